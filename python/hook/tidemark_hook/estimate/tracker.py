"""Note [Storages as blocks]
~~~~~~~~~~~~~~~~~~~~~~~~~~
Under the estimate a GPU tensor is a meta tensor: its shape, dtype and strides are real, it holds
no data, and its storage is real (nbytes, shared by every view). Every aten operator the program
runs -- forward, backward (the autograd engine runs it on its CPU path), optimizer -- passes
through Tracker, a TorchDispatchMode below autograd:
1. a cuda device in the operator's arguments becomes meta (factories, copies to the GPU);
2. the operator runs on its meta kernel, with the real device seen by torch's own Python
   kernels (device.py's `inside`);
3. each storage among its outputs that is new is a block: the caching allocator (allocator.py)
   is asked for storage.nbytes() bytes, with the Python stack of the call as its frames, and a
   weak reference on the storage frees it when its last reference goes (saved tensors freed by
   backward, grads by zero_grad, a view keeping its base: exactly when CPython drops it);
4. an operator that runs on cuBLAS takes the calling thread's handle, whose workspace is
   allocated at its first use and kept (versions.Gpu.cublas_workspace): the program's thread
   and, in backward, the autograd engine's device thread, as on a GPU;
5. scaled_dot_product_attention runs the backend the card would choose, with what that kernel
   allocates inside the call (Note [Attention backends] in attention.py).
What it cannot see: workspaces inside other kernels (cuDNN's, memory-efficient attention's), a
kernel without a
meta implementation (a custom CUDA or Triton kernel: recorded and the run stopped), and values:
an operator whose output shape depends on data (nonzero, unique, boolean masks) cannot run.
"""
import os
import sys
import threading
import time
import weakref

from . import attention, versions
from .allocator import OutOfMemory
from .device import NOT_SPECIAL

_HERE = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))  # tidemark_hook/


# The native frame of cuBLAS's workspace allocation in a card's snapshot (stacks="all").
WORKSPACE_FRAME = {"filename": "??", "line": 0, "name": "at::cuda::getNewWorkspace()"}
# The outermost native frame of the autograd engine's device thread.
ENGINE_FRAME = {"filename": "??", "line": 0,
                "name": "torch::autograd::Engine::thread_main(std::shared_ptr<torch::autograd::"
                        "GraphTask> const&)"}


class Frames:
    """The Python stack of the current call, innermost first, as PyTorch's snapshot frames
    (`filename`, `line`, `name`); the hook's own frames left out. Equal frames are one dict, so
    the pickle writes each once. In backward none: on a card the autograd engine runs a CUDA
    backward on a device thread of its own, which has no Python stack, and a snapshot's
    backward allocations have no Python frames (the estimate's engine runs on the program's
    thread, under `loss.backward()`)."""

    def __init__(self):
        self.cache = {}
        self.in_backward = lambda: False  # set once torch is imported
        # Native frames innermost to the Python stack while they run (autocast's cast): the
        # ones a card's snapshot shows there.
        self.native = []
        # torch's dispatch plumbing, between the program's call and the hook.
        self.plumbing = (os.path.join("torch", "utils", "_python_dispatch.py"),
                         os.path.join("torch", "_ops.py"))

    def __call__(self):
        out = list(reversed(self.native))
        if self.in_backward():
            # A native frame in backward is the engine thread's, as on a card: its outermost
            # frame is the engine's, which is how the allocation reads as backward's.
            return out + [ENGINE_FRAME] if out else out
        f = sys._getframe(1)
        cache = self.cache
        while f is not None:
            code = f.f_code
            filename = code.co_filename
            if not filename.startswith(_HERE) and not filename.endswith(self.plumbing):
                key = (filename, f.f_lineno, code.co_name)
                d = cache.get(key)
                if d is None:
                    d = cache[key] = {"filename": filename, "line": f.f_lineno, "name": code.co_name}
                out.append(d)
            f = f.f_back
        return out

    def user_line(self):
        """The innermost frame outside torch and the hook: where in the program a call came
        from, as `file:line (function)`."""
        f = sys._getframe(1)
        torch_dir = os.sep + "torch" + os.sep
        while f is not None:
            name = f.f_code.co_filename
            if not name.startswith(_HERE) and torch_dir not in name and "<frozen" not in name:
                return f"{name}:{f.f_lineno} ({f.f_code.co_name})"
            f = f.f_back
        return "?"


