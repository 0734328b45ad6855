"""meson test --suite harness: runs the harness in --quick mode into a temporary
directory, then checks its output: the files exist, every allocator is present for
every workload, the numbers are sane, runsel's stats identity holds, and rb_first,
array_heap, pairing_heap and every other container that picks alike (meson.build's
container table) make the same choices; the verdict's sentences fit its numbers; and
re-rendering the run's results.json gives report.md and report.html byte for byte.

    python3 -m harness.test_harness --build-dir build  (in experiments/)
"""

from __future__ import annotations

import argparse
import json
import re
import subprocess
import sys
import tempfile
from pathlib import Path

from . import targets, verdict_text
from .allocators import REFERENCE, same_choice_groups
from .interpreter import package_environment

# The allocators every report must hold besides runsel's variants: glibc, and the three
# that tools/runsel installs (its REQUIREMENTS list). Written here, not discovered: the
# test checks the harness's discovery, so it must not share it.
SYSTEM_ALLOCATORS = ("glibc", "jemalloc", "mimalloc", "tcmalloc")
SCHEMA_VERSION = 3
TIME_TARGET = 2.0  # percent: comparisons wider than this must say so
JUDGEMENTS = ("confirmed", "refuted", "not resolvable")

PICTURES = ("time_vs_memory.png", "resident_over_checkpoints.png", "timing_distributions.png",
            "bin_utilization.png")
IDENTITY_TERMS = ("allocated", "waste", "dirty", "bookkeeping", "bin_unused")


class Failures(list):
    def expect(self, condition: bool, message: str) -> None:
        if not condition:
            self.append(message)


def check_files(out: Path, failures: Failures) -> None:
    for name in ("results.json", "report.md", "report.html", *PICTURES):
        failures.expect((out / name).is_file() and (out / name).stat().st_size > 0,
                        f"{name} missing or empty")
    markdown = (out / "report.md").read_text() if (out / "report.md").exists() else ""
    placeholders = re.findall(r"\{\w+(?:\[[^\]]*\])*\}", markdown)  # an f-string without its f
    failures.expect(not placeholders, f"report.md holds unformatted text: {placeholders[:3]}")
    page = (out / "report.html").read_text() if (out / "report.html").exists() else ""
    failures.expect(page.count("data:image/png;base64,") >= len(PICTURES),
                    "report.html does not embed every picture")


def live(results: dict) -> dict:
    """The workloads with timed runs (an exact replay's entry has other figures)."""
    return {name: data for name, data in results["summary"].items()
            if data.get("kind", "live") == "live"}


def check_allocators(results: dict, expected: list[str], failures: Failures) -> None:
    failures.expect(not results["missing_allocators"],
                    f"system allocators not installed: {results['missing_allocators']} "
                    "(tools/runsel installs libjemalloc2, libmimalloc2.0, libtcmalloc-minimal4)")
    failures.expect(not results["discarded"], f"runs discarded: {results['discarded'][:3]}")
    webkit = results["settings"]["webkit"]
    for workload, data in live(results).items():
        wanted, rounds = expected, results["settings"]["repeat"]
        if workload == "webkit":  # fewer rounds, and in --quick fewer allocators
            wanted = expected if webkit["allocators"] == "all" else webkit["allocators"]
            rounds = webkit["repeat"]
        missing = [name for name in wanted if name not in data["allocators"]]
        failures.expect(not missing, f"{workload}: no results for {missing}")
        containers = {allocator["name"] for allocator in results["allocators"]
                      if allocator["runsel"] and not allocator.get("setting")}
        peer_rounds = (webkit["peer_repeat"] if workload == "webkit"
                       else results["settings"]["peer_repeat"])
        for name, pair in data["allocators"].items():
            wanted_runs = rounds if name in containers else min(rounds, peer_rounds)
            failures.expect(pair["runs"] >= wanted_runs,
                            f"{workload} × {name}: {pair['runs']} valid runs")


PURGE_POLICIES = {"budget", "deferred", "decay"}  # meson_options.txt's purge_policy choices


