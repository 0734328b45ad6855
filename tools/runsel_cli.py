#!/usr/bin/env python3
"""runsel's command line: configures and builds the allocator, then runs one job
(report, test, bench). Started by tools/runsel once the Debian packages are in.

Every step prints the command it runs ("+ ..."), so any step can be repeated by
hand from the repository root. Standard library only: a fresh machine has it.
"""

from __future__ import annotations

import argparse
import json
import os
import shlex
import statistics
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import runsel_report  # noqa: E402  (next to this file)

sys.path.insert(0, str(Path(__file__).resolve().parent / "trace"))
import runsel_trace_cli  # noqa: E402  (tools/trace/: the trace and replay subcommands)

ROOT = Path(__file__).resolve().parent.parent
BUILD_DIR = Path("build")
RESULTS_DIR = Path("results")
WORKLOAD = Path("tests/programs/alloc_heavy.py")
BENCH_PROGRAM = Path("experiments/malloc_bench")  # under the build directory
BENCH_COMPARE = Path("experiments/bench/compare.py")
VARIANT_TARGET_PREFIX = "malloc-"  # meson's name for build/libmalloc-<container>.so
REFERENCE_VARIANT = "rb_first"  # the others are compared with it


class StepFailed(Exception):
    """A step could not be done; the message says which and why."""


# --- running commands -----------------------------------------------------------------


def show(command: list[str], env_changes: dict[str, str] | None = None) -> None:
    """Prints a command as it could be typed in a shell at the repository root."""
    prefix = [f"{name}={value}" for name, value in (env_changes or {}).items()]
    print("+ " + shlex.join(prefix + [str(part) for part in command]), flush=True)


def run(command: list[str], check: bool = True) -> int:
    """Shows and runs a command with the terminal as its output; returns its exit code."""
    show(command)
    code = subprocess.call([str(part) for part in command])
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
    options = capture_json(["meson", "introspect", str(build_dir), "--buildoptions"])
    return {option["name"]: str(option["value"]) for option in options}


def configure(build_dir: Path, options: dict[str, str]) -> None:
    """meson setup on a new build directory; --reconfigure when an option changes."""
    defines = [f"-D{name}={value}" for name, value in options.items()]
    if not is_configured(build_dir):
        run(["meson", "setup", build_dir, *defines])
        return
    current = current_options(build_dir)
    changed = {name: value for name, value in options.items() if current.get(name) != value}
    if changed:
        run(["meson", "setup", "--reconfigure", build_dir, *defines])
    else:
        print(f"# {build_dir}/ is configured (run_container={current.get('run_container')})")


def build_targets(build_dir: Path) -> list[dict]:
    return capture_json(["meson", "introspect", str(build_dir), "--targets"])


def defines_output(build_dir: Path, output: Path) -> bool:
    wanted = output.resolve()
    return any(Path(name).resolve() == wanted
               for target in build_targets(build_dir) for name in target["filename"])


def variant_libraries(build_dir: Path) -> dict[str, Path]:
    """Every container's library, {container: build/libmalloc-<container>.so}, reference first."""
    libraries = {}
    for target in build_targets(build_dir):
        if target["type"] == "shared library" and target["name"].startswith(VARIANT_TARGET_PREFIX):
            container = target["name"][len(VARIANT_TARGET_PREFIX) :]
            libraries[container] = root_relative(Path(target["filename"][0]))
    if not libraries:
        raise StepFailed(f"meson defines no {VARIANT_TARGET_PREFIX}<container> library")
    return dict(sorted(libraries.items(), key=lambda item: item[0] != REFERENCE_VARIANT))


def selected_variant(build_dir: Path) -> str:
    return current_options(build_dir).get("run_container", "?")


def build(build_dir: Path, outputs: list[Path] | None = None) -> None:
    """ninja on the given outputs (paths under build_dir), or on everything."""
    targets = [os.path.relpath(path, build_dir) for path in outputs or []]
    run(["ninja", "-C", build_dir, *targets])


def build_libraries(args: argparse.Namespace, extra: list[Path] = ()) -> dict[str, Path]:
    """Builds every variant's library, build/libmalloc.so and `extra`; returns the variants."""
    libraries = variant_libraries(args.build_dir)
    build(args.build_dir, [*libraries.values(), args.build_dir / "libmalloc.so", *extra])
    return libraries


# --- report: python3 under every variant ----------------------------------------------


def workload_python(args: argparse.Namespace) -> str:
    """Debian's python3 (a real binary, so the child's pid is python's own), else ours."""
    if args.python:
        return args.python
    return "/usr/bin/python3" if Path("/usr/bin/python3").exists() else sys.executable


