"""The report's `firefox` workload: stock Firefox's recorded session (firefox_record:
cached by Firefox version, corpus and recorder, re-recorded when one changes) replayed exactly,
for the busiest content process and for the parent, on every container with the classic
run geometry, on lifo with the installed Firefox's run sizes (lifo@firefox), and on
Firefox's own allocator (the reference row, firefox_replay); beside them, at the same
marks, the real allocator's figures inside the browser (10-18 arenas, many threads).
Gives results.json's top-level "firefox" entry (experiments/README.md).

    python3 -m harness.firefox_workload [--pages N] [--out FILE] [--variant NAME ...]
        [--content-only] [--cache DIR] [--build-dir DIR]   (in experiments/)
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from . import (
    allocators,
    fanout,
    firefox_logs,
    firefox_names,
    firefox_record,
    firefox_replay,
    judgement,
    replays,
)
from .allocators import FIREFOX_MATCHING
from .interpreter import ROOT

WORKLOAD = "firefox"  # the harness's name for this workload (--workload firefox)
FIGURES = ("allocated", "committed", "bin_unused", "resident", "dirty", "live_requested",
           "purged_resident", "headroom_bound", "kept_empty_unused")
MARK_NAME = re.compile(r"^jemalloc_stats #(\d+) ")


def replay_with(program: Path, trace: Path, scratch: Path, conf: str | None,
                timeout: float) -> dict:
    """One runsel replayer's JSON document in the as-built profile, with conf's entries
    after it when given."""
    handle, name = tempfile.mkstemp(prefix=program.name + ".", suffix=".json", dir=scratch)
    os.close(handle)
    environment = {key: value for key, value in os.environ.items() if key != "RUNSEL_CONF"}
    environment["RUNSEL_CONF"] = allocators.with_as_built(conf)
    done = subprocess.run([str(program), "--json", name, str(trace)], capture_output=True,
                          text=True, timeout=timeout, env=environment)
    if done.returncode != 0:
        raise replays.ReplayFailed(f"{program.name} {trace.name}: exit {done.returncode}: "
                                   f"{done.stderr.strip()[-400:]}")
    return json.loads(Path(name).read_text())


def geometry_of(document: dict) -> list[int]:
    """bytes_per_run of every class, as the replay's last checkpoint reports it."""
    return [bin_["bytes_per_run"] for bin_ in document["checkpoints"][-1]["bins"]]


def marks_of(document: dict, side: list[dict]) -> list[dict]:
    """The replay's mark checkpoints named by the recorder's side file (its K-th
    jemalloc_stats() line is the side file's mark K), with the in-browser figures."""
    by_number = {record["mark"]: record for record in side}
    named = []
    for point in document["checkpoints"]:
        found = MARK_NAME.match(point["name"]) if point["kind"] == "mark" else None
        record = by_number.get(int(found.group(1))) if found else None
        if record is None:
            continue
        named.append({"label": record["label"], "ops": point["ops"],
                      "in_browser": record.get("stats")})
    return named


