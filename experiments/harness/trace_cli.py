"""The `trace` and `replay` subcommands of tools/runsel (tools/trace/format.md).

  runsel trace [--output PATTERN] -- CMD ARG...   records CMD's allocation calls
  runsel replay [--every N] [--variant NAME] [--json FILE] TRACE
                                                  replays TRACE on every container, compares

tools/runsel_cli.py registers them with add_commands(); they configure, build and show
their steps with build_steps.py, as runsel_cli.py does. Standard library only.
"""

from __future__ import annotations

import argparse
import glob
import json
import os
import shlex
import subprocess
import tempfile
import time
from pathlib import Path

from . import allocators
from . import build_steps as steps
from . import firefox_replay
from .allocators import RECORDER_TARGET, REPLAYER_PREFIX
from .interpreter import ROOT

CONVERTER_TARGET = "runsel-trace-convert"  # build/tools/runsel-trace-convert (logalloc logs)
TRACE_MAGIC = b"RSTR"
TRACES_DIR = Path("results/traces")


def caller_directory() -> Path:
    """Where the user typed the command (runsel_cli.py moves to the repository root)."""
    return Path(os.environ.get("PWD", os.getcwd()))


def from_caller(path: str) -> Path:
    return (caller_directory() / path).resolve()


def target_file(build_dir: Path, name: str, kind: str) -> Path | None:
    """The file of the build's target called exactly `name` of this kind, if any."""
    return allocators.targets_named(allocators.build_targets(build_dir), name, kind).get("")


# --- trace --------------------------------------------------------------------------------


def command_trace(args: argparse.Namespace) -> int:
    command = args.command[1:] if args.command[:1] == ["--"] else list(args.command)
    if not command:
        raise steps.StepFailed("nothing to trace: give a command after --")
    steps.configure(args.build_dir, steps.requested_options(args))
    library = target_file(args.build_dir, RECORDER_TARGET, "shared library")
    if library is None:
        raise steps.StepFailed(f"meson defines no {RECORDER_TARGET} library (tools/meson.build)")
    steps.build(args.build_dir, [library])

    if args.output:
        pattern = from_caller(args.output)
    else:
        pattern = ROOT / TRACES_DIR / (Path(command[0]).name + ".%p")
    pattern.parent.mkdir(parents=True, exist_ok=True)
    preload = " ".join(filter(None, [str(library.resolve()), os.environ.get("LD_PRELOAD")]))
    changes = {"LD_PRELOAD": preload, "RUNSEL_TRACE": str(pattern)}
    if "PYTHONMALLOC" not in os.environ:  # python's own pools would hide its objects
        changes["PYTHONMALLOC"] = "malloc"
    steps.show(command, changes)
    started = time.time()
    child = subprocess.Popen(command, cwd=caller_directory(), env={**os.environ, **changes})
    code = child.wait()
    if code < 0:  # killed by a signal: report it the way a shell would
        code = 128 - code

    written = [Path(name) for name in glob.glob(str(pattern).replace("%p", "*") + "*")
               if Path(name).stat().st_mtime >= started - 1]
    main_trace = Path(str(pattern).replace("%p", str(child.pid)))
    print(f"# {shlex.join(command)} exited with {code}")
    for path in sorted(written, key=lambda path: path != main_trace):
        role = "the command" if path == main_trace else "a child process"
        print(f"trace of {role}: {path} ({path.stat().st_size} bytes)")
    if main_trace.exists():
        print(f"next: tools/runsel replay {os.path.relpath(main_trace, caller_directory())}")
    return code


# --- replay -------------------------------------------------------------------------------


# Exact figures set against the reference: committed and resident move with the purge
# policy's timing (dirty pages waiting for a purge); committed - dirty, bin_unused and the
# resident memory a forced purge leaves do not.
COMPARED = ["committed", "dirty", "committed-dirty", "resident", "purged", "bin_unused"]


def figure(point: dict, name: str) -> int | None:
    """A compared figure of one checkpoint; None when the replayer did not measure it."""
    if name == "committed-dirty":
        return point["committed"] - point["dirty"]
    if name == "purged":
        return point.get("purged_resident")
    return point[name]


