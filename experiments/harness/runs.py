"""Running workloads: one run, the interleaved plan with progress on the terminal,
and instruction counts (perf stat where the machine has counters, else callgrind).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

from .allocators import (
    WORKLOAD_PREFIX,
    Allocator,
    build_targets,
    identity_problem,
    round_order,
    targets_named,
)
from .cost import (
    CALLGRIND,
    FIXED_LAYOUT,
    PERF_EVENTS,
    PROFILE_LIBRARY,
    CostFailed,
    build_profile_libraries,
    read_callgrind,
    read_perf,
)
from .fanout import fanned_map


@dataclass(frozen=True)
class Workload:
    name: str
    program: Path
    arguments: tuple[str, ...] = ()  # e.g. ("--trace", PATH) for a replay:<name> workload
    repeat: int | None = None  # rounds it takes part in (None: every round)
    allocators: tuple[str, ...] = ()  # only under these (empty: every allocator)
    peer_repeat: int | None = None  # rounds the other allocators take part in (None: repeat)
    # instruction counts and counting runs (callgrind cannot run a browser in time)
    counted: bool = True
    family: str = "synthetic"  # "synthetic", "webkit" or "trace": which question it speaks to
    kind: str = "live"         # "live": timed runs under LD_PRELOAD
    label: str | None = None   # the verdict table's name for it (default: name)

    def runs_under(self, allocators: list[Allocator], repetition: int) -> list[Allocator]:
        if self.repeat is not None and repetition >= self.repeat:
            return []
        return [a for a in allocators if (not self.allocators or a.name in self.allocators)
                and (a.is_container or self.peer_repeat is None or repetition < self.peer_repeat)]


def run_once(workload: Workload, allocator: Allocator, scale: float, seed: int,
             timeout: float, prefix: list[str] = (), introspect: bool = True) -> dict:
    """One run; returns {"ok", "document" or "error", "stderr"}. Never raises for a bad run."""
    command = [*prefix, str(workload.program), *workload.arguments, "--seed", str(seed),
               "--scale", str(scale)]
    if not introspect:
        command.append("--no-introspection")
    try:
        completed = subprocess.run(command, env=allocator.run_environment(), capture_output=True,
                                   text=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        return {"ok": False, "error": f"timed out after {timeout:.0f} s", "stderr": ""}
    if completed.returncode != 0:
        return {"ok": False, "error": f"exit {completed.returncode}",
                "stderr": completed.stderr[-2000:]}
    try:
        document = json.loads(completed.stdout)
    except json.JSONDecodeError as failure:
        return {"ok": False, "error": f"output is not JSON: {failure}",
                "stderr": completed.stderr[-2000:]}
    problem = identity_problem(allocator, document.get("allocator", {}))
    if problem:
        return {"ok": False, "error": f"identity not proven: {problem}", "stderr": ""}
    return {"ok": True, "document": document, "stderr": completed.stderr}


class Progress:
    """One status line on a terminal (rewritten in place), sparse lines otherwise."""

    def __init__(self, total: int, label: str):
        self.total, self.label, self.done = total, label, 0
        self.started = time.monotonic()
        self.live = sys.stderr.isatty()

    def step(self, text: str) -> None:
        self.done += 1
        elapsed = time.monotonic() - self.started
        remaining = elapsed / self.done * (self.total - self.done)
        line = (f"{self.label} [{self.done:4d}/{self.total}] {text:<48} "
                f"elapsed {elapsed:5.0f} s, about {remaining:4.0f} s left")
        if self.live:
            sys.stderr.write("\r" + line[:150].ljust(150))
            if self.done == self.total:
                sys.stderr.write("\n")
        elif self.done == self.total or self.done % max(1, self.total // 10) == 0:
            sys.stderr.write(line + "\n")
        sys.stderr.flush()

    def note(self, text: str) -> None:
        sys.stderr.write(("\n" if self.live else "") + text + "\n")


def run_interleaved(workloads: list[Workload], allocators: list[Allocator], repeat: int,
                    scale: float, seed: int, timeout: float,
                    fixed_layout: bool = True, first_round: int = 0,
                    label: str = "runs") -> tuple[list[dict], list[dict]]:
    """Every workload under every allocator, `repeat` rounds of A B C ... so drift hits
    all alike; each round starts one allocator later so none always runs first. Rounds
    are numbered from `first_round`. Returns (valid runs, discarded runs)."""
    prefix = FIXED_LAYOUT if fixed_layout else []
    progress = Progress(sum(len(workload.runs_under(allocators, repetition))
                            for repetition in range(first_round, first_round + repeat)
                            for workload in workloads), label)
    valid, discarded = [], []
    for repetition in range(first_round, first_round + repeat):
        for workload in workloads:
            for allocator in round_order(workload.runs_under(allocators, repetition),
                                         repetition):
                result = run_once(workload, allocator, scale, seed, timeout, prefix)
                record = {"workload": workload.name, "allocator": allocator.name,
                          "repetition": repetition}
                if result["ok"]:
                    valid.append({**record, "document": result["document"]})
                    status = f"{result['document']['measured_seconds'] * 1e3:8.1f} ms"
                else:
                    discarded.append({**record, "error": result["error"],
                                      "stderr": result["stderr"]})
                    progress.note(f"DISCARDED {workload.name} × {allocator.name}: "
                                  f"{result['error']}")
                    status = "discarded"
                progress.step(f"{workload.name} × {allocator.name} #{repetition + 1} {status}")
    return valid, discarded


# --- instruction counts ---------------------------------------------------------------


def perf_works() -> bool:
    """True when `perf stat -e instructions` counts on this machine (not in most VMs)."""
    try:
        completed = subprocess.run(["perf", "stat", "-x,", "-e", "instructions:u", "true"],
                                   capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.TimeoutExpired):
        return False
    first = completed.stderr.strip().split(",")[0] if completed.stderr.strip() else ""
    return completed.returncode == 0 and first.isdigit()


def choose_counter(requested: str) -> tuple[str, str]:
    """(counter, why): counter is "perf", "callgrind" or "off"."""
    if requested == "off":
        return "off", "switched off (--instructions off)"
    if requested in ("auto", "perf") and perf_works():
        return "perf", f"perf stat -e {PERF_EVENTS} (whole process)"
    if requested == "perf":
        return "off", "perf stat has no instruction counter on this machine"
    try:
        subprocess.run(["valgrind", "--version"], capture_output=True, check=True)
    except (OSError, subprocess.CalledProcessError):
        return "off", "no hardware counters and no valgrind"
    why = "no hardware counters here: " if requested == "auto" else ""
    return "callgrind", why + ("valgrind --tool=callgrind --cache-sim=yes, measured region only, "
                               "reduced size; runsel variants on their profiling twins")


def profiling_twin(allocator: Allocator) -> Allocator:
    """A runsel variant's profiling twin (build/libprofile-malloc-<container>.so: the same
    allocator with the container's calls out of line); any other allocator as it is."""
    if not allocator.runsel or allocator.preload is None:
        return allocator
    profile = PROFILE_LIBRARY.format(allocator.name)
    return Allocator(allocator.name, True, allocator.preload.parent / profile)


