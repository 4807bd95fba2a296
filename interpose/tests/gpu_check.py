"""Checks of traces recorded on a GPU by gpu_check.sh (docs/interpose.md), one line per check.

  gpu_check.py sample TRACE SAMPLE_STDOUT
  gpu_check.py torch TRACE RUN_JSON PLAIN_JSON [PLAIN_JSON ...]
  gpu_check.py expandable TRACE RUN_JSON
  gpu_check.py lineup MERGED_TRACE

Reads only the finalized tables (docs/trace-format.md). Exit 1 when a check fails. With
TIDEMARK_GPU_FIRST_RUN=1 the recording overhead and "every memcpy has a call site" are reported
(REPORT lines) but do not fail: the first run on a GPU measures them (docs/cuda.md).
"""
import collections
import json
import os
import sqlite3
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "scripts"))
import zstd_frame  # noqa: E402  (the chunks are zstd frames)

FIRST_RUN = os.environ.get("TIDEMARK_GPU_FIRST_RUN") == "1"

MiB = 1 << 20


def last_json(path):
    """The program's JSON line (the last line of its stdout that is one)."""
    lines = [line for line in open(path).read().splitlines() if line.startswith("{")]
    if not lines:
        sys.exit(f"{path}: no JSON line (did the training script fail?)")
    return json.loads(lines[-1])


class Checks:
    def __init__(self, path):
        self.db = sqlite3.connect(path)
        self.fails = []

    def q(self, sql, *args):
        return [tuple(r) for r in self.db.execute(sql, args)]

    def one(self, sql, *args):
        rows = self.q(sql, *args)
        return rows[0][0] if rows else None

    def expect(self, name, got, want):
        self.ok(name, got == want, repr(got) + ("" if got == want else " (want " + repr(want) + ")"))

    def ok(self, name, passed, detail):
        print(("ok   " if passed else "FAIL ") + name + ": " + detail)
        if not passed:
            self.fails.append(name)

    def measured(self, name, passed, detail):
        """A target the first GPU run reports instead of enforcing (TIDEMARK_GPU_FIRST_RUN=1)."""
        if FIRST_RUN:
            print("REPORT " + name + ": " + detail + (" (met)" if passed else " (missed; not enforced on a first run)"))
        else:
            self.ok(name, passed, detail)

    def info(self, name, detail):
        print("info " + name + ": " + detail)

    def cuda0(self):
        return self.one("SELECT id FROM devices WHERE type = 'cuda' AND idx = 0")

    def mark(self, name):
        """The value of a mark, None when the trace has none."""
        return self.one("SELECT m.value FROM marks m JOIN strings s ON s.id = m.name WHERE s.text = ?", name)

    def functions(self, stack):
        """The functions of a stack, innermost first (inlined frames included)."""
        rows = self.q(
            "WITH RECURSIVE up(id, parent, ip, depth) AS ("
            " SELECT id, parent, ip, 0 FROM stack_nodes WHERE id = ?"
            " UNION ALL SELECT n.id, n.parent, n.ip, up.depth + 1 FROM stack_nodes n JOIN up ON n.id = up.parent)"
            " SELECT f.function FROM up JOIN frames f ON f.ip = up.ip ORDER BY up.depth, f.depth", stack)
        return [r[0] for r in rows]

    def stack_has(self, name, table, where, function):
        """Every row of `table` matching `where` has a stack naming `function`."""
        rows = self.q(f"SELECT stack FROM {table} WHERE {where}")
        missing = [s for (s,) in rows if not any(function in f for f in self.functions(s))]
        self.ok(name, bool(rows) and not missing,
                f"{len(rows)} rows, {len(missing)} without {function}" +
                (" (first stack: " + " < ".join(self.functions(missing[0])[:6]) + ")" if missing else ""))

    def lod_rows(self, device, level=0):
        """The rows of one level of the memory curves, decoded from memory_lod's chunks (zstd
        frames of encoded rows) as docs/trace-format.md describes them: (t, allocated, active,
        reserved, requested)."""
        def varints(data):
            pos = 0
            while pos < len(data):
                v, shift = 0, 0
                while True:
                    b = data[pos]
                    pos += 1
                    v |= (b & 0x7F) << shift
                    shift += 7
                    if not b & 0x80:
                        break
                yield v

        def unzigzag(v):
            return (v >> 1) ^ -(v & 1)

        out = []
        for (rows, data) in self.q("SELECT rows, data FROM memory_lod WHERE device = ? AND level = ? "
                                   "ORDER BY chunk", device, level):
            it = varints(zstd_frame.content(data))

            def value():
                c = next(it)
                if c == 1:
                    return unzigzag(next(it))
                return unzigzag(c >> 1) if c & 1 else unzigzag(c >> 1) * 512
            t, prev = 0, [0, 0, 0, 0]
            for _ in range(rows):
                t += unzigzag(next(it))
                next(it)  # seq delta (level 0) or n
                for i in range(4):
                    prev[i] += value()
                    if level > 0:
                        value(), value()  # value - min, max - value
                out.append((t, *prev))
        return out

    def reserved_peak(self):
        return max((r[3] for r in self.lod_rows(self.cuda0())), default=0)

    def allocated_within_reserved(self, name):
        over = sum(1 for (d,) in self.q("SELECT id FROM devices") for r in self.lod_rows(d) if r[1] > r[3])
        self.expect(name, over, 0)

    def done(self):
        return 1 if self.fails else 0


