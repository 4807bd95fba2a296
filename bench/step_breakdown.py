#!/usr/bin/env python3
"""Where a training step's time goes, tensorlib next to PyTorch, by kind of work.

tensorlib: `perf record --call-graph dwarf` over bench/train_step_bench's BM_<Model>Step; each
sample taken inside the step loop is given one kind from its call chain (the rules in KIND_RULES
below), and the kinds' shares of the samples times the benchmark's step time are the
milliseconds. PyTorch: bench/pytorch/breakdown.py (torch.profiler's operator times). Both run
pinned to the same cores with the same thread count. Run by scripts/step-breakdown.sh; perf
(Debian's linux-perf) and a Python with PyTorch are development aids, nothing in the build needs
them. Prints a Markdown table per model and thread count (docs/performance.md).
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
KINDS = ["gemm", "convolution", "pooling", "elementwise", "reductions", "optimizer",
         "allocator", "autograd", "framework"]
LABEL = {"gemm": "GEMM (linear layers)", "convolution": "convolution (im2col, GEMMs, col2im)",
         "pooling": "max pooling", "elementwise": "elementwise, copies and fills",
         "reductions": "reductions (loss, bias gradients)", "optimizer": "optimizer (zero_grad, step)",
         "allocator": "allocator", "autograd": "autograd engine",
         "framework": "framework (op front-ends, tensors, the loop)",
         "other_ops": "other operators"}


def has(chain, *needles):
    return any(any(n in f for n in needles) for f in chain)


def kind_of(chain):
    """chain: function names, innermost first."""
    inner = chain[0]
    if has(chain, "tl::optim::"):
        return "optimizer"
    conv = has(chain, "tl::nn::functional::conv", "tl::nn::Conv2d", "conv2d_", "im2col", "col2im")
    if inner.startswith(("sgemm", "dgemm", "cblas_")) or "gemm_" in inner:
        return "convolution" if conv else "gemm"
    if has(chain, "max_pool"):
        return "pooling"
    if conv or has(chain, "from_channel_major", "add_row_sums"):
        return "convolution"
    if has([inner], "CachingAllocator", "malloc", "_int_free", "cfree", "operator new",
           "operator delete", "HostDevice"):
        return "allocator"
    if has([inner], "reduce_rows", "sum_leading", "softmax", "Kernels::reduce"):
        return "reductions"
    if has([inner], "binary_kernel", "unary_kernel", "ternary_kernel", "Kernels::fill",
           "Kernels::copy", "memset", "memmove", "memcpy", "Kernels::where", "Kernels::clamp"):
        return "elementwise"
    if has(chain, "tl::autograd::"):
        return "autograd"
    return "framework"


def samples(perf_data):
    """Yields each sample's call chain (function names, innermost first)."""
    out = subprocess.run(["perf", "script", "-i", perf_data, "-F", "ip,sym"],
                         capture_output=True, text=True, check=True).stdout
    chain = []
    for line in out.splitlines() + [""]:
        line = line.strip()
        if not line:
            if chain:
                yield chain
            chain = []
            continue
        parts = line.split(None, 1)
        chain.append(parts[1] if len(parts) > 1 else "[unknown]")


def tensorlib(bench, model, threads, seconds, env):
    name = {"mlp": "BM_MlpStep", "cnn": "BM_CnnStep"}[model]
    with tempfile.TemporaryDirectory() as tmp:
        data, result = os.path.join(tmp, "perf.data"), os.path.join(tmp, "bench.json")
        subprocess.run(["perf", "record", "-q", "-F", "400", "--call-graph", "dwarf,32768", "-o", data,
                        "taskset", "-c", f"0-{threads - 1}", bench, f"--benchmark_filter=^{name}(/|$)",
                        f"--benchmark_min_time={seconds}", "--benchmark_repetitions=1",
                        f"--benchmark_out={result}", "--benchmark_out_format=json"],
                       env=env, check=True, capture_output=True)
        with open(result) as f:
            runs = json.load(f)["benchmarks"]
        medians = [b for b in runs if b.get("aggregate_name") == "median"]
        step_ms = (medians or runs)[0]["real_time"]
        counts = {k: 0 for k in KINDS}
        for chain in samples(data):
            if not has(chain, "step_loop"):
                continue  # start-up, model building, the benchmark's own bookkeeping
            counts[kind_of(chain)] += 1
    total = sum(counts.values()) or 1
    return {"step_ms": step_ms, **{f"{k}_ms": step_ms * c / total for k, c in counts.items()},
            "samples": total}


def main():
    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("--bench", required=True, help="train_step_bench")
    p.add_argument("--python", help="an interpreter with PyTorch (without: tensorlib only)")
    p.add_argument("--threads", type=int, action="append", help="repeatable; default 1")
    p.add_argument("--seconds", type=float, default=3.0)
    p.add_argument("--json", action="store_true", help="print the figures as JSON")
    a = p.parse_args()
    results = {}
    for threads in a.threads or [1]:
        env = dict(os.environ)
        for var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
            env[var] = str(threads)
        torch = {}
        if a.python:
            torch = json.loads(subprocess.run(
                ["taskset", "-c", f"0-{threads - 1}", a.python, os.path.join(HERE, "pytorch", "breakdown.py"),
                 "--threads", str(threads)], env=env, check=True, capture_output=True, text=True,
                cwd=os.path.join(HERE, "pytorch")).stdout)
        for model in ("mlp", "cnn"):
            results[f"{model}/{threads}"] = {"tensorlib": tensorlib(a.bench, model, threads, a.seconds, env),
                                             "pytorch": torch.get(model, {})}
    if a.json:
        print(json.dumps(results, indent=1))
        return
    for key, r in results.items():
        model, threads = key.split("/")
        tl, pt = r["tensorlib"], r["pytorch"]
        print(f"\n{model.upper()}, batch 64, {threads} thread(s): step {tl['step_ms']:.2f} ms (tensorlib)"
              + (f", {pt['step_ms']:.2f} ms (PyTorch)" if pt else "") + "\n")
        print("| kind | tensorlib ms | PyTorch ms |\n| --- | --- | --- |")
        for k in KINDS + ["other_ops"]:
            t, q = tl.get(f"{k}_ms"), pt.get(f"{k}_ms")
            if t is None and q is None:
                continue
            fmt = lambda v: "—" if v is None else f"{v:.2f}"
            print(f"| {LABEL[k]} | {fmt(t)} | {fmt(q)} |")


if __name__ == "__main__":
    sys.exit(main())
