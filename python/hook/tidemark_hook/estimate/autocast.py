"""Note [Autocast redone]
~~~~~~~~~~~~~~~~~~~~~~~
CUDA autocast casts in the dispatcher, for tensors whose backend is CUDA; the estimate's GPU
tensors are meta (Note [A meta tensor seen as cuda]), so under `torch.autocast("cuda")` nothing
would be cast and a bf16 run would be estimated as fp32 (+19% to +28% on the peaks measured).
So while a CUDA autocast region is open, a TorchFunctionMode applies CUDA autocast's own lists
(versions.AUTOCAST_*) to the calls the program makes, above autograd as the dispatcher does, so
the casts are recorded by autograd and their outputs saved for backward as on the GPU:
* `lower` operators get their floating GPU arguments cast to the autocast dtype, `fp32` ones to
  float32, `fp32_opt` reductions a float32 dtype, `promote` ones the widest type among them;
* a cast of a leaf that requires grad (a weight) is cached until the outermost autocast region
  closes (torch.clear_autocast_cache), as autocast's cache does, except under inference_mode
  or with the cache turned off;
* each cast's allocation carries the native frame a card's snapshot gives it
  (`at::autocast::cached_cast`, CACHED_CAST), by which diagnoses tell a weight's copy;
* an operator inside a listed one is not cast again (the dispatcher excludes autocast while a
  cast operator runs). Unlike the dispatcher, a TorchFunctionMode sees only the calls the
  program makes, not those torch's own Python functions make inside them: the linears inside
  F.multi_head_attention_forward are not cast (docs/estimate.md, "What it cannot see").
"""
from . import versions


# The native frame a card's snapshot (stacks="all") gives autocast's casts.
CACHED_CAST = {"filename": "??", "line": 0,
               "name": "at::autocast::cached_cast(c10::ScalarType, at::Tensor const&, "
                       "c10::DeviceType)"}


def install(torch, device, notes):
    from torch.overrides import TorchFunctionMode

    lower, fp32 = versions.AUTOCAST_LOWER, versions.AUTOCAST_FP32
    fp32_opt, promote = versions.AUTOCAST_FP32_OPT, versions.AUTOCAST_PROMOTE
    cache = {}  # id(weight) -> (weight, cast)
    is_meta = device.real_is_meta
    counted = set()

    def eligible(t):
        return isinstance(t, torch.Tensor) and is_meta(t) and t.dtype.is_floating_point and \
            t.dtype != torch.float64

    cast_in = [None]  # the operator whose arguments are being cast

    def cast(t, dtype):
        if not eligible(t) or t.dtype == dtype:
            return t
        if cast_in[0] not in counted:
            counted.add(cast_in[0])
            notes.emulated("autocast", f"{cast_in[0]} cast as CUDA autocast casts it")
        cacheable = (t.is_leaf and t.requires_grad and torch.is_autocast_cache_enabled()
                     and not torch.is_inference_mode_enabled())
        if cacheable:
            hit = cache.get(id(t))
            if hit is not None and hit[0] is t:
                return hit[1]
        # On a card, the snapshot's native frames show the cast inside autocast's
        # cached_cast, which is how a weight's 16-bit copy is told from other allocations.
        device.frames.native.append(CACHED_CAST)
        try:
            out = t.to(dtype)
        finally:
            device.frames.native.pop()
        if cacheable:
            cache[id(t)] = (t, out)
        return out

    def map_args(args, kwargs, f):
        def m(x):
            if isinstance(x, (list, tuple)):
                return type(x)(m(y) for y in x)
            return f(x)
        return [m(a) for a in args], {k: m(v) for k, v in kwargs.items()}

    class Autocast(TorchFunctionMode):
        def __torch_function__(self, func, types, args=(), kwargs=None):
            kwargs = kwargs or {}
            name = getattr(func, "__name__", "")
            if not torch.is_autocast_enabled("cuda"):
                return func(*args, **kwargs)
            dtype = torch.get_autocast_dtype("cuda")
            cast_in[0] = name
            if name in lower:
                args, kwargs = map_args(args, kwargs, lambda x: cast(x, dtype))
            elif name in fp32:
                args, kwargs = map_args(args, kwargs, lambda x: cast(x, torch.float32))
            elif name in fp32_opt:
                first = args[0] if args else kwargs.get("input")
                if eligible(first) and first.dtype != torch.float32 and kwargs.get("dtype") is None:
                    kwargs = dict(kwargs, dtype=torch.float32)
            elif name in promote:
                tensors = []
                map_args(args, kwargs, lambda x: tensors.append(x) if eligible(x) else None)
                if tensors:
                    widest = max((t.dtype for t in tensors), key=lambda d: torch.finfo(d).bits)
                    args, kwargs = map_args(args, kwargs, lambda x: cast(x, widest))
            else:
                return func(*args, **kwargs)
            return func(*args, **kwargs)

    mode = Autocast()
    real_clear = torch.clear_autocast_cache

    def clear_autocast_cache():
        cache.clear()
        real_clear()

    torch.clear_autocast_cache = clear_autocast_cache

    # The mode is on while a CUDA autocast region is open.
    autocast = torch.amp.autocast_mode.autocast
    real_enter, real_exit = autocast.__enter__, autocast.__exit__
    depth = [0]

    def enter(self):
        out = real_enter(self)
        if self.device == "cuda":
            depth[0] += 1
            if depth[0] == 1:
                mode.__enter__()
        return out

    def exit(self, *exc):
        if self.device == "cuda":
            depth[0] -= 1
            if depth[0] == 0:
                mode.__exit__(None, None, None)
        return real_exit(self, *exc)

    autocast.__enter__ = enter
    autocast.__exit__ = exit
