import collections
import pickle
import sys

from .._allocator import ALLOCATOR as _ALLOCATOR


def _record_memory_history(enabled="all", context="all", stacks="all", max_entries=sys.maxsize, device=None):
    if not _ALLOCATOR.initialized:
        raise RuntimeError("fake torch: _record_memory_history before CUDA was initialised")
    _ALLOCATOR.history = collections.deque(maxlen=max_entries) if enabled else None
    _ALLOCATOR.stacks = stacks


def _snapshot(device=None):
    return _ALLOCATOR.snapshot()


def _dump_snapshot(filename="dump_snapshot.pickle"):
    with open(filename, "wb") as f:
        pickle.dump(_snapshot(), f)