def process_entry(build_dir: Path, session: Path, process: dict, containers: dict[str, Path],
                  conf: str, timeout: float, progress,
                  at_firefox: tuple[str, ...] = (FIREFOX_MATCHING,),
                  classic: bool = True) -> dict:
    """One process's log replayed on every container (classic run sizes; not when
    `classic` is False), on the containers named in at_firefox under the installed
    Firefox's run sizes (NAME@firefox) and on Firefox's own allocator, with every figure
    at every mark."""
    log = session / process["log"]
    trace = session / (process["log"].removesuffix(".log.gz") + ".trace")
    if not trace.exists() or trace.stat().st_mtime < log.stat().st_mtime:
        progress(f"converting {log.name}")
        firefox_replay.convert(build_dir, log, trace, partial=not process["complete"])
    side = firefox_logs.read_marks(session / process["marks_file"])
    jobs = [(name, program, None) for name, program in containers.items() if classic]
    jobs += [(f"{name}@firefox", containers[name], conf) for name in at_firefox
             if name in containers]
    jobs.append((firefox_names.REFERENCE_NAME, None, None))

    def run(job):
        name, program, setting = job
        # A folder of the task's own, on the machine the task runs on (a Dask worker).
        with tempfile.TemporaryDirectory(prefix="runsel-firefox-replay-") as scratch:
            if program is None:
                return firefox_replay.reference_replay(build_dir, trace, Path(scratch),
                                                       timeout=timeout)
            return replay_with(program, trace, Path(scratch), setting, timeout)
    documents = dict(zip([job[0] for job in jobs], fanout.fanned_map(
        run, jobs, lambda job, _: progress(f"firefox {process['role']} replayed on {job[0]}"),
        kind="firefox replay")))
    reference = documents[firefox_names.REFERENCE_NAME]
    marks = marks_of(reference, side)
    for mark in marks:
        mark["figures"] = {}
        for name, document in documents.items():
            point = next(p for p in document["checkpoints"] if p["ops"] == mark["ops"]
                         and p["kind"] == "mark")
            mark["figures"][name] = {figure: point.get(figure) for figure in FIGURES}
    return {"role": process["role"], "pid": process["pid"], "trace": str(trace),
            "records": reference["trace"]["records"],
            "recording": {key: process[key] for key in (
                "lines", "calls", "frees", "frees_dropped", "frees_dropped_share",
                "live_reuses", "coverage", "num_operations", "complete", "bytes")},
            "replay_tally": {name: document["replay"] for name, document in documents.items()},
            "geometry": {name: geometry_of(document) for name, document in documents.items()},
            "profiles": {name: document.get("profile") for name, document in documents.items()},
            "marks": marks}


def record_session(build_dir: Path, cache: Path, pages: int) -> dict:
    """The recorded session's run.json document (firefox_record: reused from `cache` when
    Firefox, the corpus and the recorder are the same), or {"error": one line}."""
    started = time.monotonic()
    try:
        document = firefox_record.record(build_dir, cache, pages, page_timeout=300)
    except (firefox_record.RecordFailed, subprocess.TimeoutExpired) as failure:
        return {"error": str(failure) or type(failure).__name__}
    return {**document, "step_seconds": round(time.monotonic() - started, 1)}


def workload_rows(processes: list[dict], containers: list[str]) -> list[dict]:
    """process_entry()s with more rows (the Firefox corpus's: every NAME@firefox) cut to
    the workload's: the classic rows of `containers`, lifo@firefox and Firefox's own."""
    rows = {*containers, f"{FIREFOX_MATCHING}@firefox", firefox_names.REFERENCE_NAME}

    def kept(by_row: dict) -> dict:
        return {name: value for name, value in by_row.items() if name in rows}
    return [{**{key: value for key, value in process.items() if key != "cost"},
             **{key: kept(process[key]) for key in ("replay_tally", "geometry", "profiles")},
             "marks": [{**mark, "figures": kept(mark["figures"])} for mark in process["marks"]]}
            for process in processes]


def firefox_summary(build_dir: Path, cache: Path, pages: int, containers: list[str] | None,
                    parent: bool = True, timeout: float = 900, progress=print,
                    recorded: dict | None = None, replayed: list[dict] | None = None) -> dict:
    """results.json's "firefox" entry, or {"error": one line} when Firefox cannot run:
    the session `recorded` (record_session's document), or recorded now; `replayed`: its
    processes' entries already replayed (the Firefox corpus's, workload_rows)."""
    started = time.monotonic()
    document = recorded or record_session(build_dir, cache, pages)
    if "error" in document:
        return {"error": document["error"]}
    spent = document.get("step_seconds", 0.0) if recorded else 0.0
    try:
        layout = firefox_replay.geometry(build_dir)
        conf = firefox_replay.run_pages_setting(layout)
        programs = replays.replayers(build_dir)
        if containers:
            programs = {name: path for name, path in programs.items() if name in containers}
        session = Path(document["directory"])
        chosen = [p for p in document["processes"] if parent or p["role"] == "content"]
        processes = (workload_rows(replayed, list(programs)) if replayed is not None else
                     [process_entry(build_dir, session, process, programs, conf, timeout,
                                    progress) for process in chosen])
    except (firefox_replay.FirefoxFailed, replays.ReplayFailed,
            subprocess.TimeoutExpired) as failure:
        return {"error": str(failure) or type(failure).__name__}
    classic = next(iter(processes[0]["geometry"].values())) if processes else []
    return {
        "firefox": document["firefox"], "pages": [page["url"] for page in document["pages"]],
        "corpus": document["corpus"], "reused_recording": document.get("reused", False),
        "recording_seconds": document["wall_seconds"], "session": str(session),
        "run_pages_setting": conf, "firefox_layout": layout, "classic_bytes_per_run": classic,
        "rows": {**{name: "classic run sizes" for name in programs},
                 f"{FIREFOX_MATCHING}@firefox": "the installed Firefox's run sizes",
                 firefox_names.REFERENCE_NAME: "Firefox's own mozjemalloc (its run sizes), "
                                                "replaying the same trace, one arena"},
        "processes": processes, "seconds": round(time.monotonic() - started + spent, 1),
    }


