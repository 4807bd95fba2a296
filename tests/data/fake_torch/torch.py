"""A stand-in for PyTorch (README.md beside): the API Tidemark's Python hook calls, and tensors
that are blocks of a small caching allocator. One module, its submodules (torch.cuda,
torch.cuda.memory, torch.cuda.nvtx, torch.optim, torch.optim.optimizer, torch._C) made here."""
import collections
import os
import pickle
import sys
import time
import traceback
import types

__version__ = "0.0.0+tidemark.fake"
MiB = 1 << 20

# ---- the caching allocator ----
# PyTorch's shape, simplified: requests round up to 512 bytes; one block per segment; a request
# of at most 1 MiB takes a 2 MiB segment, a larger one a segment of its size rounded up to
# 2 MiB; a freed block's segment is cached and reused by a request that rounds to the same
# segment size; when the device is full, the cached segments are released and the request
# retried, then an `oom` entry is recorded, the observers called and OutOfMemoryError raised.
# The history is a ring of the last `max_entries` entries, as PyTorch keeps it.
class OutOfMemoryError(RuntimeError):
    pass


def _frames():
    # innermost first, as PyTorch lists them; this module's own frames left out
    out = []
    for f in reversed(traceback.extract_stack()[:-3]):
        out.append({"filename": f.filename, "line": f.lineno, "name": f.name})
    return out


