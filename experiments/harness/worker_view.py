"""What a Dask worker must have to serve the report, checked on the worker itself: the
tooling package (the copy the client shipped) importable, the build and trace folders
at the client's paths, the programs the tasks run (valgrind, ...) on its PATH, and a build
made from the client's commit (its build stamp).
Standard library only, and sent to the workers by value (fanout registers this module
with cloudpickle), so it runs on a worker that cannot import the package and says why.

    problem(expected) -> None, or the reason this worker cannot serve, in a few words
"""

from __future__ import annotations

import importlib
import os
import shutil
import stat
import sys

STAMP = "runsel-build-stamp"  # in the build folder, written by meson (tools/build_stamp.py)
PACKAGES = ("harness", "webkit")  # the tooling: experiments/'s packages the tasks import


def read_stamp(build_dir: str) -> str | None:
    try:
        with open(os.path.join(build_dir, STAMP), encoding="utf-8") as stamp:
            return stamp.read().strip()
    except OSError:
        return None


def forget_other_copies(shipped: str) -> None:
    """Drops the packages' modules loaded from anywhere but the shipped archive (an earlier
    client's, a PYTHONPATH checkout), so the next import takes the client's copy: a
    long-lived worker may have served another commit."""
    for name in [name for name in sys.modules
                 if name.split(".")[0] in PACKAGES]:
        if shipped not in (getattr(sys.modules[name], "__file__", None) or ""):
            del sys.modules[name]
    importlib.invalidate_caches()


def tooling_problem(shipped: str | None, modules: list[str]) -> str | None:
    """Whether every module the tasks run from imports, from the shipped copy."""
    if shipped:
        forget_other_copies(shipped)
    for name in modules:
        try:
            module = importlib.import_module(name)
        except Exception as failure:  # noqa: BLE001 (an import may raise anything: the reason)
            return f"cannot import the tooling's {name} ({type(failure).__name__}: {failure})"
        where = os.path.dirname(module.__file__ or "")
        if shipped and shipped not in where:
            return f"imports {name} from {where}, not from the copy the client shipped"
    return None


def path_problem(path: str) -> str | None:
    try:
        folder = stat.S_ISDIR(os.stat(path).st_mode)
    except OSError as failure:
        return f"cannot see {path} ({failure.strerror})"
    if not os.access(path, os.R_OK | (os.X_OK if folder else 0)):
        return f"cannot read {path}"
    return None


def stamp_problem(build_dir: str, expected: str) -> str | None:
    found = read_stamp(build_dir)
    if found is None:
        return f"its build {build_dir} has no {STAMP} (a build older than the client's)"
    if found != expected:
        return f"its build {build_dir} is from {found}, the client's from {expected}"
    return None


def problem(expected: dict) -> str | None:
    """expected: {"shipped": the archive's file name or None, "modules": the modules the
    tasks run from, "paths": folders and files the tasks read, "programs": commands the
    tasks run, "build_dir": str or None, "stamp": the client's build stamp}."""
    reason = tooling_problem(expected.get("shipped"), expected.get("modules", ()))
    for path in expected.get("paths", ()):
        reason = reason or path_problem(path)
    for program in expected.get("programs", ()):
        if reason is None and shutil.which(program) is None:
            reason = f"has no {program} on its PATH ({os.environ.get('PATH', '')})"
    if reason is None and expected.get("build_dir"):
        reason = stamp_problem(expected["build_dir"], expected["stamp"])
    return reason
