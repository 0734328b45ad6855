"""Exact replays for the report: a recorded trace replayed once on every runsel container
by build/tools/runsel-replay-<container> (one thread, no address randomization, every
block written as the program wrote it), whose figures are exact and repeatable. Gives
one results.json summary entry of kind "replay" per trace (experiments/README.md,
"results.json"); the reference container is replayed twice to prove the figures repeat.
Each container's cost (instructions, simulated cache misses, the allocator's and the
container's share) comes from callgrind on the first records of the trace (cost.py;
corpus_summaries: windows spread over the whole trace instead), as shipped ("cost") and
hardened ("cost_hardened"), and
its pick counters (what choices the container had) from one more replay on the counting
twin of its library.

    python3 -m harness.replays --build-dir build --trace PATH [--out FILE]  (PYTHONPATH=experiments)
        [--family NAME] [--cost-records N (0: no cost)]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

from .allocators import (
    CACHED_REPLAYER_PREFIX,
    CACHED_TWIN,
    COUNTING_REPLAYER_PREFIX,
    REFERENCE,
    REPLAYER_PREFIX,
    as_built_environment,
    same_choice_groups,
)
from .cost import (
    BUILDS,
    DEFAULT_RECORDS,
    DEFAULT_WINDOWS,
    HARDENED,
    SHIPPED,
    WINDOW_RECORDS,
    CostFailed,
    build_profile_twins,
    ninja,
    replay_cost,
)
from .fanout import fanned_map

COUNTING_REPLAYER = f"tools/{COUNTING_REPLAYER_PREFIX}{{}}"  # on the counting twin, built on demand
PICK_COUNTERS = ("picks", "picks_with_choice", "nonfull_at_pick", "picked_fullness",
                 "runs_created", "runs_destroyed")
FIGURES = ("mapped", "committed", "allocated", "waste", "dirty", "bookkeeping", "bin_unused",
           "purged_resident", "purged_committed",
           "resident", "headroom_bound", "kept_empty_unused")


class ReplayFailed(Exception):
    pass


def replayers(build_dir: Path, prefix: str = REPLAYER_PREFIX) -> dict[str, Path]:
    """{container: build/tools/runsel-replay-<container>} for those built, reference first
    (with CACHED_REPLAYER_PREFIX: the replayers with the thread cache on)."""
    found = {path.name[len(prefix):]: path
             for path in sorted((build_dir / "tools").glob(prefix + "*"))
             if path.is_file() and not path.name.endswith(".p")}
    return dict(sorted(found.items(), key=lambda item: item[0] != REFERENCE))


def cached_replayers(build_dir: Path) -> dict[str, Path]:
    return replayers(build_dir, CACHED_REPLAYER_PREFIX)


def replay_once(program: Path, trace: Path, timeout: float,
                extra: tuple[str, ...] = ()) -> dict:
    """The replayer's JSON document (tools/trace/format.md, "Replay figures"). Runs as a
    task wherever fanout puts it: its figures file is in that machine's temporary folder."""
    handle, name = tempfile.mkstemp(prefix=program.name + ".", suffix=".json")
    os.close(handle)  # replays run in parallel: each writes a file of its own
    figures = Path(name)
    command = [str(program), *extra, "--json", str(figures), str(trace)]
    try:
        try:
            done = subprocess.run(command, capture_output=True, text=True, timeout=timeout,
                                  env=as_built_environment())
        except subprocess.TimeoutExpired as failure:
            raise ReplayFailed(f"{program.name}: timed out after {timeout:.0f} s") from failure
        except OSError as failure:  # not built, or not at this path on this worker
            raise ReplayFailed(f"{program}: {failure.strerror}") from failure
        if done.returncode != 0:
            raise ReplayFailed(f"{program.name} {trace}: exit {done.returncode}: "
                               f"{done.stderr.strip()[-500:]}")
        return json.loads(figures.read_text())
    finally:
        figures.unlink(missing_ok=True)


