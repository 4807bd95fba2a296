"""torch.cuda (and torch.accelerator) as on the card faked: device queries from versions.GPUS,
memory figures from the estimate's allocator, the program's own allocator history and snapshot
in PyTorch's format, and streams, events, RNG and NVTX that do what they would with nothing to
wait for."""
import contextlib
import pickle
import types


class Stream:
    def __init__(self, device=None, priority=0, **kwargs):
        self.device = device
        self.priority = priority
        self.cuda_stream = 0

    def wait_stream(self, other):
        pass

    def wait_event(self, event):
        pass

    def record_event(self, event=None):
        return event or Event()

    def synchronize(self):
        pass

    def query(self):
        return True

    def is_capturing(self):
        return False

    def __eq__(self, other):
        return isinstance(other, Stream)

    def __hash__(self):
        return 0


class Event:
    """A CUDA event: recorded, waited on, timed. The estimate runs no kernels, so every interval
    between events is 0 ms."""

    def __init__(self, enable_timing=False, blocking=False, interprocess=False, **kwargs):
        self.enable_timing = enable_timing

    def record(self, stream=None):
        pass

    def wait(self, stream=None):
        pass

    def query(self):
        return True

    def synchronize(self):
        pass

    def elapsed_time(self, end):
        return 0.0


class Properties:
    def __init__(self, gpu):
        self.name = gpu.name
        self.total_memory = gpu.total_memory
        self.major = gpu.major
        self.minor = gpu.minor
        self.multi_processor_count = gpu.multi_processor_count
        self.is_integrated = False
        self.is_multi_gpu_board = False
        self.L2_cache_size = 50 << 20
        self.gcnArchName = ""
        self.uuid = "00000000-0000-0000-0000-000000000000"

    def __repr__(self):
        return (f"_CudaDeviceProperties(name='{self.name}', major={self.major}, minor={self.minor}, "
                f"total_memory={self.total_memory >> 20}MB, "
                f"multi_processor_count={self.multi_processor_count})")