def check_settings(results: dict, failures: Failures) -> None:
    """rb_first runs under each purge policy other than the build's default, and every
    run's allocator reported the policy it was asked for (runsel_purge_policy())."""
    default = results["settings"].get("default_purge_policy")
    failures.expect(default in PURGE_POLICIES, f"default purge policy {default!r}")
    wanted = {f"rb_first@purge:{policy}": policy for policy in PURGE_POLICIES - {default}}
    for workload, data in live(results).items():
        if workload == "webkit":
            continue
        missing = sorted(set(wanted) - set(data["allocators"]))
        failures.expect(not missing, f"{workload}: no purge-policy runs {missing}")
        for name, pair in data["allocators"].items():
            if pair["identity"].startswith("runsel:"):
                policy = wanted.get(name, default)  # other settings purge by the default
                failures.expect(pair["purge"] == policy, f"{workload} × {name}: ran purge "
                                f"policy {pair['purge']}, expected {policy}")


def check_numbers(results: dict, failures: Failures) -> None:
    for workload, data in live(results).items():
        for name, pair in data["allocators"].items():
            where = f"{workload} × {name}"
            if data.get("family") == "synthetic":  # workload.cpp reports CPU time
                failures.expect(pair["time_measure"] == "cpu" and
                                pair["wall_times"] != pair["times"],
                                f"{where}: the comparisons use wall time, not CPU time")
            failures.expect(0 < pair["median_seconds"] < 120, f"{where}: median time "
                            f"{pair['median_seconds']}")
            failures.expect(pair["peak_resident"] > 0, f"{where}: no resident memory")
            for point in pair["checkpoints"]:
                failures.expect(0 < point["resident"] < 8 << 30,
                                f"{where} {point['name']}: resident {point['resident']}")
                # Every block is written when allocated, so it is resident; there is no
                # upper bound: allocators that keep freed memory have huge ratios.
                if point["fragmentation"] is not None:
                    failures.expect(point["fragmentation"] > 0.8,
                                    f"{where} {point['name']}: fragmentation "
                                    f"{point['fragmentation']:.2f}")
            if pair["instructions"] is not None and results["settings"]["instructions"] != "off":
                failures.expect(pair["instructions"].get("instructions", 0) > 0,
                                f"{where}: instruction count {pair['instructions']}")
            for checkpoint, stats in pair["runsel"].items():
                gap = stats["committed"] - sum(stats[term] for term in IDENTITY_TERMS)
                failures.expect(gap == 0, f"{where} {checkpoint}: runsel identity off by {gap}")
            failures.expect(bool(pair["runsel"]) == (pair["identity"].startswith("runsel:")),
                            f"{where}: runsel stats present only under runsel")


def check_webkit_replay(results: dict, failures: Failures) -> None:
    """The recorded webkit run: its page-holding web process replayed on the containers,
    with the driver's checkpoints as marks, the reference twice and identical."""
    entry = results["summary"].get("webkit replay") or {}
    failures.expect(entry.get("kind") == "replay" and not entry.get("error")
                    and entry.get("allocators"), f"webkit replay: {entry.get('error', entry)}")
    recordings = (results.get("corpus") or {}).get("recordings") or [{"pages": [1, 0]}]
    pages = recordings[0]["pages"][1] - recordings[0]["pages"][0] + 1
    wanted = [f"tab_{n}_loaded" for n in range(1, pages + 1)] + ["tabs_closed"]
    for name, pair in entry.get("allocators", {}).items():
        marks = [point["name"] for point in pair["exact"]["checkpoints"]
                 if point["kind"] == "mark"]
        failures.expect(marks == wanted, f"webkit replay on {name}: marks {marks}, "
                                         f"expected {wanted}")
    reference = entry.get("allocators", {}).get("rb_first")
    failures.expect(bool(reference) and reference["exact"]["repeated_identical"] is True,
                    "webkit replay: two replays on rb_first differ (or rb_first missing)")
    failures.expect(entry.get("key_checkpoint") == wanted[-2],
                    f"webkit replay: key checkpoint {entry.get('key_checkpoint')}")
    corpus = results.get("corpus") or {}
    judged = ((corpus.get("groups") or {}).get("webkit") or {}).get("judgement") or {}
    failures.expect(len(corpus.get("recordings", [])) == len(judged.get("traces", [])) >= 3,
                    f"the trace corpus: {len(corpus.get('recordings', []))} recordings, "
                    f"{len(judged.get('traces', []))} judged (at least 3 wanted)")
    for name, mine in (judged.get("containers") or {}).items():
        closed = mine["memory"]["closed"]["purged_resident"]
        failures.expect(closed["n_traces"] == len(judged["traces"]) and closed["outcome"] in (
            "lower", "higher", "not resolvable", "identical"),
            f"the corpus judgement of {name}: {closed}")
        cost = mine["cost"]["instructions_per_call"]
        failures.expect(cost["n_traces"] >= 2, f"the corpus cost of {name}: {cost}")


