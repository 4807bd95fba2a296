#!/usr/bin/env python3
"""Scores `tidemark diagnose` against labelled real PyTorch snapshots.

A labelled directory holds `labels.jsonl` (one JSON object per snapshot: `file`, `expect`,
`also_ok`, and the expert's account) and the snapshots, either as files beside it or packed in
`*.tar.zst` archives, which are unpacked into --work. Each snapshot is imported
(`tidemark import`) and diagnosed (`tidemark diagnose --json`, the default view: moderate and
major findings), and its finding ids are scored against its label:

* an `expect` entry is a hit when a finding has its id (`"a|b"`: either), else a miss;
* a finding id in neither `expect` nor `also_ok` is a false alarm (counted once per file and
  id: three devices with the same wrong finding are one wrong answer);
* precision = hits / (hits + false alarms), recall = hits / expect entries;
* a healthy file (empty `expect`) is clean when it has no false alarm, and silent when it has
  no finding at all.

Prints the score, every miss and false alarm with the finding's title, and exits 1 when a
floor given by --min-precision, --min-recall or --min-clean is not met (2 on bad input).
`make test` runs it on the project's labelled set (tests/data/pytorch/labelled) with floors that
only go up (tests/CMakeLists.txt); docs/diagnoses.md has the figures.
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


def fail(msg):
    print(f"score-diagnoses: {msg}", file=sys.stderr)
    sys.exit(2)


def read_labels(path):
    labels = []
    with open(path, encoding="utf-8") as f:
        for n, line in enumerate(f, 1):
            if not line.strip():
                continue
            try:
                d = json.loads(line)
            except json.JSONDecodeError as e:
                fail(f"{path}:{n}: not JSON ({e})")
            for key in ("file", "expect", "also_ok"):
                if key not in d:
                    fail(f"{path}:{n}: no '{key}'")
            labels.append(d)
    return labels


def unpack(directory, work):
    try:
        return snapshot_sets.unpack(directory, work)
    except snapshot_sets.UnpackError as e:
        fail(str(e))


def diagnose(tidemark, snapshot, work):
    """The findings of one snapshot (a list of dicts), or an error string."""
    db = os.path.join(work, os.path.basename(snapshot) + ".db")
    for suffix in ("", "-wal", "-shm"):
        if os.path.exists(db + suffix):
            os.remove(db + suffix)
    r = subprocess.run([tidemark, "import", snapshot, "-o", db], capture_output=True, text=True)
    if r.returncode != 0:
        return f"import failed ({r.returncode}): {r.stderr.strip()}"
    r = subprocess.run([tidemark, "diagnose", db, "--json"], capture_output=True, text=True)
    if r.returncode != 0:
        return f"diagnose failed ({r.returncode}): {r.stderr.strip()}"
    try:
        return json.loads(r.stdout)["findings"]
    except (json.JSONDecodeError, KeyError) as e:
        return f"diagnose printed no findings JSON ({e})"


def score(labels, results):
    hits = misses = alarms = expected = 0
    healthy = clean = silent = 0
    lines = []
    for label in labels:
        name = label["file"]
        findings = results[name]
        if isinstance(findings, str):
            lines.append(f"ERROR {name}: {findings}")
            misses += len(label["expect"])
            expected += len(label["expect"])
            continue
        ids = {f["id"] for f in findings}
        ok = set(label["also_ok"])
        for e in label["expect"]:
            alts = e.split("|")
            ok.update(alts)
            expected += 1
            if ids & set(alts):
                hits += 1
            else:
                misses += 1
                lines.append(f"MISS  {name}: expected {e}")
        wrong = sorted(ids - ok)
        alarms += len(wrong)
        for w in wrong:
            titles = [f"{f['device']}: {f['title']}" for f in findings if f["id"] == w]
            lines.append(f"FALSE {name}: {w} ({'; '.join(titles)})")
        if not label["expect"]:
            healthy += 1
            clean += not wrong
            silent += not ids
    return {
        "hits": hits, "misses": misses, "false_alarms": alarms, "expected": expected,
        "precision": hits / (hits + alarms) if hits + alarms else 1.0,
        "recall": hits / expected if expected else 1.0,
        "healthy": healthy, "healthy_clean": clean, "healthy_silent": silent,
    }, lines


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("directory", help="a labelled directory: labels.jsonl and the snapshots")
    ap.add_argument("--tidemark", required=True, help="the tidemark CLI to score")
    ap.add_argument("--work", required=True, help="a directory for unpacked snapshots and traces")
    ap.add_argument("--jobs", type=int, default=os.cpu_count() or 1)
    ap.add_argument("--min-precision", type=float, default=0.0)
    ap.add_argument("--min-recall", type=float, default=0.0)
    ap.add_argument("--min-clean", type=int, default=0, help="healthy files without a false alarm")
    ap.add_argument("--json", action="store_true", help="print the score as JSON too")
    ap.add_argument("--verbose", action="store_true", help="print every file's finding ids")
    a = ap.parse_args()
    labels_path = os.path.join(a.directory, "labels.jsonl")
    if not os.path.isfile(labels_path):
        fail(f"{a.directory}: no labels.jsonl")
    if not os.access(a.tidemark, os.X_OK):
        fail(f"{a.tidemark}: not an executable")
    os.makedirs(a.work, exist_ok=True)
    labels = read_labels(labels_path)
    files = unpack(a.directory, a.work)
    for label in labels:
        if label["file"] not in files:
            fail(f"{labels_path}: '{label['file']}' is neither beside it nor in an archive")
    with concurrent.futures.ThreadPoolExecutor(max_workers=max(1, a.jobs)) as pool:
        futures = {l["file"]: pool.submit(diagnose, a.tidemark, files[l["file"]], a.work) for l in labels}
        results = {name: f.result() for name, f in futures.items()}
    s, lines = score(labels, results)
    if a.verbose:
        for label in labels:
            r = results[label["file"]]
            got = r if isinstance(r, str) else ", ".join(f"{f['id']}@{f['device']}({f['severity']})" for f in r)
            print(f"{label['file']}: [{got}] expect {label['expect']} also {label['also_ok']}")
    for line in lines:
        print(line)
    print(f"{len(labels)} files: precision {s['precision']:.2f}, recall {s['recall']:.2f} "
          f"({s['hits']} hits, {s['false_alarms']} false alarms, {s['expected']} expected); "
          f"{s['healthy_clean']} of {s['healthy']} healthy files without a false alarm, "
          f"{s['healthy_silent']} without any finding")
    if a.json:
        print(json.dumps(s))
    failed = []
    if s["precision"] < a.min_precision:
        failed.append(f"precision {s['precision']:.2f} < {a.min_precision}")
    if s["recall"] < a.min_recall:
        failed.append(f"recall {s['recall']:.2f} < {a.min_recall}")
    if s["healthy_clean"] < a.min_clean:
        failed.append(f"{s['healthy_clean']} healthy files clean < {a.min_clean}")
    if failed:
        print("below the floor: " + "; ".join(failed))
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
