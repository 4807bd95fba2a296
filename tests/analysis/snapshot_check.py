#!/usr/bin/env python3
"""Checks a PyTorch memory snapshot as PyTorch's memory_viz reads it, independently of Tidemark.

    snapshot_check.py SNAPSHOT [--original ORIGINAL] [--dump]

Reads SNAPSHOT with Python's own pickle and checks:
  * its opcodes: protocol 2-4 and only those memory_viz's own JavaScript unpickler reads;
  * the structure memory_viz uses (segments with blocks, device_traces of entries);
  * that each segment's blocks tile it exactly;
  * that walking each device's trace backwards from the final segments, as memory_viz does to
    draw every earlier state, is consistent: every alloc/free meets the block it names, every
    block lies inside a segment reserved at that time, every segment_alloc/segment_map meets
    the memory it reserved.
Then replays each trace forwards from the state that walk reached and reports per device the
peaks and final values of requested bytes (alloc .. free_requested, by the entry's size) and
reserved bytes (segment_alloc/map .. segment_free/unmap), and the state at the start.

With --original (the snapshot a trace was imported from): the trace entries of ORIGINAL other
than `snapshot` must be the last entries of SNAPSHOT's trace, field for field (action, addr,
size, stream, time_us, frames; an unknown name or file may be '', '??' or an address), and the final segments and their blocks must match.

Prints one JSON object: {"ok": bool, "errors": [...], "devices": {"0": {...}}}, with
"snapshot": the whole snapshot as JSON (tuples as lists) under --dump; exit 0 when ok.
Uses only the standard library.
"""
import bisect
import json
import pickle
import pickletools
import re
import sys

# The opcodes memory_viz's unpickle() (torch/utils/viz/MemoryViz.js) handles.
VIEWER_OPCODES = {
    'PROTO', 'FRAME', 'STOP', 'MARK', 'APPEND', 'APPENDS', 'LIST', 'TUPLE', 'EMPTY_TUPLE',
    'TUPLE1', 'TUPLE2', 'TUPLE3', 'EMPTY_LIST', 'EMPTY_DICT', 'DICT', 'SETITEM', 'SETITEMS',
    'NEWTRUE', 'NEWFALSE', 'NONE', 'BININT', 'BININT1', 'BININT2', 'LONG1', 'BINFLOAT',
    'SHORT_BINUNICODE', 'BINUNICODE', 'MEMOIZE', 'BINPUT', 'LONG_BINPUT', 'BINGET',
    'LONG_BINGET',
}
BLOCK_STATES = {'active_allocated', 'active_pending_free', 'inactive'}


class Segments:
    """Reserved address ranges, merged like memory_viz's map_segment for expandable ones."""

    def __init__(self):
        self.starts, self.ends = [], []

    def find(self, addr):
        i = bisect.bisect_right(self.starts, addr) - 1
        return i if i >= 0 and addr < self.ends[i] else None

    def contains(self, addr, size):
        i = self.find(addr)
        return i is not None and addr + size <= self.ends[i]

    def add(self, addr, size):
        if self.find(addr) is not None or self.find(addr + size - 1) is not None:
            return False
        i = bisect.bisect_left(self.starts, addr)
        if i < len(self.starts) and self.starts[i] < addr + size:
            return False
        self.starts.insert(i, addr)
        self.ends.insert(i, addr + size)
        return True

    def remove(self, addr, size):
        i = self.find(addr)
        if i is None or addr + size > self.ends[i]:
            return False
        start, end = self.starts[i], self.ends[i]
        del self.starts[i], self.ends[i]
        if start < addr:
            self.add(start, addr - start)
        if addr + size < end:
            self.add(addr + size, end - addr - size)
        return True

    def total(self):
        return sum(e - s for s, e in zip(self.starts, self.ends))


def frames_key(frames):
    # An unknown name or file is '??' or '' in PyTorch's snapshots, and an address ('0x...')
    # in Tidemark's: all three are "unknown" here.
    def known(s):
        return '??' if s in ('', '??') or re.fullmatch(r'0x[0-9a-f]+', s) else s
    return [(known(f['name']), known(f['filename']), f['line']) for f in frames]


