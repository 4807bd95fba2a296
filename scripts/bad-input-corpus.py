#!/usr/bin/env python3
"""Every command of `tidemark` over a corpus of bad inputs (docs/cli.md, "Conventions").

Records one small valid trace with the given program, derives a corpus from it -- truncated,
byte-flipped, of the wrong schema, with damaged meta values and event blocks, with text that
is not UTF-8, on read-only media -- and runs every reporting command over each case. Then
hostile PyTorch snapshots made from the trace's export (scripts/hostile_snapshots.py: memo
bombs, ranges nested without end, frames never shared, overflowing settings, a code payload,
damage) are imported, and what imports is read by the reporting commands. Then commands run
under resource limits: a file size limit (record, finalize, import, export, timeline) and
fewer file descriptors than traces (merge, summary). Asserts, for every run:

* it ends with exit 0, 1 or 2: never a signal (SIGXFSZ included), never a sanitizer's report
  or exit code, never a message quoting SQL;
* on exit 2, exactly one line on stderr;
* it ends within --max-seconds and its peak resident memory is within --max-rss-mib;
* the input's files are byte for byte what they were (readers never write a trace), no
  temporary (`.part-*`) or lock file is left beside an output, and no payload ran.

`finalize`, which writes, runs on a copy of each case, with the same assertions.
The corpus is generated the same way on every run (fixed seeds). Standard library and
util-linux (`prlimit`, `setpriv`) only.

  scripts/bad-input-corpus.py --tidemark build/cli/tidemark --program build/samples/train_mlp
"""

import argparse
import concurrent.futures
import hashlib
import os
import random
import re
import shutil
import signal
import sqlite3
import subprocess
import sys
import tempfile
import threading
import time

import hostile_snapshots
import zstd_frame

# A sanitizer's report must not pass for exit 1 ("a check failed"): give them exit codes of
# their own. (Harmless in a build without sanitizers.)
SANITIZER_ENV = {
    "ASAN_OPTIONS": "exitcode=97:detect_leaks=1",
    "UBSAN_OPTIONS": "exitcode=98:print_stacktrace=1:halt_on_error=1",
    "LSAN_OPTIONS": "exitcode=99",
}
SANITIZER_MARKS = ("AddressSanitizer", "LeakSanitizer", "runtime error:", "UndefinedBehaviorSanitizer")


def sha256(path):
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def fingerprint(case_dir):
    """Every file of a case (the trace and anything SQLite keeps beside it), by name."""
    out = {}
    for name in sorted(os.listdir(case_dir)):
        path = os.path.join(case_dir, name)
        out[name] = sha256(path) if os.path.isfile(path) else "(not a file)"
    return out


def changed(before, after):
    """The files of `before` that are gone or differ. (A reader of a trace that is not
    finalized may leave SQLite's empty -wal and -shm beside it: new files are not changes.)"""
    return sorted(name for name, digest in before.items() if after.get(name) != digest)


def sql(path, *statements):
    con = sqlite3.connect(path)
    try:
        for s in statements:
            con.execute(s)
        con.commit()
    finally:
        con.close()


def scramble_blocks(path, rng, keep=None, table="event_blocks", inside=False):
    """Replaces the data of every row of `table` (event blocks, memory_lod chunks) with bytes
    from `rng` (the first `keep` bytes kept). `inside`: the encoding is scrambled inside an
    intact, checksummed zstd frame (docs/trace-format.md, "Compressed blobs"), an event block's
    sealed copy of its row kept, as a hostile file can have it."""
    con = sqlite3.connect(path)
    try:
        rows = con.execute("SELECT id, data FROM %s" % table).fetchall()
        for block, data in rows:
            sealed = b""
            if inside:
                data = zstd_frame.content(data)
                if table == "event_blocks" and data:
                    sealed = data[-1 - data[-1]:]
                    data = data[:-1 - data[-1]]
            head = data[:keep] if keep else b""
            tail = bytes(rng.randrange(256) for _ in range(max(0, min(len(data), 4096) - len(head))))
            data = head + tail + sealed
            con.execute("UPDATE %s SET data = ? WHERE id = ?" % table,
                        (zstd_frame.checked(data) if inside else data, block))
        con.commit()
    finally:
        con.close()


