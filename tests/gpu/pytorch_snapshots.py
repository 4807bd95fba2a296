#!/usr/bin/env python3
"""Real PyTorch memory data for the importer, diagnose, replay and export tests, made on a GPU
(docs/cuda.md, "PyTorch snapshots"; run by tests/gpu/run.sh).

One small training loop (a CNN on Fashion-MNIST-shaped random data: forward, cross-entropy,
backward, Adam step; 8 iterations) under torch.cuda.memory._record_memory_history(), dumped with
_dump_snapshot in three runs, each its own process (PYTORCH_CUDA_ALLOC_CONF is read once):

  snapshot_default.pickle     default allocator settings; the same run is also profiled
  snapshot_expandable.pickle  PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True
  snapshot_oom.pickle         torch.cuda.set_per_process_memory_fraction(512 MiB of the card),
                              then the batch doubles each iteration past the 5th until a real
                              OutOfMemoryError: the snapshot holds an 'oom' trace entry
  runs.json                   per run: settings, versions, the card, and after every iteration
                              memory_allocated/reserved and max_memory_allocated/reserved (what
                              the importer and replay are checked against), the OOM message
  memory_timeline.json.gz     the default run under torch.profiler (profile_memory=True):
                              export_memory_timeline's timeline (times, bytes per category) and
                              raw events (time, action, bytes, category), with the category
                              names in their order -- the truth for category inference

Each file stays under 16 MiB (a larger pickle is written gzip'd as .pickle.gz and said so).
Stacks are Python frames only (stacks="python"): C++ frames make _dump_snapshot symbolize for
minutes; --stacks all records them anyway.

  python3 tests/gpu/pytorch_snapshots.py --out DIR [--iterations 8] [--stacks python|all]
  python3 tests/gpu/pytorch_snapshots.py --cpu-check DIR   (no GPU: the profiler's timeline of
                                                           the loop on the CPU, to check the
                                                           export and the files' assembly)
Exit status: 0 when every file was written, 77 without torch or a GPU, 1 otherwise.
"""
import argparse
import gzip
import importlib.util
import json
import os
import pickle
import subprocess
import sys
import tempfile
import time

MiB = 1 << 20
FILE_LIMIT = 15 * MiB  # the device tool brings back files under 16 MiB
OOM_LIMIT = 512 * MiB
RUNS = {
    "default": {},
    "expandable": {"PYTORCH_CUDA_ALLOC_CONF": "expandable_segments:True"},
    "oom": {},
}


def build(torch, device):
    """The model and optimizer; made while recording, so parameters and state have stacks."""
    model = torch.nn.Sequential(
        torch.nn.Conv2d(1, 32, 3, padding=1), torch.nn.ReLU(),
        torch.nn.Conv2d(32, 64, 3, padding=1), torch.nn.ReLU(), torch.nn.MaxPool2d(2),
        torch.nn.Flatten(), torch.nn.Linear(64 * 14 * 14, 128), torch.nn.ReLU(),
        torch.nn.Linear(128, 10)).to(device)
    opt = torch.optim.Adam(model.parameters(), lr=1e-3)
    return model, opt


def train_step(torch, model, opt, x, y):
    loss = torch.nn.functional.cross_entropy(model(x), y)
    opt.zero_grad(set_to_none=True)
    loss.backward()
    opt.step()
    return loss


def batch(torch, n, device):
    return torch.randn(n, 1, 28, 28, device=device), torch.randint(0, 10, (n,), device=device)


def memory_now(torch):
    torch.cuda.synchronize()
    return {
        "memory_allocated": torch.cuda.memory_allocated(),
        "memory_reserved": torch.cuda.memory_reserved(),
        "max_memory_allocated": torch.cuda.max_memory_allocated(),
        "max_memory_reserved": torch.cuda.max_memory_reserved(),
    }


def write_limited(path, data):
    """Writes bytes at path, or gzip'd at path + '.gz' when over the limit. Returns the name."""
    if len(data) > FILE_LIMIT:
        data = gzip.compress(data, 9)
        path += ".gz"
        if len(data) > FILE_LIMIT:
            raise RuntimeError(f"{path}: {len(data)} bytes even compressed (limit {FILE_LIMIT})")
    with open(path, "wb") as f:
        f.write(data)
    return os.path.basename(path)


def index_names(table):
    """[name of index 0, name of index 1, ...] for one of _memory_profiler's index tables."""
    names = [None] * len(table)
    for key, i in table.items():
        names[i] = "unknown" if key is None else key.name
    return names


