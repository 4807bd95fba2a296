"""The `tidemark` Python module (python/tidemark, docs/python.md), run by `make test` against
the build tree's `tidemark` (TIDEMARK_CLI): the real PyTorch snapshots opened without torch,
their peaks held against an independent Python replay of each file
(tests/importers/data/real_snapshots_expected.json); curves, top, steps, diagnose, predict and
the report on real files; bad input raised as TidemarkError with the command's message; and
`python -m tidemark record` running a script through `tidemark record -- python`.

With TIDEMARK_TEST_INSTALLED (tests/python/run-installed.sh: the package installed into a venv)
the same tests run against that installation alone, and check that it is one: the module, its
native part and its command all from the venv's site-packages."""
import json
import os
import subprocess
import sys
import tempfile
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
DATA = os.path.join(HERE, "..", "data")
INSTALLED = os.environ.get("TIDEMARK_TEST_INSTALLED")
if not INSTALLED:
    sys.path.insert(0, os.path.join(HERE, "..", "..", "python"))

import tidemark  # noqa: E402


def _replayed_peaks():
    """Per real snapshot, its devices' peaks from an independent Python replay of the file."""
    with open(os.path.join(DATA, "..", "importers", "data", "real_snapshots_expected.json")) as f:
        return json.load(f)


class Module(unittest.TestCase):
    def test_real_snapshots_open_without_torch_and_their_peaks_are_the_replays(self):
        expected = _replayed_peaks()
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

    @unittest.skipIf(tidemark._native is None, "tidemark._native not built (no pybind11): every-change curves untested")
    def test_every_change_of_a_curve_reaches_the_replayed_peaks(self):
        checked = 0
        for e in _replayed_peaks():
            with tidemark.open(os.path.join(DATA, "pytorch", e["source"])) as run:
                for d in e["devices"]:
                    if d["device"] not in run.devices:
                        continue
                    t, requested = run.curve("requested", device=d["device"])
                    _, reserved = run.curve("reserved", device=d["device"])
                    _, allocated = run.curve("allocated", device=d["device"])
                    self.assertEqual(len(t), len(requested))
                    self.assertTrue(all(int(b) >= int(a) for a, b in zip(t, t[1:])), e["source"])
                    self.assertEqual(int(max(requested)), d["requested_peak"], (e["source"], d["device"]))
                    self.assertEqual(int(max(reserved)), d["reserved_peak"], (e["source"], d["device"]))
                    if d["allocated_peak_exact"]:
                        self.assertEqual(int(max(allocated)), d["allocated_peak"], (e["source"], d["device"]))
                    # The command's columns summarise the same changes: the same highest value,
                    # and each change's value within the range of its column.
                    tl = json.loads(tidemark.run("timeline", run.path, "--device", d["device"], "--width", "64",
                                                 "--json"))
                    self.assertEqual(max(tl["reserved"]["max"]), int(max(reserved)))
                    checked += 1
        self.assertGreaterEqual(checked, 8)
        run = tidemark.open(os.path.join(DATA, "pytorch", "snapshot_small_gpu.pickle"))
        with self.assertRaises(tidemark.TidemarkError) as e:
            run.curve("allocated", device="cuda:7")
        self.assertIn("cuda:7", str(e.exception))

    @unittest.skipUnless(INSTALLED, "run from the source tree (run-installed.sh runs it installed)")
    def test_the_installed_package_is_whole(self):
        site = os.path.realpath(INSTALLED)
        for path in (tidemark.__file__, tidemark._native.__file__, tidemark.executable()):
            self.assertTrue(os.path.realpath(path).startswith(site + os.sep), path)
        self.assertNotIn("TIDEMARK_CLI", os.environ)
        self.assertTrue(os.path.isfile(os.path.join(os.path.dirname(tidemark.executable()), "python",
                                                    "sitecustomize.py")))
        self.assertIn("tidemark", tidemark.run("--version").lower())

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

    def test_what_is_not_a_file_is_refused_at_once_as_a_tidemark_error(self):
        # Bug: open() on a FIFO blocked for good; a directory raised IsADirectoryError.
        with tempfile.TemporaryDirectory() as d:
            fifo = os.path.join(d, "pipe")
            os.mkfifo(fifo)
            for path in (fifo, d):
                with self.assertRaises(tidemark.TidemarkError) as e:
                    tidemark.open(path)
                self.assertIn("not a regular file", str(e.exception))
                self.assertEqual(e.exception.returncode, 2)

    def test_custom_categories_beside_a_snapshot_are_the_commands(self):
        # Rules beside the snapshot, not beside its temporary trace: the module's groups are
        # what the command says reading the snapshot itself.
        with tempfile.TemporaryDirectory() as d:
            snapshot = os.path.join(d, "run.pickle")
            with open(os.path.join(DATA, "pytorch", "snapshot_small_gpu.pickle"), "rb") as src, \
                    open(snapshot, "wb") as dst:
                dst.write(src.read())
            with open(os.path.join(d, "tidemark-categories.json"), "w") as f:
                json.dump({"engine": "autograd", "rest": "elsewhere"}, f)
            with tidemark.open(snapshot) as run:
                groups = {g.key: g.bytes for g in run.top(by="category")}
                self.assertEqual(set(groups), {"engine", "elsewhere"})
                cli = json.loads(tidemark.run("top", snapshot, "--by", "category", "--limit", "0", "--json"))
                self.assertEqual(groups, {g["key"]: g["bytes"] for g in cli["groups"]})
                self.assertEqual(sum(groups.values()), run.peaks()["cuda:0"].allocated)
            # A rules file anyone may write (planted in a shared folder) is refused, as the
            # command refuses it, naming it.
            os.chmod(os.path.join(d, "tidemark-categories.json"), 0o666)
            with self.assertRaises(tidemark.TidemarkError) as e:
                tidemark.open(snapshot)
            self.assertIn("anyone may write", str(e.exception))
            with self.assertRaises(tidemark.TidemarkError):
                tidemark.run("summary", snapshot)

    def test_predict_on_a_real_sweep(self):
        # One snapshot given as the runs at two sizes: every allocation is the same at both, so
        # each fits as a constant and the prediction at 4 is the run's own requested peak.
        path = os.path.join(DATA, "pytorch", "snapshot_small_gpu.pickle")
        run = tidemark.open(path)
        p = tidemark.predict({1: run, 2: run}, at=[4], capacity="80GiB")
        self.assertEqual(len(p), 1)
        self.assertEqual(p[0].peak_requested, run.peaks()["cuda:0"].requested)
        self.assertTrue(p[0].fits)
        run.close()

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
            path = [os.path.join(DATA, "fake_torch")]
            if not INSTALLED:
                path.insert(0, os.path.join(HERE, "..", "..", "python"))
            env = dict(os.environ, PYTHONPATH=os.pathsep.join(path))
            p = subprocess.run([sys.executable, "-m", "tidemark", "record", "-o", out,
                                os.path.join(DATA, "fake_torch", "programs", "train.py"), "train", "3"],
                               capture_output=True, text=True, env=env)
            self.assertEqual(p.returncode, 0, p.stderr)
            run = tidemark.open(out)
            self.assertEqual(len(run.steps()), 3)


if __name__ == "__main__":
    unittest.main()