def size_text(count: int) -> str:
    for unit, scale in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if abs(count) >= scale:
            return f"{count / scale:.1f} {unit}"
    return f"{count} B"


def difference_text(value: int, reference: int | None) -> str:
    """Exact difference to the reference in bytes and percent: "+4096 (+0.27%)"."""
    if reference is None:
        return "-"
    delta = value - reference
    percent = f"{100 * delta / reference:+.2f}%" if reference else ("0%" if delta == 0 else "new")
    return f"{delta:+d} ({percent})"


def table(rows: list[list[str]]) -> str:
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
    return "\n".join("  ".join(cell.rjust(width) for cell, width in zip(row, widths))
                     for row in rows)


def checkpoint_table(documents: dict[str, dict], index: int, reference: str | None) -> str:
    """One row per container at checkpoint `index`: the exact figures and their difference
    to the reference, in bytes and percent."""
    header = ["container"]
    for compared in COMPARED:
        header += [compared, f"vs {reference}" if reference else "-"]
    rows = [header]
    base = documents[reference]["checkpoints"][index] if reference else None
    for name, document in documents.items():
        point = document["checkpoints"][index]
        row = [name]
        for compared in COMPARED:
            value, reference_value = figure(point, compared), figure(base, compared) if base else None
            row += ["-" if value is None else str(value),
                    "-" if value is None else difference_text(value, reference_value)]
        rows.append(row)
    return table(rows)


def bin_unused_table(documents: dict[str, dict], index: int, reference: str | None) -> str:
    """bin_unused per size class at checkpoint `index` (classes unused everywhere left out)."""
    names = list(documents)
    rows = [["size"] + [f"{name}" + (f" vs {reference}" if reference and name != reference else "")
                        for name in names]]
    classes = [bin_["size"] for bin_ in documents[names[0]]["checkpoints"][index]["bins"]]
    for position, size in enumerate(classes):
        values = [document["checkpoints"][index]["bins"][position]["unused_bytes"]
                  for document in documents.values()]
        if not any(values):
            continue
        base = documents[reference]["checkpoints"][index]["bins"][position]["unused_bytes"] \
            if reference else None
        row = [str(size)]
        for name, value in zip(names, values):
            row.append(str(value) if name == reference or base is None or value == base
                       else f"{value} {difference_text(value, base)}")
        rows.append(row)
    return table(rows) if len(rows) > 1 else "(no small runs)"


def comparison(documents: dict[str, dict], reference: str | None) -> str:
    """Every checkpoint (marks, every N, peak, end), exact, each container against the
    reference, each followed by its bin_unused per size class."""
    first = next(iter(documents.values()))
    parts = []
    for index, point in enumerate(first["checkpoints"]):
        title = f"{point['kind']} \"{point['name']}\"" if point["kind"] == "mark" else point["name"]
        parts.append(f"## {title}: after {point['ops']} records, "
                     f"{size_text(point['live_requested'])} live requested")
        parts.append(checkpoint_table(documents, index, reference))
        parts.append("bin_unused per size class (bytes):")
        parts.append(bin_unused_table(documents, index, reference))
    return "\n".join(parts)


def run_quietly(command: list[str]) -> subprocess.CompletedProcess:
    """Shows and runs a command, its output captured as text; bytes that are not UTF-8
    (a path, or a line of the input quoted in a message) come out as \\xNN escapes."""
    steps.show(command)
    return subprocess.run(command, capture_output=True, text=True, errors="backslashreplace")


