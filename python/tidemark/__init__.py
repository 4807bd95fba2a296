"""Tidemark from Python: open a trace or a PyTorch memory snapshot and ask what the `tidemark`
command answers, as Python objects (docs/python.md).

    import tidemark
    run = tidemark.open("snapshot.pickle")       # or a trace.db; no torch needed
    run.peaks()                                  # {"cuda:0": Peaks(allocated=..., reserved=...)}
    t, allocated = run.curve("allocated")        # time (ns) and bytes, as numpy arrays if numpy is there
    run.top(by="site")[:5]                       # what was live at the peak
    [f.id for f in run.diagnose()]               # the findings, with ids and numbers as --json
    tidemark.predict({16: "b16.db", 32: "b32.db"}, at=[64, 128], capacity="80GiB")

Every call runs the `tidemark` executable with --json, the documented contract (docs/cli.md),
so the module and the command never disagree: the numbers are the same, bytes are exact ints.
The executable is found as TIDEMARK_CLI, else next to this package, else on PATH. A curve at
full resolution (every change) is read in-process by the native part, tidemark._native.
"""
from __future__ import annotations

import builtins
import dataclasses
import json
import os
import shutil
import subprocess
import tempfile
import weakref
from typing import Any, Dict, Iterable, List, Mapping, Optional, Sequence, Tuple, Union

# The native part: in the installed package beside this file; in a source checkout, the build
# tree's (build/python/tidemark), found as the command is.
_BUILD_PACKAGE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "build", "python", "tidemark")
if os.path.isdir(_BUILD_PACKAGE):
    __path__.append(os.path.abspath(_BUILD_PACKAGE))  # noqa: F821 (the package's own)
try:
    from . import _native
except ImportError:
    _native = None

__all__ = ["TidemarkError", "Trace", "Peaks", "Group", "Step", "Finding", "Prediction", "open",
           "import_snapshot", "predict", "executable", "run"]


class TidemarkError(RuntimeError):
    """The command refused its input (exit 2) or failed; the message is its own."""

    def __init__(self, message: str, returncode: int):
        super().__init__(message)
        self.returncode = returncode


def executable() -> str:
    """The `tidemark` executable this module runs."""
    env = os.environ.get("TIDEMARK_CLI")
    if env:
        return env
    here = os.path.dirname(os.path.abspath(__file__))
    for candidate in (os.path.join(here, "bin", "tidemark"), os.path.join(here, "..", "..", "build", "cli", "tidemark")):
        if os.access(candidate, os.X_OK):
            return os.path.abspath(candidate)
    found = shutil.which("tidemark")
    if found:
        return found
    raise TidemarkError("the tidemark executable was not found (set TIDEMARK_CLI, or put it on PATH)", 2)


def run(*args: str) -> str:
    """`tidemark ARGS...`; its standard output. Raises TidemarkError with its message."""
    p = subprocess.run([executable(), *args], capture_output=True, text=True)
    if p.returncode not in (0,):
        message = p.stderr.strip() or f"tidemark {' '.join(args)} failed (exit {p.returncode})"
        raise TidemarkError(message.removeprefix("tidemark: "), p.returncode)
    return p.stdout


def _json(*args: str) -> Any:
    return json.loads(run(*args, "--json"))


@dataclasses.dataclass(frozen=True)
class Peaks:
    device: str
    allocated: int
    reserved: int
    requested: int
    active: int
    allocations: int
    final_allocated: int
    allocated_exact: bool  # False: a snapshot's peak with estimated block sizes


@dataclasses.dataclass(frozen=True)
class Group:
    key: str
    label: str
    bytes: int
    count: int
    requested_bytes: int = 0
    frames: Tuple[str, ...] = ()


@dataclasses.dataclass(frozen=True)
class Step:
    number: int
    start_ns: int
    duration_ns: int
    allocated_at_start: int
    peak_allocated: int
    peak_reserved: int
    allocations: int
    allocated_bytes: int
    syncs: int


@dataclasses.dataclass(frozen=True)
class Finding:
    id: str
    title: str
    device: str
    severity: str
    bytes: int
    time_ns: int
    site: str
    evidence: Tuple[Tuple[str, str], ...]
    fix: str
    raw: Dict[str, Any] = dataclasses.field(compare=False, repr=False)


@dataclasses.dataclass(frozen=True)
class Prediction:
    at: float
    peak_requested: int
    peak_reserved: int
    aligned_share: float
    fits: Optional[bool]
    peak_site: str
    peak_phase: str
    raw: Dict[str, Any] = dataclasses.field(compare=False, repr=False)


