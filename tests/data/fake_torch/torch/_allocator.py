"""A caching allocator in the shape of PyTorch's, simplified: requests round up to 512 bytes;
one block per segment; a request of at most 1 MiB takes a 2 MiB segment, a larger one a segment
of its size rounded up to 2 MiB; a freed block's segment is cached and reused by a request that
rounds to the same segment size; when the device is full, the cached segments are released and
the request retried, then an `oom` entry is recorded, the observers called and OutOfMemoryError
raised. The history is a ring of the last `max_entries` entries, as PyTorch keeps it."""
import collections
import os
import time
import traceback

MiB = 1 << 20


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