def exact_figures(document: dict, repeated_identical: bool | None) -> dict:
    """A pair's "exact" block (a pair: one allocator's entry in a summary entry): every
    checkpoint's figures, the peak's, and how they were obtained."""
    checkpoints = [{key: point.get(key) for key in ("name", "kind", "ops", "live_requested",
                                                    *FIGURES, "bins")}
                   for point in document["checkpoints"]]
    peak = next((point for point in checkpoints if point["kind"] == "peak"), checkpoints[-1])
    return {"checkpoints": checkpoints, "peak": peak,
            "writes_blocks": bool(document.get("writes_blocks")),
            "resident_how": document.get("resident_how"),
            "repeated_identical": repeated_identical,
            "profile": document.get("profile"),
            "replay": document["replay"], "trace": document["trace"]}


def pick_counters(document: dict) -> dict:
    """A counting replay's pick counters at its end (cumulative), for bins that picked or
    created runs."""
    end = document["checkpoints"][-1]
    return {"bins": [{"size": bin_["size"], **{key: bin_[key] for key in PICK_COUNTERS}}
                     for bin_ in end["bins"] if bin_.get("picks") or bin_.get("runs_created")]}


def counted_replays(trace: Path, build_dir: Path, containers: list[str], timeout: float) -> dict:
    """{container: counters or {"error": ...}} from the counting replayers."""
    programs = [build_dir / COUNTING_REPLAYER.format(name) for name in containers]
    try:
        ninja(build_dir, programs)
    except CostFailed as failure:
        return {name: {"error": str(failure)} for name in containers}

    def counted(program: Path) -> dict:
        try:
            document = replay_once(program, trace, timeout)
        except ReplayFailed as failure:
            return {"error": str(failure)}
        return (pick_counters(document) if document.get("counting")
                else {"error": f"{program.name} does not count"})
    return dict(zip(containers, fanned_map(counted, programs, kind="counting replay")))


def key_checkpoint(document: dict) -> str:
    """The last mark if the trace has marks (the program's own last checkpoint), else the
    peak of live bytes."""
    marks = [point["name"] for point in document["checkpoints"] if point["kind"] == "mark"]
    return marks[-1] if marks else "peak"


def exact_replay_summary(trace: Path, build_dir: Path, family: str = "trace",
                         label: str | None = None, timeout: float = 600,
                         containers: list[str] | None = None, progress=None,
                         cost_records: int | None = DEFAULT_RECORDS,
                         counters: bool = True) -> dict:
    """One results.json summary entry of kind "replay": the trace replayed on every
    container; the reference twice, compared byte for byte; with cost_records, each
    container's cost over that many records under callgrind (None: not measured); with
    counters, each container's pick counters from a counting replay."""
    programs = replayers(build_dir)
    if containers:
        programs = {name: path for name, path in programs.items() if name in containers}
    if not programs:
        raise ReplayFailed(f"no {REPLAYER_PREFIX}<container> in {build_dir / 'tools'}")
    # Replays are exact whatever the load, so they run on every core at once; the
    # reference runs twice, and the two must agree to the byte.
    names = list(programs) + ([REFERENCE] if REFERENCE in programs else [])
    replayed = fanned_map(
        lambda name: replay_once(programs[name], trace, timeout), names,
        lambda name, _: progress and progress(f"exact replay of {trace.name} on {name}"),
        kind="exact replay (--trace)")
    documents = dict(zip(programs, replayed))
    repeated = ({REFERENCE: replayed[-1] == documents[REFERENCE]}
                if REFERENCE in programs else {})
    picks = (counted_replays(trace, build_dir, list(documents), timeout)
             if counters else {name: None for name in documents})
    costs: dict[tuple[str, str], dict | None] = {}
    if cost_records:
        cost_jobs = [(name, build) for build in BUILDS for name in documents]
        try:
            build_profile_twins(build_dir, list(documents))
        except CostFailed as failure:
            costs = {job: {"error": str(failure)} for job in cost_jobs}

        def cost(job: tuple[str, str]) -> dict:
            try:
                return replay_cost(trace, build_dir, job[0], cost_records,
                                                  timeout, build=job[1])
            except CostFailed as failure:
                return {"error": str(failure)}
        if not costs:
            costs = dict(zip(cost_jobs, fanned_map(
                cost, cost_jobs, lambda job, _: progress and progress(
                    f"callgrind cost of {trace.name} on {job[0]} ({job[1]})"),
                kind="callgrind cost (--trace)")))
    first = next(iter(documents.values()))
    sequences = {name: [(p["name"], p["ops"]) for p in doc["checkpoints"]]
                 for name, doc in documents.items()}
    if len({tuple(sequence) for sequence in sequences.values()}) != 1:
        raise ReplayFailed(f"{trace.name}: the containers' checkpoints differ: {sequences}")
    return {"kind": "replay", "family": family, "label": label or f"replay of {trace.name}",
            "trace": str(trace), "key_checkpoint": key_checkpoint(first),
            "memory_comparable": True, "memory_note": None,
            "allocators": {name: {"exact": exact_figures(document, repeated.get(name)),
                                  **{build: costs.get((name, build))
                                     for build in BUILDS},
                                  "counters": picks[name]}
                           for name, document in documents.items()}}


