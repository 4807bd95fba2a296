"""`tidemark estimate`'s side of the hook (docs/estimate.md): the program runs with real PyTorch
on the CPU and its GPU faked -- tensors with real shapes, dtypes, strides and lifetimes and no
data (Note [A meta tensor seen as cuda] in device.py), each storage a block of PyTorch's caching
allocator (Note [Storages as blocks] in tracker.py), autocast redone (Note [Autocast redone] in
autocast.py), torch.cuda answering with the estimated figures (cuda_api.py). What depends on
the torch version and on the card is in versions.py."""
import os
import sys

from .. import protocol
from . import versions


class Notes:
    """What the estimate emulated, and what it could not see, for the command to list."""

    def __init__(self):
        self.emulations = {}  # (what, detail) -> count
        self.failures = []    # operators that could not run: {op, line, error}
        self.values = {}      # line -> count of GPU values the program read (zeros)
        self.missing = {}     # what is not modelled -> count

    def emulated(self, what, detail):
        key = (what, detail)
        self.emulations[key] = self.emulations.get(key, 0) + 1

    def failed(self, func, error, line):
        self.failures.append({"op": str(func), "line": line,
                              "error": f"{type(error).__name__}: {str(error).splitlines()[0] if str(error) else ''}"})

    def value_read(self, line):
        self.values[line] = self.values.get(line, 0) + 1

    def not_modelled(self, what):
        self.missing[what] = self.missing.get(what, 0) + 1

    def as_dict(self):
        return {
            "emulated": [{"what": w, "detail": d, "count": n}
                         for (w, d), n in sorted(self.emulations.items())],
            "not_estimated": self.failures[:50],
            "values_read": [{"line": line, "count": n} for line, n in sorted(self.values.items())],
            "not_modelled": [{"what": w, "count": n} for w, n in sorted(self.missing.items())],
        }


class Estimate:
    def __init__(self):
        self.notes = Notes()
        self.torch = None
        self.gpu = None
        self.allocator = None
        self.history = None
        self.alloc_conf = os.environ.get("PYTORCH_CUDA_ALLOC_CONF",
                                         os.environ.get("PYTORCH_ALLOC_CONF", ""))

    def refuse(self, message):
        sys.stderr.write(f"tidemark estimate: {message}\n")
        sys.stderr.flush()
        os._exit(2)

    def fake(self, torch):
        """Fakes the GPU in `torch`, just imported."""
        problem = versions.unsupported(torch)
        if problem:
            self.refuse(problem)
        try:
            self._fake(torch)
        except Exception as e:  # a torch whose internals moved: say so, do not guess
            import traceback

            traceback.print_exc()
            self.refuse(f"could not fake the GPU in torch {torch.__version__}: "
                        f"{type(e).__name__}: {e}")

    def _fake(self, torch):
        from . import attention, autocast, cuda_api, device, tracker
        from .allocator import Allocator

        self.torch = torch
        try:
            self.gpu = versions.gpu(os.environ.get(protocol.ESTIMATE_GPU),
                                    int(os.environ.get(protocol.ESTIMATE_CAPACITY, "0") or 0))
        except ValueError as e:
            self.refuse(str(e))
        try:
            self.allocator = Allocator(os.environ[protocol.ESTIMATE_LIBRARY],
                                       self.gpu.total_memory, self.alloc_conf)
        except ValueError as e:
            self.refuse(f"PYTORCH_CUDA_ALLOC_CONF={self.alloc_conf}: {e}")
        self.history = tracker.History(self.allocator)
        self.history.frames.in_backward = lambda: torch._C._current_graph_task_id() != -1
        self.device = device.Device(torch, self.notes, self.history.frames)
        self.device.patch_tensor()
        self.device.patch_modules()
        cuda_api.install(torch, self)
        autocast.install(torch, self.device, self.notes)
        attention.install(torch, self.gpu, self.notes, self.device)
        self.patch_compile(torch)
        self.tracker = tracker.Tracker(torch, self.device, self.history, self.gpu, self.notes)
        self.mode = self.tracker.make_mode()
        self.mode.__enter__()  # for the rest of the process
        from . import fixes

        try:
            fixes.apply(torch, os.environ.get(protocol.ESTIMATE_FIX, ""), self.notes)
        except ValueError as e:
            self.refuse(f"{protocol.ESTIMATE_FIX}: {e}")

    def patch_compile(self, torch):
        """torch.compile: the program runs eager, and the estimate says so (compiled programs'
        buffers and fusions are not estimated)."""
        notes = self.notes

        def compile(model=None, *args, **kwargs):
            notes.not_modelled("torch.compile (estimated as eager)")
            if model is None:
                return lambda m: m
            return model

        torch.compile = compile

    def on_oom(self, observer):
        self.history.oom_observers.append(observer)

    def snapshot(self, whole=True):
        """PyTorch's snapshot of the faked device: the segments now, and the trace (the whole
        process's for the hook; the program's own window for its _snapshot / _dump_snapshot)."""
        h = self.history
        h.drain()
        stats = self.allocator.stats()
        snapshot = {
            "segments": h.segments(whole),
            "device_traces": [list(h.trace(whole))],
            "allocator_settings": {
                "PYTORCH_CUDA_ALLOC_CONF": self.alloc_conf,
                "max_split_size": stats.get("max_split_size", -1),
                "expandable_segments": "expandable_segments:true" in self.alloc_conf.replace(" ", "").lower(),
            },
            "external_annotations": [],
        }
        if whole:
            import json

            snapshot[protocol.ESTIMATE_KEY] = json.dumps(dict(
                self.notes.as_dict(), gpu=self.gpu.name, capacity=self.gpu.total_memory,
                torch=self.torch.__version__, alloc_conf=self.alloc_conf))
        return snapshot