def replay_on(program: Path, trace: Path, args: argparse.Namespace, scratch: Path,
              conf: str | None = None) -> dict:
    """Runs one replayer (with RUNSEL_CONF=conf when given); prints its text; returns its
    JSON document."""
    figures = scratch / f"{program.name}{'.conf' if conf else ''}.json"
    options = (["--every", str(args.every)] if args.every else []) + (
        ["--partial"] if args.partial else []) + (
        ["--allow-large-live-set"] if args.allow_large_live_set else [])
    command = [str(program), *options, "--json", str(figures), str(trace)]
    if conf:
        steps.show(["env", f"RUNSEL_CONF={conf}", *command])
        done = subprocess.run(command, capture_output=True, text=True, errors="backslashreplace",
                              env={**os.environ, "RUNSEL_CONF": conf})
    else:
        done = run_quietly(command)
    if done.returncode == 2:  # the trace is refused: the same for every container
        raise steps.InputRejected(done.stderr.strip())
    if done.returncode != 0:
        raise steps.StepFailed(f"{program} exited with {done.returncode}: {done.stderr.strip()}")
    if args.verbose:
        print(done.stdout, end="\n", flush=True)
    return json.loads(figures.read_bytes().decode("utf-8", "backslashreplace"), strict=False)


def converter(args: argparse.Namespace) -> Path:
    program = target_file(args.build_dir, CONVERTER_TARGET, "executable")
    if program is None:
        raise steps.StepFailed(f"meson defines no {CONVERTER_TARGET} (tools/meson.build)")
    steps.build(args.build_dir, [program])
    return program


def convert(command: list[str]) -> None:
    """Runs the converter; its exit code 2 is input it refuses (a malformed line)."""
    done = run_quietly(command)
    print(done.stdout, end="", flush=True)
    if done.returncode != 0:
        failure = steps.InputRejected if done.returncode == 2 else steps.StepFailed
        raise failure(done.stderr.strip() or f"{command[0]} exited with {done.returncode}")


def starts_with_trace_magic(path: Path) -> bool:
    """Whether path is a runsel trace by its first bytes; a file that cannot be read is
    refused here, with the reason."""
    try:
        with open(path, "rb") as file:
            return file.read(len(TRACE_MAGIC)) == TRACE_MAGIC
    except OSError as error:
        raise steps.InputRejected(f"cannot read {path}: {error.strerror}") from error


def command_replay(args: argparse.Namespace) -> int:
    trace = from_caller(args.trace)
    if not trace.exists():
        raise steps.InputRejected(f"no such trace: {trace}")
    is_runsel_trace = starts_with_trace_magic(trace)
    steps.configure(args.build_dir, steps.requested_options(args))
    if args.export_logalloc:
        if not is_runsel_trace:
            raise steps.InputRejected(f"{trace} is not a runsel trace: nothing to export")
        convert([str(converter(args)), "to-logalloc", str(trace),
                      str(from_caller(args.export_logalloc))])
        return 0
    if is_runsel_trace and args.pid is not None:
        raise steps.InputRejected("--pid picks a process of a logalloc log; a runsel trace has one")
    if is_runsel_trace:
        return replay_every_container(args, trace)
    with tempfile.TemporaryDirectory(prefix="runsel-logalloc-") as scratch:
        # A Mozilla logalloc log, plain or gzip-compressed: replayed as converted.
        converted = Path(scratch) / (trace.name + ".trace")
        convert([str(converter(args)), "from-logalloc",
                 *(["--pid", str(args.pid)] if args.pid is not None else []),
                 *(["--partial"] if args.partial else []),
                 str(trace), str(converted)])
        try:
            return replay_every_container(args, converted)
        except steps.InputRejected as refused:  # name the user's file, not the scratch copy
            raise steps.InputRejected(
                str(refused).replace(str(converted), f"{trace} (converted)")) from None


def chosen_replayers(args: argparse.Namespace) -> dict[str, Path]:
    """The replayers of --variant (default every container), the reference first, built."""
    replayers = allocators.targets_named(allocators.build_targets(args.build_dir),
                                         REPLAYER_PREFIX, "executable")
    if args.variant:
        unknown = set(args.variant) - set(replayers)
        if unknown:
            raise steps.StepFailed(f"no replayer for: {', '.join(sorted(unknown))}")
        replayers = {name: path for name, path in replayers.items() if name in args.variant}
    if not replayers:
        raise steps.StepFailed(f"meson defines no {REPLAYER_PREFIX}<container> (tools/meson.build)")
    replayers = dict(sorted(replayers.items(), key=lambda item: item[0] != allocators.REFERENCE))
    steps.build(args.build_dir, list(replayers.values()))
    return replayers