def flip_one_bit(path, rng, table="event_blocks"):
    """Flips one bit, chosen by `rng`, of every row's data in `table`."""
    con = sqlite3.connect(path)
    try:
        for row, data in con.execute("SELECT id, data FROM %s" % table).fetchall():
            data = bytearray(data)
            data[rng.randrange(len(data))] ^= 1 << rng.randrange(8)
            con.execute("UPDATE %s SET data = ? WHERE id = ?" % table, (bytes(data), row))
        con.commit()
    finally:
        con.close()


class Corpus:
    def __init__(self, root, valid, raw):
        self.root = root
        self.valid = valid  # a finalized trace
        self.raw = raw  # the same recording, not finalized
        self.cases = []  # (name, path of the trace in its own directory)

    def new(self, name, source=None, data=None):
        d = os.path.join(self.root, name)
        os.makedirs(d)
        path = os.path.join(d, "trace.db")
        if data is not None:
            with open(path, "wb") as f:
                f.write(data)
        else:
            shutil.copyfile(source or self.valid, path)
        self.cases.append((name, path))
        return path


def build_corpus(corpus, seed):
    rng = random.Random(seed)
    valid = open(corpus.valid, "rb").read()
    n = len(valid)

    corpus.new("valid")
    corpus.new("unfinalized", corpus.raw)
    corpus.new("empty", data=b"")
    corpus.new("text", data=b"this is not a database, just text long enough to be read as one\n" * 4)
    corpus.new("sqlite-header-only", data=valid[:100])
    for size in (16, 4096, n // 2):
        corpus.new("truncated-%d" % size, data=valid[:size])

    # Byte flips: the header (page size, counts, schema cookie, application id, version),
    # then pages at random.
    offsets = [28, 56, 68, 96]
    offsets += sorted(rng.randrange(100, n) for _ in range(3))
    for off in offsets:
        b = bytearray(valid)
        b[off] ^= 0xFF
        corpus.new("flipped-%d" % off, data=bytes(b))
    b = bytearray(valid)
    for _ in range(64):
        b[rng.randrange(100, n)] = rng.randrange(256)
    corpus.new("scrambled", data=bytes(b))

    # The wrong schema, or none.
    p = corpus.new("foreign-sqlite", data=b"")
    os.remove(p)
    sql(p, "CREATE TABLE t (x)", "INSERT INTO t VALUES (1)")
    sql(corpus.new("version-1"), "PRAGMA user_version = 1")
    sql(corpus.new("version-99"), "PRAGMA user_version = 99")
    sql(corpus.new("version-negative"), "PRAGMA user_version = -1")
    sql(corpus.new("application-id"), "PRAGMA application_id = 1234")
    for table in ("meta", "event_blocks", "memory_lod", "frames"):
        sql(corpus.new("no-" + table.replace("_", "-")), "DROP TABLE IF EXISTS %s" % table)
    sql(corpus.new("finalized-without-tables", corpus.raw),
        "UPDATE meta SET value = 1 WHERE key = 'finalized'")

    # Damaged values.
    for key in ("event_count", "pid", "finalized"):
        sql(corpus.new("meta-%s-text" % key.replace("_", "-")),
            "UPDATE meta SET value = 'twelve' WHERE key = '%s'" % key)
    sql(corpus.new("meta-negative-counts"),
        "UPDATE meta SET value = -5 WHERE key IN ('event_count', 'dropped_count')")
    sql(corpus.new("meta-huge-times"),
        "UPDATE meta SET value = 9223372036854775807 WHERE key LIKE '%ts_ns'")
    scramble_blocks(corpus.new("blocks-garbage"), rng, keep=64)
    scramble_blocks(corpus.new("blocks-encoding-garbage"), rng, keep=64, inside=True)
    sql(corpus.new("blocks-short"), "UPDATE event_blocks SET data = substr(data, 1, 7)")
    # One flipped bit in each stored block (a checksum catches it), and rows that are not the
    # ones the blocks were sealed with (fewer events, another seq range).
    flip_one_bit(corpus.new("blocks-one-bit-flipped"), rng)
    sql(corpus.new("blocks-row-count"), "UPDATE event_blocks SET count = count - 1")
    sql(corpus.new("blocks-row-seq"), "UPDATE event_blocks SET first_seq = first_seq + 1")
    scramble_blocks(corpus.new("blocks-unfinalized-garbage", corpus.raw), rng)
    # Sizes beyond what a trace holds (2^56): refused on read, naming the file.
    sql(corpus.new("sizes-negative"), "UPDATE allocations SET size = -size")
    sql(corpus.new("sizes-huge"), "UPDATE allocations SET size = 9223372036854775807")
    sql(corpus.new("requested-huge"), "UPDATE allocations SET requested_size = 9223372036854775807")
    sql(corpus.new("segments-huge"), "UPDATE segments SET size = 9223372036854775807")
    # The memory curves' chunks: times reversed, data cut or scrambled, values beyond 2^60.
    sql(corpus.new("lod-reversed"), "UPDATE memory_lod SET min_t = -max_t, max_t = -min_t")
    sql(corpus.new("lod-short"), "UPDATE memory_lod SET data = substr(data, 1, length(data) / 2)")
    sql(corpus.new("lod-rows-huge"), "UPDATE memory_lod SET rows = 9223372036854775807")
    scramble_blocks(corpus.new("lod-garbage"), rng, keep=16, table="memory_lod")
    scramble_blocks(corpus.new("lod-encoding-garbage"), rng, keep=16, table="memory_lod", inside=True)
    huge = zstd_frame.checked(bytes.fromhex("0002" "01" "80808080808080808001" "000000"))
    sql(corpus.new("lod-values-huge"), "UPDATE memory_lod SET rows = 1, data = X'%s' WHERE level = 0" % huge.hex())
    sql(corpus.new("stack-cycle"), "UPDATE stack_nodes SET parent = id")
    sql(corpus.new("device-unknown"), "UPDATE allocations SET device = 77")

    # Text that is not UTF-8.
    sql(corpus.new("latin1-command-line"),
        "UPDATE meta SET value = CAST(X'7472616984696E2E7079202D2D6E616D6520636166E9' AS TEXT) "
        "WHERE key = 'command_line'")
    sql(corpus.new("invalid-utf8-strings"),
        "UPDATE strings SET text = CAST(X'FFFE' || CAST(text AS BLOB) AS TEXT)",
        "UPDATE frames SET function = CAST(X'FF' || CAST(function AS BLOB) AS TEXT), "
        "file = CAST(X'C3' AS TEXT)",
        "UPDATE devices SET name = CAST(X'637564613AFF' AS TEXT)")

    # Read-only media: a read-only file in a read-only directory (made read-only once the
    # corpus is complete: see make_read_only).
    corpus.new("read-only")
    corpus.new("read-only-unfinalized", corpus.raw)


def make_read_only(corpus):
    for name, path in corpus.cases:
        if name.startswith("read-only"):
            os.chmod(path, 0o444)
            os.chmod(os.path.dirname(path), 0o555)


def reporting_commands(trace, valid, out_dir):
    """Every reporting command, as argument lists (without the binary)."""
    out = lambda ext: os.path.join(out_dir, "out." + ext)  # noqa: E731 - one line each
    return [
        ["summary", trace, "--json"], ["info", trace, "--json"],
        ["timeline", trace, "--png", out("png"), "--width", "100", "--height", "40"],
        ["top", trace, "--by", "stack", "--json"], ["top", trace, "--folded"],
        ["top", trace, "--reserved"], ["leaks", trace, "--by-step"],
        ["steps", trace], ["syncs", trace, "--json"], ["diagnose", trace, "--json"],
        ["check", trace, "--max-peak-allocated", "1GiB", "--max-leaked", "1GiB",
         "--max-syncs-per-step", "1000", "--no-findings", "--baseline", valid,
         "--max-increase", "10", "--junit", out("xml")],
        ["diff", valid, trace, "--json"],
        ["export", trace, "--format", "snapshot", "-o", out("pickle")],
        ["watch", trace, "--once", "--wait", "0s"],
        ["replay", trace, "--json"], ["replay", trace, "--sweep", "--threads", "1"],
        ["replay", trace, "--alloc-conf", "expandable_segments:True", "-o", out("replayed.db")],
    ]


class Bounds:
    """What one run may take: seconds of wall time and MiB of peak resident memory."""

    seconds = 60
    rss_mib = 1024
    jobs = 2


def run(binary, args, user=False, limits=()):
    """Runs `binary args` (as an unprivileged user, under `prlimit` `limits` such as
    "--fsize=65536"); returns (exit code or -signal, stderr, peak RSS in MiB, seconds), the
    code None when it ran past Bounds.seconds (it is then killed)."""
    argv = [binary] + args
    if limits:
        argv = ["prlimit"] + list(limits) + ["--"] + argv
    if user:
        argv = ["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups", "--"] + argv
    env = dict(os.environ, **SANITIZER_ENV)
    with tempfile.TemporaryFile() as err:
        start = time.monotonic()
        # restore_signals (the default): the child gets SIGXFSZ and SIGPIPE at their defaults,
        # as from a shell, not ignored as in Python.
        p = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=err, env=env)
        timer = threading.Timer(Bounds.seconds, p.kill)
        timer.start()
        _, status, usage = os.wait4(p.pid, 0)  # the child's own peak, not the pool's
        timer.cancel()
        seconds = time.monotonic() - start
        p.returncode = code = os.waitstatus_to_exitcode(status)
        err.seek(0)
        text = err.read().decode("utf-8", "replace")
    if seconds >= Bounds.seconds and code == -signal.SIGKILL:
        code = None
    return code, text, usage.ru_maxrss / 1024.0, seconds


