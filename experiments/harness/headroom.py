"""The headroom bound: how far each container's bin_unused lies above the least that any
run-selection policy which never moves an object could leave, the live regions of every
bin packed into the fewest runs (the replayer's "headroom_bound", tools/trace/format.md).
Per corpus group (the WebKit traces, the --corpus-file traces, each Firefox process, and
each group of the Firefox corpus: its sessions are the traces), at
the moments the verdict judges (judgement.moments) and as the mean over every mark of a
session, each container's excess over the bound in bytes and in percent of lifo's
excess: how much of today's recoverable waste the container recovers. Computed when the
run ends from results["corpus"] and results["firefox"], whose replays hold every mark;
kept in results["headroom"] as numbers; report_headroom.py lays them out.

    python3 -m harness.headroom --build-dir build [--trace PATH ...]   (in experiments/)
        [--firefox-session DIR] [--variant NAME ...] [--json FILE]
replays the traces (as the WebKit group) and a recorded Firefox session (its run.json's
directory: each process replayed as firefox_workload does) on every container built,
exactly, and prints the tables.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from . import judgement
from .allocators import FIREFOX_MATCHING
from .anchors import GROUP_LABELS
from .firefox_names import CORPUS_GROUP_LABELS, GROUPS

MOMENTS = ("loaded", "closed", "peak", "session")  # session: the mean over every mark


def packing_bound(bin_: dict) -> int:
    """One bin's bound in bytes: (ceil(live / per run) * per run - live) * size."""
    per_run, live = bin_["regions_per_run"], bin_["regions_in_use"]
    if not per_run:
        return 0
    return (-(-live // per_run) * per_run - live) * bin_["size"]


def bound_of(point: dict) -> int | None:
    """A checkpoint's bound: the replayer's, else summed from its bins, else None."""
    if point.get("headroom_bound") is not None:
        return point["headroom_bound"]
    bins = point.get("bins")
    return sum(packing_bound(bin_) for bin_ in bins) if bins else None


def webkit_places(entry: dict) -> tuple[dict[str, dict[str, dict]], dict[str, list[str]]]:
    """A corpus trace as ({checkpoint name: {container: checkpoint}}, {moment: names})."""
    places: dict[str, dict[str, dict]] = {}
    for container, pair in entry["allocators"].items():
        for point in (pair.get("exact") or {}).get("checkpoints") or []:
            places.setdefault(point["name"], {})[container] = point
    first = next(iter(entry["allocators"].values()))["exact"]["checkpoints"]
    named = judgement.moments(entry)
    chosen = {moment: [named[moment]] for moment in ("loaded", "closed", "peak")}
    chosen["session"] = [point["name"] for point in first if point["kind"] == "mark"]
    return places, {moment: [n for n in names if n in places] for moment, names in chosen.items()}


def firefox_places(process: dict) -> tuple[dict[str, dict[str, dict]], dict[str, list[str]]]:
    """A Firefox process's marks in the same shape (numbered: labels such as "every"
    recur); no peak of live bytes among its marks."""
    places = {f"{index} {mark['label']}": mark["figures"]
              for index, mark in enumerate(process["marks"])}
    names = list(places)
    loaded = [n for n in names if n.split(" ", 1)[1].startswith("tab_")
              and n.endswith("_loaded")]
    closed = [n for n in names if n.split(" ", 1)[1] == "tabs_closed"]
    return places, {"loaded": loaded[-1:], "closed": closed[-1:], "peak": [],
                    "session": names}


def mean(values: list[float]) -> float:
    return sum(values) / len(values)


def trace_headroom(places: dict[str, dict[str, dict]], chosen: dict[str, list[str]],
                   containers: list[str]) -> dict:
    """One trace: per moment the bound and each container's bin_unused, excess and kept
    empty runs' unused bytes, each the mean over the moment's checkpoints; and every
    checkpoint where a container went below the bound (never, unless a figure is wrong)."""
    found, below, checked = {}, [], 0
    for moment, names in chosen.items():
        rows = [(name, places[name]) for name in names
                if all(c in places[name] and bound_of(places[name][c]) is not None
                       and places[name][c].get("bin_unused") is not None for c in containers)]
        if not rows:
            continue
        found[moment] = {
            "checkpoints": len(rows),
            "bound": mean([bound_of(there[containers[0]]) for _, there in rows]),
            **{key: {c: mean([figure(there[c]) for _, there in rows]) for c in containers}
               for key, figure in (("bin_unused", lambda p: p["bin_unused"]),
                                   ("excess", lambda p: p["bin_unused"] - bound_of(p)),
                                   ("kept_empty", lambda p: p.get("kept_empty_unused") or 0))}}
    for name, there in places.items():
        for container in containers:
            point = there.get(container)
            if point is None or bound_of(point) is None or point.get("bin_unused") is None:
                continue
            checked += 1
            if point["bin_unused"] < bound_of(point):
                below.append({"checkpoint": name, "container": container,
                              "bin_unused": point["bin_unused"], "bound": bound_of(point)})
    return {"moments": found, "below": below, "checked": checked}


def group_headroom(group: str, label: str, traces: dict[str, dict],
                   containers: list[str]) -> dict:
    """A group's traces ({name: trace_headroom}) summed: per moment the mean bound, each
    container's mean excess and its percent of FIREFOX_MATCHING's (a ratio of the sums over the
    traces; None without FIREFOX_MATCHING or when its excess is 0)."""
    summed = {}
    for moment in MOMENTS:
        there = [t["moments"][moment] for t in traces.values() if moment in t["moments"]]
        if not there:
            continue
        total = {key: {c: sum(t[key][c] for t in there) for c in containers}
                 for key in ("bin_unused", "excess", "kept_empty")}
        scale = total["excess"].get(FIREFOX_MATCHING)
        summed[moment] = {
            "traces": len(there), "checkpoints": sum(t["checkpoints"] for t in there),
            "bound": sum(t["bound"] for t in there) / len(there),
            **{key: {c: value / len(there) for c, value in values.items()}
               for key, values in total.items()},
            "percent_of_scale": {c: (100 * total["excess"][c] / scale if scale else None)
                                 for c in containers}}
    return {"group": group, "label": label, "containers": containers, "moments": summed,
            "traces": traces,
            "checked": sum(t["checked"] for t in traces.values()),
            "below": [{"trace": name, **b} for name, t in traces.items() for b in t["below"]]}


def corpus_groups(corpus: dict | None) -> list[dict]:
    found = []
    for group, data in ((corpus or {}).get("groups") or {}).items():
        entries = {name: entry for name, entry in (data.get("entries") or {}).items()
                   if "error" not in entry and entry.get("allocators")}
        if not entries:
            continue
        containers = list(next(iter(entries.values()))["allocators"])
        traces = {name: trace_headroom(*webkit_places(entry), containers)
                  for name, entry in entries.items()
                  if all(c in entry["allocators"] for c in containers)}
        found.append(group_headroom(group, GROUP_LABELS.get(group, group), traces, containers))
    return found


def firefox_groups(firefox: dict | None, containers: list[str]) -> list[dict]:
    """One group per Firefox process, on the classic-geometry containers only (lifo's run
    with Firefox's run sizes and Firefox's own allocator have other bounds)."""
    found = []
    for process in (firefox or {}).get("processes") or []:
        if not process.get("marks"):
            continue
        rows = [c for c in containers if c in process["marks"][0]["figures"]]
        if not rows:
            continue
        name = f"{process['role']} ({process['pid']})"
        traces = {name: trace_headroom(*firefox_places(process), rows)}
        found.append(group_headroom(f"firefox {process['role']}",
                                    f"Firefox {process['role']} log", traces, rows))
    return found


def session_places(process: dict, rows: list[str], suffix: str):
    """A Firefox corpus session's process as firefox_places gives it, each row's figures
    under the container's own name (NAME + suffix in the replay), and its peak: the mark
    with the most live bytes."""
    marks = [{"label": mark["label"],
              "figures": {name: mark["figures"][name + suffix] for name in rows}}
             for mark in process["marks"]]
    places, chosen = firefox_places({"marks": marks})
    chosen["peak"] = [max(places, key=lambda name: places[name][rows[0]]["live_requested"])]
    return places, chosen


def firefox_corpus_groups(entry: dict | None) -> list[dict]:
    """One group per group of the Firefox corpus (firefox_names.GROUPS: the content logs
    under the installed Firefox's run sizes, under the classic ones, the parent logs),
    each session one trace, on the containers every session replayed."""
    found = []
    if not entry or "error" in entry:
        return found
    for group, (role, suffix) in GROUPS.items():
        processes = {session["name"]: process for session in entry.get("sessions", [])
                     for process in session["processes"]
                     if process["role"] == role and process["marks"]}
        rows = [name for name in entry.get("containers", [])
                if all(name + suffix in process["marks"][0]["figures"]
                       for process in processes.values())]
        if not processes or not rows:
            continue
        traces = {name: trace_headroom(*session_places(process, rows, suffix), rows)
                  for name, process in processes.items()}
        found.append(group_headroom(group, CORPUS_GROUP_LABELS[group], traces, rows))
    return found


def checks(found: dict | None) -> list[dict]:
    """One check line per group (results.json's checks): no container went below the
    bound at any checkpoint; a failure means a wrong figure, not a good policy."""
    return [{"workload": group["group"], "ok": not group["below"],
             "check": "no container below the headroom bound at any checkpoint",
             "detail": (f"{group['checked']} checkpoints" if not group["below"] else
                        ", ".join(f"{b['container']} at {b['trace']} {b['checkpoint']}: "
                                  f"{b['bin_unused']} < {b['bound']}"
                                  for b in group["below"][:4]))}
            for group in (found or {}).get("groups") or []]


def build(corpus: dict | None, firefox: dict | None,
          firefox_corpus: dict | None = None) -> dict | None:
    """results["headroom"]; None when no replay gave the bound."""
    groups = corpus_groups(corpus)
    classic = [name for name, what in ((firefox or {}).get("rows") or {}).items()
               if what == "classic run sizes"]
    if firefox and "error" not in firefox:
        groups += firefox_groups(firefox, classic)
    groups += firefox_corpus_groups(firefox_corpus)
    groups = [group for group in groups if group["moments"]]
    if not groups:
        return None
    return {"scale": FIREFOX_MATCHING, "moments": list(MOMENTS), "groups": groups}


def measured(args: argparse.Namespace) -> dict:
    """{"corpus", "firefox"} as a run would hold them, from the command's traces and
    session (no cost, no pick counters: the bound needs the exact figures only)."""
    from . import firefox_workload, replays
    corpus = firefox = None
    if args.trace:
        traces = {path.parent.name + "/" + path.name: path.resolve() for path in args.trace}
        entries = replays.corpus_summaries(traces, args.build_dir, "webkit",
                                           args.variant or None,
                                           windows=replays.CostWindows(windows=0),
                                           counters=False,
                                           progress=lambda text: print(text, file=sys.stderr))
        corpus = {"groups": {"webkit": {"entries": entries}}}
    if args.firefox_session:
        session = args.firefox_session.resolve()
        recorded = {**json.loads((session / "run.json").read_text()), "directory": str(session)}
        firefox = firefox_workload.firefox_summary(
            args.build_dir, session.parent, len(recorded["pages"]), args.variant or None,
            progress=lambda text: print(text, file=sys.stderr), recorded=recorded)
        if "error" in firefox:
            sys.exit(f"headroom: {args.firefox_session}: {firefox['error']}")
    return {"corpus": corpus, "firefox": firefox}


def main() -> int:
    from . import fanout, report_headroom
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--build-dir", type=Path, default=Path("build"))
    parser.add_argument("--trace", type=Path, action="append", default=[])
    parser.add_argument("--firefox-session", type=Path)
    parser.add_argument("--variant", action="append", default=[])
    parser.add_argument("--json", type=Path, help="write results.json's \"headroom\" here")
    args = parser.parse_args()
    args.build_dir = args.build_dir.resolve()
    if not args.trace and not args.firefox_session:
        parser.error("give --trace or --firefox-session")
    try:
        run = measured(args)
    finally:
        fanout.close()
    found = build(run["corpus"], run["firefox"])
    if found is None:
        sys.exit("headroom: no replay gave the bound (a replayer older than headroom_bound?)")
    if args.json:
        args.json.write_text(json.dumps(found, indent=1) + "\n")
    from tabulate import tabulate
    for title, headers, rows, note in report_headroom.tables({"headroom": found}):
        print(f"\n{title}\n{tabulate(rows, headers, tablefmt='github')}\n{note}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
