"""Tidemark's startup hook for Python programs run by `tidemark record` and `tidemark
estimate` (docs/recording.md, "PyTorch programs"; docs/estimate.md).

The command puts this file's directory first on PYTHONPATH, so every Python process of the run
(torchrun's workers, multiprocessing children) imports it at startup, as Python imports any
`sitecustomize`. It first runs the `sitecustomize` it hides, if the environment has one, then
hands over to the `tidemark_hook` package beside it, which records the run (and, under
`estimate`, first fakes the GPU): tidemark_hook/protocol.py states what it is told and what it
writes. Without TIDEMARK_PYTHON_DIR it does nothing but chain.
"""
import os
import sys

_HERE = os.path.dirname(os.path.abspath(__file__))


def _chain():
    """Runs the sitecustomize this one hides (the next on sys.path), as Python would have."""
    import importlib.machinery
    import importlib.util

    path = [p for p in sys.path if os.path.abspath(p or os.curdir) != _HERE]
    spec = importlib.machinery.PathFinder.find_spec("sitecustomize", path)
    if spec is None or spec.loader is None or not spec.origin:
        return
    if os.path.abspath(spec.origin) == os.path.abspath(__file__):
        return
    module = importlib.util.module_from_spec(spec)
    try:
        spec.loader.exec_module(module)
    except Exception as e:  # as site.py reports a failing sitecustomize, and goes on
        print(f"Error in sitecustomize ({spec.origin}); set PYTHONVERBOSE for traceback:\n"
              f"{type(e).__name__}: {e}", file=sys.stderr)



_chain()
if os.environ.get("TIDEMARK_PYTHON_DIR"):
    import tidemark_hook

    tidemark_hook.install()