def count_instructions(workload: Workload, allocator: Allocator, counter: str, scale: float,
                       seed: int, timeout: float) -> dict:
    """{"instructions": N, "cost": {...}} or {"error": ...}; the run still proves its
    allocator. "cost" is experiments/harness/cost.py's block: under callgrind, simulated
    cache misses and the allocator's and the container's own instructions too."""
    with tempfile.TemporaryDirectory() as scratch:
        if counter == "perf":
            prefix = ["perf", "stat", "-x,", "-o", f"{scratch}/perf.txt", "-e",
                      PERF_EVENTS, "--"]
        else:
            prefix = [*CALLGRIND, "--collect-atstart=no",
                      "--toggle-collect=workload_measured*",
                      f"--callgrind-out-file={scratch}/callgrind.out"]
            allocator = profiling_twin(allocator)
        result = run_once(workload, allocator, scale, seed, timeout, prefix, introspect=False)
        if not result["ok"]:
            return {"error": result["error"]}
        if counter == "perf":
            cost = read_perf(Path(f"{scratch}/perf.txt").read_text())
            if cost["instructions"] is None:
                return {"error": "no instruction count in perf's output"}
        else:
            try:
                cost = read_callgrind(
                    Path(f"{scratch}/callgrind.out"),
                    str(allocator.preload) if allocator.preload else None)
            except (OSError, CostFailed) as failure:
                return {"error": f"callgrind: {failure}"}
    cost["scale"] = scale
    return {"instructions": cost["instructions"], "cost": cost}


