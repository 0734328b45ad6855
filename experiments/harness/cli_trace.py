"""The `trace` and `replay` subcommands of tools/runsel (tools/trace/format.md).

  runsel trace [--output PATTERN] -- CMD ARG...   records CMD's allocation calls
  runsel replay [--every N] [--variant NAME] [--json FILE] TRACE
                                                  replays TRACE on every container, compares

cli.py registers them with add_commands(); they configure, build and show their steps
with build_steps.py, as the other subcommands do. Standard library only.
"""

from __future__ import annotations

import argparse
import glob
import os
import re
import shlex
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from . import allocators, firefox_names, firefox_replay
from .allocators import (
    AS_BUILT_CONF,
    CONVERTER_TARGET,
    FIREFOX_REPLAYER_TARGET,
    RECORDER_TARGET,
    REFERENCE,
    REPLAYER_PREFIX,
)
from .build_steps import InputRejected, StepFailed, build, configure, requested_options, show
from .interpreter import ROOT
from .replay_figures import JsonOutput, ReplayFigures, print_comparison

TRACE_MAGIC = b"RSTR"
TRACES_DIR = Path("results/traces")


def caller_directory() -> Path:
    """Where the user typed the command (cli.py moves to the repository root)."""
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
        raise StepFailed("nothing to trace: give a command after --")
    configure(args.build_dir, requested_options(args))
    library = target_file(args.build_dir, RECORDER_TARGET, "shared library")
    if library is None:
        raise StepFailed(f"meson defines no {RECORDER_TARGET} library (tools/meson.build)")
    build(args.build_dir, [library])

    if args.output:
        pattern = from_caller(args.output)
    else:
        pattern = ROOT / TRACES_DIR / (Path(command[0]).name + ".%p")
    pattern.parent.mkdir(parents=True, exist_ok=True)
    preload = " ".join(filter(None, [str(library.resolve()), os.environ.get("LD_PRELOAD")]))
    changes = {"LD_PRELOAD": preload, "RUNSEL_TRACE": str(pattern)}
    if "PYTHONMALLOC" not in os.environ:  # python's own pools would hide its objects
        changes["PYTHONMALLOC"] = "malloc"
    show(command, changes)
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



def run_quietly(command: list[str]) -> subprocess.CompletedProcess:
    """Shows and runs a command, its output captured as text; bytes that are not UTF-8
    (a path, or a line of the input quoted in a message) come out as \\xNN escapes."""
    show(command)
    return subprocess.run(command, capture_output=True, text=True, errors="backslashreplace")


# The replayer's line on stderr saying what the replay holds at most and its bound.
MEMORY_LINE = re.compile(r"^runsel-replay: .*?: memory: (a replay holds at most .*)$", re.M)


def replay_on(program: Path, trace: Path, args: argparse.Namespace, scratch: Path,
              run_pages: str | None = None) -> tuple[Path, str | None]:
    """Runs one replayer in --profile's profile (and with the run sizes `run_pages`, a
    RUNSEL_CONF entry, when given), its text into a file in scratch (printed with
    --verbose); returns the file of its JSON document and what it said it holds at most
    against its bound. Exit code 2, a refusal, is the input's: passed on as one line."""
    conf = ",".join(filter(None, [AS_BUILT_CONF if args.profile == "as_built" else None,
                                  run_pages])) or None
    tag = ".firefox" if run_pages else ""
    figures = scratch / f"{program.name}{tag}.json"
    options = (["--every", str(args.every)] if args.every else []) + (
        ["--partial"] if args.partial else []) + (
        ["--allow-large-live-set"] if args.allow_large_live_set else [])
    command = [str(program), *options, "--json", str(figures), str(trace)]
    text = scratch / f"{program.name}{tag}.txt"
    if conf:
        show(["env", f"RUNSEL_CONF={conf}", *command])
    else:
        show(command)
    with open(text, "wb") as output:
        done = subprocess.run(command, stdout=output, stderr=subprocess.PIPE, text=True,
                              errors="backslashreplace",
                              env={**os.environ, "RUNSEL_CONF": conf} if conf else None)
    message = " ".join(done.stderr.split("\n")).strip()
    if done.returncode == 2:  # the trace is refused: the same for every container
        raise InputRejected(message)
    if done.returncode != 0:
        code = done.returncode
        how = (f"was killed by signal {-code} ({signal.Signals(-code).name})"
               if code < 0 and -code in signal.valid_signals() else f"exited with {code}")
        raise StepFailed(f"{program} {how}: {message or '(nothing on stderr)'}")
    if args.verbose:
        with open(text, encoding="utf-8", errors="backslashreplace") as output:
            shutil.copyfileobj(output, sys.stdout)
        print(flush=True)
    text.unlink()
    memory = MEMORY_LINE.search(done.stderr)
    return figures, memory.group(1) if memory else None


