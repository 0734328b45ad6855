#!/usr/bin/env python3
"""runsel's command line: configures and builds the allocator, then runs one job
(report, test, bench, trace, replay). Started by tools/runsel once the Debian packages
are in. The entry shim of the tooling package (experiments/harness/): the one place
that puts experiments/ on the import path.

Every step prints the command it runs ("+ ..."), so any step can be repeated by
hand from the repository root. Standard library only: a fresh machine has it.
"""

from __future__ import annotations

import argparse
import json
import os
import shlex
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

if __name__ == "__main__":  # the tooling package, experiments/harness/
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "experiments"))

from harness import allocators as shared
from harness import progress, trace_cli
from harness.allocators import (
    CACHED_REPLAYER_PREFIX,
    COUNTING_TARGET_PREFIX,
    RECORDER_TARGET,
    REPLAYER_PREFIX,
    SETTING_TARGET_PREFIX,
    WORKLOAD_PREFIX,
    build_targets,
    targets_named,
)
from harness.allocators import REFERENCE as REFERENCE_VARIANT
from harness.build_steps import (
    InputRejected,
    StepFailed,
    build,
    capture_json,
    configure,
    is_configured,
    requested_options,
    run,
    show,
)
from harness.interpreter import PACKAGE_ROOT, ROOT
from harness.presets import DEFAULT, QUICK, positive
from harness.worker_view import STAMP as BUILD_STAMP

BUILD_DIR = Path("build")
RESULTS_DIR = Path("results")
HARNESS = "harness.harness"  # run as python3 -m harness.harness
RENDERER = "harness.report"  # run as python3 -m harness.report
# A child Python that imports the package (the commands run at the repository root).
PACKAGE_PATH = {"PYTHONPATH": ":".join(filter(None, [str(PACKAGE_ROOT.relative_to(ROOT)),
                                                     os.environ.get("PYTHONPATH")]))}
REPORT_DIR = RESULTS_DIR / "report"
BENCH_PROGRAM = Path("experiments/malloc_bench")  # under the build directory
BENCH_COMPARE = Path("experiments/bench/compare.py")
BENCH_PROGRAMS = Path("experiments/bench/programs.py")
BENCH_PROGRAM_PREFIX = "bench_"  # meson's build/experiments/bench_<name>: the bench programs
# The containers the bench programs run by default (--all-containers: every one).
BENCH_ANCHORS = ("rb_first", "lifo")
SELECTED_TARGET = "malloc"  # build/libmalloc.so: the container picked at setup
CI_TEST_SETUP = "ci"  # meson.build's test setup for CI: the fixed seed list
QUICK_TEST_SETUP = "quick"  # the same on fewer inputs: runsel test without --all
DEFAULT_SUITE = "default"  # the tests runsel test runs without --all (tests/README.md)


def defines_output(build_dir: Path, output: Path) -> bool:
    wanted = output.resolve()
    return any(Path(name).resolve() == wanted
               for target in build_targets(build_dir) for name in target["filename"])


def variant_libraries(build_dir: Path) -> dict[str, Path]:
    """Every container's library, {container: build/libmalloc-<container>.so}, reference first."""
    libraries = {name: root_relative(path)
                 for name, path in shared.variant_files(build_targets(build_dir)).items()}
    if not libraries:
        raise StepFailed(f"meson defines no {shared.VARIANT_TARGET_PREFIX}<container> library")
    return dict(sorted(libraries.items(), key=lambda item: item[0] != REFERENCE_VARIANT))


def selected_library(build_dir: Path) -> Path:
    """The file of build/libmalloc.so (a link to the file named with its version)."""
    for target in build_targets(build_dir):
        if target["type"] == "shared library" and target["name"] == SELECTED_TARGET:
            return root_relative(Path(target["filename"][0]))
    raise StepFailed(f"meson defines no {SELECTED_TARGET} library")


def build_libraries(args: argparse.Namespace, extra: list[Path] = ()) -> dict[str, Path]:
    """Builds every variant's library, build/libmalloc.so and `extra`; returns the variants."""
    libraries = variant_libraries(args.build_dir)
    build(args.build_dir, [*libraries.values(), selected_library(args.build_dir), *extra])
    return libraries


