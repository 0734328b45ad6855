"""The corpus of Firefox sessions: a named set of sessions (experiments/firefox/sessions.json),
each recorded once by firefox_record (gzip logalloc logs of the parent and of the busiest
content process, with the recording's checks) and cached under
results/firefox/corpus/<Firefox version>-<session>-r<repeat>-<pages key>/; only what is
missing is recorded, one browser at a time. A session whose browser fails or whose logs
fail their checks is listed in "left_out" with its reason, never kept. Logalloc logs
recorded elsewhere (--corpus-file) join as sessions of their own, content process only.

    python3 -m harness.firefox_corpus [--set NAME] [--corpus-file LOG ...] [--out DIR]
        [--build-dir DIR] [--force]   (in experiments/; prints the corpus document)
"""

from __future__ import annotations

import argparse
import gzip
import json
import shutil
import subprocess
import sys
import time
from pathlib import Path

from webkit import webkit_corpus

from . import firefox_logs, firefox_record
from .interpreter import ROOT

SESSIONS = ROOT / "experiments" / "firefox" / "sessions.json"
CACHE = ROOT / "results" / "firefox" / "corpus"
PAGE_TIMEOUT = 300.0


class CorpusError(Exception):
    """The session set cannot be read: exit 1 with this."""


def session_set(name: str, path: Path = SESSIONS) -> list[dict]:
    """The sessions of set `name` (entries {"set": OTHER} include OTHER's), each
    {"id", "pages", "repeat", "name"} with name = id-r<repeat>, without duplicates."""
    sets = json.loads(path.read_text())["sets"]

    def expand(wanted: str, seen: tuple) -> list[dict]:
        if wanted not in sets or wanted in seen:
            raise CorpusError(f"no session set {wanted!r} in {path} (sets: {', '.join(sets)})")
        found = []
        for entry in sets[wanted]:
            found += expand(entry["set"], seen + (wanted,)) if "set" in entry else [
                {**entry, "name": f"{entry['id']}-r{entry['repeat']}"}]
        return found
    unique: dict[str, dict] = {}
    for session in expand(name, ()):
        unique.setdefault(session["name"], session)
    return list(unique.values())


def session_directory(out: Path, version: str, session: dict, pages: list[dict]) -> Path:
    return out / f"{version}-{session['name']}-{firefox_record.corpus_key(pages)}"


def record_one(build_dir: Path, out: Path, session: dict, force: bool, recorder) -> dict:
    """One session's run.json document (recorded or reused), or raises RecordFailed."""
    version = firefox_record.firefox_version()
    try:
        every = webkit_corpus.corpus_pages(webkit_corpus.CORPUS, 1, None)
    except webkit_corpus.CorpusError as failure:
        raise firefox_record.RecordFailed(str(failure)) from None
    if not all(1 <= page <= len(every) for page in session["pages"]):
        raise firefox_record.RecordFailed(
            f"pages {session['pages']} are not all in the corpus (pages 1-{len(every)})")
    pages = [every[page - 1] for page in session["pages"]]
    directory = session_directory(out, version, session, pages)
    return recorder(build_dir, directory, pages, PAGE_TIMEOUT, force)