# What the choices decide at a mark, of the figures a Firefox replay keeps (bookkeeping,
# and so committed, holds array_heap's side array).
CHOICE_FIGURES = ("live_requested", "allocated", "bin_unused")


def same_choices_checks(entry: dict, groups: list[list[str]]) -> list[dict]:
    """Per group of containers that pick alike with two or more replayed: every member's
    CHOICE_FIGURES at every mark of every process equal the first member's."""
    marks = {}
    for process in entry["processes"]:
        for number, mark in enumerate(process["marks"], 1):
            place = f"{process['role']} {mark['label']}"  # "every" recurs: then numbered
            marks[place if place not in marks else f"{place} (mark {number})"] = {
                container: tuple(figures[f] for f in CHOICE_FIGURES)
                for container, figures in mark["figures"].items()}
    return replays.group_agreement_checks(
        marks, groups, WORKLOAD, "live, allocated and bin_unused at every mark of every process",
        f"{len(entry['processes'])} processes compared")


def corpus_entries(entry: dict, containers: list[str]) -> dict[str, dict]:
    """The session's processes as replicates of the trace corpus: {"firefox <role>":
    summary entry of kind "replay"} whose checkpoints are the tab marks (tab_N_loaded,
    tabs_closed) with each container's exact figures there (the rows of other run sizes
    and Firefox's own allocator left out), so that judgement.py judges them beside the
    WebKit traces. No callgrind windows: their cost is not measured."""
    found = {}
    for process in entry.get("processes", []):
        marks = [mark for mark in process["marks"] if mark["label"].startswith("tab")]
        if not marks:
            continue
        rows = [name for name in containers if name in marks[0]["figures"]]
        loaded = [mark["label"] for mark in marks if mark["label"].endswith("_loaded")]
        found[f"firefox {process['role']}"] = {
            "kind": "replay", "family": "firefox", "label": f"Firefox {process['role']} log",
            "trace": process["trace"], "key_checkpoint": loaded[-1] if loaded else None,
            "memory_comparable": True, "memory_note": None,
            "allocators": {name: {"exact": {"checkpoints": [
                {"name": mark["label"], "ops": mark["ops"], **mark["figures"][name]}
                for mark in marks]}, "cost": None} for name in rows}}
    return found


def join_corpus(corpus: dict | None, entry: dict | None, containers: list[str]) -> None:
    """The Firefox logs joined to the WebKit traces as one group of replicates, "browsers"
    in corpus["groups"], which the report's answer is judged on: its judgements over both
    ("entries" stays empty: the traces are the webkit group's and results["firefox"]'s;
    "members" names them)."""
    webkit = ((corpus or {}).get("groups") or {}).get("webkit") or {}
    usable = {name: replayed for name, replayed in (webkit.get("entries") or {}).items()
              if "error" not in replayed}
    logs = corpus_entries(entry, containers) if entry and "error" not in entry else {}
    if not usable or not logs:
        return
    corpus["groups"]["browsers"] = {
        "entries": {}, "members": {"webkit": list(usable), "firefox": list(logs)},
        "firefox": entry["firefox"], **judgement.group_judgements({**usable, **logs})}


