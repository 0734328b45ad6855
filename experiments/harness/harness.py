"""The harness: runs every workload under every allocator (each runsel variant, glibc,
jemalloc, mimalloc, tcmalloc), interleaved and repeated, checks which allocator served
each run, counts instructions, and writes results.json plus the report (Markdown and
self-contained HTML with pictures). `tools/runsel report` builds, then runs this.

    python3 -m harness.harness [--quick] [--out DIR] [--build-dir DIR] ...  (in experiments/)
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import resource
import platform
import subprocess
import sys
import time
from pathlib import Path

from . import allocators as allocator_discovery
from .interpreter import ROOT, SYSTEM_PYTHON, ensure_libraries

if __name__ == "__main__":  # run by Debian's python3 when this one lacks what the report needs
    ensure_libraries({"matplotlib": "python3-matplotlib", "scipy": "python3-scipy",
                      "tabulate": "python3-tabulate", "distributed": "python3-distributed"},
                     "harness")

from . import comparisons, counting, fanout, judgement, metrics, replays, report, runs
from . import targets, verdict
from . import webkit_record
from .allocators import REFERENCE, WORKLOAD_PREFIX
from .presets import DEFAULT, QUICK, positive

REPLAY = "replay"  # workload_replay needs a trace: one replay:<name> workload per --trace
WEBKIT = "webkit"  # a browser engine: experiments/webkit/driver.py under Debian's python3
WEBKIT_REPLAY = "webkit replay"  # its web process's trace, replayed exactly per container
KEEP_CHUNK_MAPS = (REFERENCE, "lifo")  # the occupancy pictures compare these two
SCHEMA_VERSION = 2  # results.json's layout: experiments/README.md, "results.json"


def discover_workloads(build_dir: Path) -> list[runs.Workload]:
    """The workload programs the build defines, in meson's order."""
    found = [runs.Workload(name, program) for name, program in allocator_discovery.targets_named(
        allocator_discovery.build_targets(build_dir), WORKLOAD_PREFIX, "executable").items()]
    missing = [workload.program for workload in found if not workload.program.exists()]
    if missing:
        sys.exit(f"harness: not built: {', '.join(map(str, missing))} (run ninja -C {build_dir})")
    return found


def trace_workloads(programs: list[runs.Workload], traces: list[Path]) -> list[runs.Workload]:
    """One replay:<file name> workload per --trace, after checking that each trace is
    well formed (workload_replay validates the whole file before replaying)."""
    replayer = next((w.program for w in programs if w.name == REPLAY), None)
    if traces and replayer is None:
        sys.exit("harness: --trace needs the workload_replay program (run ninja)")
    found, names = [], set()
    for trace in traces:
        trace = trace.resolve()
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
        found.append(runs.Workload(name, replayer, ("--trace", str(trace)), family="trace"))
    return found


def webkit_workload(args: argparse.Namespace) -> runs.Workload:
    """The browser engine: the driver loads args.webkit_pages pages of its pinned corpus;
    no instruction counts (a browser under callgrind would take hours)."""
    arguments = (str(webkit_record.DRIVER), "--pages", str(args.webkit_pages),
                 "--time-limit", str(max(120, 60 * args.webkit_pages)))
    return runs.Workload(WEBKIT, Path(SYSTEM_PYTHON), arguments, repeat=args.webkit_repeat,
                         allocators=args.webkit_allocators, counted=False, family="webkit",
                         label="webkit live",
                         peer_repeat=min(args.webkit_repeat, args.webkit_peer_repeat))


def corpus_files(paths: list[Path], build_dir: Path, cache: Path) -> dict[str, Path]:
    """Any replayable files (runsel traces, or logalloc logs, plain or gzip-compressed, such
    as a recorded Firefox session's) as corpus traces {name: trace}: logs are converted once
    into `cache` (again when the log is newer)."""
    found = {}
    for path in paths:
        path = path.resolve()
        if not path.is_file():
            sys.exit(f"harness: --corpus-file {path}: no such file")
        with open(path, "rb") as file:
            is_trace = file.read(4) == b"RSTR"
        trace = path
        if not is_trace:
            trace = cache / (path.name + ".trace")
            if not trace.exists() or trace.stat().st_mtime < path.stat().st_mtime:
                cache.mkdir(parents=True, exist_ok=True)
                done = subprocess.run([str(build_dir / "tools" / "runsel-trace-convert"),
                                       "from-logalloc", str(path), str(trace)],
                                      capture_output=True, text=True)
                if done.returncode != 0:
                    sys.exit(f"harness: --corpus-file {path}: {done.stderr.strip()}")
        found[path.name] = trace
    return found


