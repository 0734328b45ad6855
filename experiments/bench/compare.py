#!/usr/bin/env python3
"""Run malloc_bench under several allocators, interleaved, and compare them.

Round by round, every allocator runs the same benchmark binary in turn (glibc without
LD_PRELOAD, the others with it: A B C A B C ...), so slow drifts of the machine hit all
of them alike (and each round starts one allocator later). Each run must prove which
allocator served malloc, or the comparison stops. Prints Markdown tables (median ns/op,
the paired difference to the baseline with a 95 % confidence interval, resident memory
of the mixed loop) and can write the raw results as JSON. Shares the harness's module
(harness.allocators, with experiments/ on PYTHONPATH) and its statistics
(harness.comparisons, scipy: re-runs itself under Debian's python3 when this interpreter
lacks it).
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

from harness import allocators
from harness.allocators import GLIBC, PEERS, Allocator, measured_environment, round_order
from harness.interpreter import ensure_libraries

if __name__ == "__main__":  # run by Debian's python3 when this one lacks numpy or scipy
    ensure_libraries({"numpy": "python3-numpy", "scipy": "python3-scipy"}, "compare.py")

from harness import comparisons, targets

RUNSEL_FILE_PREFIX = "lib" + allocators.VARIANT_TARGET_PREFIX  # libmalloc-<container>.so
CLOCK_TEXT = {
    "auto": "CPU time of the benchmark thread, except for /real_time benchmarks: wall time "
            "divided by the operations of all threads",
    "cpu": "CPU time (summed over threads)",
    "real": "wall-clock time (divided by the operations of all threads)",
}
TIME_UNIT_NS = {"ns": 1.0, "us": 1e3, "ms": 1e6, "s": 1e9}
CI_METHOD = ("Difference: the 20 % trimmed mean of the per-round log ratios to the baseline, "
             "in percent (rounds are paired: each runs every allocator); 95 % CI: "
             "scipy.stats.bootstrap, paired, BCa (percentile where BCa degenerates), "
             "{resamples} resamples, seed {seed} "
             "(experiments/harness/comparisons.py)")


class RunRejected(Exception):
    """A run that failed or cannot prove which allocator it used."""


@dataclass
class Results:
    allocators: list[Allocator]
    clock: str  # "auto", "cpu" or "real": which time ns_per_op is
    benchmarks: list[str] = field(default_factory=list)  # in the binary's order
    # samples[benchmark][allocator][metric] -> one value per round
    samples: dict[str, dict[str, dict[str, list[float]]]] = field(default_factory=dict)
    raw_runs: list[dict] = field(default_factory=list)

    def add(self, allocator: str, benchmark: str, metric: str, value: float) -> None:
        if benchmark not in self.samples:
            self.benchmarks.append(benchmark)
            self.samples[benchmark] = {}
        per_metric = self.samples[benchmark].setdefault(allocator, {})
        per_metric.setdefault(metric, []).append(value)

    def values(self, benchmark: str, allocator: str, metric: str) -> list[float]:
        return self.samples.get(benchmark, {}).get(allocator, {}).get(metric, [])


# --------------------------------------------------------------------------- arguments

def parse_preload(spec: str) -> Allocator:
    name, sep, path = spec.partition("=")
    if not sep or not name or not path:
        raise argparse.ArgumentTypeError(f"--preload wants name=path, got {spec!r}")
    library = Path(path).resolve()
    if not library.is_file():
        raise argparse.ArgumentTypeError(f"--preload {name}: no such file {path}")
    return Allocator(name, library.name.startswith(RUNSEL_FILE_PREFIX), library)


def parse_args(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--bench", default="build/experiments/malloc_bench",
                        help="malloc_bench binary (default: %(default)s)")
    parser.add_argument("--rounds", type=int, default=5,
                        help="interleaved rounds (default: %(default)s)")
    parser.add_argument("--min-time", type=float, default=0.2,
                        help="--benchmark_min_time per benchmark, seconds (default: %(default)s)")
    parser.add_argument("--filter", default=None, help="--benchmark_filter regex")
    parser.add_argument("--clock", choices=("auto", "cpu", "real"), default="auto",
                        help="time per op: auto = CPU time, wall time for /real_time "
                             "(threaded) benchmarks (default: %(default)s)")
    parser.add_argument("--preload", type=parse_preload, action="append", default=[],
                        metavar="NAME=PATH", help="an allocator to LD_PRELOAD (repeatable)")
    parser.add_argument("--no-glibc", action="store_true",
                        help="leave out the run without LD_PRELOAD")
    parser.add_argument("--baseline", default=GLIBC,
                        help="allocator the differences are relative to (default: glibc, or the "
                             "first --preload with --no-glibc)")
    parser.add_argument("--out", type=Path, default=None, help="write raw results as JSON")
    parser.add_argument("--seed", type=int, default=1, help="bootstrap seed (default: %(default)s)")
    args = parser.parse_args(argv)

    args.allocators = ([] if args.no_glibc else [Allocator(GLIBC, False, None)]) + args.preload
    names = [a.name for a in args.allocators]
    if len(set(names)) != len(names):
        parser.error(f"allocator names must be distinct: {names}")
    if not args.allocators:
        parser.error("nothing to run: give --preload or drop --no-glibc")
    if args.no_glibc and args.baseline == GLIBC:
        args.baseline = names[0]
    if args.baseline not in names:
        parser.error(f"--baseline {args.baseline} is not one of {names}")
    if args.rounds < 1:
        parser.error("--rounds must be at least 1")
    if not Path(args.bench).is_file():
        parser.error(f"no benchmark binary at {args.bench} (build it, or pass --bench)")
    return args


# --------------------------------------------------------------------------- running

def expected_label(allocator: Allocator) -> str | None:
    """The label the binary must report for this allocator, when the file name says."""
    if allocator.preload is None:
        return GLIBC
    file_name = allocator.preload.name
    if file_name.startswith(RUNSEL_FILE_PREFIX) and ".so" in file_name:
        return "runsel:" + file_name[len(RUNSEL_FILE_PREFIX):file_name.index(".so")]
    for family in PEERS:
        if family in file_name:
            return family
    return None


def verify_allocator(report: dict, allocator: Allocator) -> str:
    """Returns the proven allocator label or raises RunRejected."""
    context = report.get("context", {})
    label = context.get("allocator")
    provider = context.get("malloc_provider", "")
    if not label:
        raise RunRejected("the run did not report context.allocator")
    for entry in report.get("benchmarks", []):
        if entry.get("label") != label:
            raise RunRejected(f"{entry.get('name')} ran with label {entry.get('label')!r}, "
                              f"context says {label!r}")
    if not provider:
        raise RunRejected(f"the run ({label}) could not name the object serving malloc")
    if allocator.preload is None:
        if label != GLIBC or "/libc.so" not in provider:
            raise RunRejected(f"expected glibc, but malloc came from {provider} ({label})")
    else:
        if Path(provider).resolve() != allocator.preload:
            raise RunRejected(f"LD_PRELOAD={allocator.preload} did not take over malloc: "
                              f"it came from {provider} ({label})")
        if label == GLIBC:
            raise RunRejected(f"LD_PRELOAD={allocator.preload} reported itself as glibc")
    wanted = expected_label(allocator)
    if wanted is not None and label != wanted:
        raise RunRejected(f"expected allocator {wanted!r}, the run reported {label!r}")
    return label


def run_once(args: argparse.Namespace, allocator: Allocator) -> dict:
    with tempfile.NamedTemporaryFile(prefix="malloc_bench.", suffix=".json") as out:
        # The JSON goes to a file: stdout is left to the allocator (stats at exit etc.).
        command = [str(Path(args.bench).resolve()), "--benchmark_format=json",
                   "--benchmark_repetitions=1", f"--benchmark_min_time={args.min_time}",
                   f"--benchmark_out={out.name}", "--benchmark_out_format=json"]
        if args.filter:
            command.append(f"--benchmark_filter={args.filter}")
        completed = subprocess.run(command, env=measured_environment(allocator.preload),
                                   capture_output=True, text=True)
        if completed.returncode != 0:
            tail = "\n".join(completed.stderr.strip().splitlines()[-10:])
            raise RunRejected(f"{allocator.name}: malloc_bench exited with "
                              f"{completed.returncode}\n{tail}")
        text = Path(out.name).read_text()
        if not text.strip():
            tail = "\n".join(completed.stderr.strip().splitlines()[-3:])
            raise RunRejected(f"{allocator.name}: malloc_bench wrote no results "
                              f"(check --filter)\n{tail}")
        try:
            report = json.loads(text)
        except (OSError, json.JSONDecodeError) as error:
            raise RunRejected(f"{allocator.name}: unreadable benchmark JSON: {error}") from None
    if not report.get("benchmarks"):
        raise RunRejected(f"{allocator.name}: no benchmark ran (check --filter)")
    for entry in report["benchmarks"]:
        if entry.get("error_occurred"):
            raise RunRejected(f"{allocator.name}: {entry['name']} failed: "
                              f"{entry.get('error_message')}")
    return report


def clock_for(benchmark: str, choice: str) -> str:
    """'auto': CPU time, which other processes' load barely disturbs, except for
    benchmarks registered with UseRealTime (the threaded ones), whose point is wall-clock
    throughput and whose CPU time would hide threads sleeping on a lock."""
    if choice != "auto":
        return choice
    return "real" if "/real_time" in benchmark else "cpu"


def record(results: Results, allocator: Allocator, report: dict) -> None:
    for entry in report["benchmarks"]:
        if entry.get("run_type", "iteration") != "iteration":
            continue  # aggregates, if any; we compute our own
        scale = TIME_UNIT_NS[entry.get("time_unit", "ns")]
        clock = clock_for(entry["name"], results.clock)
        results.add(allocator.name, entry["name"], "ns_per_op", entry[clock + "_time"] * scale)
        for counter in ("items_per_second", "rss_bytes", "live_bytes"):
            if counter in entry:
                results.add(allocator.name, entry["name"], counter, float(entry[counter]))


def run_interleaved(args: argparse.Namespace) -> Results:
    results = Results(args.allocators, args.clock)
    total = args.rounds * len(args.allocators)
    started = time.monotonic()
    done = 0
    for round_index in range(args.rounds):
        for allocator in round_order(args.allocators, round_index):
            run_started = time.monotonic()
            try:
                report = run_once(args, allocator)
                label = verify_allocator(report, allocator)
            except RunRejected as error:
                sys.exit(f"compare.py: run rejected, nothing counted: {error}")
            record(results, allocator, report)
            results.raw_runs.append({"round": round_index, "allocator": allocator.name,
                                     "preload": str(allocator.preload or ""),
                                     "report": report})
            done += 1
            elapsed = time.monotonic() - started
            remaining = elapsed / done * (total - done)
            print(f"[{done:>3}/{total}] round {round_index + 1}/{args.rounds} "
                  f"{allocator.name:<12} ({label}) {time.monotonic() - run_started:5.1f} s, "
                  f"about {remaining:4.0f} s left", file=sys.stderr, flush=True)
    return results


# --------------------------------------------------------------------------- statistics

def summarize(results: Results, baseline: str, seed: int) -> dict:
    """Per benchmark and allocator: the median of each metric over the rounds, and for
    time and resident memory the paired difference to the baseline (comparisons.py)."""
    summary: dict[str, dict] = {}
    for benchmark in results.benchmarks:
        rows = {}
        for allocator in results.allocators:
            row = {}
            for metric in ("ns_per_op", "rss_bytes", "live_bytes"):
                values = results.values(benchmark, allocator.name, metric)
                base = results.values(benchmark, baseline, metric)
                if not values:
                    continue
                row[metric] = statistics.median(values)
                if base and allocator.name != baseline and metric != "live_bytes":
                    # values[r] and base[r] ran in round r: a pair.
                    rounds = min(len(values), len(base))
                    row[metric + "_vs_baseline"] = comparisons.compare_paired(
                        values[:rounds], base[:rounds], seed=seed)
            rows[allocator.name] = row
        summary[benchmark] = rows
    return summary


# --------------------------------------------------------------------------- report

def format_difference(entry: dict | None) -> str:
    """"+1.2 % [-0.4, +2.9]": the paired difference to the baseline and its 95 % CI."""
    if entry is None or entry["percent"] is None:
        return "–"
    if entry["low"] is None:
        return f"{entry['percent']:+.1f} % ({entry['outcome']})"
    return f"{entry['percent']:+.1f} % [{entry['low']:+.1f}, {entry['high']:+.1f}]"


def speed_table(summary: dict, names: list[str], baseline: str) -> str:
    others = [name for name in names if name != baseline]
    header = (["benchmark"] + [f"{name} ns/op" for name in names]
              + [f"{name} vs {baseline}" for name in others])
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    for benchmark, rows in summary.items():
        cells = [f"`{benchmark}`"]
        cells += [f"{rows[name]['ns_per_op']:.1f}" if "ns_per_op" in rows.get(name, {}) else "–"
                  for name in names]
        cells += [format_difference(rows.get(name, {}).get("ns_per_op_vs_baseline"))
                  for name in others]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


def memory_table(summary: dict, names: list[str], baseline: str) -> str:
    others = [name for name in names if name != baseline]
    header = (["benchmark", "live requested MiB"] + [f"{name} RSS MiB" for name in names]
              + [f"{name} vs {baseline}" for name in others])
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    mib = 1024.0 * 1024.0
    for benchmark, rows in summary.items():
        if not any("rss_bytes" in row for row in rows.values()):
            continue
        live = next((row["live_bytes"] for row in rows.values() if "live_bytes" in row), None)
        cells = [f"`{benchmark}`", f"{live / mib:.1f}" if live is not None else "–"]
        cells += [f"{rows[name]['rss_bytes'] / mib:.1f}" if "rss_bytes" in rows.get(name, {})
                  else "–" for name in names]
        cells += [format_difference(rows.get(name, {}).get("rss_bytes_vs_baseline"))
                  for name in others]
        lines.append("| " + " | ".join(cells) + " |")
    if len(lines) == 2:
        return ""
    return "\n".join(lines)


def target_subjects(results: Results) -> list[str]:
    """The runsel allocators the targets are judged for: the reference container when it
    ran, else every runsel allocator."""
    runsel = [a.name for a in results.allocators if a.runsel]
    return [allocators.REFERENCE] if allocators.REFERENCE in runsel else runsel


def targets_table(results: Results) -> str:
    """malloc_bench's targets (experiments/harness/targets.py), judged on this run."""
    subjects = target_subjects(results)
    if not subjects or GLIBC not in [a.name for a in results.allocators]:
        return ""
    judged = {name: targets.judge_bench(results.samples, name) for name in subjects}
    header = ["benchmark", "target", *subjects]
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    for index, row in enumerate(judged[subjects[0]]):
        cells = [judged[name][index]["judged"]["text"] for name in subjects]
        lines.append(f"| `{row['benchmark']}` | {targets.target_text(row)} | "
                     + " | ".join(cells) + " |")
    return "\n".join(lines)


