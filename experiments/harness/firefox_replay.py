"""Firefox's own allocator beside runsel's containers: a logalloc log converted to a runsel
trace, replayed on the installed firefox-esr's mozjemalloc (the reference row: runsel's
replayer preloaded into `firefox-esr --version`, build/tools/firefox/librunsel-firefox-
replay.so), and that Firefox's run geometry read from its own bin statistics, as the
RUNSEL_CONF setting that makes runsel lay its runs out the same way.

    python3 -m harness.firefox_replay --geometry [--build-dir DIR]
        prints the RUNSEL_CONF entry (its only action: it does so without --geometry too)
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

from .allocators import CONVERTER_TARGET, FIREFOX_REPLAYER_TARGET
from .firefox_record import FIREFOX

REFERENCE_LIBRARY = Path("tools") / "firefox" / f"lib{FIREFOX_REPLAYER_TARGET}.so"
CONVERTER = Path("tools") / CONVERTER_TARGET
MISSING = ("firefox-esr is missing (Debian package firefox-esr: apt-get install firefox-esr; "
           "tools/runsel installs it)")


class FirefoxFailed(Exception):
    """Firefox cannot serve as the reference: one line saying why."""


def library(build_dir: Path) -> Path:
    found = (build_dir / REFERENCE_LIBRARY).resolve()
    if not found.exists():
        raise FirefoxFailed(f"{found} is not built (ninja -C {build_dir} {REFERENCE_LIBRARY})")
    return found


def firefox_environment(preload: Path, **settings: str) -> dict[str, str]:
    environment = {key: value for key, value in os.environ.items()
                   if key not in ("LD_PRELOAD", "LD_AUDIT", "RUNSEL_CONF", "MALLOC_OPTIONS")}
    # MALLOC_OPTIONS=r: no small-allocation randomization, so a replay repeats to the byte
    # (the figures are the same with it; which address a region gets is not).
    environment.update(settings, LD_PRELOAD=str(preload), MALLOC_OPTIONS="r")
    return environment


def geometry(build_dir: Path) -> list[dict]:
    """The installed Firefox's run layout: [{size, bytes_per_run, regions_per_run}] per
    size class, from its own bin statistics."""
    if shutil.which(FIREFOX) is None:
        raise FirefoxFailed(MISSING)
    done = subprocess.run([FIREFOX, "--version"], capture_output=True, text=True, timeout=60,
                          env=firefox_environment(library(build_dir), RUNSEL_FIREFOX_GEOMETRY="1"))
    if done.returncode != 0:
        raise FirefoxFailed("reading Firefox's bin statistics failed: "
                            f"{done.stderr.strip()[-300:]}")
    rows = [line.split() for line in done.stdout.splitlines() if line.strip()]
    if not rows or any(len(row) != 3 or not all(part.isdigit() for part in row) for row in rows):
        raise FirefoxFailed(f"unexpected bin statistics from {FIREFOX}: {done.stdout[:200]!r}")
    return [{"size": int(size), "bytes_per_run": int(run), "regions_per_run": int(regions)}
            for size, run, regions in rows]


def run_pages_setting(layout: list[dict]) -> str:
    """The RUNSEL_CONF entry that gives runsel this layout's run sizes and regions per run
    (PxN: P pages holding N regions; memory/README.md, "Runs")."""
    if any(row["bytes_per_run"] % 4096 for row in layout):
        raise FirefoxFailed("Firefox's runs are not whole 4 KiB pages: no runsel equivalent")
    return "run_pages:" + "/".join(f"{row['bytes_per_run'] // 4096}x{row['regions_per_run']}"
                                   for row in layout)


def convert(build_dir: Path, log: Path, trace: Path, partial: bool = False) -> str:
    """A logalloc log (plain or gzip) to a runsel trace; returns the converter's output."""
    command = [str(build_dir / CONVERTER), "from-logalloc", *(["--partial"] if partial else []),
               str(log), str(trace)]
    done = subprocess.run(command, capture_output=True, text=True, errors="backslashreplace")
    if done.returncode != 0:
        raise FirefoxFailed(done.stderr.strip() or f"{command[0]} exited {done.returncode}")
    return done.stdout


def reference_replay_file(build_dir: Path, trace: Path, scratch: Path, partial: bool = False,
                          timeout: float = 900) -> tuple[Path, str]:
    """The trace replayed on Firefox's own allocator: the file in scratch holding the
    replayer's JSON document, as every container's (tools/trace/format.md, "Replay
    figures"), variant "firefox", and Firefox's version line. The document is left in
    its file (it grows with the trace's checkpoints); so is the replayer's text."""
    if shutil.which(FIREFOX) is None:
        raise FirefoxFailed(MISSING)
    if " " in str(trace) or " " in str(scratch):
        raise FirefoxFailed(f"{trace}: the reference replay takes no path with spaces")
    handle, name = tempfile.mkstemp(prefix="firefox.", suffix=".json", dir=scratch)
    os.close(handle)
    arguments = ["--json", name, *(["--partial"] if partial else []), str(trace)]
    with tempfile.TemporaryFile(dir=scratch) as text:
        done = subprocess.run([FIREFOX, "--version"], stdout=text, stderr=subprocess.PIPE,
                              text=True, timeout=timeout, errors="backslashreplace",
                              env=firefox_environment(library(build_dir),
                                                      RUNSEL_FIREFOX_REPLAY=" ".join(arguments)))
        text.seek(0)
        head = text.read(1 << 16).decode("utf-8", "backslashreplace")
        text.seek(max(0, text.seek(0, os.SEEK_END) - 4096))
        tail = text.read().decode("utf-8", "backslashreplace")
    if done.returncode != 0 or "runsel-replay firefox" not in head:
        raise FirefoxFailed(f"the reference replay in {FIREFOX} failed (exit {done.returncode}): "
                            f"{(done.stderr or tail).strip()[-400:]}")
    return Path(name), firefox_version_line()


def reference_replay(build_dir: Path, trace: Path, scratch: Path, partial: bool = False,
                     timeout: float = 900) -> dict:
    """The trace replayed on Firefox's own allocator: the replayer's JSON document, as
    every container's (tools/trace/format.md, "Replay figures"), variant "firefox", with
    "firefox_version" added."""
    path, version = reference_replay_file(build_dir, trace, scratch, partial, timeout)
    document = json.loads(path.read_text())
    document["firefox_version"] = version
    return document


def firefox_version_line() -> str:
    done = subprocess.run([FIREFOX, "--version"], capture_output=True, text=True, timeout=60,
                          env={k: v for k, v in os.environ.items() if k != "LD_PRELOAD"})
    return done.stdout.strip()


def main() -> int:
    import argparse
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--build-dir", type=Path, default=Path("build"))
    parser.add_argument("--geometry", action="store_true",
                        help="print the installed Firefox's run layout as a RUNSEL_CONF entry")
    args = parser.parse_args()
    try:
        layout = geometry(args.build_dir)
    except FirefoxFailed as failure:
        print(f"firefox: {failure}", file=sys.stderr)
        return 1
    print(run_pages_setting(layout))
    return 0


if __name__ == "__main__":
    sys.exit(main())