def webkit_corpus(args: argparse.Namespace, progress) -> tuple[dict, dict]:
    """The trace corpus (experiments/README.md, "The trace corpus"): the webkit recordings
    of args.corpus_ranges (cached: webkit_record.record_corpus) and the --corpus-file
    traces, each replayed exactly on every container (fanout tasks), with callgrind windows
    over the first traces. Returns (the first webkit trace's summary entry, the "webkit
    replay" workload of the tables; results.json's "corpus": every trace's entry and the
    judgement over each group of traces)."""
    containers = [name for name in args.allocator or args.webkit_replay_allocators
                  if name in replays.replayers(args.build_dir)] or None
    recordings = []
    try:
        recordings = webkit_record.record_corpus(args.build_dir, list(args.corpus_ranges),
                                                 progress=progress)
    except (webkit_record.RecordFailed, subprocess.TimeoutExpired) as failure:
        progress(f"recording the corpus failed: {failure}")
        return ({"kind": "replay", "family": "webkit", "label": "webkit replay",
                 "error": str(failure), "allocators": {}},
                {"error": str(failure), "recordings": [], "groups": {}})
    groups = {"webkit": {entry["name"]: Path(entry["trace"]) for entry in recordings}}
    if args.corpus_file:
        groups["files"] = corpus_files(args.corpus_file, args.build_dir,
                                       args.out / "corpus-traces")
    corpus = {"recordings": recordings, "groups": {}, "fanout": None,
              "cost": {"traces": args.corpus_cost_traces, "windows": args.corpus_windows,
                       "window_records": args.corpus_window_records}}
    first = None
    for group, traces in groups.items():
        try:
            entries = replays.corpus_summaries(
                traces, args.build_dir, "webkit" if group == "webkit" else "trace",
                containers=containers, timeout=args.timeout, progress=progress,
                cost_traces=args.corpus_cost_traces, windows=args.corpus_windows,
                window_records=args.corpus_window_records)
        except replays.ReplayFailed as failure:
            corpus["groups"][group] = {"error": str(failure), "entries": {}}
            continue
        for entry in entries.values():
            for pair in entry["allocators"].values():  # the choices table reads the totals
                counted = pair.get("counters")
                if counted and "bins" in counted and "total" not in counted:
                    counted["total"] = counting.totals(counted["bins"])
        usable = {name: entry for name, entry in entries.items() if "error" not in entry}
        corpus["groups"][group] = {
            "entries": entries,
            "judgement": judgement.judge_corpus(usable, REFERENCE) if usable else None}
        if group == "webkit" and usable:
            first = dict(next(iter(usable.values())))
    corpus["fanout"] = fanout.describe()
    if first is None:
        return ({"kind": "replay", "family": "webkit", "label": "webkit replay",
                 "error": "no webkit trace of the corpus replayed", "allocators": {}}, corpus)
    first["label"] = "webkit replay"
    tabs = [point["name"] for point in next(iter(first["allocators"].values()))["exact"]
            ["checkpoints"] if point["name"].startswith("tab_")]
    first["key_checkpoint"] = tabs[-1] if tabs else first["key_checkpoint"]  # as the live runs
    return first, corpus


def check_webkit() -> None:
    """Fails early (not after the first runs) when the browser or its corpus is missing."""
    check = subprocess.run([SYSTEM_PYTHON, str(webkit_record.DRIVER), "--check"], capture_output=True,
                           text=True)
    if check.returncode != 0:
        sys.exit(f"harness: the webkit workload cannot run: {check.stderr.strip()}\n"
                 f"(leave it out with --workload NAME for the others)")


