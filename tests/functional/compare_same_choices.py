#!/usr/bin/env python3
"""Runs same_choices_<container> programs and compares their digests.

Usage: compare_same_choices.py --same EXE EXE ... --different EXE ...

Every --same program must report the same operations, the same digest of
addresses and the same heap figures; every --different program must report a
different digest of addresses (otherwise the comparison could not fail).

Metadata figures (mapped, committed, bookkeeping) must match too, except that
a container with a side array in metadata memory (array_heap) may count more
committed bookkeeping pages than the others, by the same amount in committed
and bookkeeping, and never more address space; and that containers whose
objects differ in size (each of an arena's 45 bins holds one: two to ten
words) may make the arena object span one page more or less, again by the
same amount in committed and bookkeeping.

With --thread-cache (a -Dthread_cache=true build) the bins see the cache's
batches, not the program's calls: a --different program may then make the
reference's choices (moz_tree's current run, filled by a batch, is then
mostly the lowest one), which is noted, as long as one --different program
still differs; and metadata may differ by two pages where it differs by one
without the cache (the thread's cache is taken from metadata memory after
the arena object; observed: pairing_heap, 8 KiB less bookkeeping than
rb_first).

The allocator's choices depend on where the kernel puts its mappings (the
lowest-address policy compares addresses across chunks), so each program runs
with address-space randomisation off (setarch -R) and twice, to show that it
is deterministic. Without setarch, each runs five times and the most common
digest counts.
"""
import argparse
import collections
import os
import subprocess
import sys
import tempfile

SIDE_ARRAY_CONTAINERS = {"array_heap"}
MAX_SIDE_ARRAY_BYTES = 1 << 20
PAGE = 4096  # the arena object may end in another page


def setarch_prefix():
    for prefix in (["setarch", "-R"], ["setarch", os.uname().machine, "-R"]):
        try:
            done = subprocess.run(prefix + ["true"], capture_output=True)
        except OSError:
            return None
        if done.returncode == 0:
            return prefix
    return None


def clean_environment(extra=None):
    env = {k: v for k, v in os.environ.items()
           if not k.startswith("RUNSEL_") or k == "RUNSEL_CONF"}
    env.update(extra or {})
    return env


def run_once(prefix, exe, extra_env=None):
    done = subprocess.run((prefix or []) + [exe], capture_output=True, text=True,
                          env=clean_environment(extra_env), timeout=240)
    if done.returncode != 0:
        sys.exit(f"FAIL: {exe} exited with {done.returncode}\n{done.stdout}{done.stderr}")
    report = {}
    for line in done.stdout.splitlines():
        key, _, rest = line.partition(" ")
        report[key] = rest
    for key in ("variant", "operations", "addresses", "heap", "metadata", "check"):
        if key not in report:
            sys.exit(f"FAIL: {exe} printed no '{key}' line:\n{done.stdout}")
    if report["check"] != "ok":
        sys.exit(f"FAIL: {exe}: runsel_check() found inconsistent stats")
    return report


def run(prefix, exe):
    runs = 2 if prefix else 5
    reports = [run_once(prefix, exe) for _ in range(runs)]
    keys = [(r["operations"], r["addresses"], r["heap"], r["metadata"]) for r in reports]
    counts = collections.Counter(keys)
    if prefix and len(counts) != 1:
        sys.exit(f"FAIL: {exe} is not deterministic with ASLR off:\n" +
                 "\n".join(" | ".join(k) for k in counts))
    best = counts.most_common(1)[0][0]
    return next(r for r, k in zip(reports, keys) if k == best)


def figures(line):
    return {k: int(v) for k, v in (item.split("=") for item in line.split())}


