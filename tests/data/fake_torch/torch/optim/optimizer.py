_post_hooks = []


def register_optimizer_step_post_hook(hook):
    _post_hooks.append(hook)


class Optimizer:
    def __init__(self, params):
        self.params = list(params)

    def step(self):
        self._update()
        for hook in list(_post_hooks):
            hook(self, (), {})

    def _update(self):
        pass