def pick(items: list, wanted: list[str], what: str) -> list:
    if not wanted:
        return items
    if what == "workload" and REPLAY in wanted:  # --workload replay: every trace
        wanted = [name for name in wanted if name != REPLAY] + \
            [item.name for item in items if item.name.startswith(REPLAY + ":")]
    unknown = set(wanted) - {item.name for item in items}
    if unknown:
        sys.exit(f"harness: no such {what}: {', '.join(sorted(unknown))}")
    return [item for item in items if item.name in wanted]


def machine() -> dict:
    cpu = next((line.split(":", 1)[1].strip() for line in Path("/proc/cpuinfo").read_text()
                .splitlines() if line.startswith("model name")), platform.processor())
    return {"cpu": cpu, "cores": os.cpu_count(), "kernel": platform.release(),
            "python": platform.python_version(),
            "load_average_1min": round(os.getloadavg()[0], 2)}


def trim_chunk_maps(summary: dict) -> None:
    """Chunk maps are large; results.json keeps those the report draws."""
    for workload in summary["workloads"].values():
        for name, pair in workload["allocators"].items():
            if name not in KEEP_CHUNK_MAPS:
                pair["chunk_maps"] = {}


def half_width_now(valid: list[dict], workload: str, variant: str) -> float:
    """The half-width the report would print for this time comparison (inf without an
    interval), from the runs so far."""
    def times(name):
        chosen = [run for run in valid if run["workload"] == workload and run["allocator"] == name]
        return ([metrics.run_time(run["document"]) for run in chosen],
                [run["repetition"] for run in chosen])
    compared = comparisons.compare_paired(
        *comparisons.pairs_by_round(*times(variant), *times(REFERENCE)))
    return float("inf") if compared["half_width"] is None else compared["half_width"]


def extend_until_resolved(workloads: list, variants: list, valid: list[dict],
                          discarded: list[dict], args: argparse.Namespace) -> dict:
    """More rounds, runsel variants only, of the live workloads where some variant's time
    comparison with rb_first is still wider than the target, until none is or
    args.extend seconds have passed. Returns {workload: extra rounds}."""
    extra = {workload.name: 0 for workload in workloads}
    if not args.extend or REFERENCE not in [v.name for v in variants] or len(variants) < 2:
        return extra
    deadline, next_round = time.monotonic() + args.extend, args.repeat
    while time.monotonic() < deadline:
        wide = [workload for workload in workloads if workload.kind == "live" and any(
            half_width_now(valid, workload.name, variant.name) > comparisons.TARGET_PERCENT
            for variant in variants if variant.name != REFERENCE)]
        if not wide:
            break
        more, lost = runs.run_interleaved(wide, variants, 1, args.scale, args.seed,
                                          args.timeout, not args.aslr, next_round,
                                          f"extra round {next_round - args.repeat + 1}")
        valid.extend(more)
        discarded.extend(lost)
        for workload in wide:
            extra[workload.name] += 1
        next_round += 1
    return extra


class PhaseClock:
    """Wall and CPU seconds of each step; CPU counts this process and the runs it waited
    for, so a loaded machine's report still tells what the steps cost."""

    def __init__(self):
        self.wall, self.cpu = {}, {}
        self.started, self.cpu_started = time.monotonic(), self.cpu_now()

    @staticmethod
    def cpu_now() -> float:
        return sum(usage.ru_utime + usage.ru_stime for usage in
                   (resource.getrusage(resource.RUSAGE_SELF),
                    resource.getrusage(resource.RUSAGE_CHILDREN)))

    def end(self, step: str) -> None:
        now, cpu = time.monotonic(), self.cpu_now()
        self.wall[step] = round(now - self.started, 1)
        self.cpu[step] = round(cpu - self.cpu_started, 1)
        self.started, self.cpu_started = now, cpu