def sample(trace, stdout_path):
    c = Checks(trace)
    out = dict(line.strip().split("=", 1) for line in open(stdout_path) if "=" in line)
    dev = "JOIN devices d ON d.id = x.device"
    # cudaMalloc 8 MiB, cudaMallocManaged 2 MiB (device cuda:0), cudaMallocHost 1 MiB (cpu), all freed.
    c.expect("segments", c.q(f"SELECT d.type, d.idx, x.size, x.free_ts IS NOT NULL FROM segments x {dev} "
                             "WHERE x.kind = 'segment' ORDER BY x.seq"),
             [("cuda", 0, 8 * MiB, 1), ("cpu", 0, MiB, 1), ("cuda", 0, 2 * MiB, 1)])
    c.expect("device segment address", c.q("SELECT addr FROM segments WHERE size = ? AND kind = 'segment'", 8 * MiB),
             [(int(out["device_ptr"]),)])
    # cudaMallocAsync 4 MiB from the default pool: an allocation inside a mapped range of the pool.
    c.expect("pool allocation", c.q(f"SELECT d.type, x.size, x.free_requested_ts IS NOT NULL FROM allocations x {dev}"),
             [("cuda", 4 * MiB, 1)])
    c.expect("pool mapped >= 4 MiB", c.q("SELECT sum(s.size) >= 4194304 FROM segments s JOIN allocations a "
                                         "ON s.segment = a.segment WHERE s.kind = 'mapped'"), [(1,)])
    # cuMemMap of one granule inside the reserved range, from the callbacks, freed; once only.
    vmm = int(out["vmm_mapped"]), int(out["vmm_size"]), int(out["vmm_reserved"])
    c.expect("virtual-memory mapping", c.q("SELECT addr, size, segment, free_ts IS NOT NULL FROM segments "
                                           "WHERE kind = 'mapped' AND addr = ?", vmm[0]), [vmm + (1,)])
    c.info("MEMORY2 records of cuMemMap & co. (dropped)", repr(c.mark("cupti_vmm_memory_records")))
    c.expect("memcpys", c.q("SELECT direction, bytes, pinned, async FROM memcpys ORDER BY seq"),
             [("host_to_device", MiB, 1, 1), ("device_to_host", MiB, 0, 0)])
    c.expect("copy_to_host sync", c.q("SELECT count(*) FROM syncs WHERE kind = 'copy_to_host' AND duration_ns > 0"), [(1,)])
    c.expect("stream sync", c.q("SELECT count(*) >= 1 FROM syncs WHERE kind = 'stream'"), [(1,)])
    c.expect("device sync", c.q("SELECT count(*) >= 1 FROM syncs WHERE kind = 'device'"), [(1,)])
    c.expect("nvtx scope", c.q("SELECT s.text, x.pop_ts IS NOT NULL FROM scopes x JOIN strings s ON s.id = x.name"),
             [("gpu_sample", 1)])
    c.expect("marks", c.q("SELECT s.text FROM marks x JOIN strings s ON s.id = x.name "
                          "WHERE s.text NOT LIKE 'cupti_%' ORDER BY x.seq"), [("before_d2h",)])
    c.expect("cupti device buffer mark", c.q("SELECT count(*) FROM marks x JOIN strings s ON s.id = x.name "
                                             "WHERE s.text = 'cupti_device_buffer_bytes' AND x.value > 0"), [(1,)])
    for m in ("cupti_dropped_records", "cupti_events_without_call_site", "cupti_call_sites_aged_out"):
        c.expect("no " + m, c.mark(m), None)
    c.expect("mark before d2h copy", c.q("SELECT (SELECT x.ts FROM marks x JOIN strings s ON s.id = x.name WHERE s.text = 'before_d2h') "
                                         "< (SELECT ts FROM memcpys WHERE direction = 'device_to_host')"), [(1,)])
    # Call sites: the activity events are on the program's (NVTX range's) thread, with stacks
    # naming the sample's functions, and in seq order where the calls were made.
    main = c.one("SELECT thread FROM scopes")
    for table in ("memcpys", "syncs", "allocations"):
        c.expect(table + " on the program's thread", c.q(f"SELECT DISTINCT thread FROM {table}"), [(main,)])
    c.stack_has("stack: pool allocation", "allocations", "1", "allocate_from_pool")
    c.stack_has("stack: async upload", "memcpys", "direction = 'host_to_device'", "upload_async")
    c.stack_has("stack: blocking copy", "memcpys", "direction = 'device_to_host'", "copy_back_to_host")
    c.stack_has("stack: copy_to_host sync", "syncs", "kind = 'copy_to_host'", "copy_back_to_host")
    c.stack_has("stack: device sync", "syncs", "kind = 'device'", "synchronize_all")
    c.expect("order: d2h copy after the mark (seq)", c.q(
        "SELECT (SELECT x.seq FROM marks x JOIN strings s ON s.id = x.name WHERE s.text = 'before_d2h') "
        "< (SELECT seq FROM memcpys WHERE direction = 'device_to_host')"), [(1,)])
    return c.done()