def converter(args: argparse.Namespace) -> Path:
    program = target_file(args.build_dir, CONVERTER_TARGET, "executable")
    if program is None:
        raise StepFailed(f"meson defines no {CONVERTER_TARGET} (tools/meson.build)")
    build(args.build_dir, [program])
    return program


def convert(command: list[str]) -> None:
    """Runs the converter; its exit code 2 is input it refuses (a malformed line)."""
    done = run_quietly(command)
    print(done.stdout, end="", flush=True)
    if done.returncode != 0:
        failure = InputRejected if done.returncode == 2 else StepFailed
        raise failure(done.stderr.strip() or f"{command[0]} exited with {done.returncode}")


def starts_with_trace_magic(path: Path) -> bool:
    """Whether path is a runsel trace by its first bytes; a file that cannot be read is
    refused here, with the reason."""
    try:
        with open(path, "rb") as file:
            return file.read(len(TRACE_MAGIC)) == TRACE_MAGIC
    except OSError as error:
        raise InputRejected(f"cannot read {path}: {error.strerror}") from error


def command_replay(args: argparse.Namespace) -> int:
    trace = from_caller(args.trace)
    if not trace.exists():
        raise InputRejected(f"no such trace: {trace}")
    is_runsel_trace = starts_with_trace_magic(trace)
    configure(args.build_dir, requested_options(args))
    if args.export_logalloc:
        if not is_runsel_trace:
            raise InputRejected(f"{trace} is not a runsel trace: nothing to export")
        convert([str(converter(args)), "to-logalloc", str(trace),
                      str(from_caller(args.export_logalloc))])
        return 0
    if is_runsel_trace and args.pid is not None:
        raise InputRejected("--pid picks a process of a logalloc log; a runsel trace has one")
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
        except InputRejected as refused:  # name the user's file, not the scratch copy
            raise InputRejected(
                str(refused).replace(str(converted), f"{trace} (converted)")) from None


def chosen_replayers(args: argparse.Namespace) -> dict[str, Path]:
    """The replayers of --variant (default every container), the reference first, built."""
    replayers = allocators.targets_named(allocators.build_targets(args.build_dir),
                                         REPLAYER_PREFIX, "executable")
    if args.variant:
        unknown = set(args.variant) - set(replayers)
        if unknown:
            raise StepFailed(f"no replayer for: {', '.join(sorted(unknown))}")
        replayers = {name: path for name, path in replayers.items() if name in args.variant}
    if not replayers:
        raise StepFailed(f"meson defines no {REPLAYER_PREFIX}<container> (tools/meson.build)")
    replayers = dict(sorted(replayers.items(), key=lambda item: item[0] != allocators.REFERENCE))
    build(args.build_dir, list(replayers.values()))
    return replayers


def replay_every_container(args: argparse.Namespace, trace: Path) -> int:
    replayers = chosen_replayers(args)

    firefox_library = None
    if args.reference == "firefox" or args.geometry != "classic":
        library = target_file(args.build_dir, FIREFOX_REPLAYER_TARGET, "shared library")
        if library is None:
            raise StepFailed(f"meson defines no {FIREFOX_REPLAYER_TARGET} "
                                   "(tools/firefox/meson.build)")
        build(args.build_dir, [library])
        firefox_library = library
    conf = None
    if args.geometry != "classic":
        try:
            conf = firefox_replay.run_pages_setting(firefox_replay.geometry(args.build_dir))
        except firefox_replay.FirefoxFailed as failure:
            raise StepFailed(str(failure)) from None

    names = []
    if args.geometry in ("classic", "both"):
        names += list(replayers)
    if conf:
        names += [f"{name}@firefox" for name in replayers]
    if args.reference == "firefox":
        names.append(firefox_names.REFERENCE_NAME)
    reference = (firefox_names.REFERENCE_NAME if args.reference == "firefox" else
                 allocators.REFERENCE if allocators.REFERENCE in names else None)

    with tempfile.TemporaryDirectory(prefix="runsel-replay-") as scratch:
        output = JsonOutput(from_caller(args.json), reference, trace) if args.json else None
        replays = ReplayFigures(Path(scratch), output)
        memory = []
        try:
            if args.geometry in ("classic", "both"):
                for name, program in replayers.items():
                    document, holds = replay_on(program, trace, args, Path(scratch))
                    replays.add(name, document)
                    memory.append(holds)
            if conf:  # the same containers with the installed Firefox's run sizes
                for name, program in replayers.items():
                    document, holds = replay_on(program, trace, args, Path(scratch), conf)
                    replays.add(f"{name}@firefox", document)
                    memory.append(holds)
            if args.reference == "firefox":
                show(["env", "MALLOC_OPTIONS=r", f"LD_PRELOAD={firefox_library}",
                            "RUNSEL_FIREFOX_REPLAY=...", "firefox-esr", "--version"])
                try:
                    document, version = firefox_replay.reference_replay_file(
                        args.build_dir, trace, Path(scratch), args.partial)
                except firefox_replay.FirefoxFailed as failure:
                    raise StepFailed(str(failure)) from None
                replays.add(firefox_names.REFERENCE_NAME, document, {"firefox_version": version})
            print_replays(args, trace, replays, reference, conf, next(filter(None, memory), None))
            if output:
                output.finish()
        except BaseException:
            if output:
                output.abandon()
            raise
    if output:
        print(f"# figures as JSON: {output.out}")
    return 0