def _is_trace(path: str) -> bool:
    try:
        with builtins.open(path, "rb") as f:  # the module's own `open` below shadows the built-in
            return f.read(16) == b"SQLite format 3\x00"
    except OSError as e:
        raise TidemarkError(f"{path}: cannot be read: {e.strerror or e}", 2) from None


def _rules_beside(path: str) -> Optional[str]:
    """tidemark-categories.json (or .yaml) beside `path`, by the command's rule (Note [Found
    rules files] in profiler/analysis/category_rules.cpp: the command applies it to the trace
    it is given, here a temporary one): a file another user owns, or anyone may write, is
    refused, never applied."""
    import stat

    for name in ("tidemark-categories.json", "tidemark-categories.yaml"):
        beside = os.path.join(os.path.dirname(os.path.abspath(path)), name)
        if not os.path.isfile(beside):
            continue
        for st in (os.stat(beside), os.lstat(beside)):
            if st.st_uid not in (os.geteuid(), 0):
                raise TidemarkError(f"{beside}: found beside the trace but owned by user "
                                    f"{st.st_uid}, not by you: not applied; give rules with "
                                    "categories=FILE", 2)
        if os.stat(beside).st_mode & stat.S_IWOTH:
            raise TidemarkError(f"{beside}: found beside the trace but anyone may write it: not "
                                "applied; chmod o-w it, or give rules with categories=FILE", 2)
        return beside
    return None


class Trace:
    """A trace (a snapshot is imported into a temporary trace, removed with the object)."""

    def __init__(self, path: str, categories: Optional[str] = None):
        if not os.path.exists(path):
            raise TidemarkError(f"{path}: no such file", 2)
        # Only a regular file can be a trace or a snapshot: a FIFO would block the read for
        # good, a directory fail in another way.
        if not os.path.isfile(path):
            raise TidemarkError(f"{path}: not a regular file (a trace or a PyTorch snapshot)", 2)
        self.source = path
        # Custom categories (docs/cli.md, "Custom categories"): the rules file given, else the
        # one beside the file opened (a snapshot's, not its temporary trace's).
        self.categories: Optional[str] = categories or _rules_beside(path)
        self._cleanup: Optional[weakref.finalize] = None
        if _is_trace(path):
            self.path = path
        else:
            tmp = tempfile.mkdtemp(prefix="tidemark-")
            # Removed by close(), or when the object goes (quietly: an unclosed Trace is no error).
            self._cleanup = weakref.finalize(self, shutil.rmtree, tmp, True)
            self.path = os.path.join(tmp, "snapshot.db")
            try:
                run("import", path, "-o", self.path)
            except BaseException:
                self._cleanup()
                raise
        self._summary: Optional[Dict[str, Any]] = None

    def close(self) -> None:
        if self._cleanup is not None:
            self._cleanup()
            self._cleanup = None

    def __enter__(self) -> "Trace":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"tidemark.Trace({self.source!r})"

    # -- the command's answers ------------------------------------------------------------
    def _categories(self) -> List[str]:
        return ["--categories", self.categories] if self.categories else []

    def summary(self) -> Dict[str, Any]:
        """`tidemark summary --json`, as a dict."""
        if self._summary is None:
            self._summary = _json("summary", self.path, *self._categories())
        return self._summary

    @property
    def devices(self) -> List[str]:
        return [d["device"] for d in self.summary()["devices"]]

    def peaks(self) -> Dict[str, Peaks]:
        out = {}
        for d in self.summary()["devices"]:
            out[d["device"]] = Peaks(d["device"], d["peak_allocated_bytes"], d["peak_reserved_bytes"],
                                     d["peak_requested_bytes"], d["peak_active_bytes"], d["alloc_count"],
                                     d["final_allocated_bytes"], bool(d.get("peak_allocated_exact", True)))
        return out

    def curve(self, level: str = "allocated", device: Optional[str] = None, width: Optional[int] = None,
              statistic: str = "max"):
        """(times in ns from the start, bytes) of a curve -- allocated, reserved, active or
        requested. Without `width`: every change of it, read in-process (tidemark._native);
        with `width`: that many columns of the command's timeline (`statistic`: max, min or last
        of each). numpy arrays when numpy is installed, else lists."""
        if level not in ("allocated", "reserved", "active", "requested"):
            raise ValueError(f"level {level!r}: allocated, reserved, active or requested")
        if width is None:
            if _native is None:
                raise TidemarkError("every change of a curve is read by tidemark._native, which this "
                                    "installation lacks (pip install the package, or build the tree "
                                    "with pybind11); curve(width=N) gives N columns without it", 2)
            try:
                _, times, values = _native.curve(self.path, level, device or "")
            except (ValueError, RuntimeError) as e:
                raise TidemarkError(str(e), 2) from None
        else:
            args = ["timeline", self.path, "--width", str(width)]
            if device:
                args += ["--device", device]
            tl = _json(*args)
            values = tl[level][statistic]
            times = [i * tl["column_ns"] for i in range(len(values))]  # each column's start
        try:
            import numpy as np
        except ImportError:
            return (memoryview(times).tolist() if width is None else times,
                    memoryview(values).tolist() if width is None else values)
        return np.asarray(times, dtype=np.int64), np.asarray(values, dtype=np.int64)

    def top(self, by: str = "site", at: str = "peak", device: Optional[str] = None, limit: int = 0) -> List[Group]:
        """What was live at `at` (peak, end, a time such as 1.5s, step:N), grouped `by` site,
        stack, scope, category or line."""
        args = ["top", self.path, "--by", by, "--at", at, "--limit", str(limit), *self._categories()]
        if device:
            args += ["--device", device]
        j = _json(*args)
        return [Group(g["key"], g["label"], g["bytes"], g["count"], g.get("requested_bytes", 0),
                      tuple(g.get("frames", ()))) for g in j["groups"]]

    def blocks_at(self, time: str, device: Optional[str] = None) -> List[Group]:
        """The blocks live at a time, one group per stack."""
        return self.top(by="stack", at=time, device=device)

    def steps(self, device: Optional[str] = None) -> List[Step]:
        args = ["steps", self.path] + (["--device", device] if device else [])
        j = _json(*args)
        return [Step(s["step"], s["start_ns"], s["duration_ns"], s["allocated_at_start_bytes"],
                     s["peak_allocated_bytes"], s["peak_reserved_bytes"], s["alloc_count"], s["alloc_bytes"],
                     s["sync_count"]) for s in j["steps"]]

    def diagnose(self, include_minor: bool = False) -> List[Finding]:
        j = _json("diagnose", self.path, *(["--all"] if include_minor else []))
        return [Finding(f["id"], f["title"], f["device"], f["severity"], f.get("bytes", 0), f.get("time_ns", 0),
                        f.get("site", ""), tuple((e[0], e[1]) for e in f.get("evidence", [])),
                        f.get("fix", ""), f) for f in j["findings"]]

    def replay(self, alloc_conf: Optional[str] = None, capacity: Optional[str] = None) -> Dict[str, Any]:
        """`tidemark replay --json`: the run replayed under other allocator settings."""
        args = ["replay", self.path]
        if alloc_conf is not None:
            args += ["--alloc-conf", alloc_conf]
        if capacity is not None:
            args += ["--capacity", str(capacity)]
        return _json(*args)

    def report(self, output: str) -> str:
        """Writes the self-contained HTML report; returns its path."""
        run("report", self.path, "-o", output, *self._categories())
        return output


