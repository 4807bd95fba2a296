"""A stand-in for PyTorch (README.md beside): the API Tidemark's Python hook calls, and tensors
that are blocks of a small caching allocator."""
from . import _C, cuda, optim  # noqa: F401
from ._allocator import ALLOCATOR as _ALLOCATOR

__version__ = "0.0.0+tidemark.fake"


class Tensor:
    def __init__(self, nbytes):
        self.nbytes = nbytes
        self._addr = _ALLOCATOR.malloc(nbytes)

    def __del__(self):
        try:
            _ALLOCATOR.free(self._addr)
        except AttributeError:  # the allocation failed
            pass


def empty(nbytes, device="cuda"):
    return Tensor(int(nbytes))
