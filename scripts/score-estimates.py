#!/usr/bin/env python3
"""Scores `tidemark estimate` against real GPU runs (docs/estimate.md, "Accuracy").

Each case of tests/data/pytorch/estimate (cases.json, cases.tar.zst: a public script, the command
it ran on a GPU, the snapshot it dumped there) is run as `tidemark estimate -- PYTHON SCRIPT
ARGS` in its folder; the snapshot the script dumps under the estimate is compared with the real
one. Both are read by the same independent replay here (the trace walked from the segments at
the dump back to the window's start, then forward), which first reproduces each case's own
truth (cases.json `true`) from the real snapshot, so the comparison is the replay's, not
Tidemark's:
  peak_requested  the most live requested bytes in the window (memory_viz's Active Memory)
  peak_reserved   the most reserved bytes in the window
  live_at_start   requested bytes live when the window opened
  n_alloc         allocations in the window
  top_site        the user's line holding the most bytes at the requested peak, among the
                  window's allocations
and the run's wall time and peak memory (the estimate's process and its children).

Exit 0 when every case ran and every overall error is within --ceilings (a JSON file of the
largest errors allowed; they only go down); 1 otherwise; 77 when PyTorch is missing.
  score-estimates.py --tidemark build/cli/tidemark --python VENV/bin/python [--only ID,...]
      [--ceilings FILE [--quick]] [--json OUT] [--work DIR]
"""
import argparse
import json
import os
import pickle
import shutil
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
DATA = os.path.join(HERE, "..", "tests", "data", "pytorch", "estimate")


def unpack(work):
    """The cases unpacked under `work` (once: a stamp file marks it done)."""
    stamp = os.path.join(work, ".unpacked")
    if not os.path.exists(stamp):
        os.makedirs(work, exist_ok=True)
        subprocess.run(["tar", "--zstd", "-xf", os.path.join(DATA, "cases.tar.zst"), "-C", work],
                       check=True)
        open(stamp, "w").close()
    with open(os.path.join(work, "cases.json")) as f:
        return json.load(f)


def user_site(frames):
    """The innermost Python frame of the program's own code (not torch, not a library; native
    frames, which PyTorch's `stacks="all"` adds, are no one's source line here)."""
    for fr in frames or []:
        name = fr.get("filename", "").replace(chr(92), "/")
        if not name.endswith(".py") or "/torch/" in name or "site-packages" in name or \
                "dist-packages" in name:
            continue
        # The file's name, whatever system wrote the path (a snapshot from Windows has '\\').
        return f"{name.replace(chr(92), '/').rsplit('/', 1)[-1]}:{fr.get('line')} {fr.get('name')}"
    return None


def replay(snapshot):
    """The window's figures from a snapshot: its trace walked back from the segments at the
    dump to the window's start, then forward."""
    trace = (snapshot.get("device_traces") or [[]])[0] if isinstance(snapshot, dict) else []
    segments = snapshot.get("segments", []) if isinstance(snapshot, dict) else snapshot
    live = {}
    reserved = 0
    for seg in segments:
        if seg.get("device", 0) != 0:
            continue
        reserved += seg["total_size"]
        for b in seg["blocks"]:
            if b["state"] == "active_allocated":
                live[b["address"]] = (b["requested_size"], None)
    # Back to the start.
    for e in reversed(trace):
        a = e["action"]
        if a == "alloc":
            live.pop(e["addr"], None)
        elif a == "free_requested":
            # Allocated before the window: its frames are not in the snapshot.
            live[e["addr"]] = (e["size"], None)
        elif a in ("segment_alloc", "segment_map"):
            reserved -= e["size"]
        elif a in ("segment_free", "segment_unmap"):
            reserved += e["size"]
    at_start = sum(s for s, _ in live.values())
    requested = peak = at_start
    reserved_peak = reserved_at_start = reserved
    peak_live = dict(live)
    n_alloc = 0
    for e in trace:
        a = e["action"]
        if a == "alloc":
            n_alloc += 1
            live[e["addr"]] = (e["size"], user_site(e.get("frames")))
            requested += e["size"]
            if requested > peak:
                peak = requested
                peak_live = dict(live)
        elif a == "free_requested":
            s = live.pop(e["addr"], None)
            if s is not None:
                requested -= s[0]
        elif a in ("segment_alloc", "segment_map"):
            reserved += e["size"]
            reserved_peak = max(reserved_peak, reserved)
        elif a in ("segment_free", "segment_unmap"):
            reserved -= e["size"]
    # The site holding the most at the peak, among the window's allocations (whose frames the
    # trace has: PyTorch keeps none for blocks allocated before the window).
    by_site = {}
    for size, site in peak_live.values():
        if site is not None:
            by_site[site] = by_site.get(site, 0) + size
    top = max(by_site.items(), key=lambda kv: kv[1])[0] if by_site else None
    return {"peak_requested": peak, "peak_reserved": reserved_peak, "live_at_start": at_start,
            "reserved_at_start": reserved_at_start, "n_alloc": n_alloc, "top_site": top}


