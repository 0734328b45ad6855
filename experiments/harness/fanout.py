"""The deterministic steps (exact replays, callgrind counts, counting replays) as tasks on
Dask distributed: a local cluster on this machine's cores by default, or an existing
cluster by its scheduler's address (`tools/runsel report --scheduler tcp://HOST:8786`),
whose workers see the same build and trace folders at the same paths. On connecting to
a cluster, the client ships this package to every worker, present and joining later,
and checks every worker before the first task (shipping.py, worker_view.py): a worker
needs only Dask. Timed runs never go here: their results depend on the load.

    configure(None | "tcp://host:8786", build_dir)  before the first map (the harness does it)
    start(workers, shared, programs)      a local cluster of fewer workers than cores; or
                                          the cluster's workers checked: they see the build
                                          and `shared` (the traces), run `programs`, and
                                          have the client's commit
    widen()                               ... grown to one worker per core
    fanned_map(function, items, done, kind)  [function(item) for item in items], spread
    task_cpu()                            CPU seconds the tasks took, by kind
    close()                               at the end of the run

Each task's CPU seconds (its own thread's and those of the programs it waited for) are
measured where it runs and summed here by kind, so the harness's per-step CPU figures
include the work done on the workers, which its own getrusage cannot see.
"""

from __future__ import annotations

import logging
import os
import resource
import tempfile
import threading
import time
from pathlib import Path

from . import shipping, worker_view

_scheduler: str | None = None
_build_dir: Path | None = None
_shared: list[Path] = []  # besides the build: the trace files and folders the tasks read
_programs: list[str] = []  # the commands the tasks run (valgrind, ...)
_expected: dict | None = None  # what each worker must see (worker_view); None: local cluster
_served: dict[str, str | None] = {}  # on a worker: worker_view's verdict, by expectation
_client = None
_cluster = None
_tasks: dict[str, dict] = {}  # {kind: {"tasks": N, "cpu": seconds}}
_tasks_lock = threading.Lock()  # maps may run in a thread beside the harness's timed runs
_reaped = 0.0  # CPU seconds of a local cluster's workers, reaped by this process at close()


class FanoutFailed(Exception):
    pass


class WorkerRefused(FanoutFailed):
    """A worker of the cluster cannot serve the report: one line, its address and why."""


def usable_cores() -> int:
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1


def configure(scheduler: str | None, build_dir: Path | None = None) -> None:
    """Which cluster the next map uses: None for a local one (started on first use). A
    cluster's workers must see `build_dir` (checked, with its build stamp)."""
    global _scheduler, _build_dir
    close()
    _scheduler, _build_dir = scheduler, build_dir
    _shared.clear()
    _programs.clear()


def describe() -> dict:
    """Where the tasks ran, for results.json: the scheduler's address and its workers, and
    on a cluster what its workers were checked against (the tooling's copy, the build's
    stamp, the paths and programs)."""
    if _client is None:
        return {"engine": "dask.distributed", "scheduler": _scheduler or "local (not started)",
                "workers": None}
    info = _client.scheduler_info()
    checked = None if _expected is None else {
        "tooling": _expected["shipped"], "build_stamp": _expected["stamp"],
        "paths": len(_expected["paths"]), "programs": _expected["programs"]}
    return {"engine": "dask.distributed", "scheduler": info.get("address"),
            "local": _scheduler is None, "workers": len(info.get("workers", {})),
            "threads": sum(worker.get("nthreads", 0) for worker in info["workers"].values()),
            "checked": checked}


def start(workers: int | None = None, shared: list[Path] = (), programs: list[str] = ()) -> None:
    """Connects now (from the calling thread): to the configured scheduler, whose workers
    must see the build and every path of `shared`, and find every command of `programs`
    on their PATH (WorkerRefused otherwise), or to a local
    cluster of `workers` worker processes (default: one per usable core). The harness
    starts one worker fewer than the cores while its timed runs hold the last one."""
    _shared.extend(path for path in shared if path not in _shared)
    _programs.extend(program for program in programs if program not in _programs)
    client(workers)


def widen() -> None:
    """A local cluster grown to one worker per usable core (the timed runs are over)."""
    if _cluster is not None and len(_cluster.workers) < usable_cores():
        _cluster.scale(usable_cores())


