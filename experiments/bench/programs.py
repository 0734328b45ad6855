#!/usr/bin/env python3
"""Run the bench programs (experiments/bench/programs/) under several allocators,
interleaved, and report time, peak RSS and minor faults as ratios to glibc.

Round by round every (program, allocator) pair runs once, allocators in the harness's
rotating order (A B C, B C A, ...), so slow drifts of the machine hit all alike. Time is
the program's own clock over its measured region (wall time: the programs are threaded);
peak RSS (VmHWM) and minor faults (getrusage) are the whole process's, read by the program
as it ends (a parent's ru_maxrss for a child would count the forked parent before exec).
Every run must prove which allocator served it (the program prints the object whose
malloc it calls, and runsel's variant and purge policy), or the comparison stops.
Ratios are the paired difference of experiments/harness/comparisons.py (trimmed mean of
per-round log ratios, 95 % bootstrap interval), as ratios; the geometric mean row pairs
each round's geometric mean over the programs.

Needs experiments/ on PYTHONPATH (the harness package), as compare.py does.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import statistics
import subprocess
import sys
from dataclasses import dataclass
from functools import partial
from pathlib import Path

from harness import allocators
from harness.allocators import GLIBC, PEERS, Allocator, identity_problem, round_order
from harness.interpreter import ensure_libraries
from harness.presets import positive

if __name__ == "__main__":  # run by Debian's python3 when this one lacks numpy or scipy
    ensure_libraries({"numpy": "python3-numpy", "scipy": "python3-scipy"}, "programs.py")

NOT_RUNSEL = (GLIBC, *PEERS)  # the allocators runsel's time is held against

RUNSEL_FILE_PREFIXES = ("lib" + allocators.VARIANT_TARGET_PREFIX,
                        "lib" + allocators.SETTING_TARGET_PREFIX)
# The runsel libraries whose build profile their name says (memory/README.md, "Profiles"):
# libsetting-fast-<container>.so. A variant, libmalloc-<container>.so, is faithful unless
# its build has -Dthread_cache or -Dclasses48, so its profile is shown, not checked.
FAST_FILE_PREFIX = "lib" + allocators.SETTING_TARGET_PREFIX + allocators.FAST_SETTING + "-"


@dataclass(frozen=True)
class Program:
    name: str        # as reported and tabled
    binary: str      # meson's bench_<binary> under build/experiments
    arguments: tuple[str, ...] = ()


PROGRAMS = (
    Program("larson", "larson"),
    Program("larson_sized", "larson", ("--sized",)),
    Program("producer_consumer", "producer_consumer"),
    Program("stress", "stress"),
    Program("small_loop", "small_loop"),
    Program("mixed_remote", "mixed_remote"),
    Program("simple_loop", "simple_loop"),
)
METRICS = (  # (key, table title, unit of the glibc column, scale from the raw value)
    ("seconds", "time", "s", 1.0),
    ("peak_rss", "peak RSS", "MiB", 1 / 1024),  # VmHWM, in KiB
    ("minor_faults", "minor faults", "", 1.0),
)


class RunRejected(Exception):
    """A run that failed or cannot prove which allocator it used."""


def runsel_library(path: Path) -> bool:
    return path.name.startswith(RUNSEL_FILE_PREFIXES)


def exports_runsel(library: Path) -> bool:
    """Whether the library defines runsel_variant (nm -D; False when nm cannot tell)."""
    try:
        symbols = subprocess.run(["nm", "-D", "--defined-only", str(library)],
                                 capture_output=True, text=True).stdout
    except OSError:
        return False
    return any(line.split()[-1:] == ["runsel_variant"] for line in symbols.splitlines())


def parse_preload(spec: str) -> Allocator:
    """NAME=PATH, or NAME=PATH:VAR=VALUE to set a variable for its runs (RUNSEL_CONF)."""
    name, sep, rest = spec.partition("=")
    path, _, setting = rest.partition(":")
    if not sep or not name or not path:
        raise argparse.ArgumentTypeError(f"--preload wants NAME=PATH[:VAR=VALUE], got {spec!r}")
    library = Path(path).resolve()
    if not library.is_file():
        raise argparse.ArgumentTypeError(f"--preload {name}: no such file {path}")
    environment: tuple[tuple[str, str], ...] = ()
    if setting:
        variable, equals, value = setting.partition("=")
        if not equals or not variable:
            raise argparse.ArgumentTypeError(f"--preload {name}: {setting!r} is not VAR=VALUE")
        environment = ((variable, value),)
    runsel = runsel_library(library)
    if not runsel and exports_runsel(library):
        raise argparse.ArgumentTypeError(
            f"--preload {name}: {path} is a runsel library, but only its file name "
            f"({RUNSEL_FILE_PREFIXES[0]}<container>.so or "
            f"{RUNSEL_FILE_PREFIXES[1]}<setting>-<container>.so) says which "
            "container it must be, and every run's allocator is checked against that: "
            "give it such a name")
    return Allocator(name, runsel, library, setting or None, environment)


def parse_args(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--build-dir", type=Path, default=Path("build"),
                        help="meson build directory with experiments/bench_* (default: build)")
    parser.add_argument("--preload", type=parse_preload, action="append", default=[],
                        metavar="NAME=PATH[:VAR=VALUE]",
                        help="an allocator to LD_PRELOAD, optionally with one variable set "
                             "(repeatable); glibc always runs")
    parser.add_argument("--rounds", type=positive(int), default=5,
                        help="interleaved rounds, at least 5 for intervals (default: 5)")
    parser.add_argument("--scale", type=positive(float), default=1.0,
                        help="operation counts of every program (default: 1)")
    parser.add_argument("--program", action="append", default=[], metavar="NAME",
                        help="only this program (repeatable): " +
                             ", ".join(p.name for p in PROGRAMS))
    parser.add_argument("--timeout", type=positive(float), default=300.0,
                        help="seconds per run (default: 300)")
    parser.add_argument("--out", type=Path, help="write every run and the summary as JSON")
    args = parser.parse_args(argv)
    args.allocators = [Allocator(GLIBC, False, None)] + args.preload
    names = [a.name for a in args.allocators]
    if len(set(names)) != len(names):
        parser.error(f"allocator names must be distinct: {names}")
    known = {p.name for p in PROGRAMS}
    unknown = [name for name in args.program if name not in known]
    if unknown:
        parser.error(f"unknown program {unknown[0]}: one of {', '.join(sorted(known))}")
    args.programs = [p for p in PROGRAMS if not args.program or p.name in args.program]
    for program in args.programs:
        binary = args.build_dir / "experiments" / f"bench_{program.binary}"
        if not binary.is_file():
            target = binary.relative_to(args.build_dir)
            parser.error(f"no program at {binary} (ninja -C {args.build_dir} {target})")
    return args


def expected(allocator: Allocator) -> Allocator:
    """The allocator as identity_problem checks it: a runsel library's container is its
    file's (libmalloc-<container>.so, libsetting-<setting>-<container>.so)."""
    if not allocator.runsel:
        return allocator
    stem = allocator.preload.name.split(".so")[0]
    container = stem.rpartition("-")[2]
    return Allocator(container, True, allocator.preload, allocator.setting, allocator.environment)


