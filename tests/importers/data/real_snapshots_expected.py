#!/usr/bin/env python3
"""The memory curves of PyTorch memory snapshots, computed independently of Tidemark.

Development aid (the C++ tests read its output, they do not run Python). Usage, from the
repository root:

    python3 tests/importers/data/real_snapshots_expected.py tests/data/pytorch/*.pickle \
        > tests/importers/data/real_snapshots_expected.json

Each snapshot is loaded with Python's own `pickle`. Per device it computes:

* `requested_peak`: what pytorch.org/memory_viz's Active Memory Timeline draws, the way
  MemoryViz.js builds it: every `alloc` entry adds its size (the caller's request) until the
  `free_completed` (or pre-2.1 `free`) of its address; a free of an address the trace never
  allocated, and every `active_allocated` block of `segments` the trace did not allocate, were
  allocated before the trace began (with the entry's size, or the block's `requested_size`).
* `reserved_peak`: the final segments' total, walked back over `segment_alloc`/`segment_map`
  (absent before) and `segment_free`/`segment_unmap` (present before) to the start, then
  replayed forwards.
* `allocated_peak`: block sizes, rising at `alloc` and falling at `free_requested`. PyTorch's
  trace gives requests, not blocks: a block still allocated (or pending free) at the end has
  its exact size in `segments`; any other is estimated as PyTorch's default rounding of its
  request (a multiple of 512 B, at least 512 B). `allocated_peak_exact` is true when no
  estimated block was live at the (first) peak.
* the counts the importer must agree with: entries by action, annotations (well-formed
  `external_annotations` on a device with memory) and whether the snapshot has times.
* `private_pools`: the segments and reserved bytes of each pool of `segments` whose
  `segment_pool_id` is not (0, 0) (CUDA graphs, torch.cuda.MemPool), as "a,b" -> counts.
"""
import json
import os
import pickle
import sys


def round_block(n):
    return 512 if n < 512 else (n + 511) // 512 * 512


def traces_of(snap):
    t = snap.get("device_traces") or []
    if isinstance(t, dict):
        return {int(k): v for k, v in t.items()}
    return dict(enumerate(t))


def final_blocks(segments, dev):
    """addr -> (state, size, requested) of the active blocks of `dev` in `segments`."""
    out = {}
    for s in segments:
        if s["device"] != dev:
            continue
        addr = s["address"]
        for b in s["blocks"]:
            a = b.get("address", addr)
            addr = a + b["size"]
            req = b.get("requested_size")
            if req is None and b.get("history"):
                req = b["history"][0].get("real_size")
            if b["state"] in ("active_allocated", "active_pending_free"):
                out[a] = (b["state"], b["size"], b["size"] if req is None else req)
    return out


def memory_viz_requested_peak(trace, segments, dev):
    live, initial = {}, []
    for e in trace:
        if e["action"] == "alloc":
            live[e["addr"]] = e["size"]
        elif e["action"] in ("free_completed", "free"):
            if e["addr"] in live:
                del live[e["addr"]]
            else:
                initial.append(e["size"])
    for a, (state, size, req) in final_blocks(segments, dev).items():
        if state == "active_allocated" and a not in live:
            initial.append(req)
    cur = peak = sum(initial)
    for e in trace:
        if e["action"] == "alloc":
            cur += e["size"]
        elif e["action"] in ("free_completed", "free"):
            cur -= e["size"]
        peak = max(peak, cur)
    return peak


def reserved_peak(trace, segments, dev):
    end = sum(s["total_size"] for s in segments if s["device"] == dev)
    cur = end
    for e in reversed(trace):
        if e["action"] in ("segment_alloc", "segment_map"):
            cur -= e["size"]
        elif e["action"] in ("segment_free", "segment_unmap"):
            cur += e["size"]
    peak = cur
    for e in trace:
        if e["action"] in ("segment_alloc", "segment_map"):
            cur += e["size"]
        elif e["action"] in ("segment_free", "segment_unmap"):
            cur -= e["size"]
        peak = max(peak, cur)
    return peak, end


