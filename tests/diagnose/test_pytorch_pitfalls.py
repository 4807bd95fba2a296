"""The diagnoses on PyTorch programs they were not written against: samples/pytorch, each
pitfall beside its fixed twin, run with real PyTorch under `tidemark estimate` (no GPU). Each
program writes PyTorch's own snapshot of a window, as the programs users profile do -- one
training step, or a step's forward dumped before its backward -- and the estimate writes the
whole run. Checked, on both:

* the pitfall's finding is there, with its own id, and the fixed twin has no finding at all;
* the finding's "peak without them" is the fixed twin's own peak (what the fix saves, measured
  by running the fixed program, not by the detector's arithmetic), within 3%;
* a healthy training program dumped between its forward and its backward draws no advice to
  run that forward under no_grad.

Run by ctest with the interpreter scripts/torch-venv.sh makes (TIDEMARK_TORCH_PYTHON); without
it every test is skipped, saying so.

  TIDEMARK_CLI=build/cli/tidemark TIDEMARK_TORCH_PYTHON=VENV/bin/python \\
    python3 tests/diagnose/test_pytorch_pitfalls.py
"""
import json
import os
import re
import shutil
import subprocess
import tempfile
import unittest

CLI = os.path.abspath(os.environ.get("TIDEMARK_CLI", "build/cli/tidemark"))
PYTHON = os.environ.get("TIDEMARK_TORCH_PYTHON", "")
SAMPLES = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "samples",
                       "pytorch")


def have_torch():
    return bool(PYTHON) and subprocess.run([PYTHON, "-c", "import torch"],
                                           capture_output=True).returncode == 0


def bytes_of(text):
    """The byte count of an evidence value: "488.53 MiB (512,260,096 bytes)"."""
    m = re.search(r"\(([\d,]+) bytes\)", text)
    if not m:
        raise AssertionError(f"no byte count in {text!r}")
    return int(m.group(1).replace(",", ""))


@unittest.skipUnless(have_torch(), "no PyTorch: TIDEMARK_TORCH_PYTHON is not an interpreter "
                     "with torch (scripts/torch-venv.sh makes one)")
