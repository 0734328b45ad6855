"""tools/runsel's report, render and corpus subcommands: the report's build (every variant,
the workloads, the counting and setting libraries, the trace tools, the profiling twins),
then the harness (harness.py) with the options as they were typed; the report rendered
again from a results.json (report.py); the Firefox sessions recorded (firefox_corpus.py).
Standard library only.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
from pathlib import Path

from . import firefox_record, options, progress, worker_view
from .allocators import (
    CACHED_REPLAYER_PREFIX,
    CONVERTER_TARGET,
    COUNTING_REPLAYER_PREFIX,
    COUNTING_TARGET_PREFIX,
    FIREFOX_RECORDER_TARGET,
    FIREFOX_REPLAYER_TARGET,
    PROFILE_REPLAYER_PREFIX,
    PROFILE_TARGET_PREFIX,
    RECORDER_TARGET,
    REPLAYER_PREFIX,
    SETTING_TARGET_PREFIX,
    WORKLOAD_PREFIX,
    build_targets,
    targets_named,
)
from .build_steps import (
    PACKAGE_PATH,
    InputRejected,
    StepFailed,
    build,
    configure,
    is_configured,
    requested_options,
    root_relative,
    run,
    selected_library,
    variant_libraries,
)
from .options import REPORT_DIR
from .presets import DEFAULT, QUICK

HARNESS = "harness.harness"  # run as python3 -m harness.harness
RENDERER = "harness.report"  # run as python3 -m harness.report


def workload_programs(build_dir: Path) -> list[Path]:
    """The harness's workload executables (meson targets workload_<name>)."""
    return [root_relative(path) for path in
            targets_named(build_targets(build_dir), WORKLOAD_PREFIX, "executable").values()]



def harness_arguments(args: argparse.Namespace) -> list[str]:
    """The harness's arguments: the report's as they were typed (the harness's parser takes
    the same options: options.py), then the build and output directories as resolved here
    from the caller's directory (the harness runs at the repository root)."""
    return [*args.typed, "--build-dir", str(args.build_dir), "--out", str(args.out)]


def report_outputs(args: argparse.Namespace) -> list[Path]:
    """What the report builds: every variant's library, build/libmalloc.so, the workloads,
    the counting and setting libraries, the trace tools, (with instruction counts) the
    profiling twins, and the build stamp a cluster's workers are checked against."""
    programs = workload_programs(args.build_dir)
    if not programs:
        raise StepFailed(f"meson defines no {WORKLOAD_PREFIX}* programs: is -Dbenchmarks=disabled?")
    return [*variant_libraries(args.build_dir).values(), selected_library(args.build_dir),
            *programs, *report_libraries(args.build_dir), *trace_tools(args.build_dir),
            *(profiling_twins(args.build_dir) if args.instructions != "off" else []),
            args.build_dir / worker_view.STAMP]


def known_report_outputs(args: argparse.Namespace) -> list[Path] | None:
    """report_outputs() of a configured build directory, None when it is not configured or
    meson cannot say yet (configure() then says why, or reconfigures)."""
    if not is_configured(args.build_dir):
        return None
    try:
        return report_outputs(args)
    except (StepFailed, subprocess.CalledProcessError, OSError, ValueError):
        return None


def command_report(args: argparse.Namespace) -> int:
    """Builds every variant and workload, then runs the harness (which re-runs itself
    under Debian's python3 when this one lacks matplotlib, scipy or tabulate). Prints a
    line as each step starts and ends (harness/progress.py): the installs (tools/runsel's)
    and the build here, the harness's steps in the harness."""
    preset = QUICK if args.quick else DEFAULT
    estimated, source = progress.estimates(args.out, args.quick, args.repeat or preset["repeat"],
                                           args.scale or preset["scale"])
    steps = progress.Progress(estimated, source)
    print(f"{progress.PREFIX} tools/runsel report: {len(progress.STEPS)} steps "
          f"({', '.join(progress.STEPS)}); time left from {source}", flush=True)
    # ninja counts what a configured build has to do; a fresh one has the fixed estimate.
    outputs = known_report_outputs(args)
    steps.estimated["build"], how = progress.build_estimate(
        args.build_dir, None if outputs is None else
        [os.path.relpath(path, args.build_dir) for path in outputs], args.quick)
    installs = os.environ.get(progress.INSTALL_VARIABLE)
    steps.end("installs", "the Debian packages checked" if installs is not None
              else "not checked: python3 -m harness was run directly",
              seconds=float(installs or 0))
    steps.start("build", how)
    if configure(args.build_dir, {**requested_options(args), "thread_cache_containers":
                                  "all" if args.thread_cache_all else "anchors"}) \
            or outputs is None:
        outputs = report_outputs(args)
    build(args.build_dir, outputs)
    steps.end("build")
    os.environ.setdefault(progress.STARTED_VARIABLE, f"{steps.started:.3f}")  # the harness goes on
    return run([sys.executable, "-m", HARNESS, *harness_arguments(args)], check=False,
               env_changes=PACKAGE_PATH)


def command_render(args: argparse.Namespace) -> int:
    """Re-renders report.md, report.html and the pictures from a results.json (nothing is
    built or run): harness/report.py, under Debian's python3 when this one lacks
    matplotlib, scipy or tabulate."""
    if not args.results.is_file():
        raise InputRejected(f"no such file: {args.results}")
    out = ["--out", str(args.render_out)] if args.render_out else []
    return run([sys.executable, "-m", RENDERER, args.results, *out], check=False,
               env_changes=PACKAGE_PATH)