def open(path: Union[str, os.PathLike], categories: Union[str, os.PathLike, None] = None) -> Trace:  # noqa: A001
    """A trace or a PyTorch memory snapshot (torch.cuda.memory._dump_snapshot); `categories`:
    a rules file for grouping by category (default: tidemark-categories.json beside it)."""
    return Trace(os.fspath(path), os.fspath(categories) if categories is not None else None)


def import_snapshot(snapshot: Union[str, os.PathLike], output: Union[str, os.PathLike]) -> Trace:
    """Imports a snapshot into a trace file of your own and opens it."""
    run("import", os.fspath(snapshot), "-o", os.fspath(output))
    return Trace(os.fspath(output))


def predict(runs: Mapping[float, Union[str, os.PathLike, Trace]], at: Iterable[float],
            capacity: Optional[str] = None, alloc_conf: Optional[str] = None) -> List[Prediction]:
    """The peak at other sizes from runs at two or more ({size: trace or snapshot}); see
    docs/predict.md. Returns one Prediction per `at` value (the JSON in .raw)."""
    args = ["predict"]
    for size, r in runs.items():
        path = r.path if isinstance(r, Trace) else os.fspath(r)
        args.append(f"{size:g}={path}" if isinstance(size, float) else f"{size}={path}")
    args += ["--at", ",".join(f"{x:g}" if isinstance(x, float) else str(x) for x in at)]
    if capacity is not None:
        args += ["--capacity", str(capacity)]
    if alloc_conf is not None:
        args += ["--alloc-conf", alloc_conf]
    j = _json(*args)
    return [Prediction(p["at"], p["peak_requested_bytes"], p["peak_reserved_bytes"], p["aligned_share"], p["fits"],
                       p["peak_site"], p["peak_phase"], p) for p in j["predictions"]]
