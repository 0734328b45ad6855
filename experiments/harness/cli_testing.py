"""tools/runsel's test subcommand: the builds it configures, builds and tests (the main one
on fewer inputs by default; with --all, six of them, as CI runs them) and the summary
table of their tests and minutes. Standard library only.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import time
from dataclasses import dataclass, field
from pathlib import Path

from .allocators import build_targets
from .build_steps import StepFailed, build, capture_json, configure, requested_options, run
from .options import BUILD_DIR

CI_TEST_SETUP = "ci"  # meson.build's test setup for CI: the fixed seed list
QUICK_TEST_SETUP = "quick"  # the same on fewer inputs: runsel test without --all
DEFAULT_SUITE = "default"  # the tests runsel test runs without --all (tests/README.md)


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


OUTCOMES = {"OK": "passed", "EXPECTEDFAIL": "passed", "SKIP": "skipped"}  # else failed
FAILURE_TAIL_LINES = 12  # of a failed test's output, repeated in the summary


def test_records(build_dir: Path, setup: str = CI_TEST_SETUP) -> list[dict] | None:
    """meson's per-test records from its log (None when there is no log)."""
    log = test_log(build_dir, setup)
    if not log.exists():
        return None
    return [json.loads(line) for line in log.read_text().splitlines() if line.strip()]


def count_test_results(build_dir: Path, setup: str = CI_TEST_SETUP) -> dict[str, int] | None:
    """Counts meson's per-test results from its log (None when there is no log)."""
    records = test_records(build_dir, setup)
    if records is None:
        return None
    counts = {"passed": 0, "failed": 0, "skipped": 0}
    for record in records:
        counts[OUTCOMES.get(record.get("result"), "failed")] += 1
    return counts


def failure_lines(build_dir: Path, setup: str = CI_TEST_SETUP) -> list[str]:
    """Each test that did not pass: its name, result and the last lines of its output, so
    that the summary at the end of a long log names what failed."""
    lines = []
    for record in test_records(build_dir, setup) or []:
        if OUTCOMES.get(record.get("result"), "failed") == "passed":
            continue
        lines.append(f"{record['name']}: {record.get('result')} "
                     f"(exit code {record.get('returncode')}, {record.get('duration', 0):.1f} s)")
        output = (record.get("stdout") or "") + (record.get("stderr") or "")
        lines += [f"    {line}" for line in output.splitlines()[-FAILURE_TAIL_LINES:]]
    return lines


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
    outcome["failures"] = failure_lines(build_dir, spec.setup)
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
    for outcome in outcomes:
        if outcome.get("failures"):
            print(f"\n== not passed in the {outcome['build']} build")
            print("\n".join(outcome["failures"]))
    print()
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