SQL_TEXT = re.compile(r"\b(SELECT|INSERT INTO|UPDATE|CREATE TABLE|DELETE FROM|PRAGMA) ")


def problems_of(args, result):
    rc, err, rss_mib, seconds = result
    what = " ".join(args)
    if rc is None:
        return ["%s: still running after %d s (killed)\n%s" % (what, Bounds.seconds, err)]
    if rc < 0:
        return ["%s: killed by signal %d (%s)\n%s" % (what, -rc, signal.Signals(-rc).name, err)]
    found = []
    if rc not in (0, 1, 2):
        found.append("%s: exit %d (expected 0, 1 or 2)\n%s" % (what, rc, err))
    if any(m in err for m in SANITIZER_MARKS):
        found.append("%s: a sanitizer reported an error\n%s" % (what, err))
    if SQL_TEXT.search(err):
        found.append("%s: the message quotes SQL (a user reads the file and the reason)\n%s" % (what, err))
    command = next(a for a in args if not a.startswith("--"))
    # record's stderr carries the recorded program's lines too (the recorder's own among them).
    if rc == 2 and err.count("\n") != 1 and command != "record":
        found.append("%s: exit 2 with %d lines on stderr (expected one)\n%s"
                     % (what, err.count("\n"), err))
    if rss_mib > Bounds.rss_mib:
        found.append("%s: peak resident memory %.0f MiB (bound %d MiB)" % (what, rss_mib, Bounds.rss_mib))
    return found


