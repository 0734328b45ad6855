"""Which allocators the harness compares, and how a run proves which one served it.

runsel's variants are discovered from the build (meson's malloc-<container> libraries),
never listed by hand; the system allocators are found with ldconfig.
"""

from __future__ import annotations

import json
import os
import subprocess
from dataclasses import dataclass
from pathlib import Path

REFERENCE = "rb_first"  # every runsel variant's time is compared with it
VARIANT_TARGET_PREFIX = "malloc-"
COUNTING_TARGET_PREFIX = "malloc-counting-"  # a variant's counting twin, not a variant
# (allocator, shared object ldconfig knows it by). glibc needs no preload.
SYSTEM_ALLOCATORS = (
    ("jemalloc", "libjemalloc.so.2"),
    ("mimalloc", "libmimalloc.so.2"),
    ("tcmalloc", "libtcmalloc_minimal.so.4"),
)


# Variables that change how the measured allocator behaves, never passed on to a measured
# run: the preload and runsel's own switches are set per run, and glibc's debugging knobs
# (meson test sets MALLOC_PERTURB_ to a random byte) add a memset to every malloc and free.
# MALLOC_PERTURB_ also crashes Mesa's software renderer in WebKit's compositor thread now
# and then (a read of memory Mesa never initialized), failing a browser run that is fine.
MEASURED_RUN_DROPS = ("LD_PRELOAD", "RUNSEL_STATS", "RUNSEL_TRACE", "RUNSEL_TRACE_MARKS",
                      "MALLOC_PERTURB_", "MALLOC_CHECK_")


def measured_environment(preload: Path | None = None, **changes: str) -> dict[str, str]:
    """This process's environment for a measured run: MEASURED_RUN_DROPS removed, then
    LD_PRELOAD=preload (none: the system allocator) and the given variables set."""
    environment = {k: v for k, v in os.environ.items() if k not in MEASURED_RUN_DROPS}
    if preload is not None:
        environment["LD_PRELOAD"] = str(preload)
    environment.update(changes)
    return environment


@dataclass(frozen=True)
class Allocator:
    name: str            # "rb_first", ..., "glibc", "jemalloc", ...
    runsel: bool         # a runsel variant (has stats and chunk maps)
    preload: Path | None  # LD_PRELOAD, None for glibc

    def expected_identity(self) -> str:
        """What the workload's allocator detection must print for this allocator."""
        return f"runsel:{self.name}" if self.runsel else self.name


def runsel_variants(build_dir: Path) -> list[Allocator]:
    """Every container library the build defines, rb_first first, then meson's order."""
    try:
        targets = json.loads(subprocess.run(
            ["meson", "introspect", str(build_dir), "--targets"],
            check=True, capture_output=True, text=True).stdout)
        found = {target["name"][len(VARIANT_TARGET_PREFIX):]: Path(target["filename"][0])
                 for target in targets
                 if target["type"] == "shared library"
                 and target["name"].startswith(VARIANT_TARGET_PREFIX)
                 and not target["name"].startswith(COUNTING_TARGET_PREFIX)}
    except (OSError, subprocess.CalledProcessError, json.JSONDecodeError):
        found = {path.name[len("lib" + VARIANT_TARGET_PREFIX):-len(".so")]: path
                 for path in sorted(build_dir.glob(f"lib{VARIANT_TARGET_PREFIX}*.so"))
                 if not path.name.startswith("lib" + COUNTING_TARGET_PREFIX)}
    ordered = sorted(found, key=lambda name: name != REFERENCE)
    return [Allocator(name, True, found[name].resolve()) for name in ordered]


def same_choice_groups(build_dir: Path) -> list[list[str]]:
    """The containers that pick alike, as meson.build's container table says (the build
    writes it to memory/containers/containers.json): every group of two or more, in the
    table's order. They must make identical choices, so identical runsel stats."""
    listing = build_dir / "memory" / "containers" / "containers.json"
    try:
        entries = json.loads(listing.read_text())["containers"]
    except (OSError, ValueError, KeyError) as error:
        raise SystemExit(f"harness: cannot read the container table from {listing}: {error} "
                         f"(configure the build with meson first)")
    groups: dict[str, list[str]] = {}
    for entry in entries:
        groups.setdefault(entry["picks"], []).append(entry["name"])
    return [names for names in groups.values() if len(names) > 1]


def built_same_choice_groups(build_dir: Path, variants: list[str]) -> list[list[str]]:
    """same_choice_groups, keeping the built variants (groups left with two or more)."""
    groups = [[name for name in group if name in variants]
              for group in same_choice_groups(build_dir)]
    return [group for group in groups if len(group) > 1]


def system_library(soname: str) -> Path | None:
    """The path ldconfig knows `soname` by, or None when it is not installed."""
    try:
        cache = subprocess.run(["ldconfig", "-p"], capture_output=True, text=True).stdout
    except OSError:
        cache = ""
    matches = [line.strip() for line in cache.splitlines()
               if line.strip().split(" ")[0] == soname]
    for line in sorted(matches, key=lambda line: "x86-64" not in line):
        path = Path(line.partition(" => ")[2].strip())
        if path.exists():
            return path
    return None


def system_allocators() -> tuple[list[Allocator], list[str]]:
    """glibc and every installed system allocator; also the names that are missing."""
    present, missing = [Allocator("glibc", False, None)], []
    for name, soname in SYSTEM_ALLOCATORS:
        path = system_library(soname)
        if path is None:
            missing.append(name)
        else:
            present.append(Allocator(name, False, path))
    return present, missing


def identity_problem(allocator: Allocator, reported: dict) -> str | None:
    """Why a run's reported allocator is not the one asked for; None when it is."""
    name, provider = reported.get("name", ""), reported.get("provider", "")
    if name != allocator.expected_identity():
        return f"asked for {allocator.expected_identity()}, malloc served by {name or '?'}"
    if allocator.preload is not None and provider:
        if Path(provider).resolve() != allocator.preload.resolve():
            return f"malloc comes from {provider}, not {allocator.preload}"
    return None