def timeline_file(torch, prof, out_dir, device):
    """export_memory_timeline's timeline and raw events in one gzip'd JSON file, with the names
    of the category and action indices they use (_CATEGORY_TO_INDEX, _ACTION_TO_INDEX)."""
    from torch.profiler import _memory_profiler as mp
    with tempfile.TemporaryDirectory() as tmp:
        plain, raw = os.path.join(tmp, "timeline.json"), os.path.join(tmp, "timeline.raw.json.gz")
        prof.export_memory_timeline(plain, device=device)
        prof.export_memory_timeline(raw, device=device)
        with open(plain) as f:
            times, sizes = json.load(f)
        with gzip.open(raw, "rt") as f:
            events = json.load(f)
    categories = index_names(mp._CATEGORY_TO_INDEX)
    doc = {
        "what": "torch.profiler export_memory_timeline of the default run, device " + device,
        "categories": categories,
        "actions": index_names(mp._ACTION_TO_INDEX),
        "timeline": {"times_us": times, "bytes_by_category": sizes},
        "raw": {"columns": ["time_us", "action", "bytes", "category"], "events": events},
        "torch": torch.__version__,
    }
    data = gzip.compress(json.dumps(doc).encode(), 9)
    if len(data) > FILE_LIMIT:
        raise RuntimeError(f"memory timeline: {len(data)} bytes compressed (limit {FILE_LIMIT})")
    path = os.path.join(out_dir, "memory_timeline.json.gz")
    with open(path, "wb") as f:
        f.write(data)
    return os.path.basename(path), len(events)


def one_run(name, out_dir, iterations, stacks):
    """A child process: one configuration; prints its result as one JSON line."""
    import torch
    import torch.profiler
    if not torch.cuda.is_available():
        print(json.dumps({"run": name, "error": "torch sees no GPU"}))
        return 77
    dev = torch.device("cuda")
    torch.manual_seed(0)
    torch.cuda.init()
    result = {"run": name, "torch": torch.__version__, "cuda": torch.version.cuda,
              "card": torch.cuda.get_device_name(0),
              "total_memory": torch.cuda.get_device_properties(0).total_memory,
              "PYTORCH_CUDA_ALLOC_CONF": os.environ.get("PYTORCH_CUDA_ALLOC_CONF", ""),
              "stacks": stacks, "iterations": []}
    if name == "oom":
        fraction = OOM_LIMIT / result["total_memory"]
        torch.cuda.set_per_process_memory_fraction(fraction, 0)
        result["memory_fraction"] = fraction
        result["memory_limit"] = OOM_LIMIT
    torch.cuda.memory._record_memory_history(max_entries=200_000, stacks=stacks)
    prof = None
    if name == "default":
        prof = torch.profiler.profile(
            activities=[torch.profiler.ProfilerActivity.CPU, torch.profiler.ProfilerActivity.CUDA],
            profile_memory=True, record_shapes=True, with_stack=True)
        prof.__enter__()
    t0 = time.perf_counter()
    model, opt = build(torch, dev)
    result["after_setup"] = memory_now(torch)
    n = 128
    total = iterations if name != "oom" else iterations + 12
    for i in range(total):
        if name == "oom" and i >= 5:
            n *= 2  # past the 5th iteration the batch doubles until the fraction is exceeded
        try:
            x, y = batch(torch, n, dev)
            loss = train_step(torch, model, opt, x, y)
            entry = {"iteration": i + 1, "batch": n, "loss": loss.item()}
            entry.update(memory_now(torch))
            result["iterations"].append(entry)
            del x, y, loss
        except torch.cuda.OutOfMemoryError as e:
            result["oom"] = {"iteration": i + 1, "batch": n, "message": str(e).splitlines()[0]}
            result["after_oom"] = memory_now(torch)
            break
        if name == "oom" and i + 1 >= total:
            result["error"] = f"no OutOfMemoryError within {total} iterations"
    result["loop_s"] = time.perf_counter() - t0
    if prof is not None:
        prof.__exit__(None, None, None)
    with tempfile.TemporaryDirectory() as tmp:
        snap = os.path.join(tmp, "s.pickle")
        torch.cuda.memory._dump_snapshot(snap)
        torch.cuda.memory._record_memory_history(enabled=None)
        with open(snap, "rb") as f:
            data = f.read()
    loaded = pickle.loads(data)
    actions = {}
    for trace in loaded.get("device_traces", []):
        for ev in trace:
            actions[ev["action"]] = actions.get(ev["action"], 0) + 1
    result["snapshot"] = {"file": write_limited(os.path.join(out_dir, f"snapshot_{name}.pickle"), data),
                          "bytes": len(data), "segments": len(loaded.get("segments", [])),
                          "trace_actions": actions}
    if name == "oom" and not actions.get("oom"):
        result["error"] = "the snapshot holds no 'oom' trace entry"
    if prof is not None:
        result["memory_timeline"], result["memory_timeline_events"] = timeline_file(torch, prof, out_dir, "cuda:0")
    print(json.dumps(result))
    return 1 if "error" in result else 0


