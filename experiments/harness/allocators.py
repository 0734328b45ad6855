"""Allocator discovery, shared by the harness, experiments/bench/compare.py and
tools/runsel: which allocators to compare and how a run proves which one served it,
what the build defines (meson introspection) and the order of interleaved rounds.
Standard library only, so tools/runsel can import it on a fresh machine.

runsel's variants are discovered from the build (meson's malloc-<container> libraries),
never listed by hand; the system allocators are found with ldconfig.
"""

from __future__ import annotations

import json
import os
import subprocess
from dataclasses import dataclass
from pathlib import Path

REFERENCE = "rb_first"  # every runsel variant is compared with it
# mozjemalloc's bin as Firefox shipped it until 2024 (its tree era): the baseline of Mozilla
# bug 1857133's published figures, so the verdict judges them against it where replayed.
AS_BUILT = "moz_tree"
GLIBC = "glibc"  # the system's own malloc: no preload
# The container Firefox's allocator uses today: the Firefox workload sets it beside the
# reference replay on Firefox's own allocator.
FIREFOX_MATCHING = "lifo"
# (allocator, shared object ldconfig knows it by): the peers tools/runsel installs.
SYSTEM_ALLOCATORS = (
    ("jemalloc", "libjemalloc.so.2"),
    ("mimalloc", "libmimalloc.so.2"),
    ("tcmalloc", "libtcmalloc_minimal.so.4"),
)
PEERS = tuple(name for name, _ in SYSTEM_ALLOCATORS)
# The build's targets (meson.build, experiments/meson.build, tools/meson.build).
VARIANT_TARGET_PREFIX = "malloc-"
COUNTING_TARGET_PREFIX = "malloc-counting-"  # a variant's counting twin, not a variant
WORKLOAD_PREFIX = "workload_"  # build/experiments/workload_<name>
RECORDER_TARGET = "runsel-trace"  # build/tools/librunsel-trace.so
REPLAYER_PREFIX = "runsel-replay-"  # build/tools/runsel-replay-<container>
# The replayer on a container's library with the thread cache on (setting-tcache-<c>):
# build/tools/runsel-cached-replay-<container>; its profiling twin is the container
# "cached-<container>" of cost.py's names (runsel-profile-replay-cached-<container>).
CACHED_REPLAYER_PREFIX = "runsel-cached-replay-"
# Each container's as-shipped twin (no link verification): build/libshipped-malloc-<c>.so
# and build/tools/runsel-shipped-replay-<c>.
SHIPPED_TARGET_PREFIX = "shipped-malloc-"
SHIPPED_REPLAYER_PREFIX = "runsel-shipped-replay-"
# The profiling twins, built when asked (build/libprofile-malloc-<twin>.so and
# build/tools/runsel-profile-replay-<twin>), and the replayers on the counting twins
# (build/tools/runsel-counting-replay-<container>).
PROFILE_TARGET_PREFIX = "profile-malloc-"
PROFILE_REPLAYER_PREFIX = "runsel-profile-replay-"
COUNTING_REPLAYER_PREFIX = "runsel-counting-replay-"
CONVERTER_TARGET = "runsel-trace-convert"  # build/tools/runsel-trace-convert (logalloc logs)
# Stock Firefox (tools/firefox/): the audit library that records it and the reference
# replayer on its own allocator (build/tools/firefox/lib<target>.so).
FIREFOX_RECORDER_TARGET = "runsel-firefox-audit"
FIREFOX_REPLAYER_TARGET = "runsel-firefox-replay"
THREAD_CACHE_SETTING = "tcache"  # libsetting-tcache-<container>: <container>@tcache
# libsetting-fast-<container>: the fast profile (memory/README.md, "Profiles"), for
# tools/runsel bench; the report, which judges containers, never runs it.
FAST_SETTING = "fast"
CACHED_TWIN = "cached-"
# Every replay that judges a container runs in the as-built profile: mozjemalloc's run
# lifecycle, purge and spare chunk (memory/README.md, "The as-built profile"). The timed
# runs of the drop-in libraries keep the library's own defaults.
AS_BUILT_CONF = "profile:as_built"


def with_as_built(conf: str | None) -> str:
    """A RUNSEL_CONF value in the as-built profile: the profile first, so that the
    entries of `conf` (run sizes, a purge setting) override what it sets."""
    return ",".join(filter(None, [AS_BUILT_CONF, conf]))


def as_built_environment(environment: dict[str, str] | None = None) -> dict[str, str]:
    """`environment` (os.environ by default) with its RUNSEL_CONF in the as-built profile."""
    base = dict(os.environ if environment is None else environment)
    base["RUNSEL_CONF"] = with_as_built(base.get("RUNSEL_CONF"))
    return base


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


def setting_variants(build_dir: Path, variants: list[Allocator],
                     thread_cache: bool = False) -> list[Allocator]:
    """The reference container under each purge policy other than the build's default
    (RUNSEL_CONF=purge:NAME, the same library), then every setting-<setting>-<container>
    library the build defines (a build option's library, e.g. other size classes); the
    thread cache's (setting-tcache-<container>) only when `thread_cache` is asked for, the
    fast profile's (setting-fast-<container>) never."""
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
        if setting == THREAD_CACHE_SETTING and not thread_cache or setting == FAST_SETTING:
            continue
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
                         f"(configure the build with meson first)") from None
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
    present, missing = [Allocator(GLIBC, False, None)], []
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