def workload_command(args: argparse.Namespace) -> list[str]:
    return [workload_python(args), str(args.script), *args.workload_args]


def run_workload(args: argparse.Namespace, env_changes: dict[str, str]) -> dict:
    """One run of the workload; returns its output, exit code, wall time and pid."""
    command = workload_command(args)
    environment = {k: v for k, v in os.environ.items() if k not in ("LD_PRELOAD", "RUNSEL_STATS")}
    environment.update(env_changes)
    show(command, env_changes)
    start = time.perf_counter()
    child = subprocess.Popen(
        command, env=environment, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )
    try:
        stdout, stderr = child.communicate(timeout=args.timeout)
    except subprocess.TimeoutExpired:
        child.kill()
        stdout, stderr = child.communicate()
        stderr += f"\n[runsel: killed after {args.timeout} s]"
    seconds = time.perf_counter() - start
    print(f"  {seconds:.2f} s, exit {child.returncode}", flush=True)
    return {"pid": child.pid, "returncode": child.returncode, "stdout": stdout,
            "stderr": stderr, "seconds": seconds}


def stats_file(variant: str, repetition: int) -> Path:
    path = RESULTS_DIR / "stats" / f"{variant}-{repetition}.jsonl"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.unlink(missing_ok=True)
    return path


def read_stats_line(path: Path, pid: int) -> dict | None:
    """The stats line of process `pid` (python3 may have started others)."""
    if not path.exists():
        return None
    for line in path.read_text().splitlines():
        try:
            record = json.loads(line)
        except json.JSONDecodeError:
            continue
        if record.get("pid") == pid:
            return record
    return None


def run_under_variant(args, variant: str, library: Path, repetition: int) -> dict:
    stats_path = stats_file(variant, repetition)
    result = run_workload(args, {"PYTHONMALLOC": "malloc", "LD_PRELOAD": str(ROOT / library),
                                 "RUNSEL_STATS": str(ROOT / stats_path)})
    result["stats"] = read_stats_line(stats_path, result["pid"])
    result["stats_file"] = str(stats_path)
    return result


def run_all_interleaved(args, libraries: dict[str, Path]) -> tuple[list[dict], dict[str, list]]:
    """Runs glibc then each variant, `repeat` times in turn, so drift hits all alike."""
    baseline_runs, variant_runs = [], {variant: [] for variant in libraries}
    for repetition in range(1, args.repeat + 1):
        baseline_runs.append(run_workload(args, {"PYTHONMALLOC": "malloc"}))
        for variant, library in libraries.items():
            variant_runs[variant].append(run_under_variant(args, variant, library, repetition))
    return baseline_runs, variant_runs


def check_runs(variant: str, runs: list[dict], expected_stdout: str) -> list[dict]:
    """What must hold for every run under a variant: {name, ok, detail, evidence}."""
    checks = []

    def add(name: str, failures: list, detail=lambda failure: "", evidence=lambda failure: ""):
        first = failures[0] if failures else None
        checks.append({"name": name, "ok": not failures,
                       "detail": detail(first) if failures else "",
                       "evidence": evidence(first) if failures else ""})

    add("exit status 0", [run for run in runs if run["returncode"] != 0],
        lambda run: f"exit {run['returncode']} (pid {run['pid']})",
        lambda run: run["stderr"].strip()[-2000:])
    add("output identical to glibc's", [run for run in runs if run["stdout"] != expected_stdout],
        lambda run: runsel_report.first_difference(expected_stdout, run["stdout"]),
        lambda run: runsel_report.output_diff(expected_stdout, run["stdout"]))
    add("stats line written for the child's pid", [run for run in runs if run["stats"] is None],
        lambda run: f"no line with pid {run['pid']} in {run['stats_file']}",
        lambda run: run["stderr"].strip()[-2000:])
    served = [run["stats"] for run in runs if run["stats"] is not None]
    add(f"served by runsel ({variant})",
        [stats for stats in served if stats.get("variant") != variant or not stats.get("nmalloc")],
        lambda stats: f"variant={stats.get('variant')!r}, nmalloc={stats.get('nmalloc')}")
    add("stats line has every figure", [stats for stats in served
                                         if runsel_report.missing_figures(stats)],
        lambda stats: "missing: " + ", ".join(runsel_report.missing_figures(stats)))
    add("committed = allocated + waste + dirty + bookkeeping + bin_unused",
        [stats for stats in served if runsel_report.identity_gap(stats) != 0],
        lambda stats: "cannot check: a figure is missing" if runsel_report.identity_gap(stats)
        is None else f"committed - terms = {runsel_report.identity_gap(stats)} bytes")
    return checks