# --- report: the harness -----------------------------------------------------------


def workload_programs(build_dir: Path) -> list[Path]:
    """The harness's workload executables (meson targets workload_<name>)."""
    return [root_relative(path) for path in
            targets_named(build_targets(build_dir), WORKLOAD_PREFIX, "executable").values()]


def harness_arguments(args: argparse.Namespace) -> list[str]:
    """The report's options, passed on to the harness (harness.py)."""
    forwarded = ["--build-dir", str(args.build_dir), "--out", str(args.out),
                 "--instructions", args.instructions]
    if args.quick:
        forwarded.append("--quick")
    if args.aslr:
        forwarded.append("--aslr")
    for option in ("repeat", "scale", "seed", "instruction_scale", "timeout", "webkit_pages",
                   "webkit_repeat", "firefox_pages", "firefox_set"):
        value = getattr(args, option)
        if value is not None:
            forwarded += [f"--{option.replace('_', '-')}", str(value)]
    for option in ("workload", "allocator"):
        for value in getattr(args, option):
            forwarded += [f"--{option}", value]
    for trace in args.trace:
        forwarded += ["--trace", str(trace.resolve())]
    for corpus_file in args.corpus_file:
        forwarded += ["--corpus-file", str(corpus_file.resolve())]
    if args.scheduler:
        forwarded += ["--scheduler", args.scheduler]
    for flag in ("thread_cache_all", "no_thread_cache", "no_overlap"):
        if getattr(args, flag):
            forwarded.append("--" + flag.replace("_", "-"))
    return forwarded


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
            args.build_dir / BUILD_STAMP]


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
              else "not checked: tools/runsel_cli.py was run directly",
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
PROFILE_TARGET_PREFIX, PROFILE_REPLAYER_PREFIX = "profile-malloc-", "runsel-profile-replay-"
COUNTING_REPLAYER_PREFIX = "runsel-counting-replay-"  # experiments/harness/replays.py

# The firefox workload's recorder and reference replayer (tools/firefox/), and the
# converter its logalloc logs go through.
FIREFOX_TARGETS = ("runsel-firefox-audit", "runsel-firefox-replay", "runsel-trace-convert")


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


# --- test -------------------------------------------------------------------------------


@dataclass(frozen=True)
class TestBuild:
    """One build directory that `runsel test` configures, builds and tests."""
    name: str
    options: dict[str, str]  # meson options on top of the command line's
    setup_env: dict[str, str] = field(default_factory=dict)  # for meson setup (CXX)
    suites: tuple[str, ...] = ()  # always these suites (default: every suite, or --suite)
    setup: str = CI_TEST_SETUP  # meson's test setup

    def directory(self, main_dir: Path) -> Path:
        if self.name == "main":
            return main_dir
        return main_dir.with_name(f"{main_dir.name}-{self.name}")