def allocated_peak(trace, segments, dev, exact_sizes):
    # Backwards from the end state: which blocks existed before the trace, and which allocs
    # made a block still there at the end (their size is exact).
    state = {a: [st, size, True] for a, (st, size, req) in final_blocks(segments, dev).items()}
    exact_alloc = set()
    for i in range(len(trace) - 1, -1, -1):
        e = trace[i]
        act, addr, size = e["action"], e.get("addr"), e.get("size", 0)
        if act == "alloc":
            b = state.pop(addr, None)
            if b is not None and b[2]:
                exact_alloc.add(i)
        elif act == "free_requested":
            if addr in state:
                state[addr][0] = "active_allocated"
            else:
                state[addr] = ["active_allocated", round_block(size), False]
        elif act == "free_completed":
            state[addr] = ["active_pending_free", round_block(size), False]
        elif act == "free":
            state[addr] = ["active_allocated", round_block(size), False]
    live = {}  # addr -> (size, exact)
    cur = peak = 0
    peak_exact = True
    # The importer's order: blocks pending free (alloc, free_requested) first, then allocated.
    for a, (st, size, exact) in sorted(state.items(), key=lambda kv: (kv[1][0] != "active_pending_free", kv[0])):
        cur += size
        if cur > peak:
            peak, peak_exact = cur, all(x for _, x in live.values()) and exact
        if st == "active_pending_free":
            cur -= size
        else:
            live[a] = (size, exact)
    for i, e in enumerate(trace):
        act, addr, size = e["action"], e.get("addr"), e.get("size", 0)
        if act == "alloc":
            exact = i in exact_alloc
            bsize = exact_sizes[addr] if exact else round_block(size)
            live[addr] = (bsize, exact)
            cur += bsize
            if cur > peak:
                peak, peak_exact = cur, all(x for _, x in live.values())
        elif act in ("free_requested", "free"):
            b = live.pop(addr, None)
            cur -= b[0] if b else round_block(size)
    return peak, peak_exact


def private_pools(segments, dev):
    pools = {}
    for s in segments:
        pool = tuple(s.get("segment_pool_id", (0, 0)))
        if s["device"] != dev or pool == (0, 0):
            continue
        p = pools.setdefault(f"{pool[0]},{pool[1]}", {"segments": 0, "reserved_bytes": 0})
        p["segments"] += 1
        p["reserved_bytes"] += s["total_size"]
    return dict(sorted(pools.items()))


def analyse(path):
    with open(path, "rb") as f:
        snap = pickle.load(f)
    if isinstance(snap, list):
        snap = {"segments": snap}
    segments = snap["segments"]
    traces = traces_of(snap)
    timed = all("time_us" in e for t in traces.values() for e in t)
    devices = sorted(set(s["device"] for s in segments) | set(d for d, t in traces.items() if t))
    annotations = 0
    kept = []
    if timed:
        for a in snap.get("external_annotations") or []:
            if a.get("stage") in ("START", "END") and isinstance(a.get("name"), str) \
                    and a.get("device", 0) in devices and isinstance(a.get("time_us"), int):
                annotations += 1
                kept.append(a)
    # Steps inferred from the annotations (the importer's Note [Inferred steps]): the starts of
    # torch.profiler's ProfilerStep ranges, else of the optimizer's zero_grad, else the ends of
    # its step.
    inferred_steps = 0
    for prefix, stage in (("ProfilerStep#", "START"), ("Optimizer.zero_grad", "START"),
                          ("Optimizer.step", "END")):
        if any(a["name"].startswith(prefix) for a in kept):
            inferred_steps = sum(1 for a in kept if a["name"].startswith(prefix) and a["stage"] == stage)
            break
    out = {"source": os.path.basename(path), "timed": timed, "annotations": annotations,
           "inferred_steps": inferred_steps,
           "segments": len(segments), "devices": []}
    for dev in devices:
        trace = traces.get(dev, [])
        actions = {}
        for e in trace:
            actions[e["action"]] = actions.get(e["action"], 0) + 1
        res_peak, res_end = reserved_peak(trace, segments, dev)
        exact_sizes = {a: size for a, (st, size, req) in final_blocks(segments, dev).items()}
        alloc_peak, alloc_exact = allocated_peak(trace, segments, dev, exact_sizes)
        out["devices"].append({
            "device": f"cuda:{dev}",
            "entries": len(trace),
            "actions": dict(sorted(actions.items())),
            "requested_peak": memory_viz_requested_peak(trace, segments, dev),
            "reserved_peak": res_peak,
            "allocated_peak": alloc_peak,
            "allocated_peak_exact": alloc_exact,
            "final_reserved": res_end,
            "final_allocated": sum(size for st, size, req in final_blocks(segments, dev).values()
                                   if st == "active_allocated"),
            "private_pools": private_pools(segments, dev),
        })
    return out


def main(paths):
    json.dump([analyse(p) for p in paths], sys.stdout, indent=1)
    sys.stdout.write("\n")


if __name__ == "__main__":
    main(sys.argv[1:])
