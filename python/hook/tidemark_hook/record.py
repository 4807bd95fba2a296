"""Recording a Python process's CUDA memory for `tidemark record` (and `estimate`): the
allocator history, steps, the out-of-memory moment and the status, written as Note [Hook
protocol] (protocol.py) says.

Once torch has initialised CUDA in the process, the hook:
* turns on PyTorch's allocator history (`torch.cuda.memory._record_memory_history`, with
  TIDEMARK_PYTHON_MAX_ENTRIES entries and TIDEMARK_PYTHON_STACKS frames: python or all);
  under `estimate` the estimate's allocator keeps the whole history instead;
* marks each step where the program's optimizers step (an optimizer step post-hook), or where
  TIDEMARK_PYTHON_STEP_ON (MODULE:FUNC, `__main__:FUNC` for the script's own) returns; the
  marks go into the snapshot as `tidemark.step` annotations, which the importer takes as the
  steps, and into NVTX ranges named `step` when TIDEMARK_PYTHON_NVTX is set;
* writes the snapshot (the marks added) at the first out-of-memory error (PyTorch's OOM
  observer), on SIGTERM (then dies of it as it would have) and at exit;
* writes its status at exit: whether torch was imported and had CUDA, so the command can say
  what ran when nothing was recorded.
"""
import os
import sys

from . import protocol