def check_baseline(runs: list[dict]) -> list[dict]:
    """The workload must be deterministic, or comparing outputs proves nothing."""
    differing = [run for run in runs if run["stdout"] != runs[0]["stdout"]]
    return [{"name": "deterministic: every run prints the same", "ok": not differing,
             "detail": runsel_report.first_difference(runs[0]["stdout"], differing[0]["stdout"])
             if differing else "",
             "evidence": runsel_report.output_diff(runs[0]["stdout"], differing[0]["stdout"])
             if differing else ""}]


def summarize(args, libraries, baseline_runs, variant_runs) -> dict:
    """Everything the report shows, as plain data (this is results/report.json)."""
    baseline_median = statistics.median(run["seconds"] for run in baseline_runs)
    expected_stdout = baseline_runs[0]["stdout"]
    baseline_checks = check_baseline(baseline_runs)
    variants = []
    for variant, runs in variant_runs.items():
        median = statistics.median(run["seconds"] for run in runs)
        checks = check_runs(variant, runs, expected_stdout)
        variants.append({
            "name": variant,
            "library": str(libraries[variant]),
            "wall_seconds": [run["seconds"] for run in runs],
            "median_seconds": median,
            "vs_glibc": median / baseline_median if baseline_median else None,
            "checks": checks,
            "ok": all(check["ok"] for check in checks),
            "stats": runs[0]["stats"],
        })
    return {
        "generated": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
        "workload": shlex.join(workload_command(args)),
        "environment": "PYTHONMALLOC=malloc; LD_PRELOAD=<variant library>; RUNSEL_STATS=<file>",
        "python": subprocess.run([workload_python(args), "--version"], capture_output=True,
                                 text=True).stdout.strip(),
        "repeat": args.repeat,
        "selected_container": selected_variant(args.build_dir),
        "baseline": {
            "name": "glibc",
            "wall_seconds": [run["seconds"] for run in baseline_runs],
            "median_seconds": baseline_median,
            "stdout": expected_stdout,
            "checks": baseline_checks,
            "ok": all(check["ok"] for check in baseline_checks),
        },
        "variants": variants,
        "ok": all(check["ok"] for check in baseline_checks) and all(v["ok"] for v in variants),
    }


def write_results(summary: dict, stem: str) -> tuple[Path, Path]:
    RESULTS_DIR.mkdir(exist_ok=True)
    json_path, markdown_path = RESULTS_DIR / f"{stem}.json", RESULTS_DIR / f"{stem}.md"
    json_path.write_text(json.dumps(summary, indent=2) + "\n")
    markdown_path.write_text(runsel_report.markdown(summary))
    return markdown_path, json_path


def command_report(args: argparse.Namespace) -> int:
    if not args.script.exists():
        raise StepFailed(f"{args.script} is missing: the report runs it under every variant")
    configure(args.build_dir, requested_options(args))
    libraries = build_libraries(args)
    if args.variant:
        unknown = set(args.variant) - set(libraries)
        if unknown:
            raise StepFailed(f"no such variant: {', '.join(sorted(unknown))}")
        libraries = {name: path for name, path in libraries.items() if name in args.variant}
    baseline_runs, variant_runs = run_all_interleaved(args, libraries)
    if baseline_runs[0]["returncode"] != 0:
        sys.stderr.write(baseline_runs[0]["stderr"])
        raise StepFailed(f"{args.script} failed without runsel "
                         f"(exit {baseline_runs[0]['returncode']})")
    summary = summarize(args, libraries, baseline_runs, variant_runs)
    print()
    print(runsel_report.text(summary))
    markdown_path, json_path = write_results(summary, "report")
    print(f"\nreport written to {markdown_path} and {json_path}")
    return 0 if summary["ok"] else 1


# --- test -------------------------------------------------------------------------------


def count_test_results(build_dir: Path) -> dict[str, int] | None:
    """Counts meson's per-test results from its log (None when there is no log)."""
    log = build_dir / "meson-logs" / "testlog.json"
    if not log.exists():
        return None
    counts = {"passed": 0, "failed": 0, "skipped": 0}
    outcome = {"OK": "passed", "EXPECTEDFAIL": "passed", "SKIP": "skipped"}
    for line in log.read_text().splitlines():
        if line.strip():
            counts[outcome.get(json.loads(line).get("result"), "failed")] += 1
    return counts


def command_test(args: argparse.Namespace) -> int:
    configure(args.build_dir, requested_options(args))
    build(args.build_dir)
    (args.build_dir / "meson-logs" / "testlog.json").unlink(missing_ok=True)
    suites = [part for suite in args.suite for part in ("--suite", suite)]
    code = run(["meson", "test", "-C", args.build_dir, "--print-errorlogs", *suites,
                *args.meson_args], check=False)
    counts = count_test_results(args.build_dir)
    if counts is not None:
        print(f"tests: {counts['passed']} passed, {counts['failed']} failed, "
              f"{counts['skipped']} skipped")
    return code


