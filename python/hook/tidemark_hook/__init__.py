"""Tidemark's in-process hook (Note [Hook protocol] in protocol.py): standard library and torch
only. `install()` is called by the sitecustomize beside this package when the command set
TIDEMARK_PYTHON_DIR: it records the process (record.py) and, under `tidemark estimate`, first
fakes the GPU (estimate/)."""
import os

from . import protocol


def install():
    import atexit
    import signal

    from .record import Hook

    estimate = None
    if os.environ.get(protocol.MODE, protocol.MODE_RECORD) == protocol.MODE_ESTIMATE:
        from .estimate import Estimate

        estimate = Estimate()
    hook = Hook(os.environ[protocol.DIR], estimate)
    hook.watch_imports()
    if hook.step_on and hook.step_module() == "__main__":
        hook.watch_main()
    atexit.register(hook.at_exit)
    if signal.getsignal(signal.SIGTERM) == signal.SIG_DFL:
        try:
            signal.signal(signal.SIGTERM, hook.on_sigterm)
        except ValueError:  # not the main thread
            pass
