"""The deterministic steps (exact replays, callgrind counts, counting replays) as tasks on
Dask distributed: a local cluster on this machine's cores by default, or an existing
cluster by its scheduler's address (`tools/runsel report --scheduler tcp://HOST:8786`),
whose workers see the same build and trace folders at the same paths and import this
package (started with PYTHONPATH=<repository>/experiments). Timed runs never go here:
their results depend on the load.

    configure(None | "tcp://host:8786")   before the first map (the harness does it)
    start(workers)                        a local cluster of fewer workers than cores
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
import threading
import time

_scheduler: str | None = None
_client = None
_cluster = None
_tasks: dict[str, dict] = {}  # {kind: {"tasks": N, "cpu": seconds}}
_tasks_lock = threading.Lock()  # maps may run in a thread beside the harness's timed runs
_reaped = 0.0  # CPU seconds of a local cluster's workers, reaped by this process at close()


class FanoutFailed(Exception):
    pass


def usable_cores() -> int:
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1


def configure(scheduler: str | None) -> None:
    """Which cluster the next map uses: None for a local one (started on first use)."""
    global _scheduler
    close()
    _scheduler = scheduler


def describe() -> dict:
    """Where the tasks ran, for results.json: the scheduler's address and its workers."""
    if _client is None:
        return {"engine": "dask.distributed", "scheduler": _scheduler or "local (not started)",
                "workers": None}
    info = _client.scheduler_info()
    return {"engine": "dask.distributed", "scheduler": info.get("address"),
            "local": _scheduler is None, "workers": len(info.get("workers", {})),
            "threads": sum(worker.get("nthreads", 0) for worker in info["workers"].values())}


def start(workers: int | None = None) -> None:
    """Connects now (from the calling thread): to the configured scheduler, or to a local
    cluster of `workers` worker processes (default: one per usable core). The harness
    starts one worker fewer than the cores while its timed runs hold the last one."""
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
    else:
        _cluster = LocalCluster(n_workers=workers or usable_cores(), threads_per_worker=1,
                                processes=True,
                                dashboard_address=None, silence_logs=logging.ERROR)
        _client = Client(_cluster)
    return _client


def children_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def measured(function):
    """function, returning (its result, the CPU seconds it took): its own thread's and
    those of the programs it started and waited for (a worker runs one task at a time)."""
    def run(item):
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
    futures = client().map(measured(function), items, pure=False)
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
    global _client, _cluster, _reaped
    before = children_cpu()
    if _client is not None:
        _client.close()
    if _cluster is not None:
        _cluster.close()
    _client = _cluster = None
    _reaped += children_cpu() - before