@dataclass(frozen=True)
class CostWindows:
    """Which corpus replays callgrind counts, and how: the first `traces` traces, over
    `windows` windows of `records` records spread across each trace (0 windows: none),
    as shipped, and the first `hardened_traces` of them (None: all) hardened too."""
    traces: int = 4
    windows: int = DEFAULT_WINDOWS
    records: int = WINDOW_RECORDS
    hardened_traces: int | None = None

    def jobs(self, traces: list[str], containers: list[str],
             cached: bool) -> list[tuple[str, str, str]]:
        """(trace, container, build): as shipped on the costed traces, hardened on its
        share; the thread cache's replayers have the hardened build only."""
        if not self.windows:
            return []
        costed = traces[:self.traces]
        hardened = costed[:self.traces if self.hardened_traces is None else self.hardened_traces]
        return [(trace, name, build) for build, built in
                ((SHIPPED, [] if cached else costed),
                 (HARDENED, costed if cached else hardened))
                for trace in built for name in containers]


def corpus_programs(build_dir: Path, containers: list[str] | None,
                    cached: bool) -> dict[str, Path]:
    """The replayers a corpus runs on: {container: program}, those of `containers` (None:
    every one), on the thread cache's libraries when `cached`."""
    programs = cached_replayers(build_dir) if cached else replayers(build_dir)
    if containers:
        programs = {name: path for name, path in programs.items() if name in containers}
    if not programs:
        prefix = CACHED_REPLAYER_PREFIX if cached else REPLAYER_PREFIX
        raise ReplayFailed(f"no {prefix}<container> in {build_dir / 'tools'}")
    return programs


def corpus_documents(traces: dict[str, Path], programs: dict[str, Path], timeout: float,
                     progress, kind: str, twice: bool) -> dict[tuple[str, str, int], dict]:
    """Every trace replayed exactly on every container, as tasks: {(trace, container, 0):
    the replayer's document or {"error"}}, and with `twice` (trace, reference, 1) too: the
    reference replayed again, to prove the figures repeat."""
    jobs = [(trace, name, 0) for trace in traces for name in programs] + \
        ([(trace, REFERENCE, 1) for trace in traces] if twice else [])

    def replayed(job: tuple[str, str, int]) -> dict:
        try:
            return replay_once(programs[job[1]], traces[job[0]], timeout)
        except ReplayFailed as failure:
            return {"error": str(failure)}
    return dict(zip(jobs, fanned_map(
        replayed, jobs, lambda job, _: progress and progress(f"exact replay of {job[0]} on "
                                                             f"{job[1]}"),
        kind="corpus replay" + kind)))