def check(path, original):
    errors = []

    def error(msg):
        if len(errors) < 50:
            errors.append(msg)

    data = open(path, 'rb').read()
    for op, arg, _pos in pickletools.genops(data):
        if op.name not in VIEWER_OPCODES:
            error(f'opcode {op.name} is not one memory_viz reads')
        if op.name == 'PROTO' and not 2 <= arg <= 4:
            error(f'protocol {arg}: memory_viz reads 2-4')
    snap = pickle.loads(data)
    for key in ('segments', 'device_traces'):
        if key not in snap:
            error(f'no {key}')
            return errors, {}, snap

    devices = {}
    final = {}  # device -> (Segments, {addr: [requested, pending]})
    for n, seg in enumerate(snap['segments']):
        where = f'segments[{n}]'
        for k in ('device', 'address', 'total_size', 'allocated_size', 'active_size',
                  'requested_size', 'stream', 'segment_type', 'is_expandable', 'frames', 'blocks'):
            if k not in seg:
                error(f'{where}: no {k}')
        segs, blocks = final.setdefault(seg['device'], (Segments(), {}))
        if not segs.add(seg['address'], seg['total_size']):
            error(f'{where}: overlaps another segment')
        at, allocated, active = seg['address'], 0, 0
        for b in seg['blocks']:
            if b['address'] != at:
                error(f'{where}: block at {b["address"]:#x}, expected {at:#x}')
            if b['state'] not in BLOCK_STATES:
                error(f'{where}: block state {b["state"]}')
            if b['state'] != 'inactive':
                blocks[b['address']] = [b['requested_size'], b['state'] == 'active_pending_free']
                active += b['size']
                if b['state'] == 'active_allocated':
                    allocated += b['size']
            at += b['size']
        if at != seg['address'] + seg['total_size']:
            error(f'{where}: blocks cover {at - seg["address"]} of {seg["total_size"]} bytes')
        if (allocated, active) != (seg['allocated_size'], seg['active_size']):
            error(f'{where}: allocated/active sizes {seg["allocated_size"]}/{seg["active_size"]}, '
                  f'blocks say {allocated}/{active}')

    for dev, trace in enumerate(snap['device_traces']):
        segs, blocks = final.get(dev, (Segments(), {}))
        # Backwards, as memory_viz draws earlier states.
        for i in range(len(trace) - 1, -1, -1):
            e, where = trace[i], f'device_traces[{dev}][{i}]'
            a, addr, size = e['action'], e.get('addr'), e.get('size')
            if a in ('alloc', 'free_requested', 'free_completed') and not segs.contains(addr, 1):
                error(f'{where}: {a} at {addr:#x} outside every reserved segment')
            if a == 'alloc':
                b = blocks.pop(addr, None)
                if b is None or b[1] or b[0] != size:
                    error(f'{where}: alloc of {addr:#x} but the next state has {b}')
            elif a == 'free_requested':
                b = blocks.get(addr)
                if b is None or not b[1]:
                    error(f'{where}: free_requested of {addr:#x} but the next state has {b}')
                else:
                    b[1] = False
            elif a == 'free_completed':
                if addr in blocks:
                    error(f'{where}: free_completed of {addr:#x}, still allocated after it')
                blocks[addr] = [size, True]
            elif a in ('segment_alloc', 'segment_map'):
                if not segs.remove(addr, size):
                    error(f'{where}: {a} of {addr:#x}+{size} not reserved after it')
            elif a in ('segment_free', 'segment_unmap'):
                if not segs.add(addr, size):
                    error(f'{where}: {a} of {addr:#x}+{size} overlaps reserved memory')
        start_blocks, start_segments = len(blocks), len(segs.starts)
        # Forwards from there.
        requested = sum(b[0] for b in blocks.values() if not b[1])
        reserved = segs.total()
        peak_requested, peak_reserved, categories = requested, reserved, set()
        for e in trace:
            a, size = e['action'], e.get('size', 0)
            if 'category' in e:
                categories.add(e['category'])
            if a == 'alloc':
                requested += size
            elif a == 'free_requested':
                requested -= size
            elif a in ('segment_alloc', 'segment_map'):
                reserved += size
            elif a in ('segment_free', 'segment_unmap'):
                reserved -= size
            peak_requested = max(peak_requested, requested)
            peak_reserved = max(peak_reserved, reserved)
        devices[str(dev)] = {
            'entries': len(trace), 'start_blocks': start_blocks, 'start_segments': start_segments,
            'peak_requested': peak_requested, 'final_requested': requested,
            'peak_reserved': peak_reserved, 'final_reserved': reserved,
            'actions': sorted({e['action'] for e in trace}), 'categories': sorted(categories),
        }
    if original is not None:
        compare(snap, pickle.load(open(original, 'rb')), error)
    return errors, devices, snap


def compare(snap, orig, error):
    for dev, otrace in enumerate(orig['device_traces']):
        mine = snap['device_traces'][dev] if dev < len(snap['device_traces']) else []
        theirs = [e for e in otrace if e['action'] != 'snapshot']
        if len(mine) < len(theirs):
            error(f'device {dev}: {len(mine)} entries, the original has {len(theirs)}')
            continue
        tail = mine[len(mine) - len(theirs):]
        for i, (m, t) in enumerate(zip(tail, theirs)):
            for k in ('action', 'addr', 'size', 'stream', 'time_us', 'device_free'):
                if m.get(k) != t.get(k):
                    error(f'device {dev} entry {i}: {k} {m.get(k)} != original {t.get(k)}')
            if frames_key(m.get('frames', [])) != frames_key(t.get('frames', [])):
                error(f'device {dev} entry {i}: frames differ from the original')

    def seg_key(s):
        return (s['device'], s['address'], s['total_size'], s['stream'], s['segment_type'],
                s['is_expandable'])

    def block_key(b):
        active = b['state'] != 'inactive'
        return (b['address'], b['size'], b['state'], b['requested_size'] if active else None,
                tuple(frames_key(b['frames'])) if active else None)

    mine = sorted(snap['segments'], key=lambda s: (s['device'], s['address']))
    theirs = sorted(orig['segments'], key=lambda s: (s['device'], s['address']))
    if [seg_key(s) for s in mine] != [seg_key(s) for s in theirs]:
        error('final segments differ from the original')
        return
    for m, t in zip(mine, theirs):
        if [block_key(b) for b in m['blocks']] != [block_key(b) for b in t['blocks']]:
            error(f'segment {m["address"]:#x}: blocks differ from the original')


def main():
    args = sys.argv[1:]
    original = None
    dump = '--dump' in args
    if dump:
        args.remove('--dump')
    if '--original' in args:
        i = args.index('--original')
        original = args[i + 1]
        del args[i:i + 2]
    if len(args) != 1:
        print(__doc__, file=sys.stderr)
        return 2
    errors, devices, snap = check(args[0], original)
    out = {'ok': not errors, 'errors': errors, 'devices': devices}
    if dump:
        out['snapshot'] = snap
    print(json.dumps(out))
    return 0 if not errors else 1


if __name__ == '__main__':
    sys.exit(main())