def replay_every_container(args: argparse.Namespace, trace: Path) -> int:
    replayers = chosen_replayers(args)

    firefox_library = None
    if args.reference == "firefox" or args.geometry != "classic":
        library = target_file(args.build_dir, "runsel-firefox-replay", "shared library")
        if library is None:
            raise steps.StepFailed("meson defines no runsel-firefox-replay (tools/firefox/meson.build)")
        steps.build(args.build_dir, [library])
        firefox_library = library
    conf = None
    if args.geometry != "classic":
        try:
            conf = firefox_replay.run_pages_setting(firefox_replay.geometry(args.build_dir))
        except firefox_replay.FirefoxFailed as failure:
            raise steps.StepFailed(str(failure)) from None

    with tempfile.TemporaryDirectory(prefix="runsel-replay-") as scratch:
        documents = {}
        if args.geometry in ("classic", "both"):
            documents.update({name: replay_on(program, trace, args, Path(scratch))
                              for name, program in replayers.items()})
        if conf:  # the same containers with the installed Firefox's run sizes
            documents.update({f"{name}@firefox": replay_on(program, trace, args, Path(scratch), conf)
                              for name, program in replayers.items()})
        if args.reference == "firefox":
            steps.show(["env", "MALLOC_OPTIONS=r", f"LD_PRELOAD={firefox_library}",
                        "RUNSEL_FIREFOX_REPLAY=...", "firefox-esr", "--version"])
            try:
                documents[firefox_replay.REFERENCE_NAME] = firefox_replay.reference_replay(
                    args.build_dir, trace, Path(scratch), args.partial)
            except firefox_replay.FirefoxFailed as failure:
                raise steps.StepFailed(str(failure)) from None
    reference = (firefox_replay.REFERENCE_NAME if args.reference == "firefox" else
                 allocators.REFERENCE if allocators.REFERENCE in documents else None)
    first = next(iter(documents.values()))
    print(f"# {trace}: {first['trace']['records']} records, {first['trace']['marks']} marks"
          f"{'' if first['trace'].get('complete', True) else ', partial: no end record'}; "
          f"replayed on {', '.join(documents)}, one thread, no address randomization")
    if conf:
        print(f"# NAME@firefox: the container with the installed Firefox's run sizes, read from "
              f"its bin statistics (RUNSEL_CONF={conf}); the others: the classic rule's")
    if args.reference == "firefox":
        version = documents[firefox_replay.REFERENCE_NAME].get("firefox_version") or "firefox-esr"
        print(f"# firefox: the same trace on {version}'s "
              "own mozjemalloc (its executable's malloc/free, MALLOC_OPTIONS=r), figures from "
              "its jemalloc_stats_internal")
    if not first["trace"].get("complete", True):
        print(f"# partial: the trace has no end record (its process was killed); replayed its "
              f"{first['replay']['ops']} complete records")
    print("# exact figures in bytes; blocks written as the program did (every requested byte "
          "at allocation), so resident is the program's; dirty: free pages not yet purged "
          "(they move with the purge's timing), committed-dirty and purged (resident after a "
          "forced purge, measured in a forked copy) do not; differences to "
          f"{reference or '(no rb_first replayed)'} in bytes and percent")
    if args.reference == "firefox":
        print("# expect differences: mozjemalloc's run sizes (unless @firefox), its header and "
              "large-run layout; the same one arena and one thread as every replay")
    print(comparison(documents, reference))
    for name, document in documents.items():
        tally = document["replay"]
        if tally["unknown_pointers"] or tally["failed"] or tally["reused_live"]:
            print(f"# {name}: unknown_pointers={tally['unknown_pointers']} "
                  f"failed={tally['failed']} reused_live={tally['reused_live']}")
    if args.json:
        out = from_caller(args.json)
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_text(json.dumps({"reference": reference, "trace": str(trace),
                                   "replays": documents}, indent=1) + "\n")
        print(f"# figures as JSON: {out}")
    return 0