def client(workers: int | None = None):
    """The Dask client: to the configured scheduler, or to a local cluster of one single-
    threaded worker process per usable core (each task keeps one core busy with the
    subprocess it runs), or of `workers` when it is started first (start)."""
    global _client, _cluster
    if _client is not None:
        return _client
    try:
        from distributed import Client, LocalCluster
    except ImportError as failure:
        raise FanoutFailed("Dask distributed is missing (Debian: apt-get install "
                           "python3-distributed; tools/runsel installs it)") from failure
    if _scheduler:
        try:
            _client = Client(_scheduler, timeout="20s")
        except OSError as failure:
            raise FanoutFailed(f"cannot reach the Dask scheduler at {_scheduler}: "
                               f"{failure}") from failure
        prepare_cluster()
    else:
        _cluster = LocalCluster(n_workers=workers or usable_cores(), threads_per_worker=1,
                                processes=True,
                                dashboard_address=None, silence_logs=logging.ERROR)
        _client = Client(_cluster)
    return _client


def prepare_cluster() -> None:
    """Ships the package to the cluster and checks every worker (the client connected)."""
    global _expected
    try:
        with tempfile.TemporaryDirectory(prefix="runsel-ship-") as folder:
            shipped = shipping.archive(Path(folder))
            expected = shipping.expectation(_build_dir, _shared, _programs, shipped)
            shipping.ship(_client, shipped)
    except shipping.NotShippable as failure:
        close()
        raise FanoutFailed(str(failure)) from failure
    failed = shipping.problems(_client, expected)
    if failed:
        close()
        raise WorkerRefused(shipping.refusal(failed, _scheduler))
    _expected = expected


def serve_or_refuse(expected: dict) -> None:
    """On a worker, before its task: the check of prepare_cluster, once per process, for
    a worker that joined after it (WorkerRefused names the worker and the reason)."""
    key = repr(sorted(expected.items()))
    if key not in _served:
        _served[key] = worker_view.problem(expected)
    if _served[key]:
        from distributed import get_worker
        raise WorkerRefused(f"Dask worker {get_worker().address}, which joined after the "
                            f"check, cannot serve this report: {_served[key]}")


def children_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def measured(function, expected: dict | None = None):
    """function, returning (its result, the CPU seconds it took): its own thread's and
    those of the programs it started and waited for (a worker runs one task at a time).
    With `expected`, the worker is checked first (serve_or_refuse)."""
    def run(item):
        if expected is not None:
            serve_or_refuse(expected)
        thread, children = time.thread_time(), children_cpu()
        result = function(item)
        return result, time.thread_time() - thread + children_cpu() - children
    return run


def fanned_map(function, items: list, done=None, kind: str = "other") -> list:
    """[function(item) for item in items], as tasks on the cluster: only for work whose
    results do not depend on the machine's load. done(item, result) is called in the order
    the tasks finish; an exception raised by a task is raised here. Functions and items
    must be picklable (cloudpickle: closures are). The tasks' CPU seconds count under
    `kind` in task_cpu()."""
    if not items:
        return []
    from distributed import as_completed
    futures = client().map(measured(function, _expected), items, pure=False)
    where = {future.key: index for index, future in enumerate(futures)}
    results = [None] * len(items)
    for future in as_completed(futures):
        index = where[future.key]
        results[index], seconds = future.result()
        with _tasks_lock:
            tally = _tasks.setdefault(kind, {"tasks": 0, "cpu": 0.0})
            tally["tasks"] += 1
            tally["cpu"] += seconds
        if done:
            done(items[index], results[index])
    return results


def task_cpu() -> dict[str, dict]:
    """{kind: {"tasks": N, "cpu": seconds}} of every task run so far."""
    with _tasks_lock:
        return {kind: dict(tally) for kind, tally in _tasks.items()}


def tasks_cpu_total() -> float:
    with _tasks_lock:
        return sum(tally["cpu"] for tally in _tasks.values())


def reaped_cpu() -> float:
    """CPU seconds this process's RUSAGE_CHILDREN gained when a local cluster's workers
    exited (close()): the tasks' (already in task_cpu()) and the workers' own start-up and
    bookkeeping."""
    return _reaped


def close() -> None:
    global _client, _cluster, _reaped, _expected
    before = children_cpu()
    if _client is not None:
        _client.close()
    if _cluster is not None:
        _cluster.close()
    _client = _cluster = _expected = None
    _reaped += children_cpu() - before
