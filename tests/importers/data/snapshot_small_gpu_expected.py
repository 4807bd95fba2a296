#!/usr/bin/env python3
"""Expected memory curves of a PyTorch memory snapshot, computed independently of Tidemark.

Development aid only (the C++ tests never run Python): it writes the JSON the importer test
compares against. Usage:

    python3 tests/importers/data/snapshot_small_gpu_expected.py \
        tests/data/pytorch/snapshot_small_gpu.pickle > tests/importers/data/snapshot_small_gpu_expected.json

It loads the snapshot with Python's own `pickle`, rebuilds the state at the start of the trace by
walking `device_traces` backwards from the final `segments` (as PyTorch's viewer, MemoryViz.js,
does), then replays the trace forwards and records, per device, the peaks and final values of:

* allocated: rises at alloc, drops at free_requested, by the block's size. PyTorch's trace records
  the caller's request; the block size is the request rounded up to 512 B (at least 512 B), or,
  for a block still allocated at the end, its exact size from `segments`.
* requested: the same with the requested sizes (what PyTorch's viewer draws).
* active: rises at alloc, drops at free_completed, by the block's size.
* reserved: rises at segment_alloc / segment_map, drops at segment_free / segment_unmap.

Curves start at 0; the state before the trace is replayed first (segments, then blocks pending
free — alloc and free_requested —, then allocated blocks). Peaks are the first time the maximum
is reached, in ns (time_us * 1000).
"""
import json
import pickle
import sys


def round_block(n):
    return 512 if n < 512 else (n + 511) // 512 * 512


def device_of_traces(snapshot):
    traces = snapshot.get("device_traces", [])
    return {d: t for d, t in enumerate(traces)}


