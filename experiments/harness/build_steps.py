"""The build steps the command line's subcommands (cli*.py) share: running a command the
way the front door shows it ("+ ..." first, so any step can be repeated by hand from the
repository root), configuring and building with meson, and the libraries every variant
builds. Standard library only.
"""

from __future__ import annotations

import argparse
import json
import os
import shlex
import subprocess
from pathlib import Path

from . import allocators
from .interpreter import PACKAGE_ROOT, ROOT
from .options import BUILD_DIR

SELECTED_TARGET = "malloc"  # build/libmalloc.so: the container picked at setup
# A child Python that imports the package (the commands run at the repository root).
# (tools/runsel puts PACKAGE_ROOT on this process's path already: named once.)
PACKAGE_PATH = {"PYTHONPATH": ":".join([str(PACKAGE_ROOT.relative_to(ROOT)), *(
    part for part in os.environ.get("PYTHONPATH", "").split(":")
    if part and Path(part).resolve() != PACKAGE_ROOT)])}


class StepFailed(Exception):
    """A step could not be done; the message says which and why."""

    exit_code = 1


class InputRejected(StepFailed):
    """The input given cannot be used (missing, unreadable, malformed, too large); the
    message says why and where. The command exits 2."""

    exit_code = 2


# --- running commands -----------------------------------------------------------------


def show(command: list[str], env_changes: dict[str, str] | None = None) -> None:
    """Prints a command as it could be typed in a shell at the repository root."""
    prefix = [f"{name}={value}" for name, value in (env_changes or {}).items()]
    print("+ " + shlex.join(prefix + [str(part) for part in command]), flush=True)


def run(command: list[str], check: bool = True,
        env_changes: dict[str, str] | None = None) -> int:
    """Shows and runs a command with the terminal as its output; returns its exit code."""
    show(command, env_changes)
    env = {**os.environ, **env_changes} if env_changes else None
    code = subprocess.call([str(part) for part in command], env=env)
    if check and code != 0:
        raise StepFailed(f"{shlex.join(str(part) for part in command)} exited with {code}")
    return code


def capture_json(command: list[str]):
    """Runs a quiet query command (not shown: it changes nothing) and parses its JSON."""
    output = subprocess.run(command, check=True, capture_output=True, text=True).stdout
    return json.loads(output)


# --- configure and build --------------------------------------------------------------


def requested_options(args: argparse.Namespace) -> dict[str, str]:
    """The meson options asked for on the command line (others keep their value)."""
    options = {}
    if getattr(args, "container", None):
        options["run_container"] = args.container
    return options


def is_configured(build_dir: Path) -> bool:
    return (build_dir / "build.ninja").exists() and (
        build_dir / "meson-private" / "coredata.dat"
    ).exists()


def current_options(build_dir: Path) -> dict[str, str]:
    return {name: option_text(value) for name, value in allocators.build_options(build_dir).items()}


def option_text(value) -> str:
    """An option's value as it is written after -Dname= (lists space-separated)."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, list):
        return " ".join(map(str, value))
    return str(value)


def configure(build_dir: Path, options: dict[str, str],
              setup_env: dict[str, str] | None = None) -> bool:
    """meson setup on a new build directory (in setup_env, e.g. CXX); --reconfigure when an
    option changes. Returns whether meson ran (False: configured as asked already)."""
    defines = [f"-D{name}={value}" for name, value in options.items()]
    if not is_configured(build_dir):
        code = run(["meson", "setup", build_dir, *defines], check=False, env_changes=setup_env)
        if code != 0:
            raise StepFailed(f"meson setup {build_dir} failed ({code})")
        return True
    current = current_options(build_dir)
    changed = {name: value for name, value in options.items() if current.get(name) != value}
    if changed:
        run(["meson", "setup", "--reconfigure", build_dir, *defines])
        return True
    print(f"# {build_dir}/ is configured (run_container={current.get('run_container')})")
    return False


def build(build_dir: Path, outputs: list[Path] | None = None) -> None:
    """ninja on the given outputs (paths under build_dir), or on everything."""
    targets = [os.path.relpath(path, build_dir) for path in outputs or []]
    run(["ninja", "-C", build_dir, *targets])


# --- the libraries ------------------------------------------------------------------


def defines_output(build_dir: Path, output: Path) -> bool:
    wanted = output.resolve()
    return any(Path(name).resolve() == wanted
               for target in allocators.build_targets(build_dir) for name in target["filename"])


def variant_libraries(build_dir: Path) -> dict[str, Path]:
    """Every container's library, {container: build/libmalloc-<container>.so}, reference first."""
    targets = allocators.build_targets(build_dir)
    libraries = {name: root_relative(path)
                 for name, path in allocators.variant_files(targets).items()}
    if not libraries:
        raise StepFailed(f"meson defines no {allocators.VARIANT_TARGET_PREFIX}<container> library")
    return dict(sorted(libraries.items(), key=lambda item: item[0] != allocators.REFERENCE))


def selected_library(build_dir: Path) -> Path:
    """The file of build/libmalloc.so (a link to the file named with its version)."""
    for target in allocators.build_targets(build_dir):
        if target["type"] == "shared library" and target["name"] == SELECTED_TARGET:
            return root_relative(Path(target["filename"][0]))
    raise StepFailed(f"meson defines no {SELECTED_TARGET} library")


def build_libraries(args: argparse.Namespace, extra: list[Path] = ()) -> dict[str, Path]:
    """Builds every variant's library, build/libmalloc.so and `extra`; returns the variants."""
    libraries = variant_libraries(args.build_dir)
    build(args.build_dir, [*libraries.values(), selected_library(args.build_dir), *extra])
    return libraries


def root_relative(path: Path | None, default: Path = BUILD_DIR) -> Path:
    """A path given from the caller's directory, as the commands (run at the root) see it."""
    if path is None:
        return default
    absolute = path.resolve()
    return absolute.relative_to(ROOT) if absolute.is_relative_to(ROOT) else absolute
