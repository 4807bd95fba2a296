from ._allocator import ALLOCATOR as _ALLOCATOR


def _cuda_attach_out_of_memory_observer(fn):
    _ALLOCATOR.observers.append(fn)