def run_once(args: argparse.Namespace, program: Program, allocator: Allocator) -> dict:
    binary = (args.build_dir / "experiments" / f"bench_{program.binary}").resolve()
    command = [str(binary), *program.arguments, "--scale", str(args.scale)]
    try:
        completed = subprocess.run(command, env=allocator.run_environment(), capture_output=True,
                                   text=True, timeout=args.timeout)
    except subprocess.TimeoutExpired:
        raise RunRejected(f"{program.name} under {allocator.name}: no end after "
                          f"{args.timeout:g} s") from None
    status, stdout, stderr = completed.returncode, completed.stdout, completed.stderr
    if status != 0:
        tail = "\n".join(stderr.strip().splitlines()[-5:])
        raise RunRejected(f"{program.name} under {allocator.name} exited with "
                          f"{status}\n{tail}")
    try:
        reported = json.loads(stdout.strip().splitlines()[-1])
    except (IndexError, json.JSONDecodeError):
        raise RunRejected(f"{program.name} under {allocator.name}: "
                          "no JSON line on stdout") from None
    problem = identity_problem(expected(allocator), reported["allocator"])
    if problem:
        raise RunRejected(f"{program.name} under {allocator.name}: {problem}")
    profile = reported["allocator"].get("profile", "")
    if allocator.runsel and allocator.preload.name.startswith(FAST_FILE_PREFIX) and \
            profile != "fast":
        raise RunRejected(f"{program.name} under {allocator.name}: a fast-profile library "
                          f"reports the build profile {profile or '(none)'}, not fast")
    if reported["program"] != program.name:
        raise RunRejected(f"{binary.name} reported {reported['program']}, not {program.name}")
    return {"program": program.name, "allocator": allocator.name,
            "seconds": reported["seconds"], "operations": reported["operations"],
            "peak_rss": reported["peak_rss_kib"], "minor_faults": reported["minor_faults"],
            "identity": reported["allocator"]}


