"""What runsel's Python tools share (the harness, experiments/bench/compare.py,
tools/runsel): which allocators to compare and how a run proves which one served it,
what the build defines (meson introspection), the order of interleaved rounds, the
harness's run presets, and the checks of numeric options. Standard library only, so
tools/runsel can import it on a fresh machine.

runsel's variants are discovered from the build (meson's malloc-<container> libraries),
never listed by hand; the system allocators are found with ldconfig.
"""

from __future__ import annotations

import argparse
import ast
import importlib.util
import json
import os
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

HERE = Path(__file__).resolve().parent
REFERENCE = "rb_first"  # every runsel variant's time is compared with it
HARNESS = HERE / "harness.py"  # holds the run presets, DEFAULT and QUICK
SYSTEM_PYTHON = "/usr/bin/python3"  # Debian's, where python3-matplotlib, -scipy, -tabulate install
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
    name: str            # "rb_first", ..., "glibc", "jemalloc", "rb_first@purge:budget", ...
    runsel: bool         # runsel: a container variant, or one under a setting (has stats)
    preload: Path | None  # LD_PRELOAD, None for glibc
    # A setting other than the build's default ("purge:budget", "classes48"): the allocator
    # is then named "<container>@<setting>" and takes part in the timed runs and the
    # pictures, not in the container comparisons (verdict, replays, counters).
    setting: str | None = None
    environment: tuple[tuple[str, str], ...] = ()  # set for its runs (RUNSEL_CONF=...)

    @property
    def container(self) -> str | None:
        return container_of(self.name) if self.runsel else None

    @property
    def is_container(self) -> bool:
        """A container variant at the build's settings: what the verdict compares."""
        return self.runsel and self.setting is None

    def expected_identity(self) -> str:
        """What the workload's allocator detection must print for this allocator."""
        return f"runsel:{self.container}" if self.runsel else self.name

    def run_environment(self) -> dict[str, str]:
        return measured_environment(self.preload, **dict(self.environment))


SETTING_SEPARATOR = "@"
SETTING_TARGET_PREFIX = "setting-"  # setting-<setting>-<container>: a build option's library
PURGE_POLICIES = ("budget", "deferred", "decay")  # meson_options.txt purge_policy


def container_of(name: str) -> str:
    """"rb_first@purge:budget" -> "rb_first"; a container's own name unchanged."""
    return name.split(SETTING_SEPARATOR, 1)[0]


def is_setting(name: str) -> bool:
    return SETTING_SEPARATOR in name


def build_targets(build_dir: Path) -> list[dict]:
    """Every target the meson build defines (meson introspect --targets); raises
    OSError, subprocess.CalledProcessError or ValueError when it cannot say."""
    return json.loads(subprocess.run(["meson", "introspect", str(build_dir), "--targets"],
                                     check=True, capture_output=True, text=True).stdout)


def targets_named(targets: list[dict], prefix: str, kind: str) -> dict[str, Path]:
    """{name without prefix: file} of the targets of this kind ("shared library",
    "executable") whose name starts with prefix, in meson's order."""
    return {target["name"][len(prefix):]: Path(target["filename"][0]) for target in targets
            if target["type"] == kind and target["name"].startswith(prefix)}


def variant_files(targets: list[dict]) -> dict[str, Path]:
    """{container: its library} for every runsel variant among the targets (meson's
    malloc-<container>; the counting twins malloc-counting-<container> are not variants)."""
    return {name: path for name, path in
            targets_named(targets, VARIANT_TARGET_PREFIX, "shared library").items()
            if not (VARIANT_TARGET_PREFIX + name).startswith(COUNTING_TARGET_PREFIX)}


def runsel_variants(build_dir: Path) -> list[Allocator]:
    """Every container library the build defines, rb_first first, then meson's order."""
    try:
        found = variant_files(build_targets(build_dir))
    except (OSError, subprocess.CalledProcessError, ValueError):
        found = {path.name[len("lib" + VARIANT_TARGET_PREFIX):-len(".so")]: path
                 for path in sorted(build_dir.glob(f"lib{VARIANT_TARGET_PREFIX}*.so"))
                 if not path.name.startswith("lib" + COUNTING_TARGET_PREFIX)}
    ordered = sorted(found, key=lambda name: name != REFERENCE)
    return [Allocator(name, True, found[name].resolve()) for name in ordered]


def build_options(build_dir: Path) -> dict[str, object]:
    """{option: value} of the build (meson introspect --buildoptions); {} when unreadable."""
    try:
        options = json.loads(subprocess.run(
            ["meson", "introspect", str(build_dir), "--buildoptions"],
            check=True, capture_output=True, text=True).stdout)
    except (OSError, subprocess.CalledProcessError, json.JSONDecodeError):
        return {}
    return {option["name"]: option["value"] for option in options}


