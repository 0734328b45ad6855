"""The harness: runs every workload under every allocator (each runsel variant, glibc,
jemalloc, mimalloc, tcmalloc), interleaved and repeated, checks which allocator served
each run, counts instructions, and writes results.json plus the report (Markdown and
self-contained HTML with pictures). `tools/runsel report` builds, then runs this.

    python3 -m harness.harness [--quick] [--out DIR] [--build-dir DIR] ...  (in experiments/)
"""

from __future__ import annotations

import argparse
import dataclasses
import os
import shutil
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from .interpreter import ROOT, ensure_libraries

if __name__ == "__main__":  # run by Debian's python3 when this one lacks what the report needs
    ensure_libraries({"matplotlib": "python3-matplotlib", "scipy": "python3-scipy",
                      "tabulate": "python3-tabulate", "distributed": "python3-distributed"},
                     "harness")

from . import (
    anchors,
    comparisons,
    corpus_report,
    counting,
    derived,
    fanout,
    firefox_groups,
    firefox_record,
    firefox_workload,
    headroom,
    metrics,
    options,
    phases,
    progress,
    replays,
    report,
    results,
    runs,
    targets,
    verdict,
    webkit_record,
)
from .allocators import (
    PROFILE_REPLAYER_PREFIX,
    REFERENCE,
    SETTING_SEPARATOR,
    THREAD_CACHE_SETTING,
    build_options,
    runsel_variants,
    same_choice_groups,
    setting_variants,
    system_allocators,
)
from .presets import DEFAULT, QUICK

REPLAY = runs.REPLAY
FIREFOX = firefox_workload.WORKLOAD
DEFAULT_TIMEOUT = 600  # seconds per run


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