def run_all(args: argparse.Namespace) -> list[dict]:
    runs = []
    total = args.rounds * len(args.programs) * len(args.allocators)
    for round_index in range(args.rounds):
        for program in args.programs:
            for allocator in round_order(args.allocators, round_index):
                run = run_once(args, program, allocator)
                run["round"] = round_index
                runs.append(run)
                print(f"\r[{len(runs)}/{total}] round {round_index + 1}: {program.name} "
                      f"{allocator.name:<24}", end="", file=sys.stderr, flush=True)
    print(file=sys.stderr)
    return runs


# --------------------------------------------------------------------------- summary

def series(runs: list[dict], program: str, allocator: str, metric: str) -> dict[int, float]:
    return {r["round"]: float(r[metric]) for r in runs
            if r["program"] == program and r["allocator"] == allocator}


def geometric_series(runs: list[dict], programs: list[str], allocator: str,
                     metric: str) -> dict[int, float]:
    """Per round, the geometric mean over the programs (rounds where all ran)."""
    per_program = [series(runs, p, allocator, metric) for p in programs]
    rounds = set.intersection(*(set(s) for s in per_program)) if per_program else set()
    return {r: math.exp(statistics.fmean(math.log(max(s[r], 1e-12)) for s in per_program))
            for r in sorted(rounds)}


def ratio(values: dict[int, float], reference: dict[int, float]) -> dict:
    """The paired comparison as ratios: {ratio, low, high, half_width_percent, pairs,
    pairs_needed (for an interval)}."""
    from harness import comparisons  # numpy and scipy, which ensure_libraries provided

    shared = sorted(set(values) & set(reference))
    comparison = comparisons.compare_paired([values[r] for r in shared],
                                            [reference[r] for r in shared])

    def as_ratio(percent: float | None) -> float | None:
        return None if percent is None else 1 + percent / 100

    return {"ratio": as_ratio(comparison["percent"]), "low": as_ratio(comparison["low"]),
            "high": as_ratio(comparison["high"]), "half_width_percent": comparison["half_width"],
            "pairs": comparison["n_pairs"], "pairs_needed": comparisons.MIN_PAIRS}


def best_peer_series(runs: list[dict], program: str, peers: list[str],
                     metric: str) -> dict[int, float]:
    per_peer = [series(runs, program, p, metric) for p in peers]
    rounds = set.intersection(*(set(s) for s in per_peer)) if per_peer else set()
    return {r: min(s[r] for s in per_peer) for r in rounds}


def summarise(runs: list[dict], args: argparse.Namespace) -> dict:
    programs = [p.name for p in args.programs]
    names = [a.name for a in args.allocators]
    peers = [n for n in names if n in NOT_RUNSEL]
    summary: dict = {"programs": programs, "allocators": names, "metrics": {},
                     "profiles": profiles_of(runs)}
    for metric, *_ in METRICS:
        table: dict = {}
        for program in programs + ["geometric mean"]:
            if program == "geometric mean":
                get = partial(geometric_series, runs, programs, metric=metric)
            else:
                get = partial(series, runs, program, metric=metric)
            reference = get(GLIBC)
            row = {"glibc_median": statistics.median(reference.values()) if reference else None}
            for name in names[1:]:
                row[name] = ratio(get(name), reference)
            if metric == "seconds" and program != "geometric mean" and len(peers) > 1:
                best = best_peer_series(runs, program, peers, metric)
                row["vs_best_peer"] = {name: ratio(series(runs, program, name, metric), best)
                                       for name in names if name not in NOT_RUNSEL}
            table[program] = row
        summary["metrics"][metric] = table
    return summary


