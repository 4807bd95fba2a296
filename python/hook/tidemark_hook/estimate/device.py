"""The faked GPU as the program sees it (Note [A meta tensor seen as cuda]).

Note [A meta tensor seen as cuda]
~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
A GPU tensor is a meta tensor whose C++ device stays `meta`, so the autograd engine runs
backward on its CPU path and asks for no CUDA context. Python sees `cuda:0`: Tensor.device,
is_cuda and get_device answer for the GPU, so the program's own checks, the optimizer's choice
of its foreach implementation and torch's Python code take the paths they take on a card. Inside
an operator (Tracker's dispatch, `inside` > 0) torch's own Python kernels see the real `meta`.
Moving to the GPU (`.to("cuda")`, `.cuda()`, `device="cuda"`) makes a meta copy, and a tensor
already there is returned as it is; moving back (`.cpu()`, `.item()`, `.tolist()`, `.numpy()`)
gives zeros of the right shape and type, and the estimate notes where the program read a value
from the GPU. CPU tensors are computed for real (indices, data loading), except what a model
is built from: a model is usually built on the CPU and then moved, and a 7B model would take
28 GB of host memory and minutes of random initialisation for values the estimate never reads.
So a floating CPU tensor made while a module's __init__ runs (a factory: empty, randn, ...) or
given to a module as a parameter or buffer is meta too, seen as `cpu` (its storage in `host`:
the Tracker allocates no GPU block for it, nor for what is computed from such tensors alone),
until it is moved to the GPU.
"""
NOT_SPECIAL = object()