def foreign_session(path: Path, out: Path) -> dict:
    """A logalloc log recorded elsewhere as a session of its own: its content process
    only, marks named mark_K after its K-th jemalloc_stats() line; checked as the
    recorder checks its own logs, without coverage (no figures from its allocator)."""
    name = "file-" + path.name.split(".")[0]
    directory = out / "files" / name
    directory.mkdir(parents=True, exist_ok=True)
    log = directory / "content.0.log.gz"
    if not log.exists() or log.stat().st_mtime < path.stat().st_mtime:
        opener = gzip.open if path.read_bytes()[:2] == b"\x1f\x8b" else open
        with opener(path, "rb") as source, gzip.open(log, "wb") as target:
            shutil.copyfileobj(source, target)
    figures = firefox_logs.check_log(log)
    marks = [{"mark": number, "label": f"mark_{number}"}
             for number in range(1, figures["marks"] + 1)]
    (directory / "content.0.marks.jsonl").write_text(
        "".join(json.dumps(mark) + "\n" for mark in marks))
    problems = []
    if figures["live_reuses"]:
        problems.append(f"{figures['live_reuses']} addresses handed out twice while live")
    if not marks:
        problems.append("no jemalloc_stats() marks")
    process = {"pid": 0, "role": "content", "log": log.name, "bytes": log.stat().st_size,
               **figures, "num_operations": None, "coverage": None,
               "frees_dropped_share": round(figures["frees_dropped"] / figures["frees"], 4)
               if figures["frees"] else 0.0, "marks_file": "content.0.marks.jsonl",
               "mark_labels": [mark["label"] for mark in marks], "real_figures": False}
    return {"workload": "firefox", "source": str(path), "pages": [],
            "marks": process["mark_labels"], "processes": [process], "problems": problems,
            "passed": not problems, "reused": False, "directory": str(directory),
            "wall_seconds": 0.0}


def build(build_dir: Path, set_name: str, files: list[Path] = (), out: Path = CACHE,
          force: bool = False, recorder=firefox_record.record_pages, progress=print,
          sessions_file: Path = SESSIONS) -> dict:
    """The corpus: {"set", "sessions": [{"name", "id", "repeat", "pages", "source",
    "run": run.json document}], "left_out": [{"name", "reason"}], "recorded", "reused",
    "seconds"}. Records what is missing with `recorder` (firefox_record.record_pages)."""
    started = time.monotonic()
    kept, left_out, recorded, reused = [], [], 0, 0
    for session in session_set(set_name, sessions_file):
        began = time.monotonic()
        try:
            document = record_one(build_dir, out, session, force, recorder)
        except (firefox_record.RecordFailed, subprocess.TimeoutExpired, OSError) as failure:
            reason = " ".join(str(failure).split()) or type(failure).__name__
            left_out.append({"name": session["name"], "reason": reason})
            progress(f"firefox corpus: {session['name']} left out: {reason}")
            continue
        if not document.get("passed"):
            left_out.append({"name": session["name"],
                             "reason": "; ".join(document.get("problems", [])) or "failed"})
            continue
        reused += bool(document.get("reused"))
        recorded += not document.get("reused")
        progress(f"firefox corpus: {session['name']} "
                 f"{'reused' if document.get('reused') else 'recorded'} "
                 f"({time.monotonic() - began:.0f} s)")
        kept.append({**session, "source": "recorded", "run": document})
    for path in files:
        document = foreign_session(Path(path), out)
        name = Path(document["directory"]).name
        if document["passed"]:
            kept.append({"name": name, "id": name, "repeat": 0, "pages": [],
                         "source": str(path), "run": document})
        else:
            left_out.append({"name": name, "reason": "; ".join(document["problems"])})
    return {"set": set_name, "sessions": kept, "left_out": left_out, "recorded": recorded,
            "reused": reused, "seconds": round(time.monotonic() - started, 1)}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--set", default="default", help="session set (sessions.json)")
    parser.add_argument("--corpus-file", type=Path, action="append", default=[],
                        help="a logalloc log recorded elsewhere (gzip or plain)")
    parser.add_argument("--out", type=Path, default=CACHE)
    parser.add_argument("--build-dir", type=Path, default=ROOT / "build")
    parser.add_argument("--force", action="store_true", help="record even when cached")
    args = parser.parse_args(argv)
    try:
        document = build(args.build_dir.resolve(), args.set, args.corpus_file,
                         args.out.resolve(), args.force,
                         progress=lambda text: print(text, file=sys.stderr, flush=True))
    except CorpusError as failure:
        print(f"firefox corpus: {failure}", file=sys.stderr)
        return 1
    for session in document["sessions"]:
        print(f"kept {session['name']}: {session['run']['directory']}")
    for session in document["left_out"]:
        print(f"left out {session['name']}: {session['reason']}")
    return 0 if document["sessions"] else 1


if __name__ == "__main__":
    sys.exit(main())
