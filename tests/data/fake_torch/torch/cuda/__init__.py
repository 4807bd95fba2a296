import os

from .._allocator import ALLOCATOR as _ALLOCATOR
from .._allocator import OutOfMemoryError  # noqa: F401
from . import memory, nvtx  # noqa: F401


def is_available():
    return os.environ.get("FAKE_TORCH_CUDA", "1") != "0"


def is_initialized():
    return _ALLOCATOR.initialized


def _lazy_call(fn):
    # as PyTorch: now if CUDA is initialised, else when it is
    if _ALLOCATOR.initialized:
        fn()
    else:
        _ALLOCATOR.lazy.append(fn)


def init():
    _ALLOCATOR.init()


def current_device():
    return 0


def max_memory_allocated(device=None):
    return _ALLOCATOR.peak_allocated


def max_memory_reserved(device=None):
    return _ALLOCATOR.peak_reserved