# --- bench ------------------------------------------------------------------------------


def command_bench(args: argparse.Namespace) -> int:
    """compare.py prints its Markdown tables (kept as bench.md) and writes the JSON."""
    program = args.build_dir / BENCH_PROGRAM
    configure(args.build_dir, requested_options(args))
    if not defines_output(args.build_dir, program):
        raise StepFailed(f"meson defines no {program}: it needs libbenchmark-dev (and "
                         "-Dbenchmarks=true); see build/meson-logs/meson-log.txt")
    libraries = build_libraries(args, extra=[program])
    RESULTS_DIR.mkdir(exist_ok=True)
    preloads = [part for name, path in libraries.items()
                for part in ("--preload", f"{name}={path}")]
    json_path, markdown_path = RESULTS_DIR / "bench.json", RESULTS_DIR / "bench.md"
    command = [sys.executable, BENCH_COMPARE, "--bench", program, *preloads, "--out", json_path,
               *args.compare_args]
    show(command)
    completed = subprocess.run([str(part) for part in command], stdout=subprocess.PIPE, text=True)
    print(completed.stdout, end="")
    if completed.returncode != 0:
        raise StepFailed(f"{BENCH_COMPARE} exited with {completed.returncode}")
    markdown_path.write_text(completed.stdout)
    print(f"\nbenchmark written to {markdown_path} and {json_path}")
    return 0


# --- command line -----------------------------------------------------------------------


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
    shared = [build_options()]

    report = commands.add_parser(
        "report", parents=shared, help="the main job: build every variant, run python3 under each",
        description=f"Builds every variant, runs {WORKLOAD} with python3 (PYTHONMALLOC=malloc) "
                    "under glibc and under each variant (LD_PRELOAD), checks the output is "
                    "identical and that runsel served it, and prints runsel's stats. "
                    f"Writes {RESULTS_DIR}/report.md and {RESULTS_DIR}/report.json.")
    report.add_argument("--repeat", type=int, default=3, metavar="N",
                        help="runs per allocator, interleaved; times are medians (default: 3)")
    report.add_argument("--variant", action="append", default=[], metavar="NAME",
                        help="only this variant (repeatable; default: all)")
    report.add_argument("--script", type=Path, metavar="PATH",
                        help=f"Python script to run (default: {WORKLOAD})")
    report.add_argument("--python", metavar="PATH",
                        help="interpreter to run (default: /usr/bin/python3)")
    report.add_argument("--timeout", type=float, default=900, metavar="SECONDS",
                        help="per run (default: %(default)s)")
    report.add_argument("workload_args", nargs="*", metavar="ARG",
                        help="passed to the script (after --)")
    report.set_defaults(handler=command_report)

    test = commands.add_parser(
        "test", parents=shared, help="build, then run every test (meson test)",
        description="Builds everything, then runs meson test --print-errorlogs. "
                    "Exit code is meson's.")
    test.add_argument("--suite", action="append", default=[], metavar="SUITE",
                      help="only this suite: a container name, unit or functional (repeatable)")
    test.add_argument("meson_args", nargs="*", metavar="ARG",
                      help="more meson test arguments (after --)")
    test.set_defaults(handler=command_test)

    bench = commands.add_parser(
        "bench", parents=shared, help="build, then compare malloc_bench: glibc vs every variant",
        description=f"Builds {BUILD_DIR / BENCH_PROGRAM} and every variant, then runs "
                    f"{BENCH_COMPARE}. Writes {RESULTS_DIR}/bench.json and {RESULTS_DIR}/bench.md.")
    bench.add_argument("compare_args", nargs="*", metavar="ARG",
                       help=f"more {BENCH_COMPARE} arguments (after --)")
    bench.set_defaults(handler=command_bench)

    runsel_trace_cli.add_commands(commands, shared, sys.modules[__name__])
    return main


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
    if hasattr(args, "script"):
        args.script = root_relative(args.script, default=WORKLOAD)
    os.chdir(ROOT)
    try:
        return args.handler(args)
    except StepFailed as failure:
        print(f"runsel {args.command}: {failure}", file=sys.stderr)
        return 1
    except subprocess.CalledProcessError as failure:
        print(f"runsel {args.command}: {shlex.join(map(str, failure.cmd))} failed "
              f"({failure.returncode}): {(failure.stderr or '').strip()}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        return 130


if __name__ == "__main__":
    sys.exit(main())