# The builds `runsel test` runs, in this order. The extra ones live beside the
# main build directory (build-tsan, ...) and leave out the benchmarks and the
# harness, which measure rather than check. Each runs meson's `ci` test setup
# (meson.build): the fixed seed list, and each build's sanitizer options and
# timeouts.
#   tsan     ThreadSanitizer. Its runtime owns the process's malloc, so only the
#            threaded stress test runs, against the instrumented allocator core
#            linked in under renamed entry points (tests/hardening/meson.build).
#   ubsan    UndefinedBehaviorSanitizer, every allocator test: UBSan does not
#            replace malloc, so runsel stays the allocator of every test. With
#            the other hook placement (-Dhook_placement=run_header, the 40-byte
#            run header; the other builds keep page_map), so that CI passes the
#            whole suite with both placements at no extra build.
#   checked  -Dchecked=true: every container's invariant walker after each
#            operation inside the allocator, plus the tests' runsel_check() calls,
#            on the quick setup's quarter of the inputs (the main build runs them
#            all; the walkers were the slowest 18 of CI's minutes).
#   fuzz     clang and libFuzzer: the API fuzzer driven by coverage of the
#            allocator, in a checked build (a smoke run per container).
#   tcache   -Dthread_cache=true: the thread cache's own test and every API
#            test but redis (the thread_cache suite), for moz_tree, lifo,
#            rb_first and age_address only.
# The ubsan, checked, fuzz and tcache builds compile every variant again; as unity
# builds (meson's -Dunity=on: a target's sources compiled a few at a time, as
# one file each) they take about 30 % less compiler time (a checked build of
# every target: 245 CPU-s against 348). The main build stays one file at a time,
# the way users build, so that a source missing an include of its own fails there.
NO_BENCHMARKS = {"benchmarks": "disabled"}
UNITY = {"unity": "on"}
TEST_BUILDS = {
    "main": TestBuild("main", {}),
    "tsan": TestBuild("tsan", {**NO_BENCHMARKS, "b_sanitize": "thread"}, suites=("tsan",)),
    "ubsan": TestBuild("ubsan", {**NO_BENCHMARKS, **UNITY, "b_sanitize": "undefined",
                                 "cpp_args": "-fno-sanitize-recover=undefined",
                                 "hook_placement": "run_header"}),
    "checked": TestBuild("checked", {**NO_BENCHMARKS, **UNITY, "checked": "true"},
                         setup=QUICK_TEST_SETUP),
    "fuzz": TestBuild("fuzz", {**NO_BENCHMARKS, **UNITY, "checked": "true", "fuzzing": "true"},
                      setup_env={"CXX": "clang++"}, suites=("fuzz",)),
    "tcache": TestBuild("tcache", {**NO_BENCHMARKS, **UNITY, "thread_cache": "true"},
                        suites=("thread_cache",)),
}


# runsel test without --all: the main build, only what the default suite needs,
# on fewer inputs.
QUICK_BUILD = TestBuild("main", {}, suites=(DEFAULT_SUITE,), setup=QUICK_TEST_SETUP)


def test_log(build_dir: Path, setup: str = CI_TEST_SETUP) -> Path:
    """meson test's JSON log under a test setup (meson names it after the setup)."""
    return build_dir / "meson-logs" / f"testlog-{setup}.json"


def count_test_results(build_dir: Path, setup: str = CI_TEST_SETUP) -> dict[str, int] | None:
    """Counts meson's per-test results from its log (None when there is no log)."""
    log = test_log(build_dir, setup)
    if not log.exists():
        return None
    counts = {"passed": 0, "failed": 0, "skipped": 0}
    outcome = {"OK": "passed", "EXPECTEDFAIL": "passed", "SKIP": "skipped"}
    for line in log.read_text().splitlines():
        if line.strip():
            counts[outcome.get(json.loads(line).get("result"), "failed")] += 1
    return counts


def suite_targets(build_dir: Path, suites: tuple[str, ...]) -> list[Path]:
    """The files the tests of these suites need (their programs and declared dependencies)."""
    tests = capture_json(["meson", "introspect", str(build_dir), "--tests"])
    wanted = {dependency for test in tests
              if any(suite.split(":")[-1] in suites for suite in test["suite"])
              for dependency in test["depends"]}
    return [Path(name) for target in build_targets(build_dir) if target["id"] in wanted
            for name in target["filename"]]


def run_test_build(spec: TestBuild, args: argparse.Namespace) -> dict:
    """Configures, builds and tests one build; returns its outcome for the summary."""
    build_dir = spec.directory(args.build_dir)
    started = time.monotonic()
    print(f"== {spec.name} build: {build_dir}/ (meson test --setup {spec.setup})", flush=True)
    outcome = {"build": spec.name, "passed": 0, "failed": 0, "skipped": 0, "error": ""}
    suites = spec.suites or tuple(args.suite)
    try:
        configure(build_dir, {**requested_options(args), **spec.options}, spec.setup_env)
        build(build_dir, suite_targets(build_dir, suites) if suites else None)
    except (StepFailed, subprocess.CalledProcessError) as failure:
        outcome["error"] = f"build failed: {failure}"
        outcome["seconds"] = time.monotonic() - started
        return outcome
    outcome["build_seconds"] = time.monotonic() - started
    test_log(build_dir, spec.setup).unlink(missing_ok=True)
    code = run(["meson", "test", "-C", build_dir, "--no-rebuild", "--print-errorlogs",
                "--setup", spec.setup,
                *[part for suite in suites for part in ("--suite", suite)], *args.meson_args],
               check=False)
    counts = count_test_results(build_dir, spec.setup) or {}
    outcome.update(counts)
    if code != 0 and not counts.get("failed"):
        outcome["error"] = f"meson test exited with {code}"
    outcome["seconds"] = time.monotonic() - started
    print(f"tests ({spec.name}): {outcome['passed']} passed, {outcome['failed']} failed, "
          f"{outcome['skipped']} skipped", flush=True)
    return outcome


