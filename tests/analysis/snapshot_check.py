#!/usr/bin/env python3
"""Checks a PyTorch memory snapshot as PyTorch's memory_viz reads it, independently of Tidemark.

    snapshot_check.py SNAPSHOT [--original ORIGINAL] [--dump]

Reads SNAPSHOT with Python's own pickle and checks:
  * its pickle: protocol 2-4, only the opcodes memory_viz's own JavaScript unpickler reads, no
    APPENDS or SETITEMS of more than 10000 items (the viewer pushes them in one call, which
    overflows the JavaScript stack), no integer a JavaScript number cannot hold exactly;
  * the structure memory_viz uses: segments with blocks that tile them, device_traces of
    entries with the keys it reads, every segment's device among device_traces;
  * the history, walked backwards from the final segments twice:
    - as a set of reserved ranges and live blocks, strictly: every alloc and free meets the
      block it names, every block lies inside reserved memory, every segment_alloc/segment_map
      meets the memory it reserved, nothing is reserved twice;
    - as memory_viz's annotate_snapshot and simulate_memory do it (its renaming of streams,
      its list operations, its merging of mapped ranges only on equal streams), reporting
      every step where the viewer would throw, remove the wrong segment, or draw a block
      outside every segment.
Then replays each trace forwards from the state the strict walk reached and reports per
device the peaks and final values of requested bytes (alloc .. free_requested, by the entry's
size) and reserved bytes (segment_alloc/map .. segment_free/unmap), and the state at the start.

With --original (the snapshot a trace was imported from): the trace entries of ORIGINAL other
than `snapshot` must be the last entries of SNAPSHOT's trace, field for field (action, addr,
size, stream, time_us, frames; an unknown name or file may be '', '??' or an address), and
the final segments and their blocks must match.

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
MAX_BATCH = 10000
MAX_SAFE_INTEGER = 2**53 - 1
BLOCK_STATES = {'active_allocated', 'active_pending_free', 'inactive'}


def check_pickle(data, error):
    height, marks = 0, []
    for op, arg, _pos in pickletools.genops(data):
        if op.name not in VIEWER_OPCODES:
            error(f'opcode {op.name} is not one memory_viz reads')
        if op.name == 'PROTO' and not 2 <= arg <= 4:
            error(f'protocol {arg}: memory_viz reads 2-4')
        if op.name == 'LONG1' and abs(arg) > MAX_SAFE_INTEGER:
            error(f'integer {arg} is beyond what a JavaScript number holds exactly')
        if op.name == 'MARK':
            marks.append(height)
            continue
        before = op.stack_before
        if pickletools.markobject in before:
            mark = marks.pop()
            if op.name in ('APPENDS', 'SETITEMS') and height - mark > MAX_BATCH * (
                    2 if op.name == 'SETITEMS' else 1):
                error(f'{op.name} of {height - mark} stack items in one batch')
            height = mark - before.index(pickletools.markobject) + len(op.stack_after)
        else:
            height += len(op.stack_after) - len(before)


class Ranges:
    """Reserved memory as a set of addresses: ranges kept sorted and merged."""

    def __init__(self):
        self.starts, self.ends = [], []

    def find(self, addr):
        i = bisect.bisect_right(self.starts, addr) - 1
        return i if i >= 0 and addr < self.ends[i] else None

    def contains(self, addr, size):
        i = self.find(addr)
        return i is not None and addr + size <= self.ends[i]

    def add(self, addr, size):
        end = addr + size
        i = bisect.bisect_left(self.starts, addr)
        if (i > 0 and self.ends[i - 1] > addr) or (i < len(self.starts) and self.starts[i] < end):
            return False
        self.starts.insert(i, addr)
        self.ends.insert(i, end)
        if i + 1 < len(self.starts) and self.starts[i + 1] == end:  # join the next
            self.ends[i] = self.ends.pop(i + 1)
            del self.starts[i + 1]
        if i > 0 and self.ends[i - 1] == addr:  # and the previous
            self.ends[i - 1] = self.ends.pop(i)
            del self.starts[i]
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


def strict_walk(trace, dev, segs, blocks, error):
    """Backwards from the final state; returns the state at the start."""
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
    return segs, blocks


def annotate_streams(snap):
    """memory_viz's annotate_snapshot renaming of streams: per entry, then per segment; the
    entries' become None when every entry used the default stream (the segments' do not)."""
    names, next_stream = {0: 0}, [1]

    def name(s):
        if s not in names:
            names[s] = next_stream[0]
            next_stream[0] += 1
        return names[s]

    traces = []
    for trace in snap['device_traces']:
        out = []
        for t in trace:
            t = dict(t, stream=name(t.get('stream')))
            if (t['action'] == 'free_completed' and out and out[-1]['action'] == 'free_requested'
                    and out[-1]['addr'] == t['addr']):
                out[-1]['action'] = 'free'  # the viewer elides the pair into one event
                continue
            out.append(t)
        traces.append(out)
    if next_stream[0] == 1:
        for trace in traces:
            for t in trace:
                t['stream'] = None
    seg_stream = {id(s): name(s['stream']) for s in snap['segments']}
    return traces, seg_stream


def viewer_walk(snap, traces, seg_stream, dev, error):
    """memory_viz's simulate_memory from the end back to the start, as JavaScript runs it."""
    segs = []  # dicts addr, size, stream, in the viewer's list order
    blocks = {}
    for s in snap['segments']:
        if s['device'] != dev:
            continue
        segs.append({'addr': s['address'], 'size': s['total_size'], 'stream': seg_stream[id(s)]})
        for b in s['blocks']:
            if b['state'] in ('active_allocated', 'active_pending_free'):
                blocks[b['address']] = b['state'] == 'active_pending_free'
    segs.sort(key=lambda x: x['addr'])

    def splice_insert(i, seg):  # Array.prototype.splice(i, 0, seg), i possibly -1
        segs.insert(max(len(segs) + i, 0) if i < 0 else i, seg)

    def find_index(pred):
        return next((k for k, x in enumerate(segs) if pred(x)), -1)

    def inside(addr):
        return any(x['addr'] <= addr < x['addr'] + x['size'] for x in segs)

    def map_segment(merge, seg):
        i = find_index(lambda x: x['addr'] > seg['addr'])
        if not merge:
            splice_insert(i, seg)
            return
        if i == -1:
            i = len(segs)
        segs.insert(i, seg)
        if i + 1 < len(segs):
            nxt = segs[i + 1]
            if seg['addr'] + seg['size'] == nxt['addr'] and seg['stream'] == nxt['stream']:
                seg['size'] += nxt['size']
                del segs[i + 1]
        if i > 0:
            prev = segs[i - 1]
            if prev['addr'] + prev['size'] == seg['addr'] and prev['stream'] == seg['stream']:
                prev['size'] += seg['size']
                del segs[i]

    def unmap_segment(merge, seg, where):
        if not merge:
            i = find_index(lambda x: x['addr'] == seg['addr'])
            if i == -1:
                error(f'{where}: the viewer finds no segment at {seg["addr"]:#x} and removes '
                      f'another')
            del segs[i]
            return
        end = seg['addr'] + seg['size']
        i = find_index(lambda x: x['addr'] <= seg['addr'] and end <= x['addr'] + x['size'])
        if i == -1:
            error(f'{where}: the viewer throws: no segment holds {seg["addr"]:#x}+{seg["size"]}')
            return
        ex = segs[i]
        ex_end = ex['addr'] + ex['size']
        if ex['addr'] == seg['addr']:
            ex['addr'] += seg['size']
            ex['size'] -= seg['size']
            if ex['size'] == 0:
                del segs[i]
        elif ex_end == end:
            ex['size'] -= seg['size']
        else:
            ex['size'] = seg['addr'] - ex['addr']
            segs.insert(i + 1, {'addr': end, 'size': ex_end - end, 'stream': seg['stream']})

    trace = traces[dev] if dev < len(traces) else []
    for i in range(len(trace) - 1, -1, -1):
        e, where = trace[i], f'device_traces[{dev}] event {i} (as the viewer numbers them)'
        a = e['action']
        seg = {'addr': e.get('addr'), 'size': e.get('size'), 'stream': e.get('stream')}
        if a in ('free', 'free_completed'):
            blocks[e['addr']] = a == 'free_completed'
            if not inside(e['addr']):
                error(f'{where}: the viewer throws drawing block {e["addr"]:#x} outside every '
                      f'segment')
        elif a == 'free_requested':
            if e['addr'] not in blocks:
                error(f'{where}: the viewer throws: free_requested of unknown {e["addr"]:#x}')
            blocks[e['addr']] = False
        elif a == 'alloc':
            blocks.pop(e['addr'], None)
        elif a in ('segment_free', 'segment_unmap'):
            map_segment(a == 'segment_unmap', seg)
        elif a in ('segment_alloc', 'segment_map'):
            unmap_segment(a == 'segment_map', seg, where)
            lost = [b for b in blocks if seg['addr'] <= b < seg['addr'] + seg['size'] and
                    not inside(b)]
            if lost:
                error(f'{where}: the viewer throws drawing block {lost[0]:#x} outside every '
                      f'segment')


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
    check_pickle(data, error)
    snap = pickle.loads(data)
    for key in ('segments', 'device_traces'):
        if key not in snap:
            error(f'no {key}')
            return errors, {}, snap

    final = {}  # device -> (Ranges, {addr: [requested, pending]})
    for n, seg in enumerate(snap['segments']):
        where = f'segments[{n}]'
        for k in ('device', 'address', 'total_size', 'allocated_size', 'active_size',
                  'requested_size', 'stream', 'segment_type', 'is_expandable', 'frames', 'blocks'):
            if k not in seg:
                error(f'{where}: no {k}')
        if not 0 <= seg['device'] < len(snap['device_traces']):
            error(f'{where}: device {seg["device"]} has no device_traces entry')
        segs, blocks = final.setdefault(seg['device'], (Ranges(), {}))
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
        for i, e in enumerate(trace):
            need = ('action', 'size', 'device_free') if e.get('action') == 'oom' else (
                'action', 'addr', 'size', 'stream', 'frames')
            missing = [k for k in need if k not in e]
            if missing:
                error(f'device_traces[{dev}][{i}]: no {", ".join(missing)}')
                return errors, {}, snap

    traces, seg_stream = annotate_streams(snap)
    devices = {}
    for dev, trace in enumerate(snap['device_traces']):
        viewer_walk(snap, traces, seg_stream, dev, error)
        segs, blocks = strict_walk(trace, dev, *final.get(dev, (Ranges(), {})), error)
        start_blocks, start_segments = len(blocks), len(segs.starts)
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
