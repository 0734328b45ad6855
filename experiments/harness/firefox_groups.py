"""The corpus of Firefox sessions replayed and judged: every session's content log on every
container under the installed Firefox's run sizes (NAME@firefox) and under the classic
ones, its parent log likewise, and Firefox's own allocator (the reference) on both, all
in the as-built profile. Gives results.json's "firefox_corpus" entry and three corpus
groups judged apart, paired by session: "firefox" (content logs, @firefox: the report's
headline), "firefox_classic" (content logs, classic run sizes) and "firefox_parent"
(parent logs, @firefox). The WebKit traces stay their own group.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from . import firefox_corpus, firefox_replay, firefox_workload, judgement, replays
from .cost import SHIPPED
from .firefox_names import GROUPS


class SameGeometry(Exception):
    """An @firefox replay ran with the classic run sizes: its figures would be wrong."""


def check_geometries(process: dict, containers: list[str]) -> None:
    """Every NAME@firefox replay's bytes_per_run differs from NAME's (a replay that
    ignored its run_pages setting gives the classic figures under the @firefox name)."""
    for name in containers:
        classic, today = process["geometry"].get(name), process["geometry"].get(f"{name}@firefox")
        if classic is not None and today is not None and classic == today:
            raise SameGeometry(f"{process['trace']}: {name}@firefox replayed with the classic "
                               f"run sizes ({classic[:4]}...): its run_pages setting was ignored")


def costed_sessions(sessions: list[dict], count: int) -> list[dict]:
    """The sessions whose content logs callgrind counts: the shortest content log of each
    page set, shortest first, `count` of them (a trace's windows cost mostly valgrind's
    uninstrumented way through the whole log, so short logs are cheap; one per page set,
    so that the cost is judged over different pages, not repeats)."""
    shortest = {}
    for session in sessions:
        content = next((p for p in session["processes"] if p["role"] == "content"), None)
        if content is None:
            continue
        key = tuple(session["pages"])
        if key not in shortest or content["records"] < shortest[key][0]:
            shortest[key] = (content["records"], session)
    return [session for _, session in sorted(shortest.values(),
                                             key=lambda item: item[0])][:count]


def add_costs(build_dir: Path, sessions: list[dict], programs: list[str], conf: str,
              windows: replays.CostWindows, timeout: float, progress) -> list[str]:
    """callgrind's windows over the content logs of costed_sessions(), on every container
    as shipped, under the installed Firefox's run sizes and the as-built profile: each
    costed content process gets "cost": {container: cost block}. Returns the sessions'
    names."""
    chosen = costed_sessions(sessions, windows.traces) if windows.windows else []
    contents = {session["name"]: next(p for p in session["processes"] if p["role"] == "content")
                for session in chosen}
    jobs = [(name, container, SHIPPED) for name in contents for container in programs]
    costs = replays.corpus_costs({name: Path(process["trace"]) for name, process in
                                  contents.items()}, build_dir, "", jobs, windows, timeout,
                                 progress, " (firefox)", conf=conf)
    for name, process in contents.items():
        process["cost"] = {container: costs[(name, container, SHIPPED)]
                           for container in programs}
    return list(contents)


def replay_corpus(build_dir: Path, corpus: dict, containers: list[str] | None,
                  parent: bool = True, timeout: float = 900, progress=print,
                  windows: replays.CostWindows | None = None,
                  classic_parents: tuple[str, ...] = ()) -> dict:
    """results.json's "firefox_corpus" entry: {"set", "left_out", "run_pages_setting",
    "sessions": [{"name", "pages", "source", "processes": [process_entry]}], "costed"},
    or {"error": one line}. Sessions whose replays fail are left out with their reason.
    The parent logs are replayed under the installed Firefox's run sizes only (their
    group's), but for the sessions whose run directories are in `classic_parents` (the
    firefox workload's, whose tables have every row); `windows`: callgrind's over the
    content logs of some sessions (add_costs)."""
    try:
        layout = firefox_replay.geometry(build_dir)
        conf = firefox_replay.run_pages_setting(layout)
    except (firefox_replay.FirefoxFailed, subprocess.TimeoutExpired) as failure:
        return {"error": str(failure) or type(failure).__name__}
    programs = replays.replayers(build_dir)
    if containers:
        programs = {name: path for name, path in programs.items() if name in containers}
    sessions, left_out = [], list(corpus["left_out"])
    for session in corpus["sessions"]:
        run = session["run"]
        chosen = [p for p in run["processes"] if parent or p["role"] == "content"]
        try:
            processes = [firefox_workload.process_entry(
                build_dir, Path(run["directory"]), process, programs, conf, timeout,
                progress, at_firefox=tuple(programs),
                classic=process["role"] == "content" or run["directory"] in classic_parents)
                for process in chosen]
            for process in processes:
                check_geometries(process, list(programs))
        except (firefox_replay.FirefoxFailed, replays.ReplayFailed, SameGeometry,
                subprocess.TimeoutExpired) as failure:
            left_out.append({"name": session["name"],
                             "reason": f"replay: {str(failure).splitlines()[0]}"})
            continue
        sessions.append({"name": session["name"], "pages": session["pages"],
                         "repeat": session["repeat"], "source": session["source"],
                         "reused": bool(run.get("reused")), "processes": processes})
    costed = add_costs(build_dir, sessions, list(programs), conf, windows or
                       replays.CostWindows(windows=0), timeout, progress)
    return {"set": corpus["set"], "sessions": sessions, "left_out": left_out,
            "costed": costed, "cost": {"windows": windows.windows,
                                       "window_records": windows.records} if costed else None,
            "run_pages_setting": conf, "firefox_layout": layout,
            "containers": list(programs), "recorded": corpus["recorded"],
            "reused": corpus["reused"], "recording_seconds": corpus["seconds"]}


def group_entries(entry: dict, group: str) -> dict[str, dict]:
    """{session: summary entry of kind "replay"} of one group: the checkpoints are every
    mark of the session's log, with each container's figures from its replay under the
    group's run sizes, named as the container (so that judgement pairs NAME@firefox with
    rb_first@firefox on the same session)."""
    role, suffix = GROUPS[group]
    found = {}
    for session in entry.get("sessions", []):
        process = next((p for p in session["processes"] if p["role"] == role), None)
        if process is None or not process["marks"]:
            continue
        rows = [name for name in entry["containers"]
                if f"{name}{suffix}" in process["marks"][0]["figures"]]
        loaded = [m["label"] for m in process["marks"] if m["label"].endswith("_loaded")]
        found[session["name"]] = {
            "kind": "replay", "family": "firefox", "label": f"Firefox {role} log, "
            f"{session['name']}", "trace": process["trace"],
            "key_checkpoint": loaded[-1] if loaded else process["marks"][-1]["label"],
            "memory_comparable": True, "memory_note": None,
            "allocators": {name: {"exact": {"checkpoints": [
                {"name": mark["label"], "ops": mark["ops"], **mark["figures"][name + suffix]}
                for mark in process["marks"]]},
                SHIPPED: (process.get("cost") or {}).get(name) if suffix else None}
                for name in rows}}
    return found


def every_group_entries(entry: dict | None) -> dict[str, dict[str, dict]]:
    """{group: group_entries(entry, group)} for every Firefox group ({} without a corpus)."""
    if not entry or "error" in entry:
        return {}
    return {group: group_entries(entry, group) for group in GROUPS}


def join_groups(corpus: dict | None, entry: dict | None) -> None:
    """Adds the Firefox groups to corpus["groups"] (each with its sessions' names in
    "members" and its judgements; "entries" stays empty: the logs are in
    results["firefox_corpus"])."""
    if corpus is None or not entry or "error" in entry:
        return
    corpus.setdefault("groups", {})
    for group in GROUPS:
        entries = group_entries(entry, group)
        if entries:
            corpus["groups"][group] = {"entries": {}, "members": {"firefox": list(entries)},
                                       "run_sizes": "firefox" if GROUPS[group][1] else "classic",
                                       **judgement.group_judgements(entries)}


def logalloc_files(paths: list[Path]) -> list[Path]:
    """The --corpus-file paths that are logalloc logs (not runsel traces, "RSTR")."""
    found = []
    for path in paths:
        with open(path, "rb") as file:
            if file.read(4) != b"RSTR":
                found.append(Path(path).resolve())
    return found


def harness_recording(args) -> dict | None:
    """The harness's corpus of Firefox sessions (set args.firefox_set, recorded before
    the timed runs, only what is missing), with the --corpus-file logalloc logs; None
    without the firefox workload."""
    if not args.firefox:
        return None
    print(f"harness: the Firefox corpus, set {args.firefox_set} (recorded once per session)",
          file=sys.stderr)
    try:
        return firefox_corpus.build(args.build_dir, args.firefox_set,
                                    logalloc_files(args.corpus_file),
                                    progress=lambda text: print(f"harness: {text}",
                                                                file=sys.stderr))
    except firefox_corpus.CorpusError as failure:
        return {"error": str(failure), "sessions": [], "left_out": []}


def harness_step(args, summary: dict, recorded: dict | None,
                 classic_parents: tuple[str, ...] = ()) -> dict | None:
    """The corpus's replays (replay_corpus) and their check line in summary["checks"]."""
    if recorded is None:
        return None
    if "error" in recorded:
        entry = {"error": recorded["error"]}
    else:
        containers = [name for name in args.allocator or args.firefox_replay_allocators
                      if name in replays.replayers(args.build_dir)] or None
        entry = replay_corpus(args.build_dir, recorded, containers, args.firefox_parent,
                              max(args.timeout, 900),
                              lambda text: print(f"harness: {text}", file=sys.stderr),
                              replays.CostWindows(args.firefox_cost_sessions,
                                                  args.corpus_windows,
                                                  args.corpus_window_records),
                              classic_parents)
    sessions = entry.get("sessions", [])
    summary["checks"].append({
        "workload": "firefox", "ok": "error" not in entry and bool(sessions),
        "check": "the Firefox corpus: every session recorded (checks passed) and replayed on "
                 "every container under both run sizes and on Firefox's own allocator; "
                 "every NAME@firefox replay's bytes_per_run differs from NAME's",
        "detail": entry.get("error") or
                  f"{len(sessions)} sessions kept, {len(entry['left_out'])} left out" +
                  "".join(f"; {s['name']}: {s['reason']}" for s in entry["left_out"])})
    return entry