# --- registration -------------------------------------------------------------------------


def add_commands(commands, parents: list[argparse.ArgumentParser]) -> None:
    """Adds `trace` and `replay` to runsel_cli.py's subcommands."""
    trace = commands.add_parser(
        "trace", parents=parents, help="record a program's allocation calls",
        description="Runs CMD with build/tools/librunsel-trace.so preloaded (and "
                    "PYTHONMALLOC=malloc unless set), recording every allocation call into a "
                    f"trace per process (default: {TRACES_DIR}/<program>.<pid>). "
                    "Format: tools/trace/format.md. Exit code is CMD's.")
    trace.add_argument("--output", metavar="PATTERN",
                       help="trace file; %%p becomes the pid (default: "
                            f"{TRACES_DIR}/<program>.%%p)")
    trace.add_argument("command", nargs=argparse.REMAINDER, metavar="-- CMD ARG...",
                       help="the program to record and its arguments")
    trace.set_defaults(handler=lambda args: command_trace(args))

    replay = commands.add_parser(
        "replay", parents=parents,
        help="replay a trace (or a logalloc log) on every container: exact figures vs rb_first",
        description="Replays TRACE (a runsel trace, or a Mozilla logalloc log, plain or "
                    "gzip-compressed) with build/tools/runsel-replay-<container> for every "
                    "container (in recorded order, on one thread, writing every block as the "
                    "program did), then prints, at each mark, at the peak of live bytes and at "
                    "the end, every container's exact committed, dirty, committed - dirty, "
                    "resident, resident after a forced purge and bin_unused "
                    "(and bin_unused per size class) with the difference to rb_first in bytes "
                    "and percent. A malformed trace is rejected with its byte offset, a "
                    "malformed log with its line, a live set beyond the memory available "
                    "unless --allow-large-live-set: exit code 2, one line on stderr.")
    replay.add_argument("trace", metavar="TRACE",
                        help="a trace written by `runsel trace`, or a logalloc log")
    replay.add_argument("--pid", type=int, metavar="PID",
                        help="logalloc log: replay this process (default: the one with the "
                             "most calls)")
    replay.add_argument("--export-logalloc", metavar="FILE",
                        help="write TRACE as a logalloc log instead of replaying it "
                             "(gzip-compressed when FILE ends in .gz)")
    replay.add_argument("--every", type=int, default=0, metavar="N",
                        help="also print stats every N operations")
    replay.add_argument("--partial", action="store_true",
                        help="accept a trace without its end record, or a logalloc log cut "
                             "anywhere, even mid-line (its process was killed): the complete "
                             "records or lines are replayed and the output says how many")
    replay.add_argument("--allow-large-live-set", action="store_true",
                        help="replay even when the trace's live blocks peak above the memory "
                             "available (MemAvailable): a replay writes every live block, so "
                             "such a trace is refused without it")
    replay.add_argument("--reference", choices=["rb_first", "firefox"], default="rb_first",
                        help="compare with this: rb_first (default), or firefox: the same "
                             "trace replayed on the installed firefox-esr's own allocator "
                             "(mozjemalloc in its executable), shown as the row 'firefox'")
    replay.add_argument("--geometry", choices=["classic", "firefox", "both"], default="classic",
                        help="runsel's run sizes: the classic rule (default), the installed "
                             "Firefox's (read from its bin statistics; rows NAME@firefox), or both")
    replay.add_argument("--variant", action="append", default=[], metavar="NAME",
                        help="only this container (repeatable; default: all)")
    replay.add_argument("--json", metavar="FILE",
                        help="also write every replay's figures as JSON "
                             "(tools/trace/format.md, \"Replay figures\")")
    replay.add_argument("--verbose", action="store_true",
                        help="also print each replayer's own output (stats lines, bin table)")
    replay.set_defaults(handler=lambda args: command_replay(args))
