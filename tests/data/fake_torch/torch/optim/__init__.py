from .optimizer import Optimizer


class SGD(Optimizer):
    """Allocates and frees a temporary in each step, as a foreach update does."""

    def __init__(self, params, lr=0.1):
        super().__init__(params)
        self.lr = lr

    def _update(self):
        from .. import empty

        scratch = empty(4096)
        del scratch