def parse_arguments(argv: list[str] | None) -> argparse.Namespace:
    """The report's options as tools/runsel report takes them (options.py: declared once for
    both), and the harness's own: --extend, --counters."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                     parents=[options.build_options()])
    options.add_report_options(parser)
    parser.add_argument("--extend", type=float, metavar="SECONDS",
                        help="after the rounds, keep adding rounds (runsel variants only) of "
                             "the workloads whose time comparisons with rb_first are wider "
                             f"than ±{comparisons.TARGET_PERCENT:g} %%, for at most this long "
                             f"(default {DEFAULT['extend']:g}, --quick {QUICK['extend']:g})")
    parser.add_argument("--counters", choices=("auto", "off"), default="auto",
                        help="run each workload once under each variant's counting library "
                             "(build/libmalloc-counting-<container>.so) when it is built "
                             "(default: auto)")
    # Run by hand, from any folder: the repository's build and results folders.
    parser.set_defaults(build_dir=ROOT / options.BUILD_DIR, out=ROOT / options.REPORT_DIR,
                        timeout=DEFAULT_TIMEOUT)
    return with_preset(parser.parse_args(argv))


def with_preset(args: argparse.Namespace) -> argparse.Namespace:
    """The parsed options completed from the preset (--quick's or the default's)."""
    # Absolute, for tasks on workers in another folder; symbolic links kept, since a
    # cluster's workers see the shared folders at the paths given, not at what a link
    # resolves to on this machine.
    args.build_dir, args.out = (Path(os.path.abspath(path)) for path in (args.build_dir, args.out))
    args.trace, args.corpus_file = ([Path(os.path.abspath(path)) for path in paths]
                                   for paths in (args.trace, args.corpus_file))
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
                 "corpus_window_records", "corpus_hardened_traces", "cache_cost_traces",
                 "firefox_cost_sessions"):
        setattr(args, name, preset[name])
    if args.no_thread_cache:
        args.cache_cost_traces = None
    args.webkit_record_pages = max(args.webkit_pages, preset["webkit_record_pages"])
    args.webkit_peer_repeat = preset["webkit_peer_repeat"]
    args.counted_allocators = () if args.allocator else preset["counted_allocators"]
    args.peer_repeat = (None if preset["peer_repeat"] is None
                        else min(args.repeat, preset["peer_repeat"]))
    args.firefox_pages = args.firefox_pages or preset["firefox_pages"]
    args.firefox_parent = preset["firefox_parent"]
    args.firefox_set = args.firefox_set or preset["firefox_set"]
    args.firefox_replay_allocators = () if args.allocator else preset["firefox_replay_allocators"]
    args.firefox = not args.workload or FIREFOX in args.workload
    args.only_firefox = args.workload == [FIREFOX]
    args.workload = [name for name in args.workload if name != FIREFOX]
    return args


def chosen(args: argparse.Namespace) -> tuple[list[runs.Workload], list, list[str]]:
    """(workloads, allocators, missing peers) of this run, as --workload and --allocator
    pick them from what the build defines and the machine has."""
    programs = [] if args.only_firefox else runs.discover_workloads(args.build_dir)
    workloads = []
    if not args.only_firefox:
        defined = ([dataclasses.replace(w, peer_repeat=args.peer_repeat)
                    for w in programs if w.name != REPLAY]
                   + [webkit_record.webkit_workload(args)]
                   + [dataclasses.replace(w, peer_repeat=args.peer_repeat)
                      for w in runs.trace_workloads(programs, args.trace)])
        workloads = pick(defined, args.workload, "workload")
    if any(workload.name == webkit_record.WEBKIT for workload in workloads):
        webkit_record.check_webkit()
    system, missing = system_allocators()
    containers = runsel_variants(args.build_dir)
    # The thread cache's libraries join the timed runs when asked for (by name, or with
    # --thread-cache-all); by default the cache is compared on the corpus (behind_cache).
    cached = args.thread_cache_all or any(name.endswith(SETTING_SEPARATOR + THREAD_CACHE_SETTING)
                                          for name in args.allocator)
    settings = setting_variants(args.build_dir, containers, cached)
    allocators = pick(containers + system + settings, args.allocator, "allocator")
    workloads = [dataclasses.replace(w, allocators=tuple(a.name for a in allocators
                                                         if not a.setting))
                 if w.name == webkit_record.WEBKIT and not w.allocators else w
                 for w in workloads]
    return workloads, allocators, missing


def count(args: argparse.Namespace, workloads: list, allocators: list, variants: list) -> dict:
    """Instruction counts (perf or callgrind) and the counting runs: {"counter", "why",
    "counts", "counted"} for metrics.summarize and the settings."""
    counter, why = runs.choose_counter(args.instructions)
    print(f"harness: instructions: {why}", file=sys.stderr)
    counted_allocators = [allocator for allocator in allocators if not allocator.setting and (
        not args.counted_allocators or allocator.name in args.counted_allocators)]
    counts = ({} if counter == "off" else
              runs.run_instruction_counts(workloads, counted_allocators, counter,
                                          args.instruction_scale if counter == "callgrind"
                                          else args.scale, args.seed, args.timeout))
    counted = {}
    if args.counters == "auto":
        libraries = counting.counting_libraries(
            args.build_dir, [allocator.name for allocator in variants])
        counted = counting.run_counting(workloads, libraries, args.scale, args.seed,
                                        args.timeout, not args.aslr) if libraries else {}
    return {"counter": counter, "why": why, "counts": counts, "counted": counted}


def record_first(args: argparse.Namespace, workloads: list) -> dict:
    """The recordings the deterministic steps replay, made (or reused from their caches)
    before the timed runs, so that no browser recording shares the machine with them:
    {"webkit": the corpus's recordings or why they failed, None without the webkit
    workload; "firefox": the session's document (the Firefox corpus's over the same pages
    when it has one), None without the firefox workload; "firefox_corpus"}."""
    webkit = None
    if any(workload.name == webkit_record.WEBKIT for workload in workloads):
        webkit = webkit_record.corpus_recordings(
            args, lambda text: print(f"harness: {text}", file=sys.stderr))
    corpus = firefox_groups.harness_recording(args)
    return {"webkit": webkit, "firefox": firefox_workload.harness_recording(args, corpus),
            "firefox_corpus": corpus}


def shared_paths(args: argparse.Namespace, recorded: dict) -> list[Path]:
    """What the deterministic steps' tasks read besides the build, which every worker of a
    cluster must see at the same path: the --trace files, the recorded traces, the
    output folder, where the --corpus-file logs become traces, and the profiling twins'
    replayers the callgrind counts run (as shipped and hardened)."""
    paths = [Path(os.path.abspath(path)) for path in args.trace]
    if isinstance(recorded["webkit"], list):
        paths += [Path(entry["trace"]) for entry in recorded["webkit"]]
    if recorded["firefox"] and "directory" in recorded["firefox"]:
        paths.append(Path(recorded["firefox"]["directory"]))
    if recorded["firefox_corpus"]:
        paths += [Path(session["run"]["directory"])
                  for session in recorded["firefox_corpus"]["sessions"]]
    if args.corpus_file:
        args.out.mkdir(parents=True, exist_ok=True)
        paths.append(args.out)
    # The callgrind counts' replayers, the profiling twins as shipped and hardened
    # (cost.BUILDS), where this machine has them: a worker's build must have them too.
    paths += sorted(path for path in (args.build_dir / "tools").glob(
        f"{PROFILE_REPLAYER_PREFIX}*") if path.is_file())
    return paths


def task_programs(recorded: dict) -> list[str]:
    """The commands the deterministic steps' tasks run, which every worker of a cluster
    must have: valgrind and setarch when this machine has them (the counts use them), and
    Firefox when its session is replayed (its own allocator is the reference replayer)."""
    programs = [name for name in ("valgrind", "setarch") if shutil.which(name)]
    if recorded["firefox"] and "error" not in recorded["firefox"]:
        programs.append(firefox_record.FIREFOX)
    return programs


def deterministic_steps(args: argparse.Namespace, workloads: list, allocators: list,
                        variants: list, recorded: dict) -> dict:
    """Every step whose figures do not depend on the machine's load, as Dask tasks:
    instruction counts, counting runs, exact replays of the --trace workloads, the trace
    corpus and the Firefox session. Returns {"counted": count()'s, "summary": the summary
    entries and checks these steps add, "corpus", "firefox"}; main joins them to the timed
    runs' summary."""
    counted = count(args, workloads, allocators, variants)
    added = {"workloads": {}, "checks": []}
    for workload in workloads:
        if workload.name.startswith(REPLAY + ":"):
            replays.add_exact_replay(added, workload, args.build_dir, args.timeout,
                                     [a.name for a in variants])
    corpus = (webkit_record.add_corpus(added, args, recorded["webkit"])
              if recorded["webkit"] is not None else None)
    # The corpus first: when the firefox workload's session is one of its sessions, the
    # workload takes the corpus's replays of it (its parent log replayed classic too).
    sessions = firefox_groups.harness_step(
        args, added, recorded["firefox_corpus"],
        classic_parents=(recorded["firefox"].get("directory"),) if recorded["firefox"] else ())
    firefox = firefox_workload.harness_step(args, added, recorded["firefox"], sessions)
    firefox_workload.join_corpus(corpus, firefox, [a.name for a in variants])
    firefox_groups.join_groups(corpus, sessions)
    return {"counted": counted, "summary": added, "corpus": corpus, "firefox": firefox,
            "firefox_corpus": sessions}