def leftovers(directory):
    """Temporaries and locks an output left behind in `directory`."""
    return sorted(f for f in os.listdir(directory) if ".part-" in f or f.endswith(".lock"))


def snapshot_jobs(binary, root, valid, exported, seed):
    """The hostile snapshots made from `exported` (the valid trace as a snapshot): (problems,
    runs). Each is imported into a directory of its own; a trace that imports is then read by
    the reporting commands."""
    d = os.path.join(root, "snapshots")
    os.makedirs(d)
    sentinel = os.path.join(d, "PAYLOAD-RAN")
    with open(exported, "rb") as f:
        shapes = hostile_snapshots.cases(f.read(), seed, sentinel)
    imports = []
    for name, data in shapes:
        case = os.path.join(d, name)
        os.makedirs(case)
        with open(os.path.join(case, "snapshot.pickle"), "wb") as f:
            f.write(data)
        imports.append((case, ["import", os.path.join(case, "snapshot.pickle"), "-o",
                               os.path.join(case, "imported.db")]))
    problems, runs = [], 0
    with concurrent.futures.ThreadPoolExecutor(max_workers=Bounds.jobs) as pool:
        results = list(pool.map(lambda j: run(binary, j[1]), imports))
    reads = []
    for (case, args), result in zip(imports, results):
        runs += 1
        problems += problems_of(args, result)
        if result[0] == 0:
            out = os.path.join(case, "out")
            os.makedirs(out)
            for r in reporting_commands(args[3], valid, out):
                reads.append((out, r))
    with concurrent.futures.ThreadPoolExecutor(max_workers=Bounds.jobs) as pool:
        for (out, args), result in zip(reads, pool.map(lambda j: run(binary, j[1]), reads)):
            runs += 1
            problems += problems_of(args, result)
    for case, _ in imports:
        for sub in (case, os.path.join(case, "out")):
            if os.path.isdir(sub) and leftovers(sub):
                problems.append("%s: left %s" % (sub, ", ".join(leftovers(sub))))
    if os.path.exists(sentinel):
        problems.append("a snapshot's code payload ran (it created %s)" % sentinel)
    return problems, runs


