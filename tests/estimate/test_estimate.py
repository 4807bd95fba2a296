"""`tidemark estimate` on real PyTorch (docs/estimate.md): small scripts whose GPU memory is
worked out by hand from PyTorch's allocator rules (../shared notes: 512-byte rounding, 2 MiB
small segments, 20 MiB large ones for requests under 10 MiB, exact 2 MiB multiples above), run
with the GPU faked, each figure checked against that reckoning and against what the script
itself asked torch.cuda. Run by ctest with the interpreter scripts/torch-venv.sh makes
(TIDEMARK_TORCH_PYTHON); without it every test is skipped, saying so.

  TIDEMARK_CLI=build/cli/tidemark TIDEMARK_TORCH_PYTHON=VENV/bin/python python3 tests/estimate/test_estimate.py
"""
import json
import os
import pickle
import subprocess
import sys
import tempfile
import textwrap
import unittest

CLI = os.environ.get("TIDEMARK_CLI", "build/cli/tidemark")
PYTHON = os.environ.get("TIDEMARK_TORCH_PYTHON", "")
MiB = 1 << 20


def have_torch():
    return bool(PYTHON) and subprocess.run([PYTHON, "-c", "import torch"],
                                           capture_output=True).returncode == 0


@unittest.skipUnless(have_torch(), "no PyTorch: TIDEMARK_TORCH_PYTHON is not an interpreter "
                     "with torch (scripts/torch-venv.sh makes one)")
