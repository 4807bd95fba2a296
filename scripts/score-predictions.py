#!/usr/bin/env python3
"""Scores `tidemark predict` on real snapshot sweeps against their true peaks.

A sweep directory holds `sweeps.json` (per sweep: `sweep`, `parameter`, `what`, and `points`:
`value`, `file`, `peak_requested`, `peak_reserved`, the true peaks in bytes) and the snapshots,
beside it or packed in `*.tar.zst` archives, which are unpacked into --work (needs `zstd`).
Each snapshot is imported once (`tidemark import`). Then, for every sweep and every point
after its first two, that point is predicted from the points before it (two to four runs ->
the next size) with `tidemark predict --json`, and compared with its true peaks, beside two
naive baselines computed from the same runs' true peaks:

* line: the straight line through the two largest runs' peaks;
* quadratic: the parabola through the three largest runs' peaks (the line when there are two).

Prints one row per prediction (the predicted and true requested and reserved peaks, the errors
of the prediction and of the baselines, and the prediction's time), then the mean absolute
errors. Exits 1 when a ceiling given by --max-requested-error or --max-reserved-error (mean
absolute error, percent) is exceeded, 2 on bad input. `make test` runs it on the project's
sweeps (tests/data/pytorch/sweeps) with ceilings that only go down (tests/CMakeLists.txt);
docs/predict.md has the figures.
"""
import argparse
import concurrent.futures
import glob
import json
import os
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import snapshot_sets  # noqa: E402
import time


def fail(msg):
    print(f"score-predictions: {msg}", file=sys.stderr)
    sys.exit(2)


def unpack(directory, work):
    try:
        return snapshot_sets.unpack(directory, work)
    except snapshot_sets.UnpackError as e:
        fail(str(e))


def import_one(tidemark, snapshot, work):
    db = os.path.join(work, "traces", os.path.basename(snapshot) + ".db")
    if os.path.exists(db) and os.path.getmtime(db) >= os.path.getmtime(snapshot) and \
            os.path.getmtime(db) >= os.path.getmtime(tidemark):
        return db
    os.makedirs(os.path.dirname(db), exist_ok=True)
    for side in ("", "-wal", "-shm", "-journal"):
        if os.path.exists(db + side):
            os.remove(db + side)
    r = subprocess.run([tidemark, "import", snapshot, "-o", db], capture_output=True, text=True)
    if r.returncode != 0:
        fail(f"{snapshot}: tidemark import failed: {r.stderr.strip()}")
    return db


def line(points, x):
    (x1, y1), (x2, y2) = points[-2], points[-1]
    return y2 + (y2 - y1) * (x - x2) / (x2 - x1)


def quadratic(points, x):
    if len(points) < 3:
        return line(points, x)
    (x0, y0), (x1, y1), (x2, y2) = points[-3:]
    # Lagrange through the three largest.
    return (y0 * (x - x1) * (x - x2) / ((x0 - x1) * (x0 - x2)) +
            y1 * (x - x0) * (x - x2) / ((x1 - x0) * (x1 - x2)) +
            y2 * (x - x0) * (x - x1) / ((x2 - x0) * (x2 - x1)))