# The profiling twins' targets (meson.build, tools/meson.build; experiments/harness/cost.py).

# The firefox workload's recorder and reference replayer (tools/firefox/), and the
# converter its logalloc logs go through.
FIREFOX_TARGETS = (FIREFOX_RECORDER_TARGET, FIREFOX_REPLAYER_TARGET, CONVERTER_TARGET)


def trace_tools(build_dir: Path) -> list[Path]:
    """The recorder and every container's replayer: the report records the webkit
    workload's web processes and replays their traces (and any --trace) exactly; and the
    replayers with the thread cache on (behind_cache.py)."""
    return [root_relative(Path(target["filename"][0])) for target in build_targets(build_dir)
            if target["name"] in (RECORDER_TARGET, *FIREFOX_TARGETS)
            or target["name"].startswith((REPLAYER_PREFIX, CACHED_REPLAYER_PREFIX))]


def profiling_twins(build_dir: Path) -> list[Path]:
    """The profiling twins (build/libprofile-malloc-<container>.so and
    build/tools/runsel-profile-replay-<container>, with the thread cache's "cached-" ones)
    and the counting replayers: meson builds them only when asked, and the report's
    callgrind counts and pick counters need them, so the report builds them before its
    runs rather than in the middle of its timed ones."""
    targets = build_targets(build_dir)
    return [root_relative(path) for prefix, kind in ((PROFILE_TARGET_PREFIX, "shared library"),
                                                     (PROFILE_REPLAYER_PREFIX, "executable"),
                                                     (COUNTING_REPLAYER_PREFIX, "executable"))
            for path in targets_named(targets, prefix, kind).values()]


def report_libraries(build_dir: Path) -> list[Path]:
    """Each variant's counting twin (build/libmalloc-counting-<container>.so: the harness
    runs each workload once under each) and each build option's library
    (build/libsetting-<setting>-<container>.so: timed like the variants)."""
    targets = build_targets(build_dir)
    return [root_relative(path) for prefix in (COUNTING_TARGET_PREFIX, SETTING_TARGET_PREFIX)
            for path in targets_named(targets, prefix, "shared library").values()]



def add_report(commands, shared_options: list[argparse.ArgumentParser]) -> None:
    report = commands.add_parser(
        "report", parents=shared_options,
        help="the main job: every workload under every allocator, one report",
        description="Builds every runsel variant and the workloads (experiments/workloads), "
                    "then runs each workload under each variant, glibc, jemalloc, mimalloc and "
                    "tcmalloc (LD_PRELOAD), interleaved and repeated; proves which allocator "
                    "served every run; counts instructions (perf, else callgrind). Writes "
                    f"{REPORT_DIR}/report.html (self-contained), report.md and results.json. "
                    "Prints a line as each step starts and ends (time so far, estimate of "
                    "the time left); ends with each step's time, the short answer, the "
                    "report's path and the total time.")
    options.add_report_options(report)
    report.set_defaults(handler=command_report)


def add_render(commands) -> None:
    render = commands.add_parser(
        "render", help="re-render a report from its results.json (no build, no runs)",
        description="Writes report.md, report.html and the pictures again from a results.json "
                    "that tools/runsel report wrote, byte for byte as the run wrote them: a "
                    "change to the report's layout or wording needs no new run.")
    render.add_argument("results", type=Path, metavar="RESULTS_JSON",
                        help=f"e.g. {REPORT_DIR}/results.json")
    render.add_argument("--out", dest="render_out", type=Path, metavar="DIR",
                        help="where to write (default: the directory of RESULTS_JSON)")
    render.set_defaults(handler=command_render)


def command_corpus(args: argparse.Namespace) -> int:
    """Records the Firefox sessions of a set that are not cached yet (harness/firefox_corpus.py),
    with the browser's recorder built first."""
    build(args.build_dir, [args.build_dir / firefox_record.RECORDER])
    forwarded = ["--build-dir", str(args.build_dir), "--set", args.firefox_set]
    for path in args.corpus_file:
        forwarded += ["--corpus-file", str(path.resolve())]
    if args.force:
        forwarded.append("--force")
    return run([sys.executable, "-m", "harness.firefox_corpus", *forwarded], check=False,
               env_changes=PACKAGE_PATH)


def add_corpus(commands, shared_options: list[argparse.ArgumentParser]) -> None:
    corpus = commands.add_parser(
        "corpus", parents=shared_options,
        help="record Firefox sessions into the corpus the report's answer is judged on",
        description="Records each session of a set (experiments/firefox/sessions.json) that "
                    "results/firefox/corpus/ does not hold yet: stock firefox-esr under the "
                    "recorder, the parent's and the busiest content process's logalloc logs "
                    "(gzip) and their checks. A session whose browser or checks fail is "
                    "named with its reason and left out.")
    corpus.add_argument("--firefox-set", default=DEFAULT["firefox_set"], metavar="NAME",
                        help=f"the set to record (default: {DEFAULT['firefox_set']})")
    corpus.add_argument("--corpus-file", type=Path, action="append", default=[],
                        metavar="LOG", help="a logalloc log recorded elsewhere, checked and "
                                            "added as a session of its own (repeatable)")
    corpus.add_argument("--force", action="store_true", help="record again even when cached")
    corpus.set_defaults(handler=command_corpus)