class History:
    """Every allocator event of the process, in PyTorch's trace format, from its first
    allocation, and the windows the program's own `_record_memory_history` opened."""

    def __init__(self, allocator):
        self.allocator = allocator
        self.entries = []
        self.frames = Frames()
        # address -> (frames, index of its entry) of the live block / the segment there
        self.block_frames = {}
        self.segment_frames = {}
        self.window = None        # the program's own history: [first entry, end or None]
        self.window_max = None    # its max_entries
        self.oom_observers = []

    def drain(self):
        events = self.allocator.take_events()
        if not events:
            return
        frames = self.frames()
        now = time.time_ns() // 1000
        for action, addr, size, requested, stream, device_free in events:
            if action in ("empty_cache", "alloc_retry"):
                continue
            # PyTorch's trace gives a block's requested size, a segment's whole size.
            block = action in ("alloc", "free_requested", "free_completed")
            entry = {"action": action, "addr": addr, "size": requested if block else size,
                     "stream": stream, "time_us": now, "frames": frames}
            if action == "oom":
                entry = {"action": "oom", "size": size, "stream": stream,
                         "device_free": device_free, "time_us": now, "frames": frames}
            elif action == "alloc":
                self.block_frames[addr] = (frames, len(self.entries))
            elif action == "segment_alloc":
                self.segment_frames[addr] = (frames, len(self.entries))
            elif action == "free_completed":
                self.block_frames.pop(addr, None)
            self.entries.append(entry)

    def segments(self, whole, device=0):
        """PyTorch's snapshot `segments`: the allocator's, with the frames of each live block.
        In the program's own window (not `whole`), as on a card, only what was allocated
        while it recorded has frames: a block made before `_record_memory_history` has none."""
        since = 0 if whole or self.window is None else self.window[0]

        def frames_of(table, addr):
            frames, index = table.get(addr, ([], 0))
            return frames if index >= since else []

        out = []
        for s in self.allocator.segments():
            s["device"] = device
            s["segment_pool_id"] = (0, 0)
            s["frames"] = frames_of(self.segment_frames, s["address"])
            for b in s["blocks"]:
                b["frames"] = (frames_of(self.block_frames, b["address"])
                               if b["state"] != "inactive" else [])
            out.append(s)
        return out

    def trace(self, whole):
        """The entries of the program's own window (the whole history for the hook's trace)."""
        if whole:
            return self.entries
        if self.window is None:
            return []
        first, end = self.window
        entries = self.entries[first:end]
        if self.window_max and len(entries) > self.window_max:
            entries = entries[-self.window_max:]
        return entries


