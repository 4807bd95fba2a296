#!/usr/bin/env python3
"""`tidemark estimate`'s cost on a 7B-parameter training step (bench/estimate/llama7b_step.py):
wall time and the peak memory of the whole run (tidemark and the Python process it runs), beside
the same interpreter importing torch alone, measured in the same run. Targets (docs/estimate.md):
at most 60 s and 2 GB on 2 cores.
  run.py --tidemark build/cli/tidemark [--python VENV/bin/python]
Exit 1 when a target is missed; 77 without torch."""
import argparse
import os
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))


def measure(cmd, **kw):
    start = time.monotonic()
    p = subprocess.Popen(cmd, **kw)
    _, status, usage = os.wait4(p.pid, 0)
    return time.monotonic() - start, usage.ru_maxrss * 1024, os.waitstatus_to_exitcode(status)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--tidemark", required=True)
    ap.add_argument("--python", default=os.environ.get("TIDEMARK_TORCH_PYTHON", ""))
    ap.add_argument("--seq", default="512")
    a = ap.parse_args()
    if not a.python or subprocess.run([a.python, "-c", "import torch"],
                                      capture_output=True).returncode:
        print("estimate bench: no torch (scripts/torch-venv.sh); skipped")
        return 77
    base_s, base_rss, _ = measure([a.python, "-c", "import torch"])
    with tempfile.TemporaryDirectory() as d:
        s, rss, code = measure([a.tidemark, "estimate", "--gpu", "h200", "-o",
                                os.path.join(d, "run.db"), "--", a.python,
                                os.path.join(HERE, "llama7b_step.py"), a.seq],
                               stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    print(f"7B training step (seq {a.seq}): {s:.1f} s, peak memory {rss / 2**30:.2f} GB "
          f"(importing torch alone: {base_s:.1f} s, {base_rss / 2**30:.2f} GB); "
          f"ratios {s / base_s:.1f}x time, {rss / base_rss:.1f}x memory")
    ok = code == 0 and s <= 60 and rss <= 2 * 2**30
    print(f"targets: <= 60 s {'met' if s <= 60 else 'MISSED'}, <= 2 GB "
          f"{'met' if rss <= 2 * 2**30 else 'MISSED'}; exit {code}")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
