"""The tooling shipped to an existing Dask cluster, and its workers checked before the
first task: fanout does both when it connects to a scheduler, so a worker needs only
Dask and the build and trace folders at the client's paths (experiments/README.md,
"Fan-out").

    archive(folder)                    the tooling (harness, webkit) as a zip, named by digest
    expectation(build_dir, paths, programs, zip)  what every worker must have (worker_view)
    ship(client, zip)                  to every worker, and to every worker that joins later
    problems(client, expected)         {worker address: reason} of the workers that fail
    refusal(problems)                  the one line the report stops with
"""

from __future__ import annotations

import hashlib
import zipfile
from pathlib import Path

from . import worker_view
from .interpreter import PACKAGE_ROOT

ARCHIVE_PREFIX = "runsel-harness-"
# One registration per scheduler: a report replaces the previous report's copy.
PLUGIN_NAME = "runsel-harness"
WAIT_FOR_WORKERS = 30  # seconds a scheduler without workers gets to gain one
# The modules whose functions run as tasks (those that call fanout.fanned_map): each
# worker imports them all in its check, so a module the tasks need and the archive lacks
# is found before the first task.
TASK_MODULES = ("harness.fanout", "harness.runs", "harness.counting", "harness.replays",
                "harness.cost", "harness.webkit_record", "harness.behind_cache",
                "harness.firefox_workload", "harness.firefox_replay")


class NotShippable(Exception):
    pass


def package_files() -> list[str]:
    """The tooling's files, as paths under experiments/: its packages' Python and JSON."""
    return sorted(str(path.relative_to(PACKAGE_ROOT)) for package in worker_view.PACKAGES
                  for pattern in ("*.py", "*.json")
                  for path in (PACKAGE_ROOT / package).glob(pattern))


def archive(folder: Path) -> Path:
    """The tooling as a zip in `folder`, named after the digest of its files, so that a
    worker can tell the client's copy from any other it has imported."""
    files = package_files()
    digest = hashlib.sha256()
    for name in files:
        digest.update(name.encode() + b"\0" + (PACKAGE_ROOT / name).read_bytes() + b"\0")
    path = folder / f"{ARCHIVE_PREFIX}{digest.hexdigest()[:16]}.zip"
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as packed:
        for name in files:
            packed.write(PACKAGE_ROOT / name, name)
    return path


def expectation(build_dir: Path | None, paths: list[Path], programs: list[str],
                shipped: Path | None) -> dict:
    """What worker_view.problem checks on each worker: the client's own view of the build
    (its stamp), the paths the tasks read and the programs they run."""
    stamp = None
    if build_dir is not None:
        stamp = worker_view.read_stamp(str(build_dir))
        if stamp is None:
            raise NotShippable(f"{build_dir / worker_view.STAMP} is missing, so no worker's "
                               f"build can be compared with it (ninja -C {build_dir} "
                               f"{worker_view.STAMP})")
    seen = [str(build_dir)] if build_dir is not None else []
    for path in map(str, paths):
        if path not in seen:
            seen.append(path)
    return {"shipped": shipped.name if shipped else None, "modules": list(TASK_MODULES),
            "paths": seen,
            "programs": sorted(set(programs)),
            "build_dir": str(build_dir) if build_dir is not None else None, "stamp": stamp}


def ship(client, shipped: Path) -> None:
    """Dask's UploadFile worker plugin: each worker, now and when it joins, writes the
    zip into its own folder and puts it first on its import path."""
    import cloudpickle
    from distributed.diagnostics.plugin import UploadFile
    cloudpickle.register_pickle_by_value(worker_view)  # the check needs no package
    client.register_worker_plugin(UploadFile(str(shipped)), name=PLUGIN_NAME)


def problems(client, expected: dict) -> dict[str, str]:
    """{address: reason} of the workers that cannot serve; {"": reason} without workers."""
    try:
        client.wait_for_workers(1, timeout=WAIT_FOR_WORKERS)
    except Exception:  # noqa: BLE001 (the timeout's class differs by distributed version)
        return {"": f"the scheduler has had no worker for {WAIT_FOR_WORKERS} s"}
    found = client.run(worker_view.problem, expected, on_error="return")
    return {address: (f"its check failed ({type(reason).__name__}: {reason})"
                      if isinstance(reason, BaseException) else reason)
            for address, reason in sorted(found.items()) if reason}


def refusal(failed: dict[str, str], scheduler: str) -> str:
    """One line: the first worker that failed and why, and how many more did."""
    address, reason = next(iter(failed.items()))
    who = f"Dask worker {address}" if address else f"Dask scheduler {scheduler}"
    more = len(failed) - 1
    return (f"{who} cannot serve this report: {reason}"
            + (f" ({more} more worker{'s' if more > 1 else ''} fail too)" if more else "")
            + "; stopped before the first task: every worker must pass (experiments/"
              "README.md, \"Fan-out\")")