def install(torch, estimate):
    """Replaces what a script may call of torch.cuda and torch.accelerator."""
    cuda = torch.cuda
    gpu = estimate.gpu
    history = estimate.history
    allocator = estimate.allocator
    stream = Stream()

    def stat(key):
        return lambda device=None: allocator.stats().get(key, 0)

    def record_memory_history(enabled="all", context="all", stacks="all", max_entries=1_000_000,
                              *args, **kwargs):
        if enabled in (None, False):
            if history.window is not None and history.window[1] is None:
                history.window[1] = len(history.entries)
            return
        if history.window is None or history.window[1] is not None:
            history.window = [len(history.entries), None]
        history.window_max = max_entries if isinstance(max_entries, int) else None

    def snapshot(*args, **kwargs):
        return estimate.snapshot(whole=False)

    def dump_snapshot(filename="dump_snapshot.pickle"):
        with open(filename, "wb") as f:
            pickle.dump(snapshot(), f)

    def empty_cache():
        allocator.empty_cache()
        history.drain()

    def memory_stats(device=None):
        import collections

        return collections.OrderedDict(sorted(allocator.stats().items()))

    def mem_get_info(device=None):
        reserved = allocator.stats().get("reserved_bytes.all.current", 0)
        return gpu.total_memory - reserved, gpu.total_memory

    def memory_summary(device=None, abbreviated=False):
        s = allocator.stats()
        return (f"estimated by tidemark: allocated {s.get('allocated_bytes.all.current', 0)} "
                f"(peak {s.get('allocated_bytes.all.peak', 0)}), reserved "
                f"{s.get('reserved_bytes.all.current', 0)} (peak "
                f"{s.get('reserved_bytes.all.peak', 0)}) bytes")

    @contextlib.contextmanager
    def stream_context(s=None):
        yield

    class device_context:
        def __init__(self, device=None):
            pass

        def __enter__(self):
            return self

        def __exit__(self, *exc):
            return False

    def seed_noop(*args, **kwargs):
        return None

    values = {
        "is_available": lambda: True,
        "device_count": lambda: 1,
        "current_device": lambda: 0,
        "set_device": lambda device: None,
        "is_initialized": lambda: True,
        "init": lambda: None,
        "_lazy_init": lambda: None,
        "_lazy_call": lambda fn, **kw: fn(),
        "synchronize": lambda device=None: None,
        "get_device_name": lambda device=None: gpu.name,
        "get_device_capability": lambda device=None: (gpu.major, gpu.minor),
        "get_device_properties": lambda device=None: Properties(gpu),
        "get_arch_list": lambda: [f"sm_{gpu.major}{gpu.minor}"],
        "is_bf16_supported": lambda including_emulation=True: gpu.major >= 8,
        "is_tf32_supported": lambda: gpu.major >= 8,
        "memory_allocated": stat("allocated_bytes.all.current"),
        "max_memory_allocated": stat("allocated_bytes.all.peak"),
        "memory_reserved": stat("reserved_bytes.all.current"),
        "max_memory_reserved": stat("reserved_bytes.all.peak"),
        "memory_cached": stat("reserved_bytes.all.current"),
        "max_memory_cached": stat("reserved_bytes.all.peak"),
        "reset_peak_memory_stats": lambda device=None: allocator.reset_peak(),
        "reset_max_memory_allocated": lambda device=None: allocator.reset_peak(),
        "reset_max_memory_cached": lambda device=None: allocator.reset_peak(),
        "reset_accumulated_memory_stats": lambda device=None: None,
        "memory_stats": memory_stats,
        "memory_summary": memory_summary,
        "mem_get_info": mem_get_info,
        "empty_cache": empty_cache,
        "set_per_process_memory_fraction": lambda fraction, device=None: estimate.notes.not_modelled(
            "torch.cuda.set_per_process_memory_fraction"),
        "Stream": Stream,
        "Event": Event,
        "current_stream": lambda device=None: stream,
        "default_stream": lambda device=None: stream,
        "stream": stream_context,
        "device": device_context,
        "manual_seed": seed_noop,
        "manual_seed_all": seed_noop,
        "seed": seed_noop,
        "seed_all": seed_noop,
        "initial_seed": lambda: 0,
        "get_rng_state": lambda device="cuda": torch.zeros(16, dtype=torch.uint8),
        "get_rng_state_all": lambda: [torch.zeros(16, dtype=torch.uint8)],
        "set_rng_state": seed_noop,
        "set_rng_state_all": seed_noop,
        "is_current_stream_capturing": lambda: False,
        "ipc_collect": lambda: None,
    }
    for name, value in values.items():
        setattr(cuda, name, value)
    memory = cuda.memory
    for name in ("memory_allocated", "max_memory_allocated", "memory_reserved",
                 "max_memory_reserved", "reset_peak_memory_stats", "memory_stats", "empty_cache",
                 "mem_get_info", "memory_summary", "set_per_process_memory_fraction"):
        setattr(memory, name, values[name])
    memory._record_memory_history = record_memory_history
    memory._snapshot = snapshot
    memory._dump_snapshot = dump_snapshot
    cuda.memory_snapshot = lambda *a, **k: snapshot()["segments"]
    torch._C._cuda_attach_out_of_memory_observer = history.oom_observers.append
    # NVTX: ranges with nothing to mark.
    class NvtxRange(contextlib.ContextDecorator):
        def __init__(self, msg=None, *args, **kwargs):
            pass

        def __enter__(self):
            return self

        def __exit__(self, *exc):
            return False

    nvtx = types.SimpleNamespace(range_push=lambda msg: 0, range_pop=lambda: 0,
                                 mark=lambda msg: None, range_start=lambda msg: 0,
                                 range_end=lambda r: None, range=NvtxRange)
    for name, value in vars(nvtx).items():
        setattr(cuda.nvtx, name, value)
    # torch.accelerator (2.6+), which the optimizers ask about graph capture.
    acc = getattr(torch, "accelerator", None)
    if acc is not None:
        for name, value in {
            "is_available": lambda: True,
            "device_count": lambda: 1,
            "current_accelerator": lambda check_available=False: torch.device("cuda"),
            "current_device_index": lambda: 0,
            "current_device_idx": lambda: 0,
            "set_device_index": lambda device: None,
            "set_device_idx": lambda device: None,
            "current_stream": lambda device=None: stream,
            "set_stream": lambda s: None,
            "synchronize": lambda device=None: None,
        }.items():
            setattr(acc, name, value)
        accmem = getattr(acc, "memory", None)
        if accmem is not None:
            for name, key in (("memory_allocated", "allocated_bytes.all.current"),
                              ("max_memory_allocated", "allocated_bytes.all.peak"),
                              ("memory_reserved", "reserved_bytes.all.current"),
                              ("max_memory_reserved", "reserved_bytes.all.peak")):
                setattr(accmem, name, stat(key))
            accmem.empty_cache = empty_cache
            accmem.reset_peak_memory_stats = lambda device=None: allocator.reset_peak()
            accmem.memory_stats = memory_stats