def main(path):
    with open(path, "rb") as f:
        snap = pickle.load(f)
    if isinstance(snap, list):
        snap = {"segments": snap, "device_traces": []}
    segments = snap.get("segments", [])
    traces = device_of_traces(snap)
    devices = sorted(set(s["device"] for s in segments) | set(d for d, t in traces.items() if t))

    all_times = [e["time_us"] for t in traces.values() for e in t]
    t0 = min((t[0]["time_us"] for t in traces.values() if t), default=0) * 1000

    out = {"source": path.split("/")[-1], "devices": []}
    for dev in devices:
        trace = traces.get(dev, [])
        # ---- Final state.
        blocks = {}  # addr -> [state, size, requested, exact]
        segs = {}    # addr -> size (whole segments)
        mapped = {}  # start -> end (expandable segments' mapped ranges)
        for s in segments:
            if s["device"] != dev:
                continue
            if s.get("is_expandable"):
                mapped[s["address"]] = s["address"] + s["total_size"]
            else:
                segs[s["address"]] = s["total_size"]
            addr = s["address"]
            for b in s["blocks"]:
                a = b.get("address", addr)
                addr = a + b["size"]
                if b["state"] == "active_allocated":
                    blocks[a] = ["allocated", b["size"], b["requested_size"], True]
                elif b["state"] == "active_pending_free":
                    blocks[a] = ["pending", b["size"], b["requested_size"], True]

        def remove_range(lo, hi):
            for start, end in list(mapped.items()):
                if end <= lo or start >= hi:
                    continue
                del mapped[start]
                if start < lo:
                    mapped[start] = lo
                if hi < end:
                    mapped[hi] = end

        def add_range(lo, hi):
            remove_range(lo, hi)
            mapped[lo] = hi

        # ---- Walk backwards: undo each action.
        exact_size = {}  # trace index of an alloc -> exact block size
        for i in range(len(trace) - 1, -1, -1):
            e = trace[i]
            act, addr, size = e["action"], e.get("addr", 0), e.get("size", 0)
            if act == "alloc":
                b = blocks.pop(addr, None)
                if b is not None and b[3]:
                    exact_size[i] = b[1]
            elif act == "free_requested":
                b = blocks.get(addr)
                if b is None:
                    blocks[addr] = ["allocated", round_block(size), size, False]
                else:
                    b[0] = "allocated"
            elif act == "free_completed":
                blocks[addr] = ["pending", round_block(size), size, False]
            elif act == "segment_alloc":
                segs.pop(addr, None)
            elif act == "segment_free":
                segs[addr] = size
            elif act == "segment_map":
                remove_range(addr, addr + size)
            elif act == "segment_unmap":
                add_range(addr, addr + size)

        initial_segments = len(segs) + len(mapped)
        initial_blocks = len(blocks)

        # ---- Replay forwards.
        cur = {"allocated": 0, "requested": 0, "active": 0, "reserved": 0}
        peak = {k: [0, 0] for k in cur}
        counts = {"alloc": 0, "free_requested": 0, "free_completed": 0, "segment_alloc": 0,
                  "segment_free": 0, "segment_map": 0, "segment_unmap": 0, "snapshot": 0, "oom": 0}

        def bump(curve, delta, t):
            cur[curve] += delta
            if cur[curve] > peak[curve][0]:
                peak[curve] = [cur[curve], t]

        for a, size in sorted(segs.items()):
            bump("reserved", size, t0)
        for lo, hi in sorted(mapped.items()):
            bump("reserved", hi - lo, t0)
        live = {}
        order = sorted(blocks.items(), key=lambda kv: (kv[1][0] != "pending", kv[0]))
        for a, (state, size, req, _) in order:
            bump("allocated", size, t0)
            bump("requested", req, t0)
            bump("active", size, t0)
            if state == "pending":
                bump("allocated", -size, t0)
                bump("requested", -req, t0)
            live[a] = (size, req)
        seg_live = dict(segs)
        at_snapshots = []
        for i, e in enumerate(trace):
            act, addr, size, t = e["action"], e.get("addr", 0), e.get("size", 0), e["time_us"] * 1000
            if act in counts:
                counts[act] += 1
            if act == "alloc":
                bsize = exact_size.get(i, round_block(size))
                live[addr] = (bsize, size)
                bump("allocated", bsize, t)
                bump("requested", size, t)
                bump("active", bsize, t)
            elif act == "free_requested":
                bsize, req = live.get(addr, (round_block(size), size))
                bump("allocated", -bsize, t)
                bump("requested", -req, t)
            elif act == "free_completed":
                bsize, req = live.pop(addr, (round_block(size), size))
                bump("active", -bsize, t)
            elif act == "snapshot":
                at_snapshots.append(cur["allocated"])
            elif act == "segment_alloc":
                seg_live[addr] = size
                bump("reserved", size, t)
            elif act == "segment_free":
                bump("reserved", -seg_live.pop(addr, size), t)
            elif act == "segment_map":
                bump("reserved", size, t)
            elif act == "segment_unmap":
                bump("reserved", -size, t)

        final_alloc_from_segments = sum(
            b["size"] for s in segments if s["device"] == dev for b in s["blocks"]
            if b["state"] == "active_allocated")
        final_reserved_from_segments = sum(s["total_size"] for s in segments if s["device"] == dev)
        out["devices"].append({
            "device": f"cuda:{dev}",
            "trace_entries": len(trace),
            "actions": counts,
            "initial_blocks": initial_blocks,
            "initial_segments": initial_segments,
            "first_time_ns": t0,
            "last_time_ns": max(all_times, default=0) * 1000,
            **{f"peak_{k}_bytes": v[0] for k, v in peak.items()},
            **{f"peak_{k}_time_ns": v[1] for k, v in peak.items()},
            **{f"final_{k}_bytes": v for k, v in cur.items()},
            # Cross-checks straight from the snapshot's final `segments`.
            "segments_allocated_bytes": final_alloc_from_segments,
            "segments_reserved_bytes": final_reserved_from_segments,
            "snapshot_entry_sizes": sorted(set(e["size"] for e in trace if e["action"] == "snapshot")),
            "allocated_at_snapshot_entries": sorted(set(at_snapshots)),
        })
    json.dump(out, sys.stdout, indent=2)
    sys.stdout.write("\n")


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else "tests/data/pytorch/snapshot_small_gpu.pickle")