def cpu_check(out_dir):
    """Without a GPU: the loop on the CPU under the profiler, exported as on the GPU."""
    import torch
    import torch.profiler
    torch.manual_seed(0)
    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU],
                                profile_memory=True, record_shapes=True, with_stack=True) as prof:
        model, opt = build(torch, "cpu")
        for _ in range(3):
            x, y = batch(torch, 32, "cpu")
            train_step(torch, model, opt, x, y)
    name, events = timeline_file(torch, prof, out_dir, "cpu")
    with gzip.open(os.path.join(out_dir, name), "rt") as f:
        doc = json.load(f)
    seen = sorted({doc["categories"][e[3]] for e in doc["raw"]["events"]})
    print(f"cpu check: {name}: {events} raw events, {len(doc['timeline']['times_us'])} timeline points; "
          f"categories seen: {', '.join(seen)}")
    return 0


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--out", help="the folder to write into (made if missing)")
    p.add_argument("--iterations", type=int, default=8)
    p.add_argument("--stacks", choices=["python", "all"], default="python")
    p.add_argument("--timeout", type=float, default=35, help="seconds per run (they run side by side)")
    p.add_argument("--run", choices=sorted(RUNS), help=argparse.SUPPRESS)  # a child process
    p.add_argument("--cpu-check", metavar="DIR", help="no GPU: check the timeline export on the CPU")
    args = p.parse_args()
    if args.cpu_check:
        os.makedirs(args.cpu_check, exist_ok=True)
        return cpu_check(args.cpu_check)
    if not args.out or args.iterations < 5:
        p.error("--out DIR is required, and --iterations at least 5")
    os.makedirs(args.out, exist_ok=True)
    if args.run:
        return one_run(args.run, args.out, args.iterations, args.stacks)

    if importlib.util.find_spec("torch") is None:
        print("pytorch_snapshots.py: PyTorch not installed, nothing made")
        return 77
    # The three runs side by side: each pays torch's import and CUDA's start once.
    children = {}
    for name, env in RUNS.items():
        cmd = [sys.executable, os.path.abspath(__file__), "--run", name, "--out", args.out,
               "--iterations", str(args.iterations), "--stacks", args.stacks]
        children[name] = subprocess.Popen(cmd, env={**os.environ, **env}, stdout=subprocess.PIPE,
                                          stderr=subprocess.PIPE, text=True)
    runs, errors = {}, {}
    deadline = time.monotonic() + args.timeout
    for name, child in children.items():
        try:
            out, err = child.communicate(timeout=max(1.0, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            child.kill()
            out, err = child.communicate()
            err += f"\n(killed after {args.timeout:.0f} s)"
        lines = [line for line in out.splitlines() if line.startswith("{")]
        runs[name] = json.loads(lines[-1]) if lines else {"run": name, "error": "no result"}
        if child.returncode != 0 or "error" in runs[name]:
            runs[name]["stderr_tail"] = err.strip().splitlines()[-15:]
            errors[name] = child.returncode
    if all(r.get("error") == "torch sees no GPU" for r in runs.values()):
        print("pytorch_snapshots.py: torch sees no GPU, nothing made")
        return 77
    with open(os.path.join(args.out, "runs.json"), "w") as f:
        json.dump({"made_by": "tests/gpu/pytorch_snapshots.py", "runs": runs}, f, indent=1)
    for name, rc in errors.items():
        print(f"{name}: FAILED (rc {rc}): {runs[name].get('error', '')}")
        print("\n".join("  " + line for line in runs[name]["stderr_tail"]))
    failed = list(errors)
    for name, r in runs.items():
        if "snapshot" not in r:
            continue
        last = r["iterations"][-1] if r["iterations"] else {}
        print(f"{name}: {r['snapshot']['file']} {r['snapshot']['bytes'] // 1024} KiB, "
              f"{r['snapshot']['segments']} segments, actions {r['snapshot']['trace_actions']}; "
              f"{len(r['iterations'])} iterations, max allocated {last.get('max_memory_allocated')}, "
              f"max reserved {last.get('max_memory_reserved')}"
              + (f"; OOM at iteration {r['oom']['iteration']} (batch {r['oom']['batch']})" if "oom" in r else "")
              + (f"; {r['memory_timeline']} ({r['memory_timeline_events']} events)" if "memory_timeline" in r else ""))
    made = sorted(os.listdir(args.out))
    print(f"pytorch_snapshots.py: {'FAILED ' + ','.join(failed) if failed else 'ok'}; {args.out}: {' '.join(made)}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
