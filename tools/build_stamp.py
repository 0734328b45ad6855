#!/usr/bin/env python3
"""Writes the build stamp: one line naming the source a build was made from (its git
commit, and a digest of the uncommitted changes to tracked files, if any). Run by meson
on every build (target runsel-build-stamp); the report compares it on every Dask worker
(experiments/harness/worker_view.py), so no worker serves from another commit's build.
Standard library and git only; rewrites the file only when the line changes.

    tools/build_stamp.py SOURCE_DIR OUTPUT
"""

from __future__ import annotations

import hashlib
import subprocess
import sys
from pathlib import Path


def git(source: Path, *arguments: str) -> bytes | None:
    try:
        done = subprocess.run(["git", "-C", str(source), *arguments], capture_output=True,
                              timeout=60)
    except (OSError, subprocess.TimeoutExpired):
        return None
    return done.stdout if done.returncode == 0 else None


def stamp(source: Path) -> str:
    commit = git(source, "rev-parse", "--verify", "HEAD")
    if commit is None:  # a tarball: no commit to name, so the folder stands for it
        return f"source {source.resolve()} (not a git checkout)"
    line = f"commit {commit.decode().strip()}"
    changes = git(source, "diff", "--no-ext-diff", "--binary", "HEAD")
    if changes:  # two different edits of one commit must not pass for the same build
        line += f" with uncommitted changes {hashlib.sha256(changes).hexdigest()[:16]}"
    return line


def main() -> int:
    if len(sys.argv) != 3:
        print("usage: build_stamp.py SOURCE_DIR OUTPUT", file=sys.stderr)
        return 2
    output = Path(sys.argv[2])
    line = stamp(Path(sys.argv[1])) + "\n"
    if not output.exists() or output.read_text() != line:
        output.write_text(line)
    return 0


if __name__ == "__main__":
    sys.exit(main())