def run_settings(args: argparse.Namespace, counted: dict, workloads: list,
                 extra_rounds: dict) -> dict:
    """results["settings"]: how this run was made."""
    counter = counted["counter"]
    return {"repeat": args.repeat, "peer_repeat": args.peer_repeat or args.repeat,
            "scale": args.scale, "seed": args.seed,
            "default_purge_policy":
                build_options(args.build_dir).get("purge_policy"),
            "quick": args.quick, "aslr": args.aslr, "instructions": counter,
            "traces": {w.name: w.arguments[1] for w in workloads
                       if w.name.startswith(REPLAY + ":")},
            "webkit": {"pages": args.webkit_pages, "repeat": args.webkit_repeat,
                       "peer_repeat": min(args.webkit_repeat, args.webkit_peer_repeat),
                       "record_pages": args.webkit_record_pages,
                       "cost_records": args.webkit_cost_records,
                       "allocators": list(args.webkit_allocators) or "all",
                       "replay_allocators": list(args.webkit_replay_allocators) or "all"},
            "instructions_how": counted["why"],
            "instructions_allocators": list(args.counted_allocators) or "all",
            "instruction_scale": args.instruction_scale if counter == "callgrind"
            else args.scale,
            "time_target_percent": comparisons.TARGET_PERCENT,
            "extend_seconds": args.extend, "extra_rounds": extra_rounds,
            "deterministic_steps": "after the timed runs" if args.no_overlap else
            "beside the timed runs, on the cores they leave free",
            "counters": "counted" if counted["counted"] else "not measured (no counting "
            "libraries built)" if args.counters == "auto" else "off"}