def check_agreement(results: dict, groups: list[list[str]], failures: Failures) -> None:
    for check in results["checks"]:
        failures.expect(check["ok"], f"{check['workload']}: {check['check']}: {check['detail']}")
    if groups:
        deterministic = [w for w, data in live(results).items()
                         if all(pair["deterministic"] for pair in data["allocators"].values())]
        agreeing = {check["workload"] for check in results["checks"]
                    if check["check"].startswith("same choices") and check["ok"]}
        failures.expect(set(deterministic) <= agreeing,
                        f"no passing agreement check for {set(deterministic) - agreeing}")


def check_verdict_leads(out: Path, failures: Failures) -> None:
    """The answer over the corpus opens both reports; the verdict comes before the
    summary."""
    markdown = (out / "report.md").read_text() if (out / "report.md").exists() else ""
    sections = [line for line in markdown.splitlines() if line.startswith("## ")]
    failures.expect(sections[:2] == ["## Answer", "## Over the trace corpus"]
                    and "No answer over a trace corpus" not in markdown,
                    f"report.md does not open with the answer over the corpus: {sections[:2]}")
    # The first screen: the short answer (at most 120 words), then the picture.
    lines = markdown.splitlines()
    shown = [line for line in lines[lines.index("## Answer") + 1:] if line.strip()] \
        if "## Answer" in lines else []
    failures.expect(len(shown) > 1 and shown[0].startswith("**In short**")
                    and len(shown[0].replace("**", "").split()) <= 120
                    and shown[1].startswith("![The answer over the trace corpus]"),
                    f"report.md's first screen is not the short answer and the picture: "
                    f"{shown[:2]}")
    failures.expect("## Verdict" in sections
                    and "## Bug 1857133 judged on the corpus, against moz_tree" in sections
                    and sections.index("## Verdict") < sections.index("## Summary"),
                    f"report.md: no verdict before the summary: {sections}")
    markdown = (out / "report.md").read_text() if (out / "report.md").exists() else ""
    placeholders = re.findall(r"\{\w+(?:\[[^\]]*\])*\}", markdown)  # an f-string without its f
    failures.expect(not placeholders, f"report.md holds unformatted text: {placeholders[:3]}")
    page = (out / "report.html").read_text() if (out / "report.html").exists() else ""
    failures.expect(0 <= page.find("<h2>Answer</h2>") < page.find("<h2>Verdict</h2>")
                    < page.find("<h2>Summary</h2>"),
                    "report.html does not open with the answer, then the verdict")


def time_phrase_fits(row: dict) -> str | None:
    """What is wrong with a row's time statement (verdict_text.row_line), judged from
    its own interval."""
    time, line = row["time"], verdict_text.row_line(row, TIME_TARGET)
    if time is None or time.get("low") is None:
        return None if "too few" in line or "not measured" in line else "no interval, no reason"
    width = (time["high"] - time["low"]) / 2
    if abs(width - time["half_width"]) > 1e-9:
        return f"half-width {time['half_width']} is not half of [{time['low']}, {time['high']}]"
    if time["low"] > 0:
        return None if "slower by" in line else "interval above 0 but not 'slower'"
    if time["high"] < 0:
        return None if "faster by" in line else "interval below 0 but not 'faster'"
    if width > TIME_TARGET:
        return None if "underpowered" in line and "same time" not in line else \
            f"±{width:.1f} % reads as '{line}'"
    return None if "same time" in line else "tight interval around 0 but not 'same time'"