def limit_jobs(binary, program, root, valid, raw, snapshot):
    """Commands under resource limits: (problems, runs). A file size limit is a write error,
    never SIGXFSZ, and leaves no temporary or lock; more traces than file descriptors are
    read or refused naming the limit."""
    d = os.path.join(root, "limits")
    os.makedirs(d)
    jobs = []  # (directory it writes into, args, prlimit options)
    for kib in (8, 64, 256):
        case = os.path.join(d, "fsize-%d" % kib)
        os.makedirs(case)
        fsize = "--fsize=%d" % (kib * 1024)
        copy = os.path.join(case, "raw.db")
        shutil.copyfile(raw, copy)
        jobs += [
            (case, ["record", "-o", os.path.join(case, "rec.db"), "--no-cuda", "--", program, "20"], [fsize]),
            (case, ["finalize", copy], [fsize]),
            (case, ["import", snapshot, "-o", os.path.join(case, "imp.db")], [fsize]),
            (case, ["export", valid, "--format", "snapshot", "-o", os.path.join(case, "exp.pickle")], [fsize]),
            (case, ["timeline", valid, "--svg", os.path.join(case, "t.svg"), "--width", "1200"], [fsize]),
        ]
    many = os.path.join(d, "descriptors")
    os.makedirs(many)
    traces = []
    for i in range(24):
        traces.append(os.path.join(many, "rank%d.db" % i))
        shutil.copyfile(valid, traces[-1])
    jobs += [
        (many, ["merge"] + traces + ["-o", os.path.join(many, "merged.db")], ["--nofile=20"]),
        (many, ["summary"] + traces, ["--nofile=20"]),
    ]
    problems = []
    raw_sha = sha256(raw)
    with concurrent.futures.ThreadPoolExecutor(max_workers=Bounds.jobs) as pool:
        for (case, args, limits), result in zip(jobs, pool.map(lambda j: run(binary, j[1], False, j[2]), jobs)):
            problems += problems_of(limits + args, result)
            # A finalize with no room leaves the trace as it was, nothing beside it.
            if args[0] == "finalize" and result[0] == 2:
                left = [f for f in os.listdir(case) if f.startswith("raw.db") and f != "raw.db"]
                if sha256(args[1]) != raw_sha or left:
                    problems.append("%s: a finalize with no room changed the trace or left %s"
                                    % (case, ", ".join(left) or "nothing else"))
    for case in sorted({j[0] for j in jobs}):
        if leftovers(case):
            problems.append("%s: left %s" % (case, ", ".join(leftovers(case))))
    return problems, len(jobs)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--tidemark", required=True, help="the tidemark binary")
    ap.add_argument("--program", required=True, help="a program to record (train_mlp)")
    ap.add_argument("--work-dir", help="where the corpus goes (default: a temporary directory)")
    ap.add_argument("--seed", type=int, default=23)
    ap.add_argument("--jobs", type=int, default=os.cpu_count() or 2)
    ap.add_argument("--keep", action="store_true", help="keep the corpus")
    ap.add_argument("--max-seconds", type=int, default=Bounds.seconds, help="per run (default %(default)s)")
    ap.add_argument("--max-rss-mib", type=int, default=Bounds.rss_mib,
                    help="peak resident memory per run (default %(default)s)")
    a = ap.parse_args()
    Bounds.seconds, Bounds.rss_mib, Bounds.jobs = a.max_seconds, a.max_rss_mib, a.jobs

    root = a.work_dir or tempfile.mkdtemp(prefix="tidemark-corpus-")
    if os.path.exists(root):
        subprocess.run(["chmod", "-R", "u+rwx", root], check=False)
        shutil.rmtree(root)
    os.makedirs(root)
    src = os.path.join(root, "source")
    os.makedirs(src)
    valid, raw = os.path.join(src, "valid.db"), os.path.join(src, "raw.db")
    r = subprocess.run([a.tidemark, "record", "-o", valid, "--no-cuda", "--", a.program, "3"],
                       stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    if r.returncode != 0:
        sys.exit("cannot record the source trace: " + r.stderr.decode(errors="replace"))
    env = dict(os.environ, TIDEMARK_OUTPUT=raw, TIDEMARK_FINALIZE="0", TIDEMARK_STACKS="8")
    subprocess.run([a.program, "3"], env=env, stdout=subprocess.DEVNULL, check=True)

    corpus = Corpus(os.path.join(root, "cases"), valid, raw)
    os.makedirs(corpus.root)
    build_corpus(corpus, a.seed)
    make_read_only(corpus)
    # Permissions stop everyone but root: on read-only media, read as an unprivileged user.
    as_user = os.geteuid() == 0 and shutil.which("setpriv") is not None
    if as_user and run(a.tidemark, ["--help"], True)[0] != 0:
        # A checkout under a directory only root may enter keeps the user from the binary.
        print("note: the unprivileged user cannot run %s: read-only cases run as root" % a.tidemark)
        as_user = False
    if as_user:
        os.chmod(root, 0o755)
        for d in (corpus.root, src):
            os.chmod(d, 0o755)
        os.chmod(valid, 0o644)

    outputs = os.path.join(root, "outputs")
    jobs = []  # (case name, case dir, args, as an unprivileged user)
    for name, path in corpus.cases:
        out_dir = os.path.join(outputs, name)
        os.makedirs(out_dir)
        user = as_user and name.startswith("read-only")
        if user:
            os.chmod(out_dir, 0o777)
            os.chmod(outputs, 0o755)
        for args in reporting_commands(path, valid, out_dir):
            jobs.append((name, os.path.dirname(path), args, user))
    before = {name: fingerprint(os.path.dirname(path)) for name, path in corpus.cases}
    before_valid = sha256(valid)

    problems = []
    with concurrent.futures.ThreadPoolExecutor(max_workers=a.jobs) as pool:
        results = pool.map(lambda j: (j, run(a.tidemark, j[2], j[3])), jobs)
        for (name, case_dir, args, user), result in results:
            problems += problems_of(args, result)

    for name, path in corpus.cases:
        for f in changed(before[name], fingerprint(os.path.dirname(path))):
            problems.append("%s: the input's %s changed" % (name, f))
    if sha256(valid) != before_valid:
        problems.append("the valid baseline trace changed")

    # finalize writes: on a copy of each case (not of the read-only ones, as root).
    copies = os.path.join(root, "finalize")
    os.makedirs(copies)
    fin_jobs = []
    for name, path in corpus.cases:
        if name.startswith("read-only"):
            continue
        copy = os.path.join(copies, name + ".db")
        if os.path.isfile(path):
            shutil.copyfile(path, copy)
        fin_jobs.append(["finalize", copy])
    with concurrent.futures.ThreadPoolExecutor(max_workers=a.jobs) as pool:
        for args, result in zip(fin_jobs, pool.map(lambda j: run(a.tidemark, j, False), fin_jobs)):
            problems += problems_of(args, result)
    runs = len(jobs) + len(fin_jobs)

    exported = os.path.join(src, "valid.pickle")
    rc, err, _, _ = run(a.tidemark, ["export", valid, "--format", "snapshot", "-o", exported])
    if rc != 0:
        sys.exit("cannot export the source trace as a snapshot: " + err)
    for more, n in (snapshot_jobs(a.tidemark, root, valid, exported, a.seed),
                    limit_jobs(a.tidemark, a.program, root, valid, raw, exported)):
        problems += more
        runs += n

    if not a.keep:
        subprocess.run(["chmod", "-R", "u+rwx", root], check=False)
        shutil.rmtree(root, ignore_errors=True)
    if problems:
        for p in problems:
            print("FAIL " + p, file=sys.stderr)
        print("%d problems in %d runs over %d cases" % (len(problems), runs, len(corpus.cases)),
              file=sys.stderr)
        return 1
    print("ok: %d runs over %d bad traces, hostile snapshots and resource limits: no crash, no hang, "
          "at most %d MiB each, one line on exit 2, inputs unchanged, nothing left behind"
          % (runs, len(corpus.cases), Bounds.rss_mib))
    return 0


if __name__ == "__main__":
    sys.exit(main())