def corpus_costs(traces: dict[str, Path], build_dir: Path, twin: str,
                 jobs: list[tuple[str, str, str]], windows: CostWindows, timeout: float,
                 progress, kind: str, conf: str | None = None) -> dict[tuple[str, str, str], dict]:
    """callgrind's windows of each (trace, container, build) job, as tasks, on the
    container's profiling twin (`twin`: its names' prefix), with RUNSEL_CONF's entries
    `conf` (run sizes) after the as-built profile: {job: cost or {"error"}}."""
    if not jobs:
        return {}
    try:
        build_profile_twins(build_dir, list(dict.fromkeys(twin + job[1] for job in jobs)),
                            tuple(dict.fromkeys(job[2] for job in jobs)))
    except CostFailed as failure:
        return {job: {"error": str(failure)} for job in jobs}

    def counted(job: tuple[str, str, str]) -> dict:
        try:
            return replay_cost(traces[job[0]], build_dir, twin + job[1], timeout=timeout * 4,
                               windows=windows.windows, window_records=windows.records,
                               build=job[2], conf=conf)
        except CostFailed as failure:
            return {"error": str(failure)}
    return dict(zip(jobs, fanned_map(
        counted, jobs, lambda job, _: progress and progress(
            f"callgrind windows of {job[0]} on {job[1]} ({job[2]})"),
        kind="corpus callgrind windows" + kind)))


def corpus_entry(trace: str, path: Path, family: str, containers: list[str],
                 documents: dict, costs: dict, picks: dict | None) -> dict:
    """One trace's summary entry of kind "replay" from its replays (an {"error"} entry
    when one failed or the containers' checkpoints differ); `picks`: the pick counters,
    on the first trace only (None elsewhere)."""
    failed = [document["error"] for job, document in documents.items()
              if job[0] == trace and "error" in document]
    by_container = {name: documents[(trace, name, 0)] for name in containers}
    if not failed:
        checkpoints = {name: [(p["name"], p["ops"]) for p in doc["checkpoints"]]
                       for name, doc in by_container.items()}
        if len({tuple(sequence) for sequence in checkpoints.values()}) != 1:
            failed = ["the containers' checkpoints differ"]
    if failed:
        return {"kind": "replay", "family": family, "trace": str(path), "error": failed[0],
                "allocators": {}}
    repeated = (documents[(trace, REFERENCE, 1)] == by_container[REFERENCE]
                if (trace, REFERENCE, 1) in documents else None)
    return {
        "kind": "replay", "family": family, "label": trace, "trace": str(path),
        "key_checkpoint": key_checkpoint(next(iter(by_container.values()))),
        "memory_comparable": True, "memory_note": None,
        "allocators": {name: {"exact": exact_figures(document, repeated
                                                     if name == REFERENCE else None),
                              **{build: costs.get((trace, name, build)) for build in BUILDS},
                              "counters": picks.get(name) if picks is not None else None}
                       for name, document in by_container.items()}}


def corpus_summaries(traces: dict[str, Path], build_dir: Path, family: str,
                     containers: list[str] | None = None, timeout: float = 600, progress=None,
                     windows: CostWindows = CostWindows(), counters: bool = True,
                     cached: bool = False) -> dict[str, dict]:
    """A trace corpus ({name: trace file}) replayed exactly on every container, every
    (trace, container) a task of its own (fanout): {name: summary entry of kind "replay"},
    or {name: {"error": ...}} for a trace whose replays failed. The traces `windows` picks
    also get each container's callgrind cost over its windows spread across the whole
    trace, as shipped ("cost") and hardened ("cost_hardened"); the first trace the pick
    counters. `cached`: on the containers built with the thread cache (cached_replayers;
    no counters, the reference once; hardened only, the one build they have)."""
    programs = corpus_programs(build_dir, containers, cached)
    kind, twin = (" (thread cache)", CACHED_TWIN) if cached else ("", "")
    documents = corpus_documents(traces, programs, timeout, progress, kind,
                                 twice=REFERENCE in programs and not cached)
    costs = corpus_costs(traces, build_dir, twin, windows.jobs(list(traces), list(programs),
                                                               cached),
                         windows, timeout, progress, kind)
    first = next(iter(traces))
    picks = (counted_replays(traces[first], build_dir, list(programs), timeout)
             if counters and not cached else {})
    return {trace: corpus_entry(trace, path, family, list(programs), documents, costs,
                                picks if trace == first else None)
            for trace, path in traces.items()}