def check_verdict(results: dict, out: Path, failures: Failures) -> None:
    failures.expect(results.get("schema_version") == SCHEMA_VERSION,
                    f"schema_version {results.get('schema_version')}")
    rows = results["verdict"]["rows"]
    markdown = (out / "report.md").read_text() if (out / "report.md").exists() else ""
    for workload, data in results["summary"].items():
        variants = [name for name, pair in data["allocators"].items() if name != REFERENCE
                    and "@" not in name  # rb_first@purge:NAME is a setting, not a container
                    and (data.get("kind") == "replay" or pair["identity"].startswith("runsel:"))]
        listed = [row["container"] for row in rows if row["workload"] == workload]
        failures.expect(listed == variants, f"{workload}: verdict rows {listed}, variants "
                        f"{variants}")
    for row in rows:
        where = f"verdict {row['workload']} × {row['container']}"
        problem = time_phrase_fits(row)
        failures.expect(problem is None, f"{where}: {problem}")
        time = row["time"]
        if time and time.get("half_width") is not None:
            failures.expect(f"±{time['half_width']:.1f} %" in markdown or time.get("constant"),
                            f"{where}: detectable ±{time['half_width']:.1f} % not in report.md")
        line = verdict_text.row_line(row, results["verdict"]["rules"]["time_target_percent"])
        failures.expect(line.replace("|", "\\|") in markdown,
                        f"{where}: verdict line not in report.md")
    timed = [row["time"] for row in rows
             if row["time"] and row["time"].get("half_width") is not None]
    resolving = sum(t["half_width"] <= TIME_TARGET for t in timed)
    failures.expect(results["verdict"]["time_resolution"] ==
                    {"with_interval": len(timed), "resolving": resolving},
                    f"time_resolution {results['verdict']['time_resolution']}, counted "
                    f"{len(timed)} with an interval, {resolving} resolving")
    failures.expect(f"{resolving} of {len(timed)} time comparisons resolve" in markdown,
                    "report.md does not state how many time comparisons resolve the target")
    claims = results["verdict"]["published"]
    failures.expect([claim["container"] for claim in claims] == ["rb_root", "lifo", "array_heap"],
                    "bug 1857133's three claims are not all there")
    for claim in claims:
        for figure in claim["figures"]:
            for evidence in figure["evidence"]:
                comparison, judged = evidence["comparison"], evidence["judgement"]
                failures.expect(judged in JUDGEMENTS, f"{claim['container']}: {judged}")
                if not comparison or comparison.get("low") is None:
                    continue
                side = 1 if figure["published"] > 0 else -1
                if abs(figure["published"]) < 0.25:  # a "no change" claim: other rules
                    continue
                if side * comparison["low"] > 0 and \
                        side * comparison["high"] >= abs(figure["published"]) / 2:
                    failures.expect(judged == "confirmed", f"{claim['container']} "
                                    f"{figure['measure']}: {evidence['what']} is on the "
                                    f"published side but judged {judged}")
                if side * comparison["high"] < 0 and side * comparison["low"] < 0:
                    failures.expect(judged == "refuted", f"{claim['container']} "
                                    f"{figure['measure']}: opposite side but judged {judged}")
    failures.expect(verdict_text.agreement_paragraph(claims) in markdown,
                    "the agreement paragraph is not in report.md")
    asked = results["verdict"]["question"]
    failures.expect(verdict_text.question_answer(asked) in markdown,
                    "the question's answer (lifo's time and rb_first's memory) is not in report.md")
    for answer in asked.get("containers", []):
        failures.expect(answer["qualifies"] == (not answer["worse"]),
                        f"question: {answer['container']} qualifies={answer['qualifies']} "
                        f"but is shown worse on {answer['worse']}")


def check_threads_compare_like_with_like(results: dict, failures: Failures) -> None:
    threads = results["summary"].get("threads")
    if threads:
        failures.expect(threads["memory_comparable"], f"threads: {threads['memory_note']}")


def check_render(out: Path, failures: Failures) -> None:
    """tools/runsel render's renderer, on the run's own results.json, gives the very bytes
    the run wrote (report.md, report.html with its pictures)."""
    with tempfile.TemporaryDirectory(prefix="runsel-render-") as again_name:
        again = Path(again_name)
        done = subprocess.run([sys.executable, "-m", "harness.report", str(out / "results.json"),
                               "--out", str(again)], capture_output=True, text=True,
                              env=package_environment())
        failures.expect(done.returncode == 0, f"render exited {done.returncode}: "
                        f"{done.stderr.strip()[-300:]}")
        for name in ("report.md", "report.html"):
            failures.expect((again / name).exists() and
                            (again / name).read_bytes() == (out / name).read_bytes(),
                            f"{name} re-rendered from results.json differs from the run's")


