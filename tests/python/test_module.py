"""The `tidemark` Python module (python/tidemark, docs/python.md), run by `make test` against
the build tree's `tidemark` (TIDEMARK_CLI): the real PyTorch snapshots opened without torch,
their peaks held against an independent Python replay of each file
(tests/importers/data/real_snapshots_expected.json); curves, top, steps, diagnose, predict and
the report on real files; bad input raised as TidemarkError with the command's message; and
`python -m tidemark record` running a script through `tidemark record -- python`."""
import json
import os
import subprocess
import sys
import tempfile
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
DATA = os.path.join(HERE, "..", "data")
sys.path.insert(0, os.path.join(HERE, "..", "..", "python"))

import tidemark  # noqa: E402


class Module(unittest.TestCase):
    def test_real_snapshots_open_without_torch_and_their_peaks_are_the_replays(self):
        with open(os.path.join(DATA, "..", "importers", "data", "real_snapshots_expected.json")) as f:
            expected = json.load(f)
        self.assertNotIn("torch", sys.modules)
        checked = 0
        for e in expected:
            path = os.path.join(DATA, "pytorch", e["source"])
            with tidemark.open(path) as run:
                peaks = run.peaks()
                for d in e["devices"]:
                    if d["device"] not in peaks:
                        continue
                    p = peaks[d["device"]]
                    self.assertEqual(p.requested, d["requested_peak"], (e["source"], d["device"]))
                    self.assertEqual(p.reserved, d["reserved_peak"], (e["source"], d["device"]))
                    if d["allocated_peak_exact"]:
                        self.assertEqual(p.allocated, d["allocated_peak"], (e["source"], d["device"]))
                    checked += 1
        self.assertGreaterEqual(checked, 8)
        self.assertNotIn("torch", sys.modules)

    def test_curves_top_steps_and_findings(self):
        run = tidemark.open(os.path.join(DATA, "pytorch", "niu_forward_and_backward_memory_snapshot_200.pickle"))
        t, reserved = run.curve("reserved", width=200)
        self.assertEqual(len(t), len(reserved))
        self.assertEqual(int(max(reserved)), run.peaks()["cuda:0"].reserved)
        self.assertTrue(all(int(b) >= int(a) for a, b in zip(t, t[1:])))
        top = run.top(by="site", limit=5)
        self.assertLessEqual(len(top), 5)
        self.assertTrue(all(g.bytes > 0 for g in top))
        self.assertEqual([g.bytes for g in top], sorted((g.bytes for g in top), reverse=True))
        steps = run.steps()
        self.assertGreaterEqual(len(steps), 2)  # three iterations, inferred
        findings = run.diagnose()
        ids = json.loads(tidemark.run("diagnose", run.path, "--json"))["findings"]
        self.assertEqual([f.id for f in findings], [f["id"] for f in ids])
        with tempfile.TemporaryDirectory() as d:
            html = run.report(os.path.join(d, "r.html"))
            with open(html) as f:
                self.assertIn("<svg", f.read())
        run.close()

    def test_predict_on_a_real_sweep(self):
        # One snapshot given as the runs at two sizes: every allocation is the same at both, so
        # each fits as a constant and the prediction at 4 is the run's own requested peak.
        path = os.path.join(DATA, "pytorch", "snapshot_small_gpu.pickle")
        run = tidemark.open(path)
        p = tidemark.predict({1: run, 2: run}, at=[4], capacity="80GiB")
        self.assertEqual(len(p), 1)
        self.assertEqual(p[0].peak_requested, run.peaks()["cuda:0"].requested)
        self.assertTrue(p[0].fits)

    def test_bad_input_raises_with_the_commands_message(self):
        with self.assertRaises(tidemark.TidemarkError) as e:
            tidemark.open("/no/such/file.pickle")
        self.assertIn("/no/such/file.pickle", str(e.exception))
        with tempfile.NamedTemporaryFile(suffix=".pickle") as f:
            f.write(b"this is not a pickle")
            f.flush()
            with self.assertRaises(tidemark.TidemarkError) as e:
                tidemark.open(f.name)
            self.assertEqual(e.exception.returncode, 2)
            self.assertIn(f.name, str(e.exception))
        run = tidemark.open(os.path.join(DATA, "pytorch", "snapshot_small_gpu.pickle"))
        with self.assertRaises(ValueError):
            run.curve("nope")

    def test_python_m_tidemark_record_runs_the_script_under_record(self):
        with tempfile.TemporaryDirectory() as d:
            out = os.path.join(d, "run.db")
            env = dict(os.environ, PYTHONPATH=os.pathsep.join(
                [os.path.join(HERE, "..", "..", "python"), os.path.join(DATA, "fake_torch")]))
            p = subprocess.run([sys.executable, "-m", "tidemark", "record", "-o", out,
                                os.path.join(DATA, "fake_torch", "programs", "train.py"), "train", "3"],
                               capture_output=True, text=True, env=env)
            self.assertEqual(p.returncode, 0, p.stderr)
            run = tidemark.open(out)
            self.assertEqual(len(run.steps()), 3)


if __name__ == "__main__":
    unittest.main()