# What the choices decide at a checkpoint, so what containers that pick alike must give
# to the byte (metrics.choices_only's rule: bookkeeping holds array_heap's side array).
CHOICE_FIGURES = ("live_requested", "allocated", "waste", "bin_unused", "bins")


def choice_figures(pair: dict) -> list[dict]:
    return [{**{key: point.get(key) for key in CHOICE_FIGURES},
             "committed_in_use": point["committed"] - point["bookkeeping"] - point["dirty"]}
            for point in pair["exact"]["checkpoints"]]


def group_agreement_checks(places: dict[str, dict], groups: list[list[str]], workload: str,
                           what: str, compared: str) -> list[dict]:
    """One check per group of containers that pick alike with two or more of them present
    at every place ({place: {container: its figures there}}): at every place, every
    member's figures equal the first member's. `what` completes "same choices, so
    identical ..."; `compared` says what was compared when nothing differs."""
    checks = []
    for members in groups:
        present = [m for m in members if places and all(m in there for there in places.values())]
        if len(present) < 2:
            continue
        differing = [f"{place}: {member}" for place, there in places.items()
                     for member in present[1:] if there[member] != there[present[0]]]
        checks.append({"workload": workload, "ok": not differing,
                       "check": f"same choices, so identical {what}: {', '.join(present)}",
                       "detail": (f"differs from {present[0]}: " + ", ".join(differing[:6]))
                       if differing else compared})
    return checks


def same_choices_checks(entries: dict[str, dict], groups: list[list[str]],
                        workload: str) -> list[dict]:
    """One check per group of containers that pick alike (allocators.same_choice_groups)
    with two or more of them replayed: on every trace of `entries`, every member's
    figures at every checkpoint equal the first member's (every bin's runs, non-full
    runs, regions in use and unused bytes; allocated, waste, bin_unused)."""
    traces = {name: {container: choice_figures(pair)
                     for container, pair in entry["allocators"].items()}
              for name, entry in entries.items() if "error" not in entry}
    return group_agreement_checks(traces, groups, workload,
                                  "figures at every checkpoint of every trace",
                                  f"{len(traces)} traces compared")


def add_exact_replay(summary: dict, workload, build_dir: Path, timeout: float,
                     containers: list[str]) -> None:
    """The exact replays of a replay:<trace> workload's trace, as summary entry
    "exact:<trace file>", and the check that the reference's two replays agree (or the
    check that says why there are none)."""
    trace = Path(workload.arguments[1])
    name = f"exact:{trace.name}"
    try:
        entry = exact_replay_summary(trace, build_dir, family=workload.family,
                                     label=f"{workload.label or workload.name} (exact replay)",
                                     timeout=timeout, containers=containers)
    except ReplayFailed as failure:
        summary["checks"].append({"workload": workload.name, "check": "exact replay",
                                  "ok": False, "detail": str(failure)})
        return
    summary["workloads"][name] = entry
    summary["checks"].extend(same_choices_checks({trace.name: entry},
                                                 same_choice_groups(build_dir), name))
    reference = entry["allocators"].get(REFERENCE)
    summary["checks"].append({
        "workload": name, "check": f"two exact replays on {REFERENCE} agree to the byte",
        "ok": bool(reference) and reference["exact"]["repeated_identical"] is True,
        "detail": "" if reference else f"no {REFERENCE} replay"})


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--build-dir", type=Path, required=True)
    parser.add_argument("--trace", type=Path, required=True)
    parser.add_argument("--family", default="trace")
    parser.add_argument("--cost-records", type=int, default=DEFAULT_RECORDS,
                        help="records replayed under callgrind for the cost (0: no cost)")
    parser.add_argument("--out", type=Path, help="write the entry here (default: stdout)")
    args = parser.parse_args()
    try:
        entry = exact_replay_summary(args.trace.resolve(), args.build_dir.resolve(), args.family,
                                     progress=lambda text: print(text, file=sys.stderr),
                                     cost_records=args.cost_records or None)
    except ReplayFailed as failure:
        sys.exit(f"replays: {failure}")
    text = json.dumps(entry, indent=1) + "\n"
    if args.out:
        args.out.write_text(text)
    else:
        sys.stdout.write(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