class Hook:
    def __init__(self, out, estimate=None):
        self.out = out
        # Under `estimate`: fakes the GPU when torch is imported, and is the allocator history
        # this hook records (tidemark_hook/estimate); else PyTorch's own.
        self.estimate = estimate
        self.max_entries = int(os.environ.get(protocol.MAX_ENTRIES, "100000"))
        self.stacks = os.environ.get(protocol.STACKS, "python")
        self.step_on = os.environ.get(protocol.STEP_ON, "")
        self.nvtx = os.environ.get(protocol.NVTX) == "1"
        self.rank = os.environ.get("RANK")
        self.status = {"pid": os.getpid(), "rank": self.rank, "torch": False, "cuda": False,
                       "recording": False, "snapshot": None, "entries": 0,
                       "max_entries": self.max_entries, "steps": 0, "oom": False, "error": None}
        self.torch = None
        self.marks = []  # (time_us, device) of each step mark
        self.nvtx_open = False
        self.dumped_oom = False
        self.exited = False

    # -- waiting for torch ----------------------------------------------------------------
    def watch_imports(self):
        """Calls imported(name, module) once each watched module (torch, the --step-on one)
        has run, whenever the program first imports it."""
        hook = self
        pending = {"torch"}
        if self.step_on and self.step_module() != "__main__":
            pending.add(self.step_module())

        class Finder:
            def find_spec(self, name, path=None, target=None):
                if name not in pending:
                    return None
                import importlib.util

                pending.discard(name)
                sys.meta_path.remove(self)  # the real finders, not this one again
                try:
                    spec = importlib.util.find_spec(name)
                finally:
                    if pending:
                        sys.meta_path.insert(0, self)
                if spec is None or spec.loader is None or not hasattr(spec.loader, "exec_module"):
                    return spec
                loader, run = spec.loader, spec.loader.exec_module

                def exec_module(module):
                    run(module)
                    try:
                        hook.imported(name, module)
                    except Exception as e:
                        hook.status["error"] = f"{type(e).__name__}: {e}"
                loader.exec_module = exec_module
                return spec

        sys.meta_path.insert(0, Finder())

    def step_module(self):
        return self.step_on.split(":")[0]

    def imported(self, name, module):
        if name == "torch":
            self.on_torch(module)
        if self.step_on and name == self.step_module():
            self.wrap_step_function(module)

    def watch_main(self):
        """--step-on __main__:FUNC: the script's own function exists only once the script has run
        its definition, and the script is run, not imported. A profile function looks at each
        call until FUNC's first one: it then wraps FUNC where the script finds it (the later
        calls), marks the step when that first call returns, and goes, handing back any profile
        function the program had set; the rest of the run runs without one."""
        hook = self
        attr = self.step_on.split(":", 1)[1] if ":" in self.step_on else ""
        before = sys.getprofile()
        first = []

        def profile(frame, event, arg):
            if before:
                before(frame, event, arg)
            if event == "call" and not first and frame.f_code.co_name == attr.rsplit(".", 1)[-1]:
                main = sys.modules.get("__main__")
                if main is not None and frame.f_globals is vars(main) and \
                        getattr(frame.f_code, "co_qualname", attr) == attr:
                    hook.wrap_step_function(main)
                    first.append(frame)
            elif event == "return" and first and frame is first[0]:
                sys.setprofile(before)
                hook.mark_step()

        if attr:
            sys.setprofile(profile)

    def on_torch(self, torch):
        import atexit

        self.torch = torch
        self.status["torch"] = True
        if self.estimate is not None:
            self.estimate.fake(torch)
        # After torch's own exit handlers are registered, so this one runs before them.
        atexit.register(self.at_exit)
        cuda = getattr(torch, "cuda", None)
        if cuda is None or not cuda.is_available():
            return
        self.status["cuda"] = True
        # Once CUDA is initialised (now, if it already is): initialising it at import would
        # break programs that fork before they touch the GPU.
        lazy = getattr(cuda, "_lazy_call", None)
        lazy(self.start) if lazy else self.start()
        # torch.optim.optimizer is a module torch 2.15 imports without making it an attribute
        # of torch.optim: imported by name.
        try:
            import importlib

            hooks = importlib.import_module("torch.optim.optimizer")
        except ImportError:
            hooks = None
        register = getattr(hooks, "register_optimizer_step_post_hook", None)
        if register and not self.step_on:
            register(lambda optimizer, args, kwargs: self.mark_step())

    def start(self):
        torch = self.torch
        if self.estimate is not None:  # the estimate keeps the whole history from the start
            self.status["recording"] = True
            self.estimate.on_oom(self.on_oom)
            return
        try:
            torch.cuda.memory._record_memory_history(
                enabled="all", context="all", stacks=self.stacks, max_entries=self.max_entries)
        except TypeError:  # PyTorch before 2.1
            torch.cuda.memory._record_memory_history(True, trace_alloc_max_entries=self.max_entries)
        self.status["recording"] = True
        observe = getattr(torch._C, "_cuda_attach_out_of_memory_observer", None)
        if observe:
            observe(self.on_oom)

    def wrap_step_function(self, module):
        attr = self.step_on.split(":", 1)[1] if ":" in self.step_on else ""
        owner, name = module, attr
        if "." in attr:  # Class.method
            head, name = attr.rsplit(".", 1)
            for part in head.split("."):
                owner = getattr(owner, part)
        fn = getattr(owner, name)
        hook = self

        def stepped(*args, **kwargs):
            try:
                return fn(*args, **kwargs)
            finally:
                hook.mark_step()
        setattr(owner, name, stepped)

    # -- marks and dumps --------------------------------------------------------------------
    def mark_step(self):
        import time

        device = 0
        try:
            device = self.torch.cuda.current_device()
        except Exception:
            pass
        self.marks.append((time.time_ns() // 1000, device))
        self.status["steps"] += 1
        if self.nvtx:
            try:
                nvtx = self.torch.cuda.nvtx
                if self.nvtx_open:
                    nvtx.range_pop()
                nvtx.range_push("step")
                self.nvtx_open = True
            except Exception:
                self.nvtx = False

    def path(self):
        return os.path.join(self.out, protocol.snapshot_name(self.rank, os.getpid()))

    def dump(self):
        if not self.status["recording"]:
            return
        import pickle

        snapshot = (self.estimate.snapshot() if self.estimate is not None
                    else self.torch.cuda.memory._snapshot())
        annotations = snapshot.setdefault("external_annotations", [])
        for t, device in self.marks:
            annotations.append({"stage": "START", "name": "tidemark.step", "device": device, "time_us": t})
            annotations.append({"stage": "END", "name": "tidemark.step", "device": device, "time_us": t})
        self.status["entries"] = max((len(t) for t in snapshot.get("device_traces", [])), default=0)
        path = self.path()
        with self.new_file(os.path.basename(path)) as f:
            if f is None:
                return
            pickle.dump(snapshot, f, protocol=4)
        self.status["snapshot"] = path

    def on_oom(self, device, alloc, device_allocated, device_free):
        self.status["oom"] = True
        if self.dumped_oom:
            return
        self.dumped_oom = True
        try:
            self.dump()
        except Exception as e:
            self.status["error"] = f"{type(e).__name__}: {e}"
        self.write_status()  # the process may not live to its exit handlers

    def at_exit(self):
        if self.exited:
            return
        self.exited = True
        try:
            self.dump()
        except Exception as e:
            self.status["error"] = f"{type(e).__name__}: {e}"
        self.write_status()

    def write_status(self):
        import json

        with self.new_file(protocol.status_name(os.getpid())) as f:
            if f is not None:
                f.write(json.dumps(self.status).encode())

    def new_file(self, name):
        """A context giving a new file NAME in the hook's folder to write (renamed into place
        when the block ends), or None, writing nothing, when the folder is no longer record's:
        a process that outlives `record` finds it removed, or re-created by someone else.
        Record's folder (mkdtemp) is a directory of this user's that no one else may enter; the
        file is created by this process alone, so a link planted in it is never written
        through."""
        import contextlib
        import stat

        @contextlib.contextmanager
        def opened():
            try:
                st = os.lstat(self.out)
                ours = (stat.S_ISDIR(st.st_mode) and st.st_uid == os.geteuid()
                        and not st.st_mode & 0o077)
            except OSError:
                ours = False
            path = os.path.join(self.out, name)
            part = f"{path}.part-{os.getpid()}"
            fd = -1
            if ours:
                try:
                    fd = os.open(part, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600)
                except OSError:
                    fd = -1
            if fd < 0:
                yield None
                return
            with os.fdopen(fd, "wb") as f:
                yield f
            os.replace(part, path)

        return opened()

    def on_sigterm(self, signum, frame):
        import signal

        self.at_exit()
        signal.signal(signum, signal.SIG_DFL)
        os.kill(os.getpid(), signum)
