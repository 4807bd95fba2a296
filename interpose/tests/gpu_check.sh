#!/usr/bin/env bash
# The GPU half of interpose's tests (docs/interpose.md): records gpu_sample.cu, a plain CUDA
# program, with `tidemark record` and checks the trace's rows. Exit 77 (skip) without a GPU.
#   interpose/tests/gpu_check.sh [BUILD_DIR]      (default: build)
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
build=${1:-build}
tidemark=$build/cli/tidemark
if [[ ! -e /dev/nvidiactl ]] || ! command -v nvidia-smi >/dev/null || ! nvidia-smi -L >/dev/null 2>&1; then
  echo "gpu_check: no GPU, skipped"; exit 77
fi
[[ -x $tidemark ]] || { echo "gpu_check: $tidemark not built"; exit 1; }
nvcc=${NVCC:-$(command -v nvcc || echo /usr/local/cuda/bin/nvcc)}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
"$nvcc" -O1 -o "$work/gpu_sample" "$here/gpu_sample.cu"
"$work/gpu_sample" || { echo "gpu_check: gpu_sample fails without tidemark"; exit 1; }

set +e
"$tidemark" record --stacks 8 -o "$work/gpu.db" -- "$work/gpu_sample" 2> "$work/stderr"
status=$?
set -e
cat "$work/stderr"
[[ $status == 0 ]] || { echo "gpu_check: FAIL exit status $status"; exit 1; }
if grep -q "not recorded" "$work/stderr"; then echo "gpu_check: FAIL CUPTI did not start"; exit 1; fi

python3 - "$work/gpu.db" <<'PY'
import sqlite3, sys
db = sqlite3.connect(sys.argv[1])
MiB = 1 << 20
fails = []
def q(sql): return [tuple(r) for r in db.execute(sql)]
def expect(name, got, want):
    ok = got == want
    print(("ok   " if ok else "FAIL ") + name + ": " + repr(got) + ("" if ok else " (want " + repr(want) + ")"))
    if not ok: fails.append(name)
dev = "JOIN devices d ON d.id = x.device"
# cudaMalloc 8 MiB, cudaMallocManaged 2 MiB (device cuda:0), cudaMallocHost 1 MiB (cpu), all freed.
expect("segments", q(f"SELECT d.type, d.idx, x.size, x.free_ts IS NOT NULL FROM segments x {dev} "
                     "WHERE x.kind = 'segment' ORDER BY x.seq"),
       [("cuda", 0, 8 * MiB, 1), ("cpu", 0, MiB, 1), ("cuda", 0, 2 * MiB, 1)])
# cudaMallocAsync 4 MiB from the default pool: an allocation inside a mapped pool range.
expect("pool allocation", q(f"SELECT d.type, x.size, x.free_requested_ts IS NOT NULL, x.segment = "
                            "(SELECT min(addr) FROM segments WHERE kind = 'mapped') FROM allocations x {dev}"),
       [("cuda", 4 * MiB, 1, 1)])
expect("pool mapped >= 4 MiB", q("SELECT sum(size) >= 4194304 FROM segments WHERE kind = 'mapped'"), [(1,)])
expect("memcpys", q("SELECT direction, bytes, pinned, async FROM memcpys ORDER BY seq"),
       [("host_to_device", MiB, 1, 1), ("device_to_host", MiB, 0, 0)])
expect("copy_to_host sync", q("SELECT count(*) FROM syncs WHERE kind = 'copy_to_host' AND duration_ns > 0"), [(1,)])
expect("stream sync", q("SELECT count(*) >= 1 FROM syncs WHERE kind = 'stream'"), [(1,)])
expect("device sync", q("SELECT count(*) >= 1 FROM syncs WHERE kind = 'device'"), [(1,)])
expect("nvtx scope", q("SELECT s.text, x.pop_ts IS NOT NULL FROM scopes x JOIN strings s ON s.id = x.name"),
       [("gpu_sample", 1)])
expect("marks", q("SELECT s.text FROM marks x JOIN strings s ON s.id = x.name "
                  "WHERE s.text NOT LIKE 'cupti_device_buffer%' ORDER BY x.seq"), [("before_d2h",)])
expect("cupti device buffer mark", q("SELECT count(*) FROM marks x JOIN strings s ON s.id = x.name "
                                     "WHERE s.text = 'cupti_device_buffer_bytes' AND x.value > 0"), [(1,)])
expect("nothing dropped", q("SELECT count(*) FROM marks x JOIN strings s ON s.id = x.name "
                            "WHERE s.text = 'cupti_dropped_records'"), [(0,)])
# The sync and the copy are in time order with the NVTX mark that precedes them.
expect("mark before d2h copy", q("SELECT (SELECT x.ts FROM marks x JOIN strings s ON s.id = x.name WHERE s.text = 'before_d2h') "
                                 "< (SELECT ts FROM memcpys WHERE direction = 'device_to_host')"), [(1,)])
sys.exit(1 if fails else 0)
PY
echo "gpu_check: PASS"
