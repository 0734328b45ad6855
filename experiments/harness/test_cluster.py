"""Dask workers that need nothing but Dask (meson test `cluster`, suite default): a
`dask scheduler` and a `dask worker` started here on loopback, the worker with no
PYTHONPATH and a working folder outside the repository.

- The report's trace step (the exact replays of one small trace on rb_first, twice) runs
  on that worker, from the tooling the client shipped, and gives the figures a replay
  here gives.
- The report (python3 -m harness.harness) given a build folder the worker cannot see
  stops before its first task with exit code 2 and one line naming the worker and the
  folder. The folder is /proc/self/cwd/<build>: the build for the report, started in the
  build's parent folder, and nothing for the worker, started elsewhere: one path, two
  views, as on two machines.
- A worker without a program the tasks run (valgrind, ...) is refused the same way, and
  a worker that joins after the check is checked at its first task, which it refuses.

Skipped (exit 77) only when Dask distributed or its `dask` command is missing.

    python3 -m harness.test_cluster --build-dir build   (PYTHONPATH=experiments)
"""

from __future__ import annotations

import argparse
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import unittest
from pathlib import Path

from . import fanout, replays, shipping
from .interpreter import PACKAGE_ROOT, ROOT

BUILD_DIR = Path("build")
SKIP = 77  # meson's exit code for a skipped test
REFUSAL = "harness: Dask worker "
LOGS: list[str] = []  # what the scheduler and the worker printed, shown when a test fails
LOG = "".join(f"7 1 malloc({16 * (i % 40 + 1)})=0x{(i + 1) << 12:x}\n" for i in range(300)) + \
    "7 1 jemalloc_stats()\n" + "".join(f"7 1 free(0x{(i + 1) << 12:x})\n" for i in range(0, 300, 2))


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


class Cluster:
    """A scheduler and single-threaded workers, each in a session of its own, stopped by
    their process ids. A worker's environment holds PATH and HOME only."""

    def __init__(self, folder: Path):
        self.folder, self.processes = folder, []
        self.address = f"tcp://127.0.0.1:{free_port()}"
        self.start("scheduler", ["scheduler", "--host", "127.0.0.1", "--port",
                                 self.address.rsplit(":", 1)[1], "--no-dashboard"], os.environ)
        self.add_worker("worker")

    def add_worker(self, name: str, path: str = "/usr/bin:/bin") -> subprocess.Popen:
        where = self.folder / name
        where.mkdir()
        return self.start(name, ["worker", self.address, "--host", "127.0.0.1", "--nworkers",
                                 "1", "--nthreads", "1", "--no-dashboard", "--local-directory",
                                 str(where)], {"PATH": path, "HOME": str(where)}, where)

    def start(self, name: str, arguments: list[str], environment, where: Path | None = None):
        log = open(self.folder / f"{name}.log", "wb")
        self.processes.append(subprocess.Popen(
            [shutil.which("dask"), *arguments], stdout=log, stderr=subprocess.STDOUT,
            env=dict(environment), cwd=where or self.folder, start_new_session=True))
        log.close()
        return self.processes[-1]

    def wait_for_workers(self, count: int = 1, seconds: float = 180) -> None:
        from distributed import Client
        with Client(self.address, timeout="60s") as client:
            client.wait_for_workers(count, timeout=seconds)
            deadline = time.monotonic() + seconds  # and no more (one was stopped)
            while len(client.scheduler_info()["workers"]) > count:
                if time.monotonic() > deadline:
                    raise AssertionError(f"still more than {count} workers")
                time.sleep(0.2)

    @staticmethod
    def stop_one(process: subprocess.Popen) -> None:
        if process.poll() is None:
            os.killpg(process.pid, signal.SIGTERM)  # its own session: the nanny's child too
        try:
            process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, signal.SIGKILL)
            process.wait()

    def logs(self) -> str:
        return "".join(f"--- {path.name}\n{path.read_text(errors='replace')[-3000:]}"
                       for path in sorted(self.folder.glob("*.log")))

    def stop(self) -> None:
        for process in reversed(self.processes):
            self.stop_one(process)


