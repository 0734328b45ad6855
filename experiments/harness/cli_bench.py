"""tools/runsel's bench subcommand: the bench programs (experiments/bench/programs.py) under
the anchor containers (or every one), their settings, glibc and the installed peers; then
malloc_bench across every variant (experiments/bench/compare.py). Standard library only.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
from pathlib import Path

from . import allocators
from .allocators import (
    FIREFOX_MATCHING,
    REFERENCE,
    SETTING_TARGET_PREFIX,
    build_targets,
    targets_named,
)
from .build_steps import (
    PACKAGE_PATH,
    StepFailed,
    build,
    build_libraries,
    configure,
    defines_output,
    requested_options,
    root_relative,
    show,
    variant_libraries,
)
from .options import BUILD_DIR, RESULTS_DIR
from .presets import positive

BENCH_PROGRAM = Path("experiments/malloc_bench")  # under the build directory
BENCH_COMPARE = Path("experiments/bench/compare.py")
BENCH_PROGRAMS = Path("experiments/bench/programs.py")
BENCH_PROGRAM_PREFIX = "bench_"  # meson's build/experiments/bench_<name>: the bench programs
# The containers the bench programs run by default (--all-containers: every one).
BENCH_ANCHORS = (REFERENCE, FIREFOX_MATCHING)
# The fast profile's library of a container (memory/README.md, "Profiles"),
# libsetting-fast-<container>.so, runs beside each anchor as <container>@fast.
FAST_SETTING = allocators.FAST_SETTING


def command_bench(args: argparse.Namespace) -> int:
    """The bench programs (programs.py), then malloc_bench (compare.py); each prints its
    Markdown tables (kept as bench-programs.md and bench.md) and writes its JSON."""
    configure(args.build_dir, requested_options(args))
    program = args.build_dir / BENCH_PROGRAM
    programs = [root_relative(path) for path in targets_named(
        build_targets(args.build_dir), BENCH_PROGRAM_PREFIX, "executable").values()]
    if not args.micro_only and not programs:
        raise StepFailed(f"meson defines no {BENCH_PROGRAM_PREFIX}* programs: is "
                         "-Dbenchmarks=disabled?")
    if not args.programs_only and not defines_output(args.build_dir, program):
        raise StepFailed(f"meson defines no {program}: it needs libbenchmark-dev (and "
                         "-Dbenchmarks=auto or enabled); see build/meson-logs/meson-log.txt")
    fast = fast_libraries(args.build_dir)
    if args.programs_only:
        libraries = variant_libraries(args.build_dir)
        build(args.build_dir, [path for name, path in libraries.items()
                               if args.all_containers or name in BENCH_ANCHORS] +
              list(fast.values()) + programs)
    else:
        libraries = build_libraries(args, extra=[program] + ([] if args.micro_only else
                                                             [*programs, *fast.values()]))
    RESULTS_DIR.mkdir(exist_ok=True)
    # The peers the harness compares with, where installed: the targets judge some
    # benchmarks against the best of them.
    peers, missing = allocators.system_allocators()
    if missing:
        print(f"bench: not installed, left out: {', '.join(missing)}", file=sys.stderr)
    peer_preloads = [(peer.name, peer.preload) for peer in peers if peer.preload]
    if not args.micro_only:
        run_bench_programs(args, libraries, peer_preloads, fast)
    if args.programs_only:
        return 0
    preloads = [part for name, path in [*libraries.items(), *peer_preloads]
                for part in ("--preload", f"{name}={path}")]
    json_path, markdown_path = RESULTS_DIR / "bench.json", RESULTS_DIR / "bench.md"
    command = [sys.executable, BENCH_COMPARE, "--bench", program, *preloads, "--out", json_path,
               *args.compare_args]
    run_and_keep(command, markdown_path)
    print(f"\nbenchmark written to {markdown_path} and {json_path}")
    return 0


def run_and_keep(command: list, markdown_path: Path) -> None:
    """Runs a bench script (its command shown first), prints its Markdown and keeps it in
    markdown_path; a script that fails is a failed step."""
    show(command, PACKAGE_PATH)
    completed = subprocess.run([str(part) for part in command], stdout=subprocess.PIPE, text=True,
                               env={**os.environ, **PACKAGE_PATH})
    print(completed.stdout, end="")
    if completed.returncode != 0:
        raise StepFailed(f"{command[1]} exited with {completed.returncode}")
    markdown_path.write_text(completed.stdout)


def fast_libraries(build_dir: Path) -> dict[str, Path]:
    """{container: its fast profile's library} for the anchors that have one."""
    settings = targets_named(build_targets(build_dir), SETTING_TARGET_PREFIX, "shared library")
    return {container: root_relative(settings[f"{FAST_SETTING}-{container}"])
            for container in BENCH_ANCHORS if f"{FAST_SETTING}-{container}" in settings}


def run_bench_programs(args: argparse.Namespace, libraries: dict[str, Path],
                       peer_preloads: list[tuple[str, Path]],
                       fast: dict[str, Path]) -> None:
    """programs.py under the anchor containers (or every one), each anchor in the fast
    profile too, their settings when asked (each other purge policy, each setting-*
    library), glibc and the installed peers."""
    containers = {name: path for name, path in libraries.items()
                  if args.all_containers or name in BENCH_ANCHORS}
    specs = [f"{name}={path}" for name, path in containers.items()]
    if not args.settings:  # --settings runs every setting-* library, these included
        specs += [f"{container}@fast={path}" for container, path in fast.items()]
    if args.settings:
        default = allocators.build_options(args.build_dir).get("purge_policy")
        reference = libraries[REFERENCE]
        specs += [f"{REFERENCE}@purge:{policy}={reference}:RUNSEL_CONF=purge:{policy}"
                  for policy in allocators.PURGE_POLICIES if policy != default]
        settings = targets_named(build_targets(args.build_dir), SETTING_TARGET_PREFIX,
                                 "shared library")
        build(args.build_dir, [root_relative(path) for path in settings.values()])
        for name, path in settings.items():
            setting, _, container = name.rpartition("-")
            specs.append(f"{container}@{setting}={root_relative(path)}")
    specs += [f"{name}={path}" for name, path in peer_preloads]
    json_path = RESULTS_DIR / "bench-programs.json"
    markdown_path = RESULTS_DIR / "bench-programs.md"
    command = [sys.executable, BENCH_PROGRAMS, "--build-dir", args.build_dir,
               *(part for spec in specs for part in ("--preload", spec)),
               "--rounds", str(args.rounds), "--scale", str(args.scale), "--out", json_path]
    run_and_keep(command, markdown_path)
    print(f"\nbench programs written to {markdown_path} and {json_path}\n")


def add_bench(commands, shared_options: list[argparse.ArgumentParser]) -> None:
    bench = commands.add_parser(
        "bench", parents=shared_options,
        help="build, then run the bench programs and malloc_bench: glibc vs runsel and the "
             "installed peers",
        description="Builds the bench programs (experiments/bench/programs/: larson with and "
                    "without sized delete, producer/consumer, a threaded stress, two "
                    "single-thread loops, mixed sizes with cross-thread frees) and runs them "
                    f"with {BENCH_PROGRAMS} under {' and '.join(BENCH_ANCHORS)}, each also "
                    "in the fast profile, glibc, jemalloc, mimalloc and tcmalloc "
                    "(time, peak RSS, minor faults as ratios to glibc; about 2 minutes); then "
                    f"builds {BUILD_DIR / BENCH_PROGRAM} and every variant and runs "
                    f"{BENCH_COMPARE}, ending with the speed targets, judged. Writes "
                    f"{RESULTS_DIR}/bench-programs.{{md,json}} and "
                    f"{RESULTS_DIR}/bench.{{md,json}}.")
    only = bench.add_mutually_exclusive_group()
    only.add_argument("--programs-only", action="store_true",
                      help="only the bench programs (builds only the libraries they run)")
    only.add_argument("--micro-only", action="store_true", help="only malloc_bench")
    bench.add_argument("--all-containers", action="store_true",
                       help="the bench programs under every container, not only "
                            f"{', '.join(BENCH_ANCHORS)}")
    bench.add_argument("--settings", action="store_true",
                       help=f"the bench programs also under {REFERENCE} with each other "
                            "purge policy and under each build option's library")
    bench.add_argument("--rounds", type=positive(int), default=5, metavar="N",
                       help="interleaved rounds of the bench programs (default: 5, the fewest "
                            "that give intervals)")
    bench.add_argument("--scale", type=positive(float), default=1.0, metavar="X",
                       help="operation counts of the bench programs (default: 1)")
    bench.add_argument("compare_args", nargs="*", metavar="ARG",
                       help=f"more {BENCH_COMPARE} arguments (after --)")
    bench.set_defaults(handler=command_bench)
