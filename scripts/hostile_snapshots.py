"""Hostile PyTorch memory snapshots for the bad-input corpus (scripts/bad-input-corpus.py).

Each is derived from a real snapshot (`tidemark export --format snapshot` of a recording,
which has the layout `torch.cuda.memory._dump_snapshot` writes: docs/importers.md) and has one
shape that once harmed the importer or is built to: a small file whose memo expands without
bound, ranges that nest without end, frames never shared, frames all distinct, a setting whose
value overflows,
a code payload, damage. Standard library only; the same bytes for the same seed.
"""

import copy
import pickle
import random


def _dump(obj):
    return pickle.dumps(obj, protocol=4)


def _memo_bomb(levels):
    """A list whose leaves number 2^levels, a few bytes per level: the pickle's memo shares
    each level twice."""
    node = []
    for _ in range(levels):
        node = [node, node]
    return node


class _Payload:
    """Unpickles as a call of os.system: an importer that runs it creates `path`."""

    def __init__(self, path):
        self.path = path

    def __reduce__(self):
        import os

        return (os.system, ("touch '%s'" % self.path,))


def _nested_list_opcodes(depth):
    """A list nested `depth` levels deep, as raw opcodes (pickle.dumps would recurse)."""
    return b"\x80\x02" + b"]" * depth + b"a" * (depth - 1) + b"."


def cases(snapshot_bytes, seed, sentinel):
    """(name, bytes) of every hostile snapshot made from `snapshot_bytes`; `sentinel`: the
    file the code payload would create."""
    rng = random.Random(seed)
    base = pickle.loads(snapshot_bytes)
    n = len(snapshot_bytes)
    out = [("snapshot-valid", snapshot_bytes)]

    # Damage: cut short (mid-frame, mid-string, one byte), bytes overwritten.
    for size in (1, 64, n // 3, n - 1):
        out.append(("snapshot-truncated-%d" % size, snapshot_bytes[:size]))
    for k in range(6):
        b = bytearray(snapshot_bytes)
        for _ in range(4):
            b[rng.randrange(2, n - 1)] = rng.randrange(256)
        out.append(("snapshot-bytes-overwritten-%d" % k, bytes(b)))

    # The allocator's settings sharing one list through the memo, 40 levels: 2^40 leaves in
    # a few hundred bytes.
    s = copy.deepcopy(base)
    s["allocator_settings"] = {"roundup_power2_divisions": _memo_bomb(40)}
    out.append(("snapshot-memo-shared-settings", _dump(s)))

    # A rounding setting whose product with 512 wraps to 0 (once a division by zero).
    s = copy.deepcopy(base)
    s["allocator_settings"] = {"roundup_power2_divisions": 1 << 55, "max_split_size": -1}
    out.append(("snapshot-settings-overflow", _dump(s)))

    # Entries shared through the memo: the trace's entries 20 times over, that list for each
    # of 120 devices: a million entries from a file of tens of kilobytes.
    s = copy.deepcopy(base)
    s["device_traces"] = [s["device_traces"][0] * 20] * 120
    out.append(("snapshot-memo-shared-traces", _dump(s)))

    # 10,000 record_function ranges that open and never close (once O(N^2) scope paths).
    s = copy.deepcopy(base)
    t0 = min((e.get("time_us", 0) for e in s["device_traces"][0]), default=0)
    s["external_annotations"] = [
        {"stage": "START", "name": "range%d" % i, "device": 0, "time_us": t0 + i} for i in range(10000)
    ]
    out.append(("snapshot-annotations-nested", _dump(s)))

    # Every entry's frames distinct objects of equal content: nothing shared through the memo,
    # ten times over (the whole trace repeated at addresses of its own).
    s = copy.deepcopy(base)
    trace = s["device_traces"][0]
    repeated = []
    for r in range(10):
        for e in trace:
            e = copy.deepcopy(e)
            if "addr" in e:
                e["addr"] += r << 40
            repeated.append(e)
    s["device_traces"] = [repeated]
    s["segments"] = []
    out.append(("snapshot-unshared-frames", _dump(s)))

    # Every frame distinct (no program's are): 12,000 allocations of 20 frames at lines of their
    # own, past the importer's bound on distinct frames (one per 1024 bytes, at least 100,000).
    frames = iter(range(1, 1 << 30))
    s = {"segments": [], "device_traces": [[
        {"action": "alloc", "addr": 0x100000 + 512 * i, "size": 512, "stream": 0, "time_us": i,
         "frames": [{"filename": "model.py", "line": next(frames), "name": "forward"}
                    for _ in range(20)]}
        for i in range(12000)]]}
    out.append(("snapshot-distinct-frames", _dump(s)))

    # 8 MB of EMPTY_DICT: 48 bytes of values for each byte, refused past the pickle reader's
    # memory bound (16 bytes for each byte of input, at least 256 MiB) before taking 0.6 GB.
    out.append(("snapshot-empty-dict-flood", b"\x80\x04" + b"}" * (8 << 20) + b"."))

    # Not a snapshot: a list 100,000 levels deep; a bare integer; a code payload.
    out.append(("snapshot-nested-100000", _nested_list_opcodes(100000)))
    out.append(("snapshot-integer", _dump(7)))
    out.append(("snapshot-code-payload", _dump({"segments": [], "device_traces": [_Payload(sentinel)]})))
    return out
