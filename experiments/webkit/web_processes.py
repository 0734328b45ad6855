"""The webkit workload's web processes, read from /proc: which are there, their CPU time
and memory, which allocator library each maps, and the proof of which allocator served
each (its RUNSEL_STATS line for runsel). Standard library only.
"""

from __future__ import annotations

import json
import os
import re
from pathlib import Path

WEB_PROCESS = "WebKitWebProcess"
# Shared objects that give away which allocator a process runs on (besides glibc).
ALLOCATOR_LIBRARIES = (
    ("jemalloc", re.compile(r"/libjemalloc\.so[.\d]*$")),
    ("mimalloc", re.compile(r"/libmimalloc\.so[.\d]*$")),
    ("tcmalloc", re.compile(r"/libtcmalloc(_minimal)?\.so[.\d]*$")),
    ("runsel", re.compile(r"/libmalloc(-[\w-]+)?\.so(\.[\d.]+)?$")),  # a variant, a counting twin
)


def web_processes(parent: int) -> list[int]:
    """Pids of the WebKitWebProcess children of `parent`."""
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat") as file:
                fields = file.read().rsplit(")", 1)[1].split()
            if int(fields[1]) == parent and \
                    os.path.basename(os.readlink(f"/proc/{entry}/exe")) == WEB_PROCESS:
                found.append(int(entry))
        except (OSError, IndexError, ValueError):
            continue  # gone meanwhile
    return sorted(found)


def web_cpu_seconds(parent: int) -> float:
    """User plus system CPU time of `parent`'s web processes so far (/proc/<pid>/stat)."""
    total = 0
    for pid in web_processes(parent):
        try:
            fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        total += int(fields[11]) + int(fields[12])  # utime, stime (fields 14, 15)
    return total / os.sysconf("SC_CLK_TCK")


def memory_of(pid: int) -> dict | None:
    """Rss, Pss and private bytes (smaps_rollup) and minor faults of one process."""
    try:
        rollup = Path(f"/proc/{pid}/smaps_rollup").read_text()
        stat = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return None
    kib = {key: int(value) * 1024 for key, value in
           re.findall(r"^(\w+):\s+(\d+) kB", rollup, re.MULTILINE)}
    return {"pid": pid, "rss": kib.get("Rss", 0), "pss": kib.get("Pss", 0),
            "private": kib.get("Private_Clean", 0) + kib.get("Private_Dirty", 0),
            "minor_faults": int(stat[7])}


def mapped_allocator(pid: int) -> dict | None:
    """Which allocator library /proc/<pid>/maps shows (glibc when none), with its path,
    and whether the process's environment has Malloc=1."""
    try:
        maps = Path(f"/proc/{pid}/maps").read_text()
        environment = Path(f"/proc/{pid}/environ").read_bytes().split(b"\0")
    except OSError:
        return None
    paths = sorted({line.split(None, 5)[5] for line in maps.splitlines()
                    if len(line.split(None, 5)) == 6})
    found = [(name, path) for path in paths for name, pattern in ALLOCATOR_LIBRARIES
             if pattern.search(path)]
    libc = next((path for path in paths if re.search(r"/libc\.so\.6$", path)), "")
    name, provider = found[0] if len(found) == 1 else \
        ("glibc", libc) if not found else ("several: " + ", ".join(n for n, _ in found), "")
    return {"mapped": name, "provider": provider, "malloc_env": b"Malloc=1" in environment}


def read_stats_lines(directory: str) -> dict[int, dict]:
    lines = {}
    for path in Path(directory).glob("stats.*"):
        for line in path.read_text().splitlines():
            try:
                record = json.loads(line)
                lines[int(record["pid"])] = record
            except (ValueError, KeyError, TypeError):
                continue
    return lines


def prove_allocators(browser, stats: dict[int, dict]) -> tuple[dict, list[dict]]:
    """Per web process: who served malloc. runsel: its RUNSEL_STATS line (pid, variant)
    and the library mapped; other allocators: the library mapped in /proc/<pid>/maps.
    Returns the run's allocator (what every web process agrees on) and the proofs."""
    proofs = []
    for pid in sorted(browser.seen_pids):
        mapped = browser.proofs.get(pid) or {"mapped": "?", "provider": "", "malloc_env": False}
        proof = {"pid": pid, **mapped}
        if mapped["mapped"] == "runsel":
            line = stats.get(pid)
            proof["identity"] = (f"runsel:{line['variant']}" if line
                                 else "runsel:? (no RUNSEL_STATS line)")
            proof["proof"] = "RUNSEL_STATS line of this pid" if line else "none"
            if line:
                proof["runsel_exit"] = line
        else:
            proof["identity"] = mapped["mapped"]
            proof["proof"] = f"/proc/{pid}/maps"
        if not mapped["malloc_env"]:
            proof["identity"] += " (without Malloc=1: bmalloc served it)"
        proofs.append(proof)
    identities = sorted({proof["identity"] for proof in proofs})
    providers = sorted({proof["provider"] for proof in proofs})
    allocator = {"name": (identities[0] if len(identities) == 1
                          else "mixed: " + ", ".join(identities)),
                 "provider": providers[0] if len(providers) == 1 else ""}
    return allocator, proofs


def main_process_exit_stats(proofs: list[dict]) -> dict | None:
    """runsel's stats at exit of the web process that held the pages (the largest)."""
    lines = [proof["runsel_exit"] for proof in proofs if "runsel_exit" in proof]
    return max(lines, key=lambda line: line["nmalloc"]) if lines else None