def tasks_run(kind: str) -> int:
    """How many tasks of this kind fanout has run so far, in this process."""
    return fanout.task_cpu().get(kind, {}).get("tasks", 0)


class Workers(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.build = BUILD_DIR.resolve()
        cls.scratch = tempfile.TemporaryDirectory(prefix="runsel-cluster-test-")
        folder = Path(cls.scratch.name)
        log = folder / "small.log"
        log.write_text(LOG)
        cls.trace = folder / "small.trace"
        subprocess.run([str(cls.build / "tools" / "runsel-trace-convert"), "from-logalloc",
                        str(log), str(cls.trace)], check=True, capture_output=True)
        cls.cluster = Cluster(folder)
        try:
            cls.cluster.wait_for_workers()
        except Exception:
            cls.cluster.stop()
            LOGS.append(cls.cluster.logs())
            raise

    @classmethod
    def tearDownClass(cls):
        fanout.close()
        cls.cluster.stop()
        LOGS.append(cls.cluster.logs())
        cls.scratch.cleanup()

    def tearDown(self):
        fanout.close()

    def test_the_trace_step_runs_on_a_worker_with_nothing_but_dask(self):
        fanout.configure(self.cluster.address, self.build)
        fanout.start(shared=[self.trace])
        before = tasks_run("exact replay (--trace)")  # the tally spans the tests
        entry = replays.exact_replay_summary(self.trace, self.build, containers=["rb_first"],
                                             cost_records=None, counters=False)
        exact = entry["allocators"]["rb_first"]["exact"]
        self.assertIs(exact["repeated_identical"], True)
        here = replays.replay_once(self.build / "tools" / "runsel-replay-rb_first", self.trace, 120)
        self.assertEqual(exact["checkpoints"], replays.exact_figures(here, None)["checkpoints"])
        self.assertEqual(tasks_run("exact replay (--trace)") - before, 2)
        where = fanout.describe()
        self.assertEqual((where["local"], where["workers"]), (False, 1))
        # The worker's view: no PYTHONPATH, outside the repository, the shipped copy.
        seen = list(fanout.client().run(lambda: (
            os.environ.get("PYTHONPATH"), os.getcwd(),
            sys.modules["harness.replays"].__file__)).values())
        self.assertEqual(len(seen), 1)
        python_path, folder, module = seen[0]
        self.assertIsNone(python_path)
        self.assertFalse(Path(folder).is_relative_to(ROOT), folder)
        self.assertIn("/runsel-harness-", module)
        self.assertIn("/runsel-harness-", fanout.client().run(
            lambda: sys.modules["webkit"].__file__).popitem()[1])
        self.assertFalse(Path(module).is_relative_to(PACKAGE_ROOT), module)

    def test_the_cost_step_counts_both_builds_on_a_worker(self):
        """The callgrind counts run on the worker, on the as-shipped profiling twin and on
        the hardened one (cost.BUILDS), from the build folder it sees."""
        fanout.configure(self.cluster.address, self.build)
        fanout.start(shared=[self.trace], programs=["valgrind"])
        before = tasks_run("callgrind cost (--trace)")
        entry = replays.exact_replay_summary(self.trace, self.build, containers=["lifo"],
                                             cost_records=1000, counters=False)
        pair = entry["allocators"]["lifo"]
        for build in ("cost", "cost_hardened"):
            self.assertNotIn("error", pair[build] or {"error": "not measured"}, pair[build])
            self.assertGreater(pair[build]["calls"], 0)
        self.assertEqual(pair["cost"]["calls"], pair["cost_hardened"]["calls"])
        self.assertEqual(tasks_run("callgrind cost (--trace)") - before, 2)

    def test_the_report_stops_when_a_worker_cannot_see_the_build(self):
        hidden = f"/proc/self/cwd/{self.build.name}"  # the build here, nothing on the worker
        with tempfile.TemporaryDirectory(prefix="runsel-cluster-report-") as out:
            done = subprocess.run(
                [sys.executable, "-m", "harness.harness", "--quick", "--build-dir", hidden,
                 "--scheduler", self.cluster.address, "--workload", "sweep", "--allocator",
                 "rb_first", "--instructions", "off", "--counters", "off", "--out", out],
                cwd=self.build.parent, capture_output=True, text=True, timeout=300,
                env={**os.environ, "PYTHONPATH": str(PACKAGE_ROOT)})
        self.assertNotIn("Traceback", done.stderr)
        self.assertEqual(done.returncode, 2, done.stderr)
        refused = [line for line in done.stderr.splitlines() if line.startswith(REFUSAL)]
        self.assertEqual(len(refused), 1, done.stderr)
        self.assertTrue(done.stderr.rstrip().endswith(refused[0]), done.stderr)
        self.assertRegex(refused[0], r"^harness: Dask worker tcp://127\.0\.0\.1:\d+ cannot serve "
                                     r"this report: cannot see /proc/self/cwd/")
        self.assertIn(f"cannot see {hidden} (No such file or directory)", refused[0])
        self.assertIn("stopped before the first task", refused[0])

    def test_a_worker_without_a_program_the_tasks_run_is_refused(self):
        fanout.configure(self.cluster.address, self.build)
        with self.assertRaises(fanout.WorkerRefused) as refused:
            fanout.start(shared=[self.trace], programs=["runsel-no-such-program"])
        self.assertIn("has no runsel-no-such-program on its PATH (/usr/bin:/bin)",
                      str(refused.exception))
        self.assertNotIn("\n", str(refused.exception))


class LaterWorker(unittest.TestCase):
    def test_a_worker_that_joins_after_the_check_is_checked_at_its_first_task(self):
        # Worker A passes the check; B joins later with a PATH where setarch is not; A
        # stops, so the tasks go to B, whose first task refuses in one line.
        build = BUILD_DIR.resolve()
        scratch = tempfile.TemporaryDirectory(prefix="runsel-cluster-later-")
        self.addCleanup(scratch.cleanup)
        cluster = Cluster(Path(scratch.name))
        self.addCleanup(lambda: LOGS.append(cluster.logs()))
        self.addCleanup(cluster.stop)
        self.addCleanup(fanout.close)
        cluster.wait_for_workers(1)
        fanout.configure(cluster.address, build)
        fanout.start(programs=["setarch"])
        cluster.add_worker("later", path="/runsel-nothing-here")
        cluster.wait_for_workers(2)
        cluster.stop_one(cluster.processes[1])  # worker A
        cluster.wait_for_workers(1)
        with self.assertRaises(fanout.WorkerRefused) as refused:
            fanout.fanned_map(len, ["one task"])
        self.assertRegex(str(refused.exception),
                         r"^Dask worker tcp://127\.0\.0\.1:\d+, which joined after the check, "
                         r"cannot serve this report: has no setarch on its PATH "
                         r"\(/runsel-nothing-here\)$")


class TaskModules(unittest.TestCase):
    def test_every_module_that_fans_out_is_imported_by_the_check(self):
        # A task runs functions of the module that maps it: the check must import that
        # module on each worker (shipping.TASK_MODULES), or a missing import (a package the
        # archive lacks) would surface only at the first task.
        fanning = {f"harness.{path.stem}" for path in (PACKAGE_ROOT / "harness").glob("*.py")
                   if "fanned_map(" in path.read_text() and not path.stem.startswith("test_")}
        self.assertLessEqual(fanning, set(shipping.TASK_MODULES))


def main() -> int:
    global BUILD_DIR
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--build-dir", type=Path, default=BUILD_DIR)
    args, rest = parser.parse_known_args()
    BUILD_DIR = args.build_dir
    try:
        import distributed  # noqa: F401 (imported only to learn whether it is installed)
    except ImportError:
        print("skipped: Dask distributed is not installed (Debian: python3-distributed)")
        return SKIP
    if shutil.which("dask") is None:
        print("skipped: no `dask` command on PATH (Debian: python3-distributed)")
        return SKIP
    started = time.monotonic()
    result = unittest.main(argv=[sys.argv[0], *rest], exit=False).result
    print(f"cluster tests: {time.monotonic() - started:.1f} s")
    if not result.wasSuccessful():
        print("".join(LOGS), file=sys.stderr)
    return 0 if result.wasSuccessful() else 1


if __name__ == "__main__":
    sys.exit(main())
