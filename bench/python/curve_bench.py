"""The Python module's curve at full resolution (tidemark._native, docs/python.md) against the
same curve through the command's JSON (`tidemark timeline --json` with one column per change),
on one recording, in the same run; prints the ratio and fails below the target.

    python3 bench/python/curve_bench.py --build build [--steps 400] [--target 5]

The recording is samples/pitfalls/accumulated_loss (every step keeps its graph, so its curve
changes tens of thousands of times); both sides return the same points' values."""
import argparse
import json
import os
import subprocess
import sys
import tempfile
import time


def best_of(n, f):
    best = None
    for _ in range(n):
        t0 = time.perf_counter()
        out = f()
        dt = time.perf_counter() - t0
        best = dt if best is None or dt < best else best
    return best, out


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--build", default="build")
    ap.add_argument("--steps", type=int, default=400)
    ap.add_argument("--target", type=float, default=5.0, help="native at least this many times faster")
    a = ap.parse_args()
    build = os.path.abspath(a.build)
    sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "python"))
    os.environ.setdefault("TIDEMARK_CLI", os.path.join(build, "cli", "tidemark"))
    import tidemark
    if tidemark._native is None:
        print("skipped: tidemark._native is not built (pybind11)")
        return 0
    with tempfile.TemporaryDirectory() as d:
        db = os.path.join(d, "loss.db")
        subprocess.run([os.environ["TIDEMARK_CLI"], "record", "-o", db, "--",
                        os.path.join(build, "samples", "pitfall_accumulated_loss"), "--steps", str(a.steps)],
                       check=True, capture_output=True)
        run = tidemark.open(db)
        native_s, (t, v) = best_of(5, lambda: run.curve("allocated"))
        n = len(v)
        cli_s, (tc, vc) = best_of(3, lambda: run.curve("allocated", width=n))
        if max(v) != max(vc):
            print(f"FAIL: the two curves' peaks differ ({max(v)} vs {max(vc)})")
            return 1
        ratio = cli_s / native_s
        ok = ratio >= a.target
        print(f"curve('allocated'), {n} changes: native {native_s * 1e3:.1f} ms, "
              f"timeline --json --width {n} {cli_s * 1e3:.1f} ms")
        print(f"ratio {ratio:.1f}x (target >= {a.target:g}x): {'ok' if ok else 'MISSED'}")
        return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
