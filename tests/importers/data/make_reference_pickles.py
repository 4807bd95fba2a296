#!/usr/bin/env python3
"""Writes the reference pickles tests/importers/pickle_test.cpp reads (and the fuzz seeds use):
one value pickled by Python's own `pickle` with protocols 2 to 5. Development aid only; the
files are committed. Run from this directory: python3 make_reference_pickles.py"""
import pickle


def value(with_bytes):
    shared = {"k": "v"}
    misc = [1.5, None, True, False, "h\u00e9llo", "s" * 300, (1,), (1, 2), (1, 2, 3), (1, 2, 3, 4), ()]
    if with_bytes:
        misc += [b"\x00\x01", b"b" * 300]
    return {
        "ints": [0, 1, 255, 256, 65535, 65536, -1, -70000, 2**31 - 1, -2**31, 2**40, -2**40,
                 2**63 - 1, -2**63, 2**64, -2**64 - 5],
        "misc": misc,
        "shared": [shared, shared],
        7: "int key",
    }


for protocol in (2, 3, 4, 5):
    with open(f"reference_p{protocol}.pkl", "wb") as f:
        # Protocol 2 has no bytes opcodes: Python pickles bytes as a call (REDUCE).
        f.write(pickle.dumps(value(with_bytes=protocol > 2), protocol=protocol))
with open("reference_p2_bytes.pkl", "wb") as f:
    f.write(pickle.dumps(value(with_bytes=True), protocol=2))


# Small snapshots (fuzz seeds, a few KB): the start of the real snapshot when it is beside the
# repository, and one with every trace action.
def frames(n):
    return [{"filename": "train.py", "line": 10 + i, "name": f"f{i}"} for i in range(n)]


every_action = {
    "segments": [
        {"device": 0, "address": 1 << 30, "total_size": 40 << 20, "allocated_size": 8 << 20,
         "active_size": 8 << 20, "requested_size": 8 << 20, "stream": 0, "segment_type": "large",
         "segment_pool_id": (0, 0), "is_expandable": True, "frames": [],
         "blocks": [{"address": 1 << 30, "size": 8 << 20, "requested_size": 8 << 20,
                     "state": "active_allocated", "frames": frames(3)},
                    {"address": (1 << 30) + (8 << 20), "size": 32 << 20, "requested_size": 0,
                     "state": "inactive", "frames": []}]},
        {"device": 1, "address": 2 << 30, "total_size": 2 << 20, "allocated_size": 512,
         "active_size": 1024, "requested_size": 100, "stream": 7, "segment_type": "small",
         "segment_pool_id": (0, 0), "is_expandable": False, "frames": [],
         "blocks": [{"address": 2 << 30, "size": 512, "requested_size": 100,
                     "state": "active_pending_free", "frames": frames(2)},
                    {"address": (2 << 30) + 512, "size": 512, "requested_size": 512,
                     "state": "active_allocated", "frames": []}]},
    ],
    "device_traces": [
        [{"action": "segment_map", "addr": (1 << 30) + (20 << 20), "size": 20 << 20, "stream": 0, "time_us": 10, "frames": frames(1)},
         {"action": "alloc", "addr": 1 << 30, "size": 8 << 20, "stream": 0, "time_us": 11, "frames": frames(3)},
         {"action": "segment_map", "addr": (1 << 30) + (40 << 20), "size": 20 << 20, "stream": 0, "time_us": 12, "frames": []},
         {"action": "segment_unmap", "addr": (1 << 30) + (40 << 20), "size": 20 << 20, "stream": 0, "time_us": 13, "frames": []},
         {"action": "oom", "device_free": 1 << 20, "size": 1 << 34, "stream": 0, "time_us": 14, "frames": frames(4)},
         {"action": "snapshot", "addr": 0, "size": 8 << 20, "stream": 0, "time_us": 15, "frames": []}],
        [{"action": "segment_free", "addr": 3 << 30, "size": 2 << 20, "stream": 7, "time_us": 9, "frames": []},
         {"action": "free", "addr": (2 << 30) + 1024, "size": 700, "stream": 7, "time_us": 11, "frames": []},
         {"action": "free_requested", "addr": 2 << 30, "size": 100, "stream": 7, "time_us": 12, "frames": frames(2)},
         {"action": "free_completed", "addr": (2 << 30) + 2048, "size": 64, "stream": 7, "time_us": 13, "frames": []}],
    ],
    "allocator_settings": {"expandable_segments": True, "max_split_size": -1},
}
with open("snapshot_every_action.pkl", "wb") as f:
    f.write(pickle.dumps(every_action, protocol=4))

import os  # noqa: E402

real = os.path.join(os.path.dirname(os.path.abspath(__file__)),
                    "../../data/pytorch/snapshot_small_gpu.pickle")
if os.path.exists(real):
    with open(real, "rb") as f:
        snap = pickle.load(f)
    tiny = {
        "segments": [dict(s, blocks=[dict(b, frames=b["frames"][:4]) for b in s["blocks"]])
                     for s in snap["segments"][:3]],
        "device_traces": [[dict(e, frames=e.get("frames", [])[:4]) for e in snap["device_traces"][0][:40]]],
    }
    for protocol in (2, 5):
        with open(f"snapshot_tiny_p{protocol}.pkl", "wb") as f:
            f.write(pickle.dumps(tiny, protocol=protocol))

# A whole real snapshot written again with protocol 5 (Python 3.14's default), which memory_viz
# cannot read: the importer must give the same trace as from the protocol 4 original.
old = os.path.join(os.path.dirname(os.path.abspath(__file__)), "../../data/pytorch/yiyi_oom_snapshot.pickle")
with open(old, "rb") as f:
    snap = pickle.load(f)
with open("yiyi_oom_snapshot_p5.pkl", "wb") as f:
    f.write(pickle.dumps(snap, protocol=5))
