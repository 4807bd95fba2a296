#!/usr/bin/env python3
"""tensorlib against PyTorch on one training step, interleaved: for each model and thread count,
`--pairs` rounds of (tensorlib, PyTorch) -- the order flips every round -- each process pinned
to the same cores (taskset) with the same thread settings. The figure is the median of the
per-round ratios tensorlib/PyTorch, with its spread (min-max), so a burst of other work on the
machine moves one round, not the result. Run by scripts/compare-pytorch.sh.
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
BENCH_NAME = {"mlp": "BM_MlpStep", "cnn": "BM_CnnStep"}


def pinned_env(threads):
    env = dict(os.environ)
    for var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
        env[var] = str(threads)
    return env


def taskset(threads):
    return ["taskset", "-c", f"0-{threads - 1}"]


def tensorlib_ms(bench, model, threads, seconds):
    with tempfile.NamedTemporaryFile(suffix=".json") as out:
        subprocess.run(
            taskset(threads) + [bench, f"--benchmark_filter=^{BENCH_NAME[model]}(/|$)",
                                f"--benchmark_min_time={seconds}", f"--benchmark_out={out.name}",
                                "--benchmark_out_format=json"],
            env=pinned_env(threads), check=True, capture_output=True, text=True)
        with open(out.name) as f:
            result = json.load(f)
    for b in result["benchmarks"]:
        if b.get("aggregate_name") == "median":
            return b["real_time"]  # ms (the benchmark's unit)
    raise RuntimeError(f"{bench}: no median for {BENCH_NAME[model]}")


def pytorch_ms(python, model, threads, seconds):
    out = subprocess.run(
        taskset(threads) + [python, os.path.join(HERE, "train_step.py"), "--threads", str(threads),
                            "--model", model, "--seconds", str(seconds), "--repetitions", "5"],
        env=pinned_env(threads), check=True, capture_output=True, text=True).stdout
    result = json.loads(out)
    return result[f"{model}_step_ms"], result["torch"]


def main():
    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("--bench", required=True, help="train_step_bench")
    p.add_argument("--python", required=True, help="an interpreter with PyTorch")
    p.add_argument("--threads", type=int, action="append", help="repeatable; default 1 and 2")
    p.add_argument("--pairs", type=int, default=5)
    p.add_argument("--seconds", type=float, default=0.4, help="per repetition (5 per run)")
    p.add_argument("--target", type=float, default=1.2)
    p.add_argument("--json", help="write the rounds and ratios here")
    a = p.parse_args()
    threads_list = a.threads or [1, 2]
    if max(threads_list) > os.cpu_count():
        sys.exit(f"compare: --threads {max(threads_list)} but this machine has {os.cpu_count()} cores")

    rows, failed, version = [], False, "?"
    for threads in threads_list:
        for model in ("mlp", "cnn"):
            ratios, tl_all, pt_all = [], [], []
            for i in range(a.pairs):
                if i % 2 == 0:
                    t = tensorlib_ms(a.bench, model, threads, a.seconds)
                    pt, version = pytorch_ms(a.python, model, threads, a.seconds)
                else:
                    pt, version = pytorch_ms(a.python, model, threads, a.seconds)
                    t = tensorlib_ms(a.bench, model, threads, a.seconds)
                tl_all.append(t)
                pt_all.append(pt)
                ratios.append(t / pt)
            median = statistics.median(ratios)
            ok = median <= a.target
            failed |= not ok
            rows.append({"model": model, "threads": threads, "tensorlib_ms": tl_all,
                         "pytorch_ms": pt_all, "ratios": ratios, "median_ratio": median,
                         "ok": ok})
    print(f"training step, batch 64, Adam; {a.pairs} interleaved pairs each; PyTorch {version}")
    print(f"{'model':<5} {'threads':>7} {'tensorlib':>10} {'PyTorch':>10} {'ratio':>7} "
          f"{'spread':>13}  target")
    for r in rows:
        print(f"{r['model']:<5} {r['threads']:>7} {statistics.median(r['tensorlib_ms']):>7.3f} ms "
              f"{statistics.median(r['pytorch_ms']):>7.3f} ms {r['median_ratio']:>6.2f}x "
              f"{min(r['ratios']):>5.2f}-{max(r['ratios']):.2f}x  <= {a.target}x "
              f"{'ok' if r['ok'] else 'MISSED'}")
    if a.json:
        with open(a.json, "w") as f:
            json.dump({"torch": version, "pairs": a.pairs, "rows": rows}, f, indent=1)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
