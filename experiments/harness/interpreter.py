"""Where the tooling lives and which Python runs it: the repository root, the package's
import root (experiments/), the environment a child Python needs to import the package,
and the switch to Debian's python3 when this one lacks a library. Standard library only.
"""

from __future__ import annotations

import importlib.util
import os
import sys
from pathlib import Path

PACKAGE_ROOT = Path(__file__).resolve().parent.parent  # experiments/: holds harness/
ROOT = PACKAGE_ROOT.parent  # the repository
SYSTEM_PYTHON = "/usr/bin/python3"  # Debian's, where python3-matplotlib, -scipy, -tabulate install


def package_environment(environment: dict[str, str] | None = None) -> dict[str, str]:
    """`environment` (default: this process's) with PYTHONPATH starting at PACKAGE_ROOT,
    so that `python3 -m harness.<module>` works from any directory."""
    environment = dict(os.environ if environment is None else environment)
    paths = [str(PACKAGE_ROOT)] + [part for part in environment.get("PYTHONPATH", "").split(":")
                                   if part and part != str(PACKAGE_ROOT)]
    environment["PYTHONPATH"] = ":".join(paths)
    return environment


def ensure_libraries(libraries: dict[str, str], who: str) -> None:
    """Re-runs the current program under Debian's python3 when this interpreter lacks one
    of `libraries` ({module: Debian package}): as `-m <module>` when it was started so,
    else as the same script; exits naming the packages when that one lacks them too."""
    missing = [name for name in libraries if importlib.util.find_spec(name) is None]
    if not missing:
        return
    if os.path.realpath(sys.executable) != os.path.realpath(SYSTEM_PYTHON) and \
            os.path.exists(SYSTEM_PYTHON):
        spec = getattr(sys.modules["__main__"], "__spec__", None)
        program = ["-m", spec.name] if spec is not None else [sys.argv[0]]
        os.execve(SYSTEM_PYTHON, [SYSTEM_PYTHON, *program, *sys.argv[1:]], package_environment())
    sys.exit(f"{who}: missing {', '.join(missing)} (Debian: apt-get install "
             f"{' '.join(libraries[name] for name in missing)})")