def test_builds(args: argparse.Namespace) -> list[TestBuild]:
    """What runsel test runs: --builds (full inputs), --all (every build), else the quick
    run of the default suite (or of --suite) in the main build."""
    names = [name for part in args.builds for name in part.split(",") if name]
    if args.all and not names:
        names = list(TEST_BUILDS)
    unknown = [name for name in names if name not in TEST_BUILDS]
    if unknown:
        raise StepFailed(f"unknown build {', '.join(unknown)}; "
                         f"choose from {', '.join(TEST_BUILDS)}")
    if not names:
        return [QUICK_BUILD if not args.suite else
                TestBuild("main", {}, suites=tuple(args.suite), setup=QUICK_TEST_SETUP)]
    return [TEST_BUILDS[name] for name in names]


def command_test(args: argparse.Namespace) -> int:
    started = time.monotonic()
    outcomes = [run_test_build(spec, args) for spec in test_builds(args)]
    print("\n== summary")
    print(f"{'build':<8} {'passed':>6} {'failed':>6} {'skipped':>7} {'build min':>9} "
          f"{'minutes':>7}")
    for outcome in outcomes:
        print(f"{outcome['build']:<8} {outcome['passed']:>6} {outcome['failed']:>6} "
              f"{outcome['skipped']:>7} {outcome.get('build_seconds', 0) / 60:>9.1f} "
              f"{outcome['seconds'] / 60:>7.1f}  {outcome['error']}")
    print(f"total: {(time.monotonic() - started) / 60:.1f} minutes")
    totals = {key: sum(outcome[key] for outcome in outcomes)
              for key in ("passed", "failed", "skipped")}
    print(f"tests: {totals['passed']} passed, {totals['failed']} failed, "
          f"{totals['skipped']} skipped")
    # meson reports exit code 77 as a skip; no runsel test skips on purpose,
    # so a skip is a test that did not run (libFuzzer's findings exit 77 by
    # default, for one) and fails the command.
    if totals["skipped"]:
        print("runsel test: skipped tests count as failures (exit code 77: see the log)")
    failed = totals["failed"] or totals["skipped"] or any(o["error"] for o in outcomes)
    return 1 if failed else 0


# --- bench ------------------------------------------------------------------------------


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
    if args.programs_only:
        libraries = variant_libraries(args.build_dir)
        build(args.build_dir, [path for name, path in libraries.items()
                               if args.all_containers or name in BENCH_ANCHORS] + programs)
    else:
        libraries = build_libraries(args, extra=[program] + ([] if args.micro_only else programs))
    RESULTS_DIR.mkdir(exist_ok=True)
    # The peers the harness compares with, where installed: the targets judge some
    # benchmarks against the best of them.
    peers, missing = shared.system_allocators()
    if missing:
        print(f"bench: not installed, left out: {', '.join(missing)}", file=sys.stderr)
    peer_preloads = [(peer.name, peer.preload) for peer in peers if peer.preload]
    if not args.micro_only:
        run_bench_programs(args, libraries, peer_preloads)
    if args.programs_only:
        return 0
    preloads = [part for name, path in [*libraries.items(), *peer_preloads]
                for part in ("--preload", f"{name}={path}")]
    json_path, markdown_path = RESULTS_DIR / "bench.json", RESULTS_DIR / "bench.md"
    command = [sys.executable, BENCH_COMPARE, "--bench", program, *preloads, "--out", json_path,
               *args.compare_args]
    show(command, PACKAGE_PATH)
    completed = subprocess.run([str(part) for part in command], stdout=subprocess.PIPE, text=True,
                               env={**os.environ, **PACKAGE_PATH})
    print(completed.stdout, end="")
    if completed.returncode != 0:
        raise StepFailed(f"{BENCH_COMPARE} exited with {completed.returncode}")
    markdown_path.write_text(completed.stdout)
    print(f"\nbenchmark written to {markdown_path} and {json_path}")
    return 0