class Device:
    def __init__(self, torch, notes, frames):
        self.torch = torch
        self.notes = notes
        self.frames = frames
        self.inside = 0
        self.host = set()      # keys of meta storages that stand for host memory
        self.to_gpu = 0        # > 0 while a host tensor is being copied to the GPU
        self.to_host = 0       # > 0 while a host stand-in is being made
        self.module_init = 0   # > 0 while a module's __init__ runs
        self.cpu = torch.device("cpu")
        self.cuda = torch.device("cuda", 0)
        self.meta = torch.device("meta")
        TensorBase = torch._C.TensorBase
        self._device = TensorBase.device.__get__
        self._is_meta = TensorBase.is_meta.__get__
        self._is_cuda = TensorBase.is_cuda.__get__

    # -- what is the GPU ---------------------------------------------------------------------
    def real_is_meta(self, t):
        return self._is_meta(t)

    def is_host(self, t):
        """A meta tensor that stands for host memory (a module's parameter built on the CPU)."""
        return bool(self.host) and t.untyped_storage()._cdata in self.host

    def is_gpu(self, t):
        return self._is_meta(t) and not self.is_host(t)

    def host_stand_in(self, t):
        """A meta tensor shaped as the CPU tensor `t`, standing for it."""
        self.to_host += 1
        try:
            return self.torch.empty_strided(t.size(), t.stride(), dtype=t.dtype, device=self.meta)
        finally:
            self.to_host -= 1

    def patch_modules(self):
        """A floating CPU parameter or buffer given to a module becomes a host stand-in."""
        torch = self.torch
        dev = self
        Module = torch.nn.Module
        real_register_parameter = Module.register_parameter
        real_register_buffer = Module.register_buffer

        def on_host(t):
            return isinstance(t, torch.Tensor) and t.dtype.is_floating_point and \
                dev._device(t).type == "cpu" and t.numel() > 0

        def register_parameter(self, name, param):
            if param is not None and on_host(param):
                # A new parameter of the same kind (a CPU tensor's data cannot become meta).
                param = type(param)(dev.host_stand_in(param), requires_grad=param.requires_grad)
            return real_register_parameter(self, name, param)

        def register_buffer(self, name, tensor, persistent=True):
            if tensor is not None and on_host(tensor):
                tensor = dev.host_stand_in(tensor)
            return real_register_buffer(self, name, tensor, persistent)

        Module.register_parameter = register_parameter
        Module.register_buffer = register_buffer

        # The modules the program defines (after torch's own): their __init__ counted.
        def wrap_init(cls):
            init = cls.__dict__.get("__init__")
            if init is None or getattr(init, "_tidemark_counted", False):
                return
            import functools

            @functools.wraps(init)
            def counted(self, *args, **kwargs):
                dev.module_init += 1
                try:
                    return init(self, *args, **kwargs)
                finally:
                    dev.module_init -= 1

            counted._tidemark_counted = True
            cls.__init__ = counted

        real_init_subclass = Module.__dict__.get("__init_subclass__")

        @classmethod
        def init_subclass(cls, **kwargs):
            if real_init_subclass is not None:
                real_init_subclass.__func__(cls, **kwargs)
            else:
                super(Module, cls).__init_subclass__(**kwargs)
            wrap_init(cls)

        Module.__init_subclass__ = init_subclass
    def is_gpu_device(self, d):
        torch = self.torch
        if d is None:
            return False
        if isinstance(d, torch.device):
            return d.type == "cuda"
        if isinstance(d, str):
            return d.startswith("cuda")
        return isinstance(d, int) and not isinstance(d, bool)

    # -- Tensor, patched -----------------------------------------------------------------------
    def patch_tensor(self):
        torch = self.torch
        T = torch.Tensor
        dev = self
        real_device, real_is_meta, real_is_cuda = self._device, self._is_meta, self._is_cuda
        cuda = self.cuda

        cpu = self.cpu

        def device(self):
            d = real_device(self)
            if d.type != "meta" or dev.inside:
                return d
            return cpu if dev.is_host(self) else cuda

        T.device = property(device)
        T.is_cuda = property(lambda self: real_is_cuda(self) or (not dev.inside and dev.is_gpu(self)))
        T.is_cpu = property(lambda self: TensorBase.is_cpu.__get__(self) or (not dev.inside and real_is_meta(self) and dev.is_host(self)))
        T.is_meta = property(lambda self: real_is_meta(self) and bool(dev.inside))
        real_get_device = T.get_device
        T.get_device = lambda self: (-1 if dev.is_host(self) else 0) if real_is_meta(self) and not dev.inside else real_get_device(self)
        TensorBase = torch._C.TensorBase

        real_to = T.to

        def targets_cpu(args, kwargs):
            for a in list(args) + [kwargs.get("device")]:
                if isinstance(a, (str, torch.device)) and torch.device(a).type == "cpu":
                    return True
            return False

        def to(self, *args, **kwargs):
            args = list(args)
            gpu = False
            for i, a in enumerate(args):
                if isinstance(a, (str, torch.device)) or (i == 0 and isinstance(a, int) and not isinstance(a, bool)):
                    if dev.is_gpu_device(a):
                        args[i], gpu = dev.meta, True
            if dev.is_gpu_device(kwargs.get("device")):
                kwargs["device"], gpu = dev.meta, True
            if gpu and real_is_meta(self) and dev.is_host(self):
                # A host stand-in to the GPU: a copy, which is a GPU block.
                dev.to_gpu += 1
                try:
                    return real_to(self, *args, **dict(kwargs, copy=True))
                finally:
                    dev.to_gpu -= 1
            if gpu and real_is_meta(self):
                # Already on the GPU: only a change of dtype or a copy makes a new tensor.
                rest = [a for a in args if a is not dev.meta]
                if not rest and not kwargs.get("dtype") and not kwargs.get("copy") and \
                        not kwargs.get("memory_format"):
                    return self
            if not gpu and real_is_meta(self) and targets_cpu(args, kwargs):
                if dev.is_host(self):
                    rest = [a for a in args if not (isinstance(a, (str, torch.device)))]
                    return real_to(self, *rest, **{k: v for k, v in kwargs.items() if k != "device"}) \
                        if rest or kwargs.get("dtype") else self
                return dev.to_cpu(self, args, kwargs)
            return real_to(self, *args, **kwargs)

        T.to = to
        T.cuda = lambda self, device=None, non_blocking=False, memory_format=None: to(self, dev.cuda)
        real_cpu = T.cpu
        T.cpu = lambda self, *a, **k: (self if dev.is_host(self) else dev.zeros_like_cpu(self)) if real_is_meta(self) else real_cpu(self, *a, **k)
        real_numpy = T.numpy
        T.numpy = lambda self, *a, **k: real_numpy(dev.zeros_like_cpu(self) if real_is_meta(self) else self, *a, **k)
        real_tolist = T.tolist
        T.tolist = lambda self: real_tolist(dev.zeros_like_cpu(self) if real_is_meta(self) else self)
        T.pin_memory = lambda self, *a, **k: self
        T.is_pinned = lambda self, *a, **k: False
        T.record_stream = lambda self, stream: None

    def zeros_like_cpu(self, t):
        self.notes.value_read(self.frames.user_line())
        return self.torch.zeros(t.shape, dtype=t.dtype)

    def to_cpu(self, t, args, kwargs):
        out = self.zeros_like_cpu(t)
        dtype = kwargs.get("dtype") or next((a for a in args if isinstance(a, self.torch.dtype)), None)
        return out if dtype is None else out.to(dtype)

    # -- operators the meta device cannot run as a GPU would -------------------------------------
    FACTORIES = frozenset({"empty", "empty_strided", "zeros", "ones", "full", "rand", "randn",
                           "normal", "arange", "eye", "linspace", "logspace", "empty_like",
                           "zeros_like", "ones_like", "randn_like", "rand_like", "full_like"})

    def host_factory(self, func, args, kwargs):
        """A floating CPU tensor made while a module's __init__ runs: a host stand-in (Note [A
        meta tensor seen as cuda]); None for anything else, which runs as it is."""
        name = func.__name__.split(".")[0]
        if name not in self.FACTORIES:
            return None
        torch = self.torch
        d = kwargs.get("device")
        if d is not None and torch.device(d).type != "cpu":
            return None
        for a in list(args) + list(kwargs.values()):
            if isinstance(a, torch.Tensor) and not (self._is_meta(a) and self.is_host(a)) and \
                    not name.endswith("_like"):
                return None
        if name.endswith("_like") and not (args and self._is_meta(args[0]) and self.is_host(args[0])):
            return None
        meta_kwargs = dict(kwargs, device=self.meta)
        if "pin_memory" in meta_kwargs:
            meta_kwargs["pin_memory"] = False
        self.inside += 1
        try:
            out = func(*args, **meta_kwargs)
        finally:
            self.inside -= 1
        if not out.dtype.is_floating_point:
            return None
        return out

    def special(self, func, args, kwargs):
        """The answer of an operator that needs data (Tracker's dispatch), or NOT_SPECIAL."""
        name = func.__name__
        if name.startswith("_local_scalar_dense") and args and self._is_meta(args[0]):
            # .item(), bool(), int(), float() of a GPU value: zero of its type.
            self.notes.value_read(self.frames.user_line())
            t = args[0]
            if t.dtype == self.torch.bool:
                return False
            return 0.0 if t.dtype.is_floating_point or t.dtype.is_complex else 0
        if name.startswith("_to_copy") and args and self._is_meta(args[0]):
            d = kwargs.get("device")
            if d is not None and self.torch.device(d).type == "cpu":
                out = self.zeros_like_cpu(args[0])
                return out.to(kwargs["dtype"]) if kwargs.get("dtype") else out
        if name.startswith("copy_") and len(args) >= 2 and not self._is_meta(args[0]) and \
                self._is_meta(args[1]):
            # GPU -> CPU into an existing tensor: zeros.
            self.notes.value_read(self.frames.user_line())
            return args[0].zero_()
        return NOT_SPECIAL