def setting_variants(build_dir: Path, variants: list[Allocator]) -> list[Allocator]:
    """The reference container under each purge policy other than the build's default
    (RUNSEL_CONF=purge:NAME, the same library), then every setting-<setting>-<container>
    library the build defines (a build option's library, e.g. other size classes)."""
    reference = next((v for v in variants if v.name == REFERENCE and v.is_container), None)
    default = build_options(build_dir).get("purge_policy")
    found = []
    if reference is not None and default in PURGE_POLICIES:
        found += [Allocator(f"{REFERENCE}{SETTING_SEPARATOR}purge:{policy}", True,
                            reference.preload, f"purge:{policy}",
                            (("RUNSEL_CONF", f"purge:{policy}"),))
                  for policy in PURGE_POLICIES if policy != default]
    for library in sorted(build_dir.glob(f"lib{SETTING_TARGET_PREFIX}*.so")):
        setting, _, container = library.name[len("lib" + SETTING_TARGET_PREFIX):-3].rpartition("-")
        if setting and container in {v.name for v in variants}:
            found.append(Allocator(f"{container}{SETTING_SEPARATOR}{setting}", True,
                                   library.resolve(), setting))
    return found


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
    wanted_purge = dict(allocator.environment).get("RUNSEL_CONF", "").partition("purge:")[2]
    if wanted_purge and reported.get("purge") != wanted_purge:
        return (f"asked for purge policy {wanted_purge}, the allocator runs "
                f"{reported.get('purge') or 'an unknown one'}")
    if allocator.preload is not None and provider:
        if Path(provider).resolve() != allocator.preload.resolve():
            return f"malloc comes from {provider}, not {allocator.preload}"
    return None


def round_order(allocators: list, round_index: int) -> list:
    """The allocators of an interleaved round (A B C, then B C A, ...): every round runs
    each once, so slow drifts of the machine hit all alike, and each round starts one
    later so that none always runs first."""
    shift = round_index % max(1, len(allocators))
    return allocators[shift:] + allocators[:shift]


def positive(kind):
    """An argparse type: a number of `kind` above 0 (0 would not be a run at all, and must
    not quietly become a preset)."""
    def parse(text: str):
        try:
            value = kind(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"not a number: {text!r}") from None
        if not value > 0:
            raise argparse.ArgumentTypeError(f"must be above 0, not {text}")
        return value
    parse.__name__ = kind.__name__
    return parse


def harness_presets() -> dict[str, dict]:
    """harness.py's run presets, {"DEFAULT": {...}, "QUICK": {...}}, read from its source
    without running it (it needs scipy and matplotlib; tools/runsel's help must not). A
    value that is not a literal, or a constant assigned before, is left out."""
    known: dict[str, object] = {}
    for node in ast.parse(HARNESS.read_text()).body:
        if isinstance(node, ast.Assign) and len(node.targets) == 1 and \
                isinstance(node.targets[0], ast.Name):
            value = _constant(node.value, known)
            if value is not _UNKNOWN:
                known[node.targets[0].id] = value
    return {name: known.get(name, {}) for name in ("DEFAULT", "QUICK")}


_UNKNOWN = object()


def _constant(node: ast.expr, known: dict[str, object]) -> object:
    """The value of a literal, of a name in `known`, of a sum of those, or of a dict of
    those (entries whose value is none of these are left out); _UNKNOWN otherwise."""
    if isinstance(node, ast.Name):
        return known.get(node.id, _UNKNOWN)
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add):  # ANCHORS + PEERS
        left, right = _constant(node.left, known), _constant(node.right, known)
        if left is _UNKNOWN or right is _UNKNOWN:
            return _UNKNOWN
        try:
            return left + right
        except TypeError:
            return _UNKNOWN
    if isinstance(node, ast.Dict):
        entries = {}
        for key, value in zip(node.keys, node.values):
            key, value = (_constant(key, known) if key is not None else _UNKNOWN,
                          _constant(value, known))
            if key is not _UNKNOWN and value is not _UNKNOWN:
                entries[key] = value
        return entries
    try:
        return ast.literal_eval(node)
    except (ValueError, TypeError, SyntaxError, MemoryError, RecursionError):
        return _UNKNOWN


def ensure_libraries(libraries: dict[str, str], who: str) -> None:
    """Re-runs the current script under Debian's python3 when this interpreter lacks one
    of `libraries` ({module: Debian package}); exits naming the packages when that one
    lacks them too."""
    missing = [name for name in libraries if importlib.util.find_spec(name) is None]
    if not missing:
        return
    if os.path.realpath(sys.executable) != os.path.realpath(SYSTEM_PYTHON) and \
            os.path.exists(SYSTEM_PYTHON):
        os.execv(SYSTEM_PYTHON, [SYSTEM_PYTHON, sys.argv[0], *sys.argv[1:]])
    sys.exit(f"{who}: missing {', '.join(missing)} (Debian: apt-get install "
             f"{' '.join(libraries[name] for name in missing)})")