class Estimate(unittest.TestCase):
    def setUp(self):
        self.dir = tempfile.mkdtemp(prefix="tidemark-estimate-test-")

    def estimate(self, script, *options, json_out=True):
        path = os.path.join(self.dir, "script.py")
        with open(path, "w") as f:
            f.write(textwrap.dedent(script))
        out = os.path.join(self.dir, "run.db")
        args = [CLI, "estimate", "-o", out, *options]
        if json_out:
            args.append("--json")
        r = subprocess.run([*args, "--", PYTHON, path], capture_output=True, text=True,
                           cwd=self.dir)
        return r, out

    def result(self, r):
        try:
            return json.loads(r.stdout)
        except ValueError:
            self.fail(f"not JSON on stdout: {r.stdout[-500:]}\nstderr: {r.stderr[-2000:]}")

    def test_each_tensor_is_a_block_freed_when_its_last_reference_goes(self):
        # 3 MiB (large pool: a 20 MiB segment), 1 KiB (small: a 2 MiB segment), a view of the
        # first (no block), then 20 MiB (more than the 17 MiB left of the first segment: a
        # segment of its own, 20 MiB). The script prints what torch.cuda says after each step,
        # as it would on a card.
        r, db = self.estimate("""
            import torch
            a = torch.empty(3 * 2**20, dtype=torch.uint8, device="cuda")
            b = torch.ones(256, device="cuda")            # 1 KiB
            v = a[: 2**20]                                # a view: no new block
            print("after", torch.cuda.memory_allocated(), torch.cuda.memory_reserved())
            c = torch.zeros(5 * 2**20, device="cuda")     # 20 MiB
            print("peak", torch.cuda.max_memory_allocated(), torch.cuda.max_memory_reserved())
            del a                                         # v still holds a's storage
            print("view", torch.cuda.memory_allocated())
            del v
            print("freed", torch.cuda.memory_allocated(), torch.cuda.memory_reserved())
            print(a.device if False else c.device, c.is_cuda)
        """)
        self.assertEqual(r.returncode, 0, r.stderr)
        lines = {l.split()[0]: l.split()[1:] for l in r.stderr.splitlines() if l.split()
                 and l.split()[0] in ("after", "peak", "view", "freed", "cuda:0")}
        three, one_k, big = 3 * MiB, 1024, 20 * MiB
        self.assertEqual(lines["after"], [str(three + one_k), str(20 * MiB + 2 * MiB)])
        self.assertEqual(lines["peak"], [str(three + one_k + big),
                                         str(20 * MiB + 2 * MiB + 20 * MiB)])
        self.assertEqual(lines["view"], [str(three + one_k + big)])
        self.assertEqual(lines["freed"], [str(one_k + big), str(20 * MiB + 2 * MiB + 20 * MiB)])
        self.assertEqual(lines["cuda:0"], ["True"])
        j = self.result(r)
        self.assertEqual(j["peak_allocated_bytes"], three + one_k + big)
        self.assertEqual(j["peak_reserved_bytes"], 42 * MiB)
        self.assertTrue(j["fits"])
        self.assertTrue(j["sound"])
        self.assertIsNotNone(j["estimated"])
        # The trace every command reads says it is an estimate.
        summary = json.loads(subprocess.run([CLI, "summary", db, "--json"], capture_output=True,
                                            text=True).stdout)
        self.assertEqual(summary["estimated"]["gpu"], j["estimated"]["gpu"])
        self.assertIn("estimated, no GPU ran", subprocess.run([CLI, "summary", db],
                                                              capture_output=True, text=True).stdout)

    def test_a_training_step_frees_what_autograd_frees_and_keeps_optimizer_state(self):
        # Linear(1024, 1024) without bias, batch 64, SGD with momentum: parameters 4 MiB, the
        # momentum buffer 4 MiB (made at the first step, kept), the grad 4 MiB (kept until
        # zero_grad sets it to None). After two steps and zero_grad: weight, input, momentum.
        r, _ = self.estimate("""
            import torch
            m = torch.nn.Linear(1024, 1024, bias=False).cuda()
            opt = torch.optim.SGD(m.parameters(), lr=0.1, momentum=0.9)
            x = torch.randn(64, 1024, device="cuda")
            for _ in range(2):
                m(x).square().sum().backward()
                opt.step()
                opt.zero_grad()
            print("end", torch.cuda.memory_allocated(), next(m.parameters()).device)
        """)
        self.assertEqual(r.returncode, 0, r.stderr)
        end = [l.split() for l in r.stderr.splitlines() if l.startswith("end ")][0]
        weight, batch = 4 * MiB, 64 * 1024 * 4
        workspaces = 2 * 8519680  # cuBLAS: the program's thread and the autograd engine's
        self.assertEqual(int(end[1]), 2 * weight + batch + workspaces)
        self.assertEqual(end[2], "cuda:0")

    def test_each_optimizer_step_is_a_step_as_record_marks_it(self):
        # record's hook marks a step where each optimizer step ends (torch 2.15 does not make
        # torch.optim.optimizer an attribute of torch.optim: the hook found no hook to register
        # and steps were only inferred).
        r, db = self.estimate("""
            import torch
            m = torch.nn.Linear(64, 64).cuda()
            opt = torch.optim.AdamW(m.parameters())
            for _ in range(4):
                m(torch.randn(8, 64, device="cuda")).sum().backward()
                opt.step()
                opt.zero_grad()
        """)
        self.assertEqual(r.returncode, 0, r.stderr)
        steps = subprocess.run([CLI, "steps", db], capture_output=True, text=True).stdout
        self.assertIn("4 steps", steps)
        self.assertNotIn("inferred", steps)

    def test_bf16_autocast_casts_as_on_the_gpu(self):
        # Under autocast a Linear runs in bf16: its output is 2 bytes an element, and the weight's
        # cast is cached while the region is open (one cast for two calls).
        r, db = self.estimate("""
            import torch
            m = torch.nn.Linear(4096, 2048, bias=False).cuda()
            x = torch.randn(16, 4096, device="cuda")
            torch.cuda.memory._record_memory_history()
            with torch.autocast("cuda", dtype=torch.bfloat16):
                y1 = m(x)
                y2 = m(x)
            print("dtype", y1.dtype, torch.cuda.memory_allocated())
            torch.cuda.memory._dump_snapshot("autocast.pickle")
        """)
        self.assertEqual(r.returncode, 0, r.stderr)
        line = [l.split() for l in r.stderr.splitlines() if l.startswith("dtype")][0]
        self.assertEqual(line[1], "torch.bfloat16")
        weight, x, y = 2048 * 4096 * 4, 16 * 4096 * 4, 16 * 2048 * 2
        # Live after the region: the weight, the input and its bf16 cast per call (saved for the
        # weight's grad; an activation is not cached), y1 and y2, and the program thread's
        # cuBLAS workspace. The weight's bf16 cast is saved by neither graph (the input needs no
        # grad), so it went with the cache when the region closed.
        self.assertEqual(int(line[2]), weight + x + 2 * (x // 2) + 2 * y + 8519680)
        # One cast of the weight for both calls (the cache), two of the input (no cache).
        with open(os.path.join(self.dir, "autocast.pickle"), "rb") as f:
            sizes = [e["size"] for e in pickle.load(f)["device_traces"][0] if e["action"] == "alloc"]
        self.assertEqual(sizes.count(weight // 2), 1)
        self.assertEqual(sizes.count(x // 2), 2)

    def test_attention_runs_the_backend_the_card_chooses(self):
        # bf16 on an A100: flash attention, which keeps the output and a float32 logsumexp, not
        # the 2 x 8 x 1024 x 1024 attention matrix the meta device's math path would keep.
        r, _ = self.estimate("""
            import torch, torch.nn.functional as F
            q, k, v = (torch.randn(2, 8, 1024, 64, device="cuda", dtype=torch.bfloat16,
                                   requires_grad=True) for _ in range(3))
            base = torch.cuda.memory_allocated()
            out = F.scaled_dot_product_attention(q, k, v, is_causal=True)
            print("forward", torch.cuda.memory_allocated() - base)
            out.sum().backward()
        """)
        self.assertEqual(r.returncode, 0, r.stderr)
        grown = int([l.split()[1] for l in r.stderr.splitlines() if l.startswith("forward")][0])
        out, lse = 2 * 8 * 1024 * 64 * 2, 2 * 8 * 1024 * 4
        self.assertGreaterEqual(grown, out + lse)
        self.assertLess(grown, out + lse + 4096)  # the RNG state's small block at most
        j = self.result(r)
        self.assertIn("flash attention", json.dumps(j["estimated"]["emulated"]))

    def test_a_capacity_gives_the_out_of_memory_and_where(self):
        r, db = self.estimate("""
            import torch
            keep = [torch.empty(40 * 2**20, dtype=torch.uint8, device="cuda") for _ in range(4)]
        """, "--device-memory", "128MiB")
        self.assertNotEqual(r.returncode, 0)
        self.assertIn("OutOfMemoryError", r.stderr)
        j = self.result(r)
        self.assertFalse(j["fits"])
        self.assertEqual(j["oom_count"], 1)
        self.assertEqual(j["capacity_bytes"], 128 * MiB)
        # The trace holds the oom, for diagnose.
        d = subprocess.run([CLI, "diagnose", db, "--json"], capture_output=True, text=True)
        self.assertIn("oom", d.stdout.lower())
        self.assertEqual(json.loads(d.stdout)["estimated"]["capacity"], 128 * MiB)

    def test_a_data_dependent_shape_is_not_guessed(self):
        r, _ = self.estimate("""
            import torch
            x = torch.randn(100, device="cuda")
            idx = torch.nonzero(x > 0)
        """)
        self.assertNotEqual(r.returncode, 0)
        j = self.result(r)
        self.assertFalse(j["sound"])
        self.assertIn("nonzero", json.dumps(j["estimated"]["not_estimated"]))

    def test_the_scripts_own_snapshot_is_pytorchs_format_and_its_window(self):
        r, _ = self.estimate("""
            import torch
            before = torch.empty(2**20, device="cuda")
            torch.cuda.memory._record_memory_history(max_entries=1000)
            inside = torch.empty(2**20, device="cuda")
            torch.cuda.memory._dump_snapshot("own.pickle")
        """)
        self.assertEqual(r.returncode, 0, r.stderr)
        with open(os.path.join(self.dir, "own.pickle"), "rb") as f:
            s = pickle.load(f)
        actions = [e["action"] for e in s["device_traces"][0]]
        self.assertEqual(actions.count("alloc"), 1)  # only what was allocated in the window
        blocks = [b for seg in s["segments"] for b in seg["blocks"]
                  if b["state"] == "active_allocated"]
        self.assertEqual(sorted(b["requested_size"] for b in blocks), [4 * MiB, 4 * MiB])
        # Tidemark reads it as it reads PyTorch's own.
        self.assertEqual(subprocess.run([CLI, "summary", os.path.join(self.dir, "own.pickle")],
                                        capture_output=True).returncode, 0)

    def test_a_sweep_says_the_largest_value_that_fits(self):
        path = os.path.join(self.dir, "sweep.py")
        with open(path, "w") as f:
            f.write("import sys, torch\n"
                    "x = torch.empty(int(sys.argv[1]) * 2**20, dtype=torch.uint8, device='cuda')\n")
        r = subprocess.run([CLI, "estimate", "--device-memory", "100MiB", "--json", "--sweep",
                            "MB=10,50,90,200", "-o", os.path.join(self.dir, "s-{MB}.db"), "--",
                            PYTHON, path, "{MB}"], capture_output=True, text=True, cwd=self.dir)
        j = json.loads(r.stdout)
        self.assertEqual([run["fits"] for run in j["runs"]], [True, True, True, False])
        self.assertEqual(j["largest_that_fits"], "90")
        self.assertEqual(j["runs"][0]["peak_requested_bytes"], 10 * MiB)

    def test_python_m_tidemark_estimate_runs_the_script_with_this_interpreter(self):
        path = os.path.join(self.dir, "m.py")
        with open(path, "w") as f:
            f.write("import torch\nx = torch.empty(2**20, device='cuda')\n")
        package = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "python")
        r = subprocess.run([PYTHON, "-m", "tidemark", "estimate", "--json", "-o",
                            os.path.join(self.dir, "m.db"), path], capture_output=True, text=True,
                           env=dict(os.environ, PYTHONPATH=package, TIDEMARK_CLI=CLI))
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertEqual(json.loads(r.stdout)["peak_requested_bytes"], 4 * MiB)

    def test_record_hook_on_real_torch_without_a_gpu(self):
        # The same hook records under `record`: on this machine, torch without CUDA.
        path = os.path.join(self.dir, "cpu.py")
        with open(path, "w") as f:
            f.write("import torch\nprint(float(torch.ones(10).sum()))\n")
        r = subprocess.run([CLI, "record", "-o", os.path.join(self.dir, "rec.db"), "--", PYTHON,
                            path], capture_output=True, text=True)
        import_cuda = subprocess.run([PYTHON, "-c", "import torch; print(torch.cuda.is_available())"],
                                     capture_output=True, text=True).stdout.strip()
        if import_cuda == "True":
            self.skipTest("this machine has a GPU")
        self.assertEqual(r.returncode, 1, r.stderr)
        self.assertIn("10.0", r.stdout)
        self.assertIn("without CUDA", r.stderr)


class Versions(unittest.TestCase):
    def test_an_unsupported_torch_is_refused_naming_the_versions(self):
        sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "python", "hook"))
        from tidemark_hook.estimate import versions

        class Torch:
            __version__ = "1.13.1+cu117"

        message = versions.unsupported(Torch())
        self.assertIn("1.13.1", message)
        self.assertIn("supported", message)
        Torch.__version__ = "2.15.0+cu132"
        self.assertIsNone(versions.unsupported(Torch()))


if __name__ == "__main__":
    unittest.main()