def corpus_session(corpus: dict | None, pages: int) -> dict | None:
    """The run.json document of the corpus's first kept session over pages 1..pages in
    that order (None when it has none): the same recording the workload would make."""
    wanted = list(range(1, pages + 1))
    for session in (corpus or {}).get("sessions", []):
        if session.get("source") == "recorded" and session["pages"] == wanted:
            return {**session["run"], "step_seconds": 0.0}
    return None


def harness_recording(args: argparse.Namespace, corpus: dict | None = None) -> dict | None:
    """The harness's firefox recording, made before its timed runs (a browser must not
    share the machine with them): the corpus's session over the same pages when it has
    one (corpus_session), else record_session's document; None when left out."""
    if not args.firefox:
        return None
    print("harness: the firefox workload (stock firefox-esr, recorded once per version "
          "and corpus)", file=sys.stderr)
    found = corpus_session(corpus, args.firefox_pages)
    if found is not None:
        print(f"harness: the firefox workload replays the corpus's session "
              f"{found['directory']}", file=sys.stderr)
        return found
    return record_session(args.build_dir, ROOT / "results" / "firefox", args.firefox_pages)


def corpus_replays(corpus: dict | None, recorded: dict) -> list[dict] | None:
    """The Firefox corpus's replayed processes of the session `recorded` (the same run
    directory), None when the corpus did not replay it."""
    for session in (corpus or {}).get("sessions", []):
        if session["processes"] and Path(session["processes"][0]["trace"]).parent.resolve() \
                == Path(recorded.get("directory", "")).resolve():
            return session["processes"]
    return None


def harness_step(args: argparse.Namespace, summary: dict, recorded: dict | None,
                 corpus: dict | None = None) -> dict | None:
    """The harness's firefox replays of the session `recorded` (harness_recording's), or
    the Firefox corpus's replays of it (`corpus`: results.json's "firefox_corpus"):
    returns results.json's "firefox" entry (None when it was left out) and appends its
    check lines to summary["checks"]."""
    if recorded is None:
        return None
    containers = [name for name in args.allocator or args.firefox_replay_allocators
                  if name in replays.replayers(args.build_dir)] or None
    entry = firefox_summary(
        args.build_dir, ROOT / "results" / "firefox", args.firefox_pages, containers,
        parent=args.firefox_parent, timeout=max(args.timeout, 900),
        progress=lambda text: print(f"harness: {text}", file=sys.stderr), recorded=recorded,
        replayed=corpus_replays(corpus, recorded))
    summary["checks"].append({
        "workload": WORKLOAD, "ok": "error" not in entry,
        "check": "stock Firefox recorded (coverage, no live reuse) and its logs replayed "
                 "on every container and on Firefox's own allocator",
        "detail": entry.get("error") or
                  f"{len(entry['processes'])} processes, "
                  f"{'reused' if entry['reused_recording'] else 'recorded'} session"})
    if "error" not in entry:
        summary["checks"].extend(same_choices_checks(
            entry, allocators.same_choice_groups(args.build_dir)))
    return entry



def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--build-dir", type=Path, default=ROOT / "build")
    parser.add_argument("--cache", type=Path, default=ROOT / "results" / "firefox")
    parser.add_argument("--pages", type=int, default=4)
    parser.add_argument("--variant", action="append", default=[])
    parser.add_argument("--content-only", action="store_true")
    parser.add_argument("--out", type=Path)
    args = parser.parse_args()
    try:
        entry = firefox_summary(args.build_dir.resolve(), args.cache.resolve(), args.pages,
                                args.variant or None, not args.content_only,
                                progress=lambda text: print(text, file=sys.stderr))
    finally:
        fanout.close()
    text = json.dumps(entry, indent=1) + "\n"
    if args.out:
        args.out.write_text(text)
    else:
        sys.stdout.write(text)
    return 1 if "error" in entry else 0


if __name__ == "__main__":
    sys.exit(main())