def check_counters(results: dict, failures: Failures) -> None:
    """One counting run per workload and variant, and counters that add up."""
    for workload, data in live(results).items():
        if data.get("family") == "webkit":
            continue  # the browser's picks are counted on its trace's replay
        for name, pair in data["allocators"].items():
            if not pair["identity"].startswith("runsel:") or "@" in name:  # peers, settings
                failures.expect(pair.get("counters") is None, f"{workload} × {name}: counters")
                continue
            counted = pair.get("counters")
            where = f"{workload} × {name} counters"
            if not counted or "error" in counted:
                failures.append(f"{where}: {counted}")
                continue
            total = counted["total"]
            failures.expect(total["picks"] > 0, f"{where}: no picks")
            failures.expect(total["picks_with_choice"] <= total["picks"], f"{where}: choices")
            failures.expect(sum(total["nonfull_at_pick"]) == total["picks"],
                            f"{where}: non-full histogram does not add up to the picks")
            failures.expect(sum(total["picked_fullness"]) ==
                            total["picks"] - total["nonfull_at_pick"][0],
                            f"{where}: fullness histogram does not add up")
            failures.expect(total["runs_created"] >= total["runs_destroyed"] > 0,
                            f"{where}: runs created {total['runs_created']}, destroyed "
                            f"{total['runs_destroyed']}")


def check_targets(results: dict, out: Path, failures: Failures) -> None:
    """The targets table: every live workload's rows for rb_first and its settings,
    judged again here from the pairs in results.json, and shown in report.md."""
    judged = results.get("targets") or {}
    failures.expect(judged.get("subjects", [])[:1] == [REFERENCE],
                    f"targets judged for {judged.get('subjects')}")
    markdown = (out / "report.md").read_text() if (out / "report.md").exists() else ""
    failures.expect("## Targets" in markdown, "report.md has no Targets table")
    live_workloads = [name for name, data in results["summary"].items()
                      if data.get("kind", "live") == "live"]
    for workload in live_workloads:
        ran = results["summary"][workload]["allocators"]
        figures = {row["figure"] for row in judged.get("rows", []) if row["workload"] == workload}
        wanted = ({"resident at key"} | ({"minor faults"} if workload == "threads" else set())
                  if "glibc" in ran else set())
        if (workload == "threads" and "glibc" in ran) or set(ran) & set(targets.PEERS):
            wanted.add("time")
        failures.expect(figures == wanted, f"targets for {workload}: {sorted(figures)}, "
                        f"expected {sorted(wanted)} from {sorted(ran)}")
    for row in judged.get("rows", []):
        pairs = results["summary"][row["workload"]]["allocators"]
        for name, verdict_of in row["judged"].items():
            again = targets.judge_pair(pairs[name], pairs[row["opponent"]], row["figure"],
                                       row["bound"])
            where = f"target {row['workload']} {row['figure']} × {name}"
            failures.expect(again["status"] == verdict_of["status"],
                            f"{where}: {verdict_of['status']}, judged again {again['status']}")
            failures.expect(verdict_of["text"] in markdown, f"{where}: not in report.md")


def check_phase_cpu(results: dict, failures) -> None:
    """Every step has its wall and CPU seconds; the Dask tasks' CPU is counted by kind
    (the corpus's replays and callgrind windows, the firefox replays) and within the CPU
    of the steps that ran them (the timed runs, beside which they start, and the
    deterministic steps after them), which the harness's own getrusage cannot see."""
    wall, cpu = results.get("phase_seconds", {}), results.get("phase_cpu_seconds", {})
    failures.expect(wall and set(wall) == set(cpu), f"phase seconds {wall}, CPU {cpu}")
    tasks = results.get("task_cpu_seconds") or {}
    for kind in ("corpus replay", "corpus callgrind windows", "firefox replay"):
        tally = tasks.get(kind)
        failures.expect(tally and tally["tasks"] > 0 and tally["cpu"] > 0,
                        f"no CPU seconds of {kind!r} tasks: {tasks}")
    every = sum(tally["cpu"] for tally in tasks.values())
    steps = cpu.get("timed runs", 0) + cpu.get("deterministic steps", 0)
    failures.expect(steps >= every, f"the timed runs' and deterministic steps' CPU {steps:.1f} s "
                    f"leaves out their tasks' {every:.1f} s")
    counted = sum((results.get("phase_task_cpu_seconds") or {}).values())
    failures.expect(abs(counted - every) <= 0.1 * len(tasks) + 0.5,
                    f"the steps count {counted:.1f} s of tasks, the kinds {every:.1f} s")