def err(predicted, true):
    return 100.0 * (predicted - true) / true


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("directory")
    ap.add_argument("--tidemark", required=True)
    ap.add_argument("--work", required=True)
    ap.add_argument("--jobs", type=int, default=2)
    ap.add_argument("--max-requested-error", type=float)
    ap.add_argument("--max-reserved-error", type=float)
    ap.add_argument("--json", help="write the rows here as JSON")
    a = ap.parse_args()
    index = os.path.join(a.directory, "sweeps.json")
    try:
        with open(index, encoding="utf-8") as f:
            sweeps = json.load(f)
    except (OSError, json.JSONDecodeError) as e:
        fail(f"{index}: {e}")
    os.makedirs(a.work, exist_ok=True)
    files = unpack(a.directory, a.work)
    wanted = sorted({p["file"] for s in sweeps for p in s["points"]})
    for name in wanted:
        if name not in files:
            fail(f"{name}: in sweeps.json but not in {a.directory}")
    with concurrent.futures.ThreadPoolExecutor(a.jobs) as pool:
        dbs = dict(zip(wanted, pool.map(lambda n: import_one(a.tidemark, files[n], a.work), wanted)))

    cases = []
    for s in sweeps:
        pts = sorted(s["points"], key=lambda p: p["value"])
        for k in range(2, len(pts)):
            cases.append((s, pts[:k], pts[k]))

    def predict(case):
        s, given, target = case
        args = [a.tidemark, "predict", "--json", "--at", str(target["value"]), "--sites", "1"]
        args += [f"{p['value']}={dbs[p['file']]}" for p in given]
        t0 = time.monotonic()
        r = subprocess.run(args, capture_output=True, text=True)
        seconds = time.monotonic() - t0
        if r.returncode != 0:
            return case, None, seconds, r.stderr.strip()
        return case, json.loads(r.stdout), seconds, ""

    rows = []
    with concurrent.futures.ThreadPoolExecutor(a.jobs) as pool:
        for (s, given, target), out, seconds, error in pool.map(predict, cases):
            if out is None:
                fail(f"{s['sweep']} at {target['value']}: tidemark predict failed: {error}")
            p = out["predictions"][0]
            req = [(g["value"], g["peak_requested"]) for g in given]
            res = [(g["value"], g["peak_reserved"]) for g in given]
            x = target["value"]
            rows.append({
                "sweep": s["sweep"], "at": x, "runs": [g["value"] for g in given],
                "requested": p["peak_requested_bytes"], "true_requested": target["peak_requested"],
                "reserved": p["peak_reserved_bytes"], "true_reserved": target["peak_reserved"],
                "aligned_share": p["aligned_share"], "seconds": seconds,
                "err_requested": err(p["peak_requested_bytes"], target["peak_requested"]),
                "err_reserved": err(p["peak_reserved_bytes"], target["peak_reserved"]),
                "line_requested": err(line(req, x), target["peak_requested"]),
                "line_reserved": err(line(res, x), target["peak_reserved"]),
                "quad_requested": err(quadratic(req, x), target["peak_requested"]),
                "quad_reserved": err(quadratic(res, x), target["peak_reserved"]),
            })

    gib = 2.0 ** 30
    print(f"{'sweep':<28} {'runs':<22} {'at':>6}  {'requested: predicted/true':>25} {'err':>7} {'line':>7} {'quad':>7}"
          f"  {'reserved: predicted/true':>25} {'err':>7} {'line':>7} {'quad':>7} {'aligned':>7} {'time':>6}")
    for r in rows:
        runs = ",".join(str(v) for v in r["runs"])
        print(f"{r['sweep']:<28} {runs:<22} {r['at']:>6}  "
              f"{r['requested'] / gib:>11.3f}/{r['true_requested'] / gib:>8.3f} GiB {r['err_requested']:>+6.1f}% "
              f"{r['line_requested']:>+6.1f}% {r['quad_requested']:>+6.1f}%  "
              f"{r['reserved'] / gib:>11.3f}/{r['true_reserved'] / gib:>8.3f} GiB {r['err_reserved']:>+6.1f}% "
              f"{r['line_reserved']:>+6.1f}% {r['quad_reserved']:>+6.1f}% {100 * r['aligned_share']:>6.1f}% "
              f"{r['seconds']:>5.2f}s")

    def mean_abs(key):
        return sum(abs(r[key]) for r in rows) / len(rows) if rows else 0.0

    def within(key, pct):
        return sum(1 for r in rows if abs(r[key]) <= pct)

    n = len(rows)
    print(f"\n{n} predictions; mean absolute error (and predictions within 5% / 10%):")
    for what in ("requested", "reserved"):
        print(f"  {what:<9}  tidemark {mean_abs('err_' + what):6.2f}% ({within('err_' + what, 5)}/{within('err_' + what, 10)})"
              f"   line {mean_abs('line_' + what):6.2f}% ({within('line_' + what, 5)}/{within('line_' + what, 10)})"
              f"   quadratic {mean_abs('quad_' + what):6.2f}% ({within('quad_' + what, 5)}/{within('quad_' + what, 10)})")
    print(f"  time per prediction: mean {sum(r['seconds'] for r in rows) / max(n, 1):.2f} s, "
          f"max {max((r['seconds'] for r in rows), default=0):.2f} s")
    if a.json:
        with open(a.json, "w", encoding="utf-8") as f:
            json.dump(rows, f, indent=1)
    failed = False
    if a.max_requested_error is not None and mean_abs("err_requested") > a.max_requested_error:
        print(f"score-predictions: mean requested error {mean_abs('err_requested'):.2f}% is above "
              f"{a.max_requested_error}%", file=sys.stderr)
        failed = True
    if a.max_reserved_error is not None and mean_abs("err_reserved") > a.max_reserved_error:
        print(f"score-predictions: mean reserved error {mean_abs('err_reserved'):.2f}% is above "
              f"{a.max_reserved_error}%", file=sys.stderr)
        failed = True
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