def run_bench_programs(args: argparse.Namespace, libraries: dict[str, Path],
                       peer_preloads: list[tuple[str, Path]]) -> None:
    """programs.py under the anchor containers (or every one), their settings when asked
    (each other purge policy, each setting-* library), glibc and the installed peers."""
    containers = {name: path for name, path in libraries.items()
                  if args.all_containers or name in BENCH_ANCHORS}
    specs = [f"{name}={path}" for name, path in containers.items()]
    if args.settings:
        default = shared.build_options(args.build_dir).get("purge_policy")
        reference = libraries[REFERENCE_VARIANT]
        specs += [f"{REFERENCE_VARIANT}@purge:{policy}={reference}:RUNSEL_CONF=purge:{policy}"
                  for policy in shared.PURGE_POLICIES if policy != default]
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
    show(command, PACKAGE_PATH)
    completed = subprocess.run([str(part) for part in command], stdout=subprocess.PIPE, text=True,
                               env={**os.environ, **PACKAGE_PATH})
    print(completed.stdout, end="")
    if completed.returncode != 0:
        raise StepFailed(f"{BENCH_PROGRAMS} exited with {completed.returncode}")
    markdown_path.write_text(completed.stdout)
    print(f"\nbench programs written to {markdown_path} and {json_path}\n")


# --- command line -----------------------------------------------------------------------


class PresetText(dict):
    """A harness preset for help text: numbers as %g."""

    def __getitem__(self, key: str) -> str:
        value = super().__getitem__(key)
        return format(value, "g") if isinstance(value, float) else str(value)


def build_options() -> argparse.ArgumentParser:
    """Options shared by every subcommand that builds."""
    options = argparse.ArgumentParser(add_help=False)
    options.add_argument("--container", metavar="NAME",
                         help="container of build/libmalloc.so (meson -Drun_container=NAME)")
    options.add_argument("--build-dir", type=Path, metavar="DIR",
                         help=f"meson build directory (default: {BUILD_DIR})")
    return options


def parser() -> argparse.ArgumentParser:
    main = argparse.ArgumentParser(
        prog="tools/runsel",
        description="runsel: a mozjemalloc-style allocator with a choice of non-full run "
                    "containers. Installs what is missing, configures and builds with "
                    "meson, then runs the job.")
    commands = main.add_subparsers(dest="command", metavar="COMMAND")
    shared_options = [build_options()]
    add_report(commands, shared_options)
    add_render(commands)
    add_corpus(commands, shared_options)
    add_test(commands, shared_options)
    add_bench(commands, shared_options)
    trace_cli.add_commands(commands, shared_options)
    return main