def run_instruction_counts(workloads: list[Workload], allocators: list[Allocator], counter: str,
                           scale: float, seed: int, timeout: float) -> dict:
    """{workload: {allocator: {"instructions": N, "cost": {...}} or {"error": ...}}} for
    the workloads that are counted."""
    workloads = [workload for workload in workloads if workload.counted]
    counts: dict = {workload.name: {} for workload in workloads}
    if counter == "callgrind":
        twins = [allocator for allocator in allocators if allocator.is_container]
        if twins:
            build_profile_libraries(twins[0].preload.parent,
                                                   [allocator.name for allocator in twins])
    progress = Progress(len(workloads) * len(allocators), counter)

    def done(pair: tuple[Workload, Allocator], result: dict) -> None:
        workload, allocator = pair
        counts[workload.name][allocator.name] = result
        shown = (f"{result['instructions'] / 1e6:8.1f} M" if "instructions" in result
                 else result["error"])
        progress.step(f"{workload.name} × {allocator.name} {shown}")
    # Counts do not depend on the load (callgrind), so every core counts; perf stat's
    # hardware counters would, so they run one at a time.
    pairs = [(workload, allocator) for workload in workloads for allocator in allocators]

    def count(pair: tuple) -> dict:
        return count_instructions(*pair, counter, scale, seed, timeout)

    if counter == "callgrind":
        fanned_map(count, pairs, done, kind="callgrind count (synthetic)")
    else:
        for pair in pairs:
            done(pair, count(pair))
    return counts


REPLAY = "replay"  # workload_replay needs a trace: one replay:<name> workload per --trace


def discover_workloads(build_dir: Path) -> list[Workload]:
    """The workload programs the build defines, in meson's order; exits naming those
    not built."""
    found = [Workload(name, program) for name, program in targets_named(
        build_targets(build_dir), WORKLOAD_PREFIX, "executable").items()]
    missing = [workload.program for workload in found if not workload.program.exists()]
    if missing:
        sys.exit(f"harness: not built: {', '.join(map(str, missing))} (run ninja -C {build_dir})")
    return found


def trace_workloads(programs: list[Workload], traces: list[Path]) -> list[Workload]:
    """One replay:<file name> workload per --trace (replay:<file name>#2, ... for a file
    name seen again), after checking that each trace is well formed: workload_replay
    validates the whole file before it replays, here a negligible --scale."""
    replayer = next((w.program for w in programs if w.name == REPLAY), None)
    if traces and replayer is None:
        sys.exit("harness: --trace needs the workload_replay program (run ninja)")
    found, names = [], set()
    for trace in traces:
        trace = Path(os.path.abspath(trace))  # links kept: a cluster sees the path given
        if not trace.is_file():
            sys.exit(f"harness: --trace {trace}: no such file")
        check = subprocess.run([str(replayer), "--trace", str(trace), "--scale", "1e-12",
                                "--no-introspection"], capture_output=True, text=True)
        if check.returncode != 0:
            sys.exit(f"harness: --trace {trace}: {check.stderr.strip()}")
        name, suffix = f"{REPLAY}:{trace.name}", 2
        while name in names:
            name, suffix = f"{REPLAY}:{trace.name}#{suffix}", suffix + 1
        names.add(name)
        found.append(Workload(name, replayer, ("--trace", str(trace)), family="trace"))
    return found