class Allocator:
    def __init__(self):
        self.capacity = int(os.environ.get("FAKE_TORCH_CAPACITY", str(1 << 30)))
        self.next_addr = 0x7F0000000000
        self.segments = {}  # addr -> [segment size, block or None]
        self.cached = collections.defaultdict(list)  # segment size -> free segment addrs
        self.history = None  # deque of entries, when recording
        self.observers = []
        self.allocated = self.reserved = 0
        self.peak_allocated = self.peak_reserved = 0
        self.requested = self.peak_requested = 0
        self.allocations = 0
        self.initialized = False
        self.lazy = []

    def record(self, action, addr, size, **extra):
        if self.history is None:
            return
        entry = {"action": action, "addr": addr, "size": size, "stream": 0,
                 "time_us": time.time_ns() // 1000, "frames": _frames()}
        entry.update(extra)
        self.history.append(entry)

    def init(self):
        if not self.initialized:
            self.initialized = True
            for fn in self.lazy:
                fn()
            self.lazy.clear()

    @staticmethod
    def segment_size(rounded):
        return 2 * MiB if rounded <= MiB else (rounded + 2 * MiB - 1) // (2 * MiB) * (2 * MiB)

    def release_cache(self):
        for size, addrs in self.cached.items():
            for a in addrs:
                self.record("segment_free", a, size)
                del self.segments[a]
                self.reserved -= size
        self.cached.clear()

    def malloc(self, nbytes):
        self.init()
        rounded = max(512, (nbytes + 511) // 512 * 512)
        seg = self.segment_size(rounded)
        if self.cached[seg]:
            addr = self.cached[seg].pop()
        else:
            if self.reserved + seg > self.capacity:
                self.release_cache()
            if self.reserved + seg > self.capacity:
                free = self.capacity - self.reserved
                self.record("oom", 0, nbytes, device_free=free)
                for fn in list(self.observers):
                    fn(0, nbytes, self.allocated, free)
                raise OutOfMemoryError(
                    f"CUDA out of memory. Tried to allocate {nbytes} bytes ({free} bytes free)")
            addr = self.next_addr
            self.next_addr += seg + 16 * MiB
            self.segments[addr] = [seg, None]
            self.reserved += seg
            self.peak_reserved = max(self.peak_reserved, self.reserved)
            self.record("segment_alloc", addr, seg)
        self.segments[addr][1] = {"size": rounded, "requested": nbytes, "frames": _frames()}
        self.allocated += rounded
        self.requested += nbytes
        self.peak_allocated = max(self.peak_allocated, self.allocated)
        self.peak_requested = max(self.peak_requested, self.requested)
        self.allocations += 1
        self.record("alloc", addr, nbytes)
        return addr

    def free(self, addr):
        seg = self.segments.get(addr)
        if seg is None or seg[1] is None:
            return
        block = seg[1]
        seg[1] = None
        self.allocated -= block["size"]
        self.requested -= block["requested"]
        self.record("free_requested", addr, block["requested"])
        self.record("free_completed", addr, block["requested"])
        self.cached[seg[0]].append(addr)

    def snapshot(self):
        segments = []
        for addr, (size, block) in sorted(self.segments.items()):
            blocks = []
            if block:
                blocks.append({"address": addr, "size": block["size"], "requested_size": block["requested"],
                               "state": "active_allocated", "frames": block["frames"]})
                if size > block["size"]:
                    blocks.append({"address": addr + block["size"], "size": size - block["size"],
                                   "requested_size": 0, "state": "inactive", "frames": []})
            else:
                blocks.append({"address": addr, "size": size, "requested_size": 0, "state": "inactive",
                               "frames": []})
            used = block["size"] if block else 0
            segments.append({"device": 0, "address": addr, "total_size": size, "allocated_size": used,
                             "active_size": used, "requested_size": block["requested"] if block else 0,
                             "stream": 0, "segment_type": "small" if size == 2 * MiB else "large",
                             "segment_pool_id": (0, 0), "is_expandable": False, "frames": [],
                             "blocks": blocks})
        return {"segments": segments,
                "device_traces": [list(self.history) if self.history is not None else []],
                "allocator_settings": {"expandable_segments": False, "max_split_size": -1,
                                       "garbage_collection_threshold": 0.0}}


ALLOCATOR = Allocator()


def _module(name, **attrs):
    m = types.ModuleType(name)
    m.__dict__.update(attrs)
    sys.modules[name] = m
    return m


# ---- torch._C ----
def _cuda_attach_out_of_memory_observer(fn):
    ALLOCATOR.observers.append(fn)


_C = _module("torch._C", _cuda_attach_out_of_memory_observer=_cuda_attach_out_of_memory_observer)


# ---- torch.cuda.memory and torch.cuda.nvtx ----
def _record_memory_history(enabled="all", context="all", stacks="all", max_entries=sys.maxsize, device=None):
    if not ALLOCATOR.initialized:
        raise RuntimeError("fake torch: _record_memory_history before CUDA was initialised")
    ALLOCATOR.history = collections.deque(maxlen=max_entries) if enabled else None


def _snapshot(device=None):
    return ALLOCATOR.snapshot()


def _dump_snapshot(filename="dump_snapshot.pickle"):
    with open(filename, "wb") as f:
        pickle.dump(_snapshot(), f)


_nvtx_stack = []


def _range_push(msg):
    _nvtx_stack.append(msg)
    return len(_nvtx_stack) - 1


def _range_pop():
    return len(_nvtx_stack) - 1 if _nvtx_stack and _nvtx_stack.pop() is not None else -1


# ---- torch.cuda ----
def _is_available():
    return os.environ.get("FAKE_TORCH_CUDA", "1") != "0"


def _lazy_call(fn):
    # as PyTorch: now if CUDA is initialised, else when it is
    if ALLOCATOR.initialized:
        fn()
    else:
        ALLOCATOR.lazy.append(fn)


cuda = _module(
    "torch.cuda",
    is_available=_is_available,
    is_initialized=lambda: ALLOCATOR.initialized,
    _lazy_call=_lazy_call,
    init=lambda: ALLOCATOR.init(),
    current_device=lambda: 0,
    max_memory_allocated=lambda device=None: ALLOCATOR.peak_allocated,
    max_memory_reserved=lambda device=None: ALLOCATOR.peak_reserved,
    OutOfMemoryError=OutOfMemoryError,
    memory=_module("torch.cuda.memory", _record_memory_history=_record_memory_history, _snapshot=_snapshot,
                   _dump_snapshot=_dump_snapshot),
    nvtx=_module("torch.cuda.nvtx", range_push=_range_push, range_pop=_range_pop),
)


# ---- torch.optim ----
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


class SGD(Optimizer):
    """Allocates and frees a temporary in each step, as a foreach update does."""

    def __init__(self, params, lr=0.1):
        super().__init__(params)
        self.lr = lr

    def _update(self):
        scratch = empty(4096)
        del scratch


optim = _module("torch.optim", SGD=SGD, Optimizer=Optimizer,
                optimizer=_module("torch.optim.optimizer", Optimizer=Optimizer,
                                  register_optimizer_step_post_hook=register_optimizer_step_post_hook))


# ---- tensors ----
class Tensor:
    def __init__(self, nbytes):
        self.nbytes = nbytes
        self._addr = ALLOCATOR.malloc(nbytes)

    def __del__(self):
        try:
            ALLOCATOR.free(self._addr)
        except AttributeError:  # the allocation failed
            pass


def empty(nbytes, device="cuda"):
    return Tensor(int(nbytes))