def run_case(case, work, tidemark, python):
    cwd = os.path.join(work, case["cwd"])
    if os.path.isdir(cwd):
        shutil.rmtree(cwd)
    os.makedirs(cwd)
    for d in case.get("make_dirs") or []:
        os.makedirs(os.path.join(cwd, d), exist_ok=True)
    dumped = os.path.join(cwd, case["dumps"])
    os.makedirs(os.path.dirname(dumped), exist_ok=True)
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(os.path.join(work, p) for p in case.get("pythonpath") or [])
    env.update(case.get("env") or {})
    env["PATH"] = os.path.dirname(python) + os.pathsep + env.get("PATH", "")
    script = os.path.join(work, case["command"][1])
    command = [tidemark, "estimate", "--json", "-o", os.path.join(cwd, "estimate.db"), "--",
               python, script, *case["command"][2:]]
    # Waited for with wait4: the run's own peak memory (tidemark's and the Python process's, the
    # larger), not the largest of every child this scorer ever had.
    with tempfile.TemporaryFile("w+") as out_file, tempfile.TemporaryFile("w+") as err_file:
        start = time.monotonic()
        proc = subprocess.Popen(command, cwd=cwd, env=env, stdout=out_file, stderr=err_file)
        _, status, usage = os.wait4(proc.pid, 0)
        seconds = time.monotonic() - start
        out_file.seek(0)
        err_file.seek(0)
        out, err = out_file.read(), err_file.read()
    code = os.waitstatus_to_exitcode(status)
    result = {"id": case["id"], "exit": code, "seconds": round(seconds, 1),
              "max_rss_mb": usage.ru_maxrss // 1024}
    try:
        result["estimate"] = json.loads(out)
    except ValueError:
        result["estimate"] = None
    if not os.path.exists(dumped):
        result["error"] = "no snapshot dumped: " + (err.strip().splitlines() or ["?"])[-1][:300]
        result["stderr_tail"] = err[-3000:]
        return result
    with open(dumped, "rb") as f:
        result["estimated"] = replay(pickle.load(f))
    return result


def error(est, true, key):
    return (est[key] - true[key]) / true[key] if true[key] else 0.0


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--tidemark", required=True)
    ap.add_argument("--python", default=os.environ.get("TIDEMARK_TORCH_PYTHON", ""),
                    help="an interpreter with torch (default: $TIDEMARK_TORCH_PYTHON)")
    ap.add_argument("--work", default="estimate-cases")
    ap.add_argument("--only", default="")
    ap.add_argument("--quick", action="store_true",
                    help="only the cases the ceilings file lists as quick (make test)")
    ap.add_argument("--ceilings")
    ap.add_argument("--json")
    a = ap.parse_args()
    if not a.python or subprocess.run([a.python, "-c", "import torch"],
                                      capture_output=True).returncode != 0:
        print(f"score-estimates: {a.python} has no torch (scripts/torch-venv.sh installs it); "
              "skipped", file=sys.stderr)
        return 77
    work = os.path.abspath(a.work)
    cases = unpack(work)
    only = set(filter(None, a.only.split(",")))
    if a.quick and a.ceilings:
        with open(a.ceilings) as f:
            only |= set(json.load(f).get("quick", []))
    rows = []
    replay_wrong = False
    print(f"{'case':44} {'req peak':>9} {'res peak':>9} {'at start':>9} {'allocs':>7} "
          f"{'top site':>8} {'time':>6} {'RSS':>7}")
    for case in cases:
        if only and case["id"] not in only:
            continue
        r = run_case(case, work, os.path.abspath(a.tidemark), os.path.abspath(a.python))
        with open(os.path.join(work, case["snapshot"]), "rb") as f:
            real = replay(pickle.load(f))
        # The replay reproduces the case's own truth from the real snapshot.
        truth = case["true"]
        for k in ("peak_requested", "peak_reserved", "live_at_start", "n_alloc"):
            if real[k] != truth[k]:
                print(f"score-estimates: {case['id']}: the replay gives {k} {real[k]} for the "
                      f"real snapshot, cases.json says {truth[k]}", file=sys.stderr)
                replay_wrong = True
        r["real"] = real
        rows.append(r)
        if "estimated" not in r:
            print(f"{case['id']:44} FAILED ({r['exit']}): {r.get('error')}")
            continue
        e = r["estimated"]
        r["errors"] = {k: error(e, real, k) for k in ("peak_requested", "peak_reserved",
                                                      "live_at_start", "n_alloc")}
        r["same_top_site"] = e["top_site"] == real["top_site"]
        x = r["errors"]
        print(f"{case['id']:44} {x['peak_requested']:+9.2%} {x['peak_reserved']:+9.2%} "
              f"{x['live_at_start']:+9.2%} {x['n_alloc']:+7.1%} "
              f"{'same' if r['same_top_site'] else 'DIFF':>8} {r['seconds']:5.0f}s "
              f"{r['max_rss_mb']:>6}M")
    scored = [r for r in rows if "errors" in r]
    summary = {
        "cases": len(rows), "ran": len(scored),
        "max_abs_error": {k: max((abs(r["errors"][k]) for r in scored), default=None)
                          for k in ("peak_requested", "peak_reserved", "live_at_start", "n_alloc")},
        "same_top_site": sum(r["same_top_site"] for r in scored),
        "max_seconds": max((r["seconds"] for r in rows), default=0),
        "max_rss_mb": max((r["max_rss_mb"] for r in rows), default=0),
    }
    print(json.dumps(summary, indent=1))
    if a.json:
        with open(a.json, "w") as f:
            json.dump({"summary": summary, "cases": rows}, f, indent=1, default=str)
    ok = len(scored) == len(rows) and not replay_wrong
    if a.ceilings:
        with open(a.ceilings) as f:
            ceilings = json.load(f)
        for k, limit in ceilings.get("max_abs_error", {}).items():
            got = summary["max_abs_error"].get(k)
            if got is None or got > limit:
                print(f"score-estimates: {k}: largest error {got} over the ceiling {limit}",
                      file=sys.stderr)
                ok = False
        if summary["same_top_site"] < ceilings.get("min_same_top_site", 0):
            print("score-estimates: fewer cases with the same top site than the floor",
                  file=sys.stderr)
            ok = False
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