def print_replays(args: argparse.Namespace, trace: Path, replays: ReplayFigures,
                  reference: str | None, conf: str | None, memory: str | None) -> None:
    first = next(iter(replays.heads.values()))
    print(f"# {trace}: {first['trace']['records']} records, {first['trace']['marks']} marks"
          f"{'' if first['trace'].get('complete', True) else ', partial: no end record'}; "
          f"replayed on {', '.join(replays.heads)}, one thread, no address randomization")
    if memory:  # the first replay's: the same figure for every container, its bound then
        print(f"# memory: {memory}")
    print("# profile: " + ("as_built (RUNSEL_CONF=profile:as_built: mozjemalloc's run "
                           "lifecycle, purge and spare chunk, as the report's replays)"
                           if args.profile == "as_built" else
                           "drop_in (the drop-in library's own page level)"))
    if conf:
        print(f"# NAME@firefox: the container with the installed Firefox's run sizes, read from "
              f"its bin statistics (RUNSEL_CONF={conf}); the others: the classic rule's")
    if args.reference == "firefox":
        head = replays.heads[firefox_names.REFERENCE_NAME]
        version = head.get("firefox_version") or "firefox-esr"
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
    print_comparison(replays, reference)
    for name, document in replays.heads.items():
        tally = document["replay"]
        if tally["unknown_pointers"] or tally["failed"] or tally["reused_live"]:
            print(f"# {name}: unknown_pointers={tally['unknown_pointers']} "
                  f"failed={tally['failed']} reused_live={tally['reused_live']}")


# --- registration -------------------------------------------------------------------------


def add_commands(commands, parents: list[argparse.ArgumentParser]) -> None:
    """Adds `trace` and `replay` to the command line's subcommands (cli.py)."""
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
                    "malformed log with its line, a replay that would hold more than the "
                    "memory it may use (MemAvailable, or less under ulimit -v or -d: its slot "
                    "tables always, its live blocks unless --allow-large-live-set): exit code "
                    "2, one line on stderr.")
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
                             "available (MemAvailable, or less under ulimit -v or -d): a replay "
                             "writes every live block, so such a trace is refused without it "
                             "(slot tables beyond it are refused all the same)")
    replay.add_argument("--reference", choices=[REFERENCE, firefox_names.REFERENCE_NAME],
                        default=REFERENCE,
                        help="compare with this: rb_first (default), or firefox: the same "
                             "trace replayed on the installed firefox-esr's own allocator "
                             "(mozjemalloc in its executable), shown as the row 'firefox'")
    replay.add_argument("--geometry", choices=["classic", "firefox", "both"], default="classic",
                        help="runsel's run sizes: the classic rule (default), the installed "
                             "Firefox's (read from its bin statistics; rows NAME@firefox), or both")
    replay.add_argument("--profile", choices=["as_built", "drop_in"], default="as_built",
                        help="the arena's page level: as_built (default), mozjemalloc's run "
                             "lifecycle as the report's replays run it, or drop_in, the "
                             "drop-in library's own (memory/README.md, \"The as-built "
                             "profile\")")
    replay.add_argument("--variant", action="append", default=[], metavar="NAME",
                        help="only this container (repeatable; default: all)")
    replay.add_argument("--json", metavar="FILE",
                        help="also write every replay's figures as JSON "
                             "(tools/trace/format.md, \"Replay figures\")")
    replay.add_argument("--verbose", action="store_true",
                        help="also print each replayer's own output (stats lines, bin table)")
    replay.set_defaults(handler=lambda args: command_replay(args))