class PitfallPrograms(unittest.TestCase):
    runs = {}

    @classmethod
    def setUpClass(cls):
        cls.dir = tempfile.mkdtemp(prefix="tidemark-pytorch-pitfalls-")

    @classmethod
    def tearDownClass(cls):
        shutil.rmtree(cls.dir, ignore_errors=True)

    def run_program(self, program, fixed, window):
        """(window snapshot, whole-run trace) of one program, run once under the estimate."""
        key = (program, fixed, window)
        if key not in self.runs:
            name = f"{program}{'_fixed' if fixed else ''}_{window}"
            snapshot = os.path.join(self.dir, name + ".pickle")
            trace = os.path.join(self.dir, name + ".db")
            args = [CLI, "estimate", "-o", trace, "--", PYTHON,
                    os.path.join(SAMPLES, program + ".py"), "--window", window,
                    "--snapshot", snapshot] + (["--fixed"] if fixed else [])
            r = subprocess.run(args, capture_output=True, text=True, cwd=self.dir)
            self.assertEqual(r.returncode, 0, f"{' '.join(args)}\n{r.stderr[-3000:]}")
            self.runs[key] = (snapshot, trace)
        return self.runs[key]

    def diagnose(self, path):
        r = subprocess.run([CLI, "diagnose", path, "--json"], capture_output=True, text=True)
        self.assertEqual(r.returncode, 0, r.stderr)
        return json.loads(r.stdout)

    def peak(self, path):
        r = subprocess.run([CLI, "summary", path, "--json"], capture_output=True, text=True)
        self.assertEqual(r.returncode, 0, r.stderr)
        devices = [d for d in json.loads(r.stdout)["devices"] if d["device"].startswith("cuda")]
        return devices[0]["peak_allocated_bytes"]

    def check_pitfall(self, program, finding_id, windows=("step", "forward")):
        for window in windows:
            snapshot, trace = self.run_program(program, False, window)
            fixed_snapshot, fixed_trace = self.run_program(program, True, window)
            pairs = [(snapshot, fixed_snapshot)]
            if window == "step":
                pairs.append((trace, fixed_trace))
            for path, twin in pairs:
                with self.subTest(program=program, window=window, file=os.path.basename(path)):
                    d = self.diagnose(path)
                    ids = [f["id"] for f in d["findings"]]
                    self.assertEqual(ids, [finding_id], d["findings"])
                    self.assertEqual(self.diagnose(twin)["findings"], [])
                    evidence = dict(d["findings"][0]["evidence"])
                    without = bytes_of(evidence["peak without them"])
                    truth = self.peak(twin)
                    self.assertAlmostEqual(without / truth, 1.0, delta=0.03,
                                           msg=f"predicted {without}, the fixed run's peak {truth}")

    def test_stale_gradients_are_found_in_one_step_and_in_one_forward(self):
        # zero_grad(set_to_none=False): the gradients were made before the window, so the
        # importer tells them from the parameters and AdamW's moments by their sizes.
        self.check_pitfall("stale_grads", "stale-grads")

    def test_a_kept_warm_up_graph_is_found_and_its_size_is_the_saving(self):
        self.check_pitfall("warmup_graph", "kept-graph")

    def test_an_autocast_region_around_the_loop_is_found_as_stale_weight_copies(self):
        # The whole run (the copies' own allocations are in it): the region spans the loop, so
        # the first forward's copies serve every step -- major whatever the bytes. The fixed
        # twin casts anew in each forward: its copies are at most the ordinary autocast-cache.
        _, trace = self.run_program("autocast_whole_loop", False, "step")
        found = [f for f in self.diagnose(trace)["findings"] if f["id"] == "autocast-cache"]
        self.assertEqual(len(found), 1, found)
        self.assertEqual(found[0]["severity"], "major")
        self.assertIn("spans the training loop", found[0]["title"])
        _, fixed = self.run_program("autocast_whole_loop", True, "step")
        for f in self.diagnose(fixed)["findings"]:
            self.assertNotIn("spans the training loop", f["title"])

    def test_a_training_forward_dumped_before_its_backward_is_no_evaluation(self):
        snapshot, _ = self.run_program("forward_before_backward", False, "forward")
        d = self.diagnose(snapshot)
        self.assertEqual(d["findings"], [])
        skipped = {s["id"]: s["reason"] for s in d["skipped"]}
        self.assertIn("the program trains", skipped.get("grad-in-eval", ""))

    def verify(self, program):
        r = subprocess.run([CLI, "diagnose", "--verify", "--json", "--", PYTHON,
                            os.path.join(SAMPLES, program + ".py")],
                           capture_output=True, text=True, cwd=self.dir)
        self.assertEqual(r.returncode, 0, r.stderr[-3000:])
        return json.loads(r.stdout)

    def test_verify_measures_a_run_time_fix_by_running_the_program_again(self):
        # stale-grads' fix applied from outside (gradients set to None after each step): the
        # peak it measures is the --fixed program's own, and the detector's saving agrees.
        d = self.verify("stale_grads")
        self.assertEqual([f["id"] for f in d["findings"]], ["stale-grads"])
        v = d["verified"][0]
        self.assertTrue(v["measured"], v)
        self.assertEqual(v["curve"], "allocated")
        _, fixed_trace = self.run_program("stale_grads", True, "step")
        self.assertAlmostEqual(v["peak_after_bytes"] / self.peak(fixed_trace), 1.0, delta=0.03)
        self.assertEqual(v["peak_before_bytes"] - v["peak_after_bytes"], v["saving_bytes"])
        self.assertAlmostEqual(v["saving_bytes"] / d["findings"][0]["bytes"], 1.0, delta=0.1)

    def test_verify_says_why_a_fix_that_rewrites_the_program_is_not_measured(self):
        d = self.verify("warmup_graph")
        self.assertEqual([f["id"] for f in d["findings"]], ["kept-graph"])
        v = d["verified"][0]
        self.assertFalse(v["measured"])
        self.assertIn("rewrites the program", v["why"])


if __name__ == "__main__":
    unittest.main(verbosity=2)