def torch_run(trace, run_json, *plain_jsons):
    c = Checks(trace)
    run = last_json(run_json)
    plain = [last_json(p) for p in plain_jsons]
    peak = c.reserved_peak()
    want = run["max_reserved"]
    c.ok("reserved peak vs torch.cuda.max_memory_reserved()", abs(peak - want) <= max(2 * MiB, want // 100),
         f"recorded {peak} B, torch {want} B, difference {peak - want:+d} B")
    c.allocated_within_reserved("allocated <= reserved")
    steps = c.q("SELECT thread, count(*) FROM scopes s JOIN strings t ON t.id = s.name WHERE t.text = 'step' GROUP BY thread")
    c.ok("NVTX step ranges", bool(steps) and steps[0][1] >= run["steps"], repr(steps))
    # The loop's steps and torch_train.py's warm-up steps, numbered in order from 1.
    n, lo, hi = c.q("SELECT count(*), min(number), max(number) FROM steps")[0]
    c.ok("steps from the step ranges", n >= run["steps"] and lo == 1 and hi == n,
         f"{n} numbered {lo} to {hi}")
    main = steps[0][0] if steps else None
    for table in ("memcpys", "syncs"):
        # Mostly the training thread (autograd's device thread may copy too), never without the
        # call's stack (an event without a call site has none).
        threads = c.q(f"SELECT thread, count(*) FROM {table} GROUP BY thread ORDER BY 2 DESC")
        c.ok(table + " on the training thread", bool(threads) and threads[0][0] == main,
             repr(threads) + f" (training thread {main})")
        # Every copy call is traced (Note [Every copy has a call site] in interpose/callbacks.cpp);
        # a first run reports the count rather than failing on it.
        without = c.one(f"SELECT count(*) FROM {table} WHERE stack = 0")
        total = c.one(f"SELECT count(*) FROM {table}")
        check = c.measured if table == "memcpys" else c.ok
        check(table + " without a stack", without == 0, f"{without} of {total}")
    item_syncs = c.q("SELECT stack FROM syncs WHERE kind = 'copy_to_host'")
    innermost = collections.Counter((c.functions(s) or ["(no stack)"])[0] for (s,) in item_syncs)
    c.ok("loss.item() syncs with stacks", len(item_syncs) >= run["steps"] // 10 and "(no stack)" not in innermost,
         f"{len(item_syncs)} copy_to_host syncs, innermost: {innermost.most_common(3)}")
    c.info("events without a call site", repr(c.mark("cupti_events_without_call_site")))
    c.expect("no dropped records", c.mark("cupti_dropped_records"), None)
    base = min(p["loop_s"] for p in plain)
    ratio = run["loop_s"] / base
    c.measured("recording overhead (training loop wall time, target <= 1.10x)", ratio <= 1.10,
         f"{ratio:.3f}x ({run['loop_s']:.2f} s recorded, {base:.2f} s plain, best of {len(plain)})")
    return c.done()


def expandable(trace, run_json):
    c = Checks(trace)
    run = last_json(run_json)
    mapped = c.one("SELECT count(*) FROM segments WHERE kind = 'mapped' AND device = ?", c.cuda0())
    whole = c.one("SELECT count(*) FROM segments WHERE kind = 'segment' AND device = ?", c.cuda0())
    c.info("expandable segments seen", f"{mapped} mapped ranges (cuMemMap), {whole} whole segments (cudaMalloc); "
           f"MEMORY2 records of cuMemMap & co.: {c.mark('cupti_vmm_memory_records')!r} "
           "(None: CUPTI's MEMORY2 does not report them)")
    c.ok("expandable: mapped ranges recorded", mapped > 0, f"{mapped}")
    peak = c.reserved_peak()
    want = run["max_reserved"]
    c.ok("expandable: reserved peak vs torch.cuda.max_memory_reserved()", abs(peak - want) <= max(2 * MiB, want // 100),
         f"recorded {peak} B, torch {want} B, difference {peak - want:+d} B")
    return c.done()


def lineup(merged):
    c = Checks(merged)
    n = c.one("SELECT count(*) FROM allocations")
    c.ok("snapshot blocks in the merged trace", n > 0, f"{n} allocations")
    c.allocated_within_reserved("allocated <= reserved (merged)")
    # Covered by segments (whole ones, or mapped ranges of an expandable one) live from the
    # allocation to its free.
    outside = c.one(
        "SELECT count(*) FROM allocations a WHERE (SELECT ifnull(sum(min(s.addr + s.size, a.addr + a.size)"
        " - max(s.addr, a.addr)), 0) FROM segments s WHERE s.device = a.device AND s.addr < a.addr + a.size"
        " AND s.addr + s.size > a.addr AND s.alloc_ts <= a.alloc_ts AND (s.free_ts IS NULL OR"
        " s.free_ts >= ifnull(a.free_requested_ts, a.alloc_ts))) < a.size")
    c.expect("blocks inside live recorded segments", outside, 0)
    return c.done()


if __name__ == "__main__":
    commands = {"sample": sample, "torch": torch_run, "expandable": expandable, "lineup": lineup}
    if len(sys.argv) < 3 or sys.argv[1] not in commands:
        sys.exit(__doc__)
    sys.exit(commands[sys.argv[1]](*sys.argv[2:]))
