"""The estimate's caching allocator: profiler/estimate's C library (allocator_abi.h), loaded with
ctypes, so every figure is PyTorch's policy as tensorlib implements it and replay replays it,
not a second allocator written here."""
import ctypes
import json

# tidemark::events::Kind, as allocator_abi.h numbers PyTorch's trace actions.
ACTIONS = ("segment_alloc", "segment_free", "segment_map", "segment_unmap", "alloc",
           "free_requested", "free_completed", "empty_cache", "alloc_retry", "oom")


class Event(ctypes.Structure):
    _fields_ = [("kind", ctypes.c_uint64), ("addr", ctypes.c_uint64), ("size", ctypes.c_uint64),
                ("requested_size", ctypes.c_uint64), ("stream", ctypes.c_uint64),
                ("device_free", ctypes.c_uint64)]


class OutOfMemory(Exception):
    pass


class Allocator:
    def __init__(self, library, capacity, alloc_conf):
        lib = ctypes.CDLL(library)
        lib.tidemark_estimate_open.restype = ctypes.c_void_p
        lib.tidemark_estimate_open.argtypes = [ctypes.c_uint64, ctypes.c_char_p, ctypes.c_char_p,
                                               ctypes.c_size_t]
        lib.tidemark_estimate_alloc.restype = ctypes.c_int
        lib.tidemark_estimate_alloc.argtypes = [ctypes.c_void_p, ctypes.c_uint64, ctypes.c_uint64,
                                                ctypes.POINTER(ctypes.c_uint64), ctypes.c_char_p,
                                                ctypes.c_size_t]
        lib.tidemark_estimate_free.argtypes = [ctypes.c_void_p, ctypes.c_uint64]
        lib.tidemark_estimate_empty_cache.restype = ctypes.c_int
        lib.tidemark_estimate_empty_cache.argtypes = [ctypes.c_void_p]
        lib.tidemark_estimate_reset_peak.argtypes = [ctypes.c_void_p]
        lib.tidemark_estimate_take_events.restype = ctypes.c_size_t
        lib.tidemark_estimate_take_events.argtypes = [ctypes.c_void_p, ctypes.POINTER(Event),
                                                      ctypes.c_size_t]
        for f in (lib.tidemark_estimate_stats_json, lib.tidemark_estimate_segments_json):
            f.restype = ctypes.c_size_t
            f.argtypes = [ctypes.c_void_p, ctypes.c_char_p, ctypes.c_size_t]
        self.lib = lib
        error = ctypes.create_string_buffer(1024)
        self.handle = lib.tidemark_estimate_open(capacity, alloc_conf.encode(), error, len(error))
        if not self.handle:
            raise ValueError(error.value.decode(errors="replace"))
        self.events = (Event * 256)()
        self.addr = ctypes.c_uint64()
        self.error = ctypes.create_string_buffer(2048)

    def alloc(self, size, stream=0):
        rc = self.lib.tidemark_estimate_alloc(self.handle, size, stream, ctypes.byref(self.addr),
                                              self.error, len(self.error))
        if rc == 1:
            raise OutOfMemory(self.error.value.decode(errors="replace"))
        if rc:
            raise RuntimeError("tidemark estimate's allocator: " +
                               self.error.value.decode(errors="replace"))
        return self.addr.value

    def free(self, addr):
        self.lib.tidemark_estimate_free(self.handle, addr)

    def empty_cache(self):
        if self.lib.tidemark_estimate_empty_cache(self.handle):
            raise RuntimeError("tidemark estimate's allocator could not empty its cache")

    def reset_peak(self):
        self.lib.tidemark_estimate_reset_peak(self.handle)

    def take_events(self):
        """The allocator's events since the last call: (action, addr, size, requested_size,
        stream, device_free)."""
        out = []
        while True:
            n = self.lib.tidemark_estimate_take_events(self.handle, self.events, len(self.events))
            for e in self.events[:n]:
                out.append((ACTIONS[e.kind], e.addr, e.size, e.requested_size, e.stream,
                            e.device_free))
            if n < len(self.events):
                return out

    def _json(self, f):
        n = f(self.handle, None, 0)
        buf = ctypes.create_string_buffer(n + 1)
        f(self.handle, buf, n + 1)
        return json.loads(buf.raw[:n])

    def stats(self):
        return self._json(self.lib.tidemark_estimate_stats_json)

    def segments(self):
        return self._json(self.lib.tidemark_estimate_segments_json)