def add_report(commands, shared_options: list[argparse.ArgumentParser]) -> None:
    default, quick = PresetText(DEFAULT), PresetText(QUICK)
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
    report.add_argument("--quick", action="store_true",
                        help=f"a short run: {quick['repeat']} repetitions at scale "
                             f"{quick['scale']}")
    report.add_argument("--out", type=Path, default=REPORT_DIR, metavar="DIR",
                        help="output directory (default: %(default)s)")
    report.add_argument("--repeat", type=positive(int), metavar="N",
                        help="runs per workload and allocator, at least 1 (default: "
                             f"{default['repeat']}, quick: {quick['repeat']})")
    report.add_argument("--scale", type=positive(float), metavar="X",
                        help=f"workload size, above 0 (default: {default['scale']}, "
                             f"quick: {quick['scale']})")
    report.add_argument("--seed", type=int, metavar="N", help="workload seed (default: 1)")
    report.add_argument("--instructions", choices=("auto", "perf", "callgrind", "off"),
                        default="auto", help="instruction counts: perf stat where the machine "
                        "has counters, else valgrind's callgrind (default: auto)")
    report.add_argument("--instruction-scale", type=positive(float), metavar="X",
                        help="workload size under callgrind (default: "
                             f"{default['instruction_scale']}, quick: "
                             f"{quick['instruction_scale']})")
    report.add_argument("--workload", action="append", default=[], metavar="NAME",
                        help="only this workload (repeatable); firefox: the recorded stock "
                             "Firefox session, replayed exactly")
    report.add_argument("--allocator", action="append", default=[], metavar="NAME",
                        help="only this allocator (repeatable): a container, glibc, jemalloc, "
                             "mimalloc or tcmalloc")
    report.add_argument("--trace", action="append", default=[], type=Path, metavar="PATH",
                        help="also replay this recorded trace (runsel trace -- CMD) as workload "
                             "replay:<file name> under every allocator (repeatable)")
    report.add_argument("--corpus-file", action="append", default=[], type=Path,
                        metavar="PATH", help="add a trace or a logalloc log (a Firefox "
                        "session's, a real program's) to the trace corpus the verdict judges "
                        "over, as one more group of replicates (repeatable)")
    report.add_argument("--scheduler", metavar="ADDRESS",
                        help="run the replays and callgrind counts on this Dask scheduler "
                             "(tcp://HOST:8786): the report ships its tooling to every worker; "
                             "a worker needs Dask, valgrind, and the build and the traces at "
                             "the same paths (checked before the first task: exit 2 naming "
                             "the worker otherwise); default: a local Dask cluster on this "
                             "machine's cores")
    report.add_argument("--webkit-pages", type=positive(int), metavar="N",
                        help=f"pages each webkit run loads (default: {default['webkit_pages']}; "
                             f"the recorded run {default['webkit_record_pages']})")
    report.add_argument("--webkit-repeat", type=positive(int), metavar="N",
                        help="rounds of the webkit workload (default: "
                             f"{default['webkit_repeat']}, the other allocators "
                             f"{default['webkit_peer_repeat']}; quick: {quick['webkit_repeat']})")
    report.add_argument("--firefox-pages", type=positive(int), metavar="N",
                        help="pages of the recorded Firefox session (default: "
                             f"{default['firefox_pages']}; quick: {quick['firefox_pages']}); "
                             "recorded once per Firefox version and corpus (results/firefox/)")
    report.add_argument("--firefox-set", metavar="NAME",
                        help="the Firefox sessions the answer is judged on (a set of "
                             "experiments/firefox/sessions.json; default: "
                             f"{default['firefox_set']}; quick: {quick['firefox_set']}); only "
                             "the sessions not yet in results/firefox/corpus/ are recorded")
    report.add_argument("--timeout", type=positive(float), metavar="SECONDS",
                        help="per run (default: the harness's)")
    report.add_argument("--aslr", action="store_true",
                        help="keep address-space randomisation (default: off via setarch -R, "
                             "so runs of a variant choose alike)")
    report.add_argument("--thread-cache-all", action="store_true",
                        help="build every container with the thread cache beside it "
                             "(-Dthread_cache_containers=all), so that \"behind a thread "
                             "cache\" compares them all, and time the workloads under them "
                             "too (<container>@tcache; default: the four anchors, on the "
                             "corpus only)")
    report.add_argument("--no-thread-cache", action="store_true",
                        help="leave out the corpus replays behind a thread cache")
    report.add_argument("--no-overlap", action="store_true",
                        help="run the replays and callgrind counts after the timed runs, not "
                             "beside them on the core they leave free (longer)")
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
    build(args.build_dir, [args.build_dir / "tools" / "firefox" / "librunsel-firefox-audit.so"])
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