def busy_note(results: Results) -> str:
    """A warning when other work shared the machine (1-minute load at a run's start)."""
    loads = [run["report"]["context"].get("load_avg", [0.0])[0] for run in results.raw_runs]
    cpus = results.raw_runs[0]["report"]["context"].get("num_cpus", 1) if loads else 1
    if not loads or max(loads) < 0.75 * cpus:
        return ""
    return (f"**Busy machine:** load average up to {max(loads):.1f} on {cpus} CPUs during the "
            "runs; wall-clock figures are noisy, CPU-time ones less so.")


def report_markdown(results: Results, summary: dict, args: argparse.Namespace) -> str:
    names = [a.name for a in results.allocators]
    proven = {run["allocator"]: run["report"]["context"]["allocator"] for run in results.raw_runs}
    context = results.raw_runs[0]["report"]["context"] if results.raw_runs else {}
    parts = [
        "## malloc_bench: " + ", ".join(f"{name} ({proven.get(name, '?')})" for name in names),
        "",
        f"{args.rounds} interleaved rounds, min time {args.min_time} s per benchmark, "
        f"{context.get('num_cpus', '?')} CPUs, host {context.get('host_name', '?')}. "
        f"Time: median over rounds of ns per operation (one malloc+free pair), "
        f"{CLOCK_TEXT[args.clock]}. "
        f"Against {args.baseline}: below 0 is faster or smaller. "
        + CI_METHOD.format(resamples=comparisons.RESAMPLES, seed=args.seed) + ".",
        "",
        speed_table(summary, names, args.baseline),
    ]
    busy = busy_note(results)
    if busy:
        parts[2] += " " + busy
    memory = memory_table(summary, names, args.baseline)
    if memory:
        parts += ["", "Resident memory of the whole process at the end of the mixed loops and "
                  "of BM_page_sized, working set still live (median over rounds; the mixed "
                  "loops write only the first 32 bytes of each block, so untouched pages of "
                  "large blocks are not resident; BM_page_sized writes every page).", "",
                  memory]
    table = targets_table(results)
    if table:
        parts += ["", "### Targets", "", "Each cell: runsel's figure over the other "
                  "allocator's, paired by round, with its 95 % interval (the method above); "
                  "met when the whole interval is at or below the bound, missed when it is "
                  "wholly above, unresolved when it straddles; \"needs\" is the change of "
                  "runsel's figure that would just meet the bound. Time as in the first "
                  "table; resident memory as in the second. The best peer is the one of "
                  "jemalloc, mimalloc and tcmalloc with the lowest median time (a benchmark "
                  "left out by --filter, or a peer not installed, reads \"-\").", "", table]
    return "\n".join(parts) + "\n"


def write_raw(path: Path, results: Results, summary: dict, args: argparse.Namespace) -> None:
    document = {
        "bench": str(Path(args.bench).resolve()),
        "rounds": args.rounds,
        "min_time": args.min_time,
        "clock": args.clock,
        "filter": args.filter,
        "baseline": args.baseline,
        "ci_method": CI_METHOD.format(resamples=comparisons.RESAMPLES, seed=args.seed),
        "allocators": [{"name": a.name, "preload": str(a.preload or "")}
                       for a in results.allocators],
        "samples": results.samples,
        "summary": summary,
        "runs": results.raw_runs,
    }
    path.write_text(json.dumps(document, indent=1) + "\n")


def main(argv: list[str]) -> int:
    args = parse_args(argv)
    results = run_interleaved(args)
    summary = summarize(results, args.baseline, args.seed)
    print(report_markdown(results, summary, args), end="")
    if args.out is not None:
        write_raw(args.out, results, summary, args)
        print(f"raw results written to {args.out}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