def write_and_render(document: dict, out: Path) -> tuple[Path, Path, Path]:
    """Writes results.json into `out`, then renders the report from what was written (so
    a later `tools/runsel render` gives the same bytes). Returns the three paths."""
    path = results.write(document, out)
    written = results.written(path)
    markdown, html = report.write_report(written, out)
    print(report.summary_text(written))
    return path, markdown, html


def measure(args: argparse.Namespace, workloads: list, allocators: list,
            steps: progress.Progress, clock: phases.PhaseClock) -> dict:
    """The recordings, then the timed runs with the deterministic steps beside them (or
    after them): {"valid", "discarded": the timed runs, "extra_rounds", "done": what
    deterministic_steps() returned}."""
    steps.start("recordings", "the browser sessions, or their cached traces")
    recorded = record_first(args, workloads)
    clock.end("recordings")
    steps.end("recordings")
    variants = [allocator for allocator in allocators if allocator.is_container]
    # The deterministic steps run beside the timed runs on the cores those leave free
    # (a local cluster of one worker fewer than the cores, widened when they end).
    beside = not args.no_overlap and (args.scheduler or fanout.usable_cores() > 1)
    fanout.start(None if args.scheduler or not beside else fanout.usable_cores() - 1,
                 shared_paths(args, recorded), task_programs(recorded))
    with ThreadPoolExecutor(max_workers=1) as pool:
        beside_runs = (pool.submit(deterministic_steps, args, workloads, allocators, variants,
                                   recorded) if beside else None)
        steps.start("timed runs", "one at a time" + (
            "; the replays and callgrind counts run beside them" if beside_runs else ""))
        valid, discarded = runs.run_interleaved(workloads, allocators, args.repeat, args.scale,
                                                args.seed, args.timeout, not args.aslr)
        extra_rounds = metrics.extend_until_resolved(workloads, variants, valid, discarded,
                                                     args)
        clock.end("timed runs", beside=bool(beside_runs))
        steps.end("timed runs")
        fanout.widen()
        steps.start("replays", "what is left of them, begun beside the timed runs"
                    if beside_runs else "exact replays and callgrind counts")
        done = (beside_runs.result() if beside_runs else
                deterministic_steps(args, workloads, allocators, variants, recorded))
    clock.end("deterministic steps")
    steps.end("replays")
    return {"valid": valid, "discarded": discarded, "extra_rounds": extra_rounds, "done": done}


def summarize(args: argparse.Namespace, workloads: list, allocators: list,
              measured: dict) -> dict:
    """metrics.summarize's {"workloads", "checks", "corpus"} of the timed runs, joined with
    the deterministic steps' entries and checks, the headroom's bounds ("headroom") and
    their checks; the derived figures added (derived.py). Closes the Dask cluster."""
    done = measured["done"]
    counted = done["counted"]
    summary = metrics.summarize(measured["valid"], [allocator.name for allocator in allocators],
                                workloads, counted["counts"], same_choice_groups(args.build_dir),
                                counted["counted"])
    summary["workloads"].update(done["summary"]["workloads"])
    summary["checks"].extend(done["summary"]["checks"])
    if done["corpus"] is not None:
        summary["corpus"] = done["corpus"]
        summary["corpus"]["fanout"] = fanout.describe()
    summary["headroom"] = headroom.build(summary.get("corpus"), done["firefox"],
                                         done["firefox_corpus"])
    summary["checks"].extend(headroom.checks(summary["headroom"]))
    fanout.close()
    derived.trim_chunk_maps(summary["workloads"])
    derived.derive(summary["workloads"])
    return summary