def check_behind_cache(results: dict, out: Path, build_dir: Path, failures: Failures) -> None:
    """With the cached replayers built (the anchors by default), the corpus was replayed
    behind the thread cache on the ones --quick replays, each judged without and with the
    cache over the same traces, and the report has the table."""
    from .replays import cached_replayers
    built = cached_replayers(build_dir)
    if "rb_first" not in built:
        return
    found = (results.get("corpus") or {}).get("behind_cache") or {}
    failures.expect(found and "error" not in found, f"no replays behind the cache: {found}")
    if not found or "error" in found:
        return
    webkit = results["corpus"]["groups"]["webkit"]["entries"]
    failures.expect(set(found["traces"]) == {name for name, entry in webkit.items()
                                             if "error" not in entry},
                    f"behind the cache on {found['traces']}, the corpus has {list(webkit)}")
    failures.expect(len(found["containers"]) >= 2 and "rb_first" in found["containers"],
                    f"behind the cache: {found['containers']}")
    # The cached twins are built hardened only (behind_cache.hardened): their windows are
    # the entries' "cost_hardened", and no as-shipped "cost" is claimed for them.
    pairs = [entry["allocators"]["rb_first"] for entry in found["entries"].values()]
    failures.expect(any((pair.get("cost_hardened") or {}).get("allocator_instructions")
                        for pair in pairs), "no callgrind windows behind the cache")
    failures.expect(not any(pair.get("cost") for pair in pairs),
                    "an as-shipped cost behind the cache, which has no as-shipped build")
    markdown = (out / "report.md").read_text() if (out / "report.md").exists() else ""
    failures.expect("## Behind a thread cache" in markdown, "report.md has no table behind "
                    "the thread cache")


def container_names(build_dir: Path) -> list[str]:
    """Every container of meson.build's table, as the build wrote it to
    memory/containers/containers.json: a plain build builds each one's variant."""
    listing = build_dir / "memory" / "containers" / "containers.json"
    return [entry["name"] for entry in json.loads(listing.read_text())["containers"]]


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--build-dir", type=Path, required=True)
    parser.add_argument("--keep", type=Path, help="write the output here instead of a temp dir")
    args = parser.parse_args()
    expected = container_names(args.build_dir) + list(SYSTEM_ALLOCATORS)
    with tempfile.TemporaryDirectory(prefix="runsel-harness-") as scratch:
        out = args.keep or Path(scratch)
        command = [sys.executable, "-m", "harness.harness", "--quick", "--build-dir",
                   str(args.build_dir), "--out", str(out)]
        print("+ " + " ".join(command), flush=True)
        code = subprocess.call(command, env=package_environment())
        failures = Failures()
        failures.expect(code == 0, f"harness exited with {code}")
        check_files(out, failures)
        if (out / "results.json").exists():
            results = json.loads((out / "results.json").read_text())
            failures.expect("webkit" in results["summary"], "no webkit workload in --quick")
            check_webkit_replay(results, failures)
            check_allocators(results, expected, failures)
            check_settings(results, failures)
            check_numbers(results, failures)
            check_agreement(results, same_choice_groups(args.build_dir), failures)
            check_verdict_leads(out, failures)
            check_verdict(results, out, failures)
            check_threads_compare_like_with_like(results, failures)
            check_counters(results, failures)
            check_render(out, failures)
            check_targets(results, out, failures)
            check_phase_cpu(results, failures)
            check_behind_cache(results, out, args.build_dir, failures)
    for failure in failures:
        print(f"FAILED: {failure}")
    print(f"harness test: {len(failures)} failure(s); allocators expected: {', '.join(expected)}")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
