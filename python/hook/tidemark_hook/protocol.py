"""Note [Hook protocol]
~~~~~~~~~~~~~~~~~~~~~~
What `tidemark record` and `tidemark estimate` tell the in-process hook, and what it writes back,
stated once here; cli/hook_protocol.h mirrors the names for the command's side.

The command makes a private folder (mkdtemp: the user's, no one else may enter) and runs the
program with:
  TIDEMARK_PYTHON_DIR          the folder; without it the hook does nothing
  TIDEMARK_PYTHON_MODE         "record" (default) or "estimate": fake the GPU first
  TIDEMARK_PYTHON_MAX_ENTRIES  allocator history entries each process keeps (record)
  TIDEMARK_PYTHON_STACKS       python or all: the frames of each allocation
  TIDEMARK_PYTHON_STEP_ON      MODULE:FUNC whose return ends a step (default: optimizer steps)
  TIDEMARK_PYTHON_NVTX         1: steps are NVTX ranges too (CUPTI injection on)
and, under estimate:
  TIDEMARK_ESTIMATE_LIBRARY    the allocator library (profiler/estimate/allocator_abi.h)
  TIDEMARK_ESTIMATE_GPU        the card faked (tidemark_hook/estimate/versions.py, GPUS)
  TIDEMARK_ESTIMATE_CAPACITY   its memory in bytes (0: the card's own)
  TIDEMARK_ESTIMATE_FIX        fixes applied at run time (tidemark_hook/estimate/fixes.py)
PYTORCH_CUDA_ALLOC_CONF (or PYTORCH_ALLOC_CONF) is read as PyTorch reads it.

Each process writes into the folder, each file whole (renamed into place), never through a link,
and nothing once the folder is not the command's own:
  snapshot-rank<RANK>.pickle or snapshot-pid<PID>.pickle   PyTorch's snapshot format, the steps
      as `tidemark.step` annotations; under estimate, a top-level `tidemark_estimate` dict
      (what was emulated and what could not be: ESTIMATE_KEY)
  status-pid<PID>.json         STATUS_FIELDS: what ran, so the command can say why nothing was
      recorded
"""

DIR = "TIDEMARK_PYTHON_DIR"
MODE = "TIDEMARK_PYTHON_MODE"
MAX_ENTRIES = "TIDEMARK_PYTHON_MAX_ENTRIES"
STACKS = "TIDEMARK_PYTHON_STACKS"
STEP_ON = "TIDEMARK_PYTHON_STEP_ON"
NVTX = "TIDEMARK_PYTHON_NVTX"
ESTIMATE_LIBRARY = "TIDEMARK_ESTIMATE_LIBRARY"
ESTIMATE_GPU = "TIDEMARK_ESTIMATE_GPU"
ESTIMATE_CAPACITY = "TIDEMARK_ESTIMATE_CAPACITY"
ESTIMATE_FIX = "TIDEMARK_ESTIMATE_FIX"

MODE_RECORD = "record"
MODE_ESTIMATE = "estimate"

ESTIMATE_KEY = "tidemark_estimate"
STATUS_FIELDS = ("pid", "rank", "torch", "cuda", "recording", "snapshot", "entries",
                 "max_entries", "steps", "oom", "error")


def snapshot_name(rank, pid):
    return f"snapshot-rank{rank}.pickle" if rank is not None else f"snapshot-pid{pid}.pickle"


def status_name(pid):
    return f"status-pid{pid}.json"