def results_document(args: argparse.Namespace, run: dict, measured: dict,
                     summary: dict) -> dict:
    """results.json's document (experiments/README.md, "results.json") but for the time
    figures; `run`: {"argv", "started", "load_before", "workloads", "allocators",
    "missing"}."""
    done, firefox = measured["done"], measured["done"]["firefox"]
    argv = run["argv"]
    return {
        "schema_version": results.SCHEMA_VERSION,
        "generated": time.strftime("%Y-%m-%d %H:%M:%S %Z"),
        "duration_seconds": round(time.time() - run["started"], 1),
        "command": " ".join(["tools/runsel report", *(argv if argv is not None else sys.argv[1:])]),
        "machine": {**phases.machine(), "load_average_1min_at_start": run["load_before"]},
        "settings": run_settings(args, done["counted"], run["workloads"],
                                 measured["extra_rounds"]),
        "reference": REFERENCE,
        "allocators": [{"name": a.name, "runsel": a.runsel, "setting": a.setting,
                        "preload": str(a.preload) if a.preload else None}
                       for a in run["allocators"]],
        "missing_allocators": run["missing"],
        "workloads": [workload.name for workload in run["workloads"]],
        "summary": summary["workloads"],
        "checks": summary["checks"],
        "discarded": measured["discarded"],
        "corpus": summary.get("corpus"),
        "verdict": verdict.build(summary["workloads"], summary.get("corpus")),
        "targets": targets.judge_workloads(summary["workloads"], REFERENCE),
        "firefox": firefox,
        "firefox_corpus": done["firefox_corpus"],
        "anchors": anchors.build(summary.get("corpus"), firefox,
                                 firefox_groups.every_group_entries(done["firefox_corpus"])),
        "headroom": summary["headroom"],
    }


def finish(args: argparse.Namespace, document: dict, steps: progress.Progress,
           clock: phases.PhaseClock) -> int:
    """The time figures added, results.json written and the report rendered from it, the
    run's time tables and closing lines printed; the exit code (1 when a check failed or
    a run was discarded)."""
    workers = ((document.get("corpus") or {}).get("fanout") or {}).get("workers") \
        or fanout.usable_cores()
    phases.add_time_figures(document, clock, workers, local=not args.scheduler)
    path, markdown, html = write_and_render(document, args.out)
    print("\n" + phases.time_tables(document, clock, workers))
    steps.end("statistics")
    discarded = document["discarded"]
    failed = [check for check in document["checks"] if not check["ok"]]
    print(progress.closing(corpus_report.short_answer(results.load(path)),
                           [html, markdown, path], steps.elapsed(), steps.since)
          + ("" if not (discarded or failed) else
             f"\n{len(failed)} check(s) failed and {len(discarded)} run(s) discarded: "
             "see the report's Checks"), flush=True)
    return 1 if discarded or failed else 0


def main(argv: list[str] | None = None) -> int:
    args = parse_arguments(argv)
    fanout.configure(args.scheduler, args.build_dir)
    started, load_before = time.time(), round(os.getloadavg()[0], 2)
    workloads, allocators, missing = chosen(args)
    print(f"harness: {len(workloads)} workloads × {len(allocators)} allocators × "
          f"{args.repeat} repetitions, scale {args.scale}", file=sys.stderr)
    print(f"harness: allocators: {', '.join(allocator.name for allocator in allocators)}"
          + (f" (not installed: {', '.join(missing)})" if missing else ""), file=sys.stderr)
    steps = progress.Progress(*progress.estimates(args.out, args.quick, args.repeat, args.scale))
    clock = phases.PhaseClock()  # seconds (wall and CPU) each step took, for the time budget
    measured = measure(args, workloads, allocators, steps, clock)
    steps.start("statistics", "the figures, then the report and its pictures")
    summary = summarize(args, workloads, allocators, measured)
    document = results_document(args, {"argv": argv, "started": started,
                                       "load_before": load_before, "workloads": workloads,
                                       "allocators": allocators, "missing": missing},
                                measured, summary)
    clock.end("statistics")
    return finish(args, document, steps, clock)


def entry() -> int:
    """main(), ended by a cluster that cannot serve (fanout.FanoutFailed: a worker's
    address and why, or a scheduler out of reach) with one line and exit code 2."""
    try:
        return main()
    except fanout.FanoutFailed as failure:
        print(f"harness: {failure}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(entry())