class Tracker:
    """The dispatch mode of Note [Storages as blocks], made a TorchDispatchMode when torch is
    imported (make_mode)."""

    def __init__(self, torch, device, history, gpu, notes):
        self.torch = torch
        self.device = device      # device.Device: the faked device's state
        self.history = history
        self.allocator = history.allocator
        self.gpu = gpu
        self.notes = notes        # estimate.Notes: what was emulated, what could not be
        self.live = {}            # storage key -> address
        self.handles = set()      # cuBLAS handles that have their workspace
        self.meta = torch.device("meta")

    def allocate(self, nbytes):
        try:
            addr = self.allocator.alloc(nbytes)
        except OutOfMemory as e:
            self.history.drain()
            for observer in list(self.history.oom_observers):
                observer(0, nbytes, 0, 0)
            raise self.torch.cuda.OutOfMemoryError(str(e)) from None
        self.history.drain()
        return addr

    def release(self, key):
        addr = self.live.pop(key, None)
        if addr is None or self.allocator is None:
            return
        self.allocator.free(addr)
        self.history.drain()

    def track(self, out, args=()):
        torch = self.torch
        device = self.device
        # What is made from host stand-ins alone stands for host memory too (a model's
        # .to(dtype) on the CPU), unless it is being moved to the GPU.
        host = device.to_host > 0
        if device.host and not device.to_gpu and not host:
            flat = list(args)
            gpu_input = False
            while flat:
                a = flat.pop()
                if isinstance(a, (list, tuple)):
                    flat.extend(a)
                elif isinstance(a, torch.Tensor) and device.real_is_meta(a):
                    if device.is_host(a):
                        host = True
                    else:
                        gpu_input = True
            host = host and not gpu_input
        stack = [out]
        while stack:
            t = stack.pop()
            if isinstance(t, (list, tuple)):
                stack.extend(t)
                continue
            if not isinstance(t, torch.Tensor) or not self.device.real_is_meta(t):
                continue
            storage = t.untyped_storage()
            key = storage._cdata
            if key in self.live:
                continue
            if host:
                if key not in device.host:
                    device.host.add(key)
                    weakref.finalize(storage, device.host.discard, key)
                continue
            if key in device.host:
                continue
            nbytes = storage.nbytes()
            if nbytes == 0:
                continue
            self.live[key] = self.allocate(nbytes)
            weakref.finalize(storage, self.release, key)

    def workspace(self):
        """The calling thread's cuBLAS handle and its workspace (Note [Storages as blocks], 4)."""
        torch = self.torch
        backward = torch._C._current_graph_task_id() != -1
        handle = "autograd" if backward else threading.get_ident()
        if handle in self.handles:
            return
        self.handles.add(handle)
        # The native frame a card's snapshot gives the workspace, by which it is told apart.
        frames = self.history.frames
        frames.native.append(WORKSPACE_FRAME)
        try:
            self.allocate(self.gpu.cublas_workspace)
        finally:
            frames.native.pop()
        self.notes.emulated("cuBLAS workspace", f"{self.gpu.cublas_workspace} bytes for the "
                            f"{'autograd engine' if backward else 'program'}'s thread")

    def make_mode(self):
        from torch.utils._python_dispatch import TorchDispatchMode

        tracker = self
        device = self.device
        meta = self.meta
        cublas = versions.CUBLAS_OPS
        is_gpu = device.is_gpu_device

        class Mode(TorchDispatchMode):
            def __torch_dispatch__(self, func, types, args=(), kwargs=None):
                kwargs = kwargs or {}
                if "device" in kwargs and is_gpu(kwargs["device"]):
                    kwargs = dict(kwargs, device=meta)
                special = device.special(func, args, kwargs)
                if special is not NOT_SPECIAL:
                    return special
                name = func.__name__
                temporaries = []
                if name.startswith("_scaled_dot_product_flash_attention_backward"):
                    temporaries = [tracker.allocate(n) for n in
                                   attention.flash_backward_temporaries(args)]
                if device.module_init:
                    stand_in = device.host_factory(func, args, kwargs)
                    if stand_in is not None:
                        device.to_host += 1
                        try:
                            tracker.track(stand_in, args)
                        finally:
                            device.to_host -= 1
                        return stand_in
                device.inside += 1
                try:
                    out = func(*args, **kwargs)
                except Exception as e:
                    tracker.notes.failed(func, e, tracker.history.frames.user_line())
                    raise
                finally:
                    device.inside -= 1
                tracker.track(out, args)
                for addr in temporaries:
                    tracker.allocator.free(addr)
                if temporaries:
                    tracker.history.drain()
                if name.split(".")[0] in cublas:
                    tracker.workspace()
                return out

        return Mode()