def parse_arguments(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--build-dir", type=Path, default=ROOT / "build")
    parser.add_argument("--out", type=Path, default=ROOT / "results" / "report",
                        help="directory for results.json, report.md, report.html, pictures")
    parser.add_argument("--quick", action="store_true",
                        help=f"about a minute: {QUICK['repeat']} repetitions at scale "
                             f"{QUICK['scale']}")
    parser.add_argument("--repeat", type=positive(int),
                        help="repetitions per (workload, allocator), at least 1")
    parser.add_argument("--scale", type=positive(float),
                        help="workload size (1.0 = default run), above 0")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--extend", type=float, metavar="SECONDS",
                        help="after the rounds, keep adding rounds (runsel variants only) of "
                             "the workloads whose time comparisons with rb_first are wider "
                             f"than ±{comparisons.TARGET_PERCENT:g} %%, for at most this long "
                             f"(default {DEFAULT['extend']:g}, --quick {QUICK['extend']:g})")
    parser.add_argument("--instructions", choices=("auto", "perf", "callgrind", "off"),
                        default="auto", help="instruction counter; auto: perf when the "
                        "machine has counters, else callgrind (default: auto)")
    parser.add_argument("--instruction-scale", type=positive(float),
                        help="workload size for callgrind runs (it is ~50x slower)")
    parser.add_argument("--workload", action="append", default=[], metavar="NAME")
    parser.add_argument("--trace", action="append", default=[], type=Path, metavar="PATH",
                        help="add a replay:<file name> workload replaying this recorded "
                             "trace (repeatable); --scale below 1 replays that fraction")
    parser.add_argument("--allocator", action="append", default=[], metavar="NAME")
    parser.add_argument("--webkit-pages", type=positive(int), metavar="N",
                        help="pages of the webkit corpus each webkit run loads "
                             f"(default {DEFAULT['webkit_pages']}, --quick {QUICK['webkit_pages']})")
    parser.add_argument("--webkit-repeat", type=positive(int), metavar="N",
                        help="rounds the webkit workload takes part in (default "
                             f"{DEFAULT['webkit_repeat']}, --quick {QUICK['webkit_repeat']})")
    parser.add_argument("--corpus-file", action="append", default=[], type=Path,
                        metavar="PATH", help="add this trace or logalloc log (a Firefox "
                        "session's, a real program's) to the trace corpus (repeatable): these "
                        "files are judged as one more group of replicates")
    parser.add_argument("--scheduler", metavar="ADDRESS",
                        help="run the deterministic steps (replays, callgrind counts) on this "
                             "Dask scheduler (tcp://HOST:8786), whose workers see this build "
                             "and the traces at the same paths; default: a local cluster on "
                             "this machine's cores")
    parser.add_argument("--timeout", type=float, default=600, help="per run, seconds")
    parser.add_argument("--counters", choices=("auto", "off"), default="auto",
                        help="run each workload once under each variant's counting library "
                             "(build/libmalloc-counting-<container>.so) when it is built "
                             "(default: auto)")
    parser.add_argument("--aslr", action="store_true",
                        help="keep address-space randomisation (default: runs use setarch -R "
                             "so every run of a variant sees the same address layout)")
    args = parser.parse_args(argv)
    preset = QUICK if args.quick else DEFAULT
    for name in ("repeat", "scale", "instruction_scale", "extend"):
        if getattr(args, name) is None:
            setattr(args, name, preset[name])
    args.webkit_pages = args.webkit_pages or preset["webkit_pages"]
    args.webkit_repeat = min(args.repeat, args.webkit_repeat or preset["webkit_repeat"])
    args.webkit_allocators = () if args.allocator else preset["webkit_allocators"]
    args.webkit_replay_allocators = () if args.allocator else preset["webkit_replay_allocators"]
    args.webkit_cost_records = preset["webkit_cost_records"]
    for name in ("corpus_ranges", "corpus_cost_traces", "corpus_windows",
                 "corpus_window_records"):
        setattr(args, name, preset[name])
    args.webkit_record_pages = max(args.webkit_pages, preset["webkit_record_pages"])
    args.webkit_peer_repeat = preset["webkit_peer_repeat"]
    args.counted_allocators = () if args.allocator else preset["counted_allocators"]
    args.peer_repeat = (None if preset["peer_repeat"] is None
                        else min(args.repeat, preset["peer_repeat"]))
    return args