def first_difference(prefix, exe_a, exe_b):
    """Both programs' logs, with addresses relative to the first chunk."""
    with tempfile.TemporaryDirectory() as tmp:
        logs = []
        for index, exe in enumerate((exe_a, exe_b)):
            path = os.path.join(tmp, f"{index}.log")
            run_once(prefix, exe, {"RUNSEL_SAME_CHOICES_LOG": path})
            with open(path) as log:
                logs.append(log.read().splitlines())

    def relative(lines):
        base = None
        for line in lines:
            if "address=" in line:
                head, _, address = line.rpartition("address=")
                value = int(address, 16)
                base = base if base is not None else value & ~((1 << 20) - 1)
                line = f"{head}offset={value - base:#x}"
            yield line

    for number, (a, b) in enumerate(zip(relative(logs[0]), relative(logs[1]))):
        if a != b:
            return f"line {number + 1}:\n  {exe_a}: {a}\n  {exe_b}: {b}"
    return "logs agree line by line"


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--same", nargs="+", required=True)
    parser.add_argument("--different", nargs="*", default=[])
    parser.add_argument("--thread-cache", action="store_true",
                        help="the programs run behind a thread cache (-Dthread_cache=true)")
    args = parser.parse_args()
    # The arena object holds one container object per bin, and the containers' objects
    # differ in size: between two containers that pick alike the arena's metadata differs
    # by up to 8 KiB here (e.g. age_address and je_slabs), which its page rounding turns
    # into up to two pages; a thread cache's object after it can add a third.
    page_slack = 3 * PAGE if args.thread_cache else 2 * PAGE

    prefix = setarch_prefix()
    if prefix is None:
        print("note: setarch -R unavailable; running with ASLR, five times each")
    reports = {exe: run(prefix, exe) for exe in args.same + args.different}
    for report in reports.values():
        print(f"{report['variant']:>12}: addresses {report['addresses']}  {report['heap']}")
        print(f"{'':>12}  {report['metadata']}")

    failures = []
    reference_exe = args.same[0]
    reference = reports[reference_exe]
    for exe in args.same[1:]:
        report = reports[exe]
        for key in ("operations", "addresses", "heap"):
            if report[key] != reference[key]:
                failures.append(f"{report['variant']} differs from {reference['variant']} in "
                                f"{key}; first difference at " +
                                first_difference(prefix, reference_exe, exe))
                break
        ref_meta, meta = figures(reference["metadata"]), figures(report["metadata"])
        extra = meta["bookkeeping"] - ref_meta["bookkeeping"]
        if report["variant"] in SIDE_ARRAY_CONTAINERS:
            allowed = -page_slack <= extra <= MAX_SIDE_ARRAY_BYTES + page_slack
            why = "side arrays and container objects"
        else:
            allowed = abs(extra) <= page_slack
            why = "container objects in the arena"
        ok = (meta["mapped"] == ref_meta["mapped"] and
              meta["committed"] - ref_meta["committed"] == extra and allowed)
        if ok and extra:
            print(f"note: {report['variant']}'s {why}: {extra:+} bytes of bookkeeping")
        if not ok:
            failures.append(f"{report['variant']} metadata {report['metadata']} does not match "
                            f"{reference['variant']} {reference['metadata']}")
    alike = [exe for exe in args.different
             if reports[exe]["addresses"] == reference["addresses"]]
    for exe in alike:
        if args.thread_cache and len(alike) < len(args.different):
            print(f"note: behind the thread cache {reports[exe]['variant']} made the same "
                  f"choices as {reference['variant']}")
        else:
            failures.append(f"{reports[exe]['variant']} made the same choices as "
                            f"{reference['variant']}: the sequence cannot tell policies apart")

    if failures:
        print("FAIL:\n  " + "\n  ".join(failures))
        return 1
    print(f"OK: {', '.join(reports[e]['variant'] for e in args.same)} made the same choices"
          + (f"; {', '.join(reports[e]['variant'] for e in args.different if e not in alike)}"
             " did not" if len(alike) < len(args.different) else ""))
    return 0


if __name__ == "__main__":
    sys.exit(main())