def add_test(commands, shared_options: list[argparse.ArgumentParser]) -> None:
    test = commands.add_parser(
        "test", parents=shared_options,
        help="build, then run every container's correctness tests, on fewer inputs "
             "(--all: every test in six builds, as CI)",
        description="Without --all: configures the main build "
                    f"({BUILD_DIR}/), builds only what the suite '{DEFAULT_SUITE}' needs and "
                    f"runs it under meson's '{QUICK_TEST_SETUP}' test setup: for every container "
                    "the unit, functional and hardening tests, the same-choices tests, one "
                    "trace replay and the thread-cache libraries' tests, on a quarter of the "
                    "seeds and operations (tests/README.md lists what it leaves to --all). "
                    "At most 10 minutes on 2 cores, the build included. "
                    "--all: every test in six builds, full inputs: the main one, then "
                    "ThreadSanitizer, UndefinedBehaviorSanitizer, -Dchecked=true, libFuzzer "
                    "(clang) and -Dthread_cache=true builds beside it (build-tsan/, "
                    "build-ubsan/, build-checked/, build-fuzz/, build-tcache/); what CI runs. "
                    "Each run ends with a table of every build's tests and minutes. "
                    "Exit code 0 when every test that ran passed.")
    test.add_argument("--all", action="store_true",
                      help="every test in every build, full inputs (what CI runs)")
    test.add_argument("--builds", action="append", default=[], metavar="LIST",
                      help="comma-separated builds to run with full inputs, from " +
                           ", ".join(TEST_BUILDS) + " (default: without --all, the quick run; "
                           "with it, all of them, in that order)")
    test.add_argument("--suite", action="append", default=[], metavar="SUITE",
                      help="only this suite: a container name, default, unit, functional, "
                           "hardening, trace, thread_cache, harness or firefox (repeatable; the "
                           "tsan build always runs its own)")
    test.add_argument("meson_args", nargs="*", metavar="ARG",
                      help="more meson test arguments (after --)")
    test.set_defaults(handler=command_test)


def add_bench(commands, shared_options: list[argparse.ArgumentParser]) -> None:
    bench = commands.add_parser(
        "bench", parents=shared_options,
        help="build, then run the bench programs and malloc_bench: glibc vs runsel and the "
             "installed peers",
        description="Builds the bench programs (experiments/bench/programs/: larson with and "
                    "without sized delete, producer/consumer, a threaded stress, a "
                    f"single-thread loop) and runs them with {BENCH_PROGRAMS} under "
                    f"{' and '.join(BENCH_ANCHORS)}, glibc, jemalloc, mimalloc and tcmalloc "
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
                       help=f"the bench programs also under {REFERENCE_VARIANT} with each other "
                            "purge policy and under each build option's library")
    bench.add_argument("--rounds", type=positive(int), default=5, metavar="N",
                       help="interleaved rounds of the bench programs (default: 5, the fewest "
                            "that give intervals)")
    bench.add_argument("--scale", type=positive(float), default=1.0, metavar="X",
                       help="operation counts of the bench programs (default: 1)")
    bench.add_argument("compare_args", nargs="*", metavar="ARG",
                       help=f"more {BENCH_COMPARE} arguments (after --)")
    bench.set_defaults(handler=command_bench)


def root_relative(path: Path | None, default: Path = BUILD_DIR) -> Path:
    """A path given from the caller's directory, as the commands (run at the root) see it."""
    if path is None:
        return default
    absolute = path.resolve()
    return absolute.relative_to(ROOT) if absolute.is_relative_to(ROOT) else absolute


def main(argv: list[str] | None = None) -> int:
    arguments = parser()
    args = arguments.parse_args(argv)
    if args.command is None:
        arguments.print_help()
        return 2
    if hasattr(args, "build_dir"):
        args.build_dir = root_relative(args.build_dir)
    if hasattr(args, "out"):
        args.out = root_relative(args.out)
    for name in ("results", "render_out"):  # render's paths, from the caller's directory
        if getattr(args, name, None) is not None:
            setattr(args, name, root_relative(getattr(args, name)))
    os.chdir(ROOT)
    try:
        return args.handler(args)
    except StepFailed as failure:
        print(f"runsel {args.command}: {failure}", file=sys.stderr)
        return failure.exit_code
    except subprocess.CalledProcessError as failure:
        print(f"runsel {args.command}: {shlex.join(map(str, failure.cmd))} failed "
              f"({failure.returncode}): {(failure.stderr or '').strip()}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        return 130


if __name__ == "__main__":
    sys.exit(main())