def main(argv: list[str] | None = None) -> int:
    args = parse_arguments(argv)
    fanout.configure(args.scheduler)
    started = time.time()
    load_before = round(os.getloadavg()[0], 2)
    programs = discover_workloads(args.build_dir)
    workloads = pick([dataclasses.replace(w, peer_repeat=args.peer_repeat)
                      for w in programs if w.name != REPLAY]
                     + [webkit_workload(args)]
                     + [dataclasses.replace(w, peer_repeat=args.peer_repeat)
                        for w in trace_workloads(programs, args.trace)],
                     args.workload, "workload")
    if any(workload.name == WEBKIT for workload in workloads):
        check_webkit()
    system, missing = allocator_discovery.system_allocators()
    containers = allocator_discovery.runsel_variants(args.build_dir)
    settings = allocator_discovery.setting_variants(args.build_dir, containers)
    allocators = pick(containers + system + settings, args.allocator, "allocator")
    workloads = [dataclasses.replace(w, allocators=tuple(a.name for a in allocators
                                                         if not a.setting))
                 if w.name == WEBKIT and not w.allocators else w for w in workloads]
    names = [allocator.name for allocator in allocators]
    print(f"harness: {len(workloads)} workloads × {len(allocators)} allocators × "
          f"{args.repeat} repetitions, scale {args.scale}", file=sys.stderr)
    print(f"harness: allocators: {', '.join(names)}"
          + (f" (not installed: {', '.join(missing)})" if missing else ""), file=sys.stderr)

    phases = PhaseClock()  # seconds (wall and CPU) each step took, for the time budget
    valid, discarded = runs.run_interleaved(workloads, allocators, args.repeat, args.scale,
                                            args.seed, args.timeout, not args.aslr)
    variants = [allocator for allocator in allocators if allocator.is_container]
    extra_rounds = extend_until_resolved(workloads, variants, valid, discarded, args)
    phases.end("timed runs")
    counter, counter_why = runs.choose_counter(args.instructions)
    print(f"harness: instructions: {counter_why}", file=sys.stderr)
    counted_allocators = [allocator for allocator in allocators if not allocator.setting and (
        not args.counted_allocators or allocator.name in args.counted_allocators)]
    counts = ({} if counter == "off" else
              runs.run_instruction_counts(workloads, counted_allocators, counter,
                                          args.instruction_scale if counter == "callgrind"
                                          else args.scale, args.seed, args.timeout))
    phases.end("instruction counts")
    counted = {}
    if args.counters == "auto":
        libraries = counting.counting_libraries(
            args.build_dir, [allocator.name for allocator in variants])
        counted = counting.run_counting(workloads, libraries, args.scale, args.seed,
                                        args.timeout, not args.aslr) if libraries else {}
    phases.end("counting runs")
    summary = metrics.summarize(valid, names, workloads, counts,
                                allocator_discovery.same_choice_groups(args.build_dir), counted)
    for workload in workloads:  # each trace also replayed exactly, once per container
        if workload.name.startswith(REPLAY + ":"):
            trace = Path(workload.arguments[1])
            try:
                summary["workloads"][f"exact:{trace.name}"] = replays.exact_replay_summary(
                    trace, args.build_dir, family=workload.family,
                    label=f"{workload.label or workload.name} (exact replay)",
                    timeout=args.timeout,
                    containers=[a.name for a in variants])
                reference = summary["workloads"][f"exact:{trace.name}"]["allocators"].get(REFERENCE)
                summary["checks"].append({
                    "workload": f"exact:{trace.name}",
                    "check": f"two exact replays on {REFERENCE} agree to the byte",
                    "ok": bool(reference) and reference["exact"]["repeated_identical"] is True,
                    "detail": "" if reference else f"no {REFERENCE} replay"})
            except replays.ReplayFailed as failure:
                summary["checks"].append({"workload": workload.name, "check": "exact replay",
                                          "ok": False, "detail": str(failure)})
    phases.end("exact replays")
    trim_chunk_maps(summary)
    corpus = None
    if any(workload.name == WEBKIT for workload in workloads):
        entry, corpus = webkit_corpus(args, lambda text: print(f"harness: {text}",
                                                               file=sys.stderr))
        summary["workloads"][WEBKIT_REPLAY] = entry
        summary["checks"].append({
            "workload": WEBKIT_REPLAY, "ok": "error" not in entry,
            "check": "the trace corpus: webkit runs recorded with their checkpoint marks (or "
                     "reused), each replayed exactly on every container, the reference twice "
                     "to the byte",
            "detail": entry.get("error") or f"{len(corpus['recordings'])} recordings, "
                      f"{sum(1 for r in corpus['recordings'] if r['reused'])} reused; "
                      f"{len(entry['allocators'])} containers"})
        for group in corpus["groups"].values():
            for name, replayed in group.get("entries", {}).items():
                reference = replayed["allocators"].get(REFERENCE)
                summary["checks"].append({
                    "workload": f"corpus:{name}", "ok": "error" not in replayed and bool(
                        reference) and reference["exact"]["repeated_identical"] is True,
                    "check": f"two exact replays on {REFERENCE} agree to the byte",
                    "detail": replayed.get("error", "")})
        phases.end("trace corpus")
    fanout.close()
    results = {
        "schema_version": SCHEMA_VERSION,
        "generated": time.strftime("%Y-%m-%d %H:%M:%S %Z"),
        "duration_seconds": round(time.time() - started, 1),
        "command": " ".join(["tools/runsel report", *(argv if argv is not None else sys.argv[1:])]),
        "machine": {**machine(), "load_average_1min_at_start": load_before},
        "settings": {"repeat": args.repeat, "peer_repeat": args.peer_repeat or args.repeat,
                     "scale": args.scale, "seed": args.seed,
                     "default_purge_policy":
                         allocator_discovery.build_options(args.build_dir).get("purge_policy"),
                     "quick": args.quick, "aslr": args.aslr, "instructions": counter,
                     "traces": {w.name: w.arguments[1] for w in workloads
                                if w.name.startswith(REPLAY + ":")},
                     "webkit": {"pages": args.webkit_pages, "repeat": args.webkit_repeat,
                                "peer_repeat": min(args.webkit_repeat, args.webkit_peer_repeat),
                                "record_pages": args.webkit_record_pages,
                                "cost_records": args.webkit_cost_records,
                                "allocators": list(args.webkit_allocators) or "all",
                                "replay_allocators": list(args.webkit_replay_allocators)
                                or "all"},
                     "instructions_how": counter_why,
                     "instructions_allocators": list(args.counted_allocators) or "all",
                     "instruction_scale": args.instruction_scale if counter == "callgrind"
                     else args.scale,
                     "time_target_percent": comparisons.TARGET_PERCENT,
                     "extend_seconds": args.extend, "extra_rounds": extra_rounds,
                     "counters": "counted" if counted else "not measured (no counting "
                     "libraries built)" if args.counters == "auto" else "off"},
        "reference": REFERENCE,
        "allocators": [{"name": a.name, "runsel": a.runsel, "setting": a.setting,
                        "preload": str(a.preload) if a.preload else None} for a in allocators],
        "missing_allocators": missing,
        "workloads": [workload.name for workload in workloads],
        "summary": summary["workloads"],
        "checks": summary["checks"],
        "discarded": discarded,
        "corpus": corpus,
        "verdict": verdict.build(summary["workloads"], corpus),
        "targets": targets.judge_workloads(summary["workloads"], REFERENCE),
    }
    phases.end("statistics")
    results["phase_seconds"] = phases.wall
    results["phase_cpu_seconds"] = phases.cpu
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "results.json").write_text(json.dumps(results, indent=1) + "\n")
    markdown, html = report.write_report(results, args.out)
    print(report.summary_text(results))
    print(f"\nreport: {html}\n        {markdown}\nresults: {args.out / 'results.json'}")
    failed = [check for check in results["checks"] if not check["ok"]]
    return 1 if discarded or failed else 0


if __name__ == "__main__":
    sys.exit(main())