def profiles_of(runs: list[dict]) -> dict[str, str]:
    """Each runsel allocator's build profile, as its runs reported it ("mixed" if they
    disagree; nothing for the peers, which have none)."""
    profiles: dict[str, set] = {}
    for run in runs:
        profile = run.get("identity", {}).get("profile", "")
        if profile:
            profiles.setdefault(run["allocator"], set()).add(profile)
    return {name: found.pop() if len(found) == 1 else "mixed" for name, found in profiles.items()}


def build_profiles(summary: dict) -> dict[str, str]:
    return summary.get("profiles", {})


def cell(entry: dict) -> str:
    if entry["ratio"] is None:
        return "-"
    if entry["low"] is None:
        return (f"{entry['ratio']:.2f} (no interval: {entry['pairs']} rounds, "
                f"{entry['pairs_needed']} needed)")
    return f"{entry['ratio']:.2f} [{entry['low']:.2f}, {entry['high']:.2f}]"


def markdown(summary: dict, args: argparse.Namespace, load: tuple[float, float]) -> str:
    names = summary["allocators"]
    lines = [f"Bench programs: {args.rounds} interleaved rounds, scale {args.scale:g}; "
             f"load average (1 min) {load[0]:.2f} before, {load[1]:.2f} after. Ratios to glibc: "
             "trimmed mean of per-round log ratios, [95 % interval] (paired bootstrap).", ""]
    for metric, title, unit, factor in METRICS:
        lines += [f"### {title} ÷ glibc", "",
                  "| program | glibc" + (f" ({unit})" if unit else "") + " | " +
                  " | ".join(names[1:]) + " |",
                  "|---" * (len(names) + 1) + "|"]
        for program, row in summary["metrics"][metric].items():
            base = row["glibc_median"]
            base_text = "-" if base is None else (f"{base * factor:.3g}" if factor != 1 or
                                                  metric == "seconds" else f"{base:.0f}")
            lines.append(f"| {program} | {base_text} | " +
                         " | ".join(cell(row[n]) for n in names[1:]) + " |")
        lines.append("")
    time_rows = summary["metrics"]["seconds"]
    own = [n for n in names if n not in NOT_RUNSEL]
    if own and any("vs_best_peer" in row for row in time_rows.values()):
        lines += ["### time ÷ the best peer (per round, the fastest of " +
                  ", ".join(n for n in names if n in NOT_RUNSEL) + ")", "",
                  "| program | " + " | ".join(own) + " |", "|---" * (len(own) + 1) + "|"]
        for program, row in time_rows.items():
            if "vs_best_peer" in row:
                lines.append(f"| {program} | " +
                             " | ".join(cell(row["vs_best_peer"][n]) for n in own) + " |")
        lines.append("")
    profiles = build_profiles(summary)
    if profiles:
        lines += ["runsel's build profiles (runsel_build_profile(), every run): " +
                  ", ".join(f"{name} {profile}" for name, profile in profiles.items()) + ".", ""]
    widths = [e["half_width_percent"] for m in summary["metrics"].values() for row in m.values()
              for n in names[1:] if (e := row.get(n)) and e.get("half_width_percent") is not None]
    if widths:
        lines.append(f"Smallest effect these rounds could resolve: the median interval "
                     f"half-width is ±{statistics.median(widths):.1f} % (range "
                     f"±{min(widths):.1f} to ±{max(widths):.1f} %).")
    return "\n".join(lines) + "\n"


def main(argv: list[str]) -> int:
    args = parse_args(argv)
    load_before = os.getloadavg()[0]
    try:
        runs = run_all(args)
    except RunRejected as error:
        print(f"programs.py: {error}", file=sys.stderr)
        return 1
    load = (load_before, os.getloadavg()[0])
    summary = summarise(runs, args)
    print(markdown(summary, args, load), end="")
    if args.out:
        args.out.write_text(json.dumps({"runs": runs, "summary": summary, "load": load,
                                        "rounds": args.rounds, "scale": args.scale}, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
