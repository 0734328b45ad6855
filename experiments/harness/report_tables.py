"""The report's tables, one function per table: results.json in (as the harness writes
it: results.py), (title, headers, rows, note) out, every figure read, none computed. The
order they come in (tables(), leading()) is the report's; report.py lays them out.
"""

from __future__ import annotations

from pathlib import Path

from . import (
    corpus_report,
    report_anchors,
    report_cache,
    report_check_price,
    report_firefox_corpus,
    report_headroom,
    verdict_text,
)
from .derived import exact_point
from .report_cells import (
    NOT_MEASURED,
    STATS_FIGURES,
    bytes_cell,
    delta_cell,
    detectable_cell,
    exact_cell,
    instructions_cell,
    memory_cell,
    mib,
    profile_sentence,
)
from .report_firefox import firefox_containers_table, firefox_marks_table, firefox_recording_table


def point_at(pair: dict, checkpoint: str) -> dict:
    return next(point for point in pair["checkpoints"] if point["name"] == checkpoint)


# --- tables: (title, headers, rows, note) ---------------------------------------------


def verdict_table(results: dict):
    """Every container against rb_first on every workload: memory, cost, time, one line."""
    verdict, settings = results["verdict"], results["settings"]
    reference, target = results["reference"], results["verdict"]["rules"]["time_target_percent"]
    headers = ["workload", "container", f"memory vs {reference}", "instructions",
               "D1 misses", "LL misses", f"time vs {reference} (95 % CI)", "detects",
               "verdict"]
    rows = [[row["label"], row["container"], memory_cell(row),
             exact_cell(row["cost"]["instructions"]), exact_cell(row["cost"]["d1_misses"]),
             exact_cell(row["cost"]["ll_misses"]),
             delta_cell(row["time"]) if row["kind"] == "live" else "not measured (replay)",
             detectable_cell(row["time"]), verdict_text.row_line(row, target)]
            for row in verdict["rows"]]
    resolution = verdict["time_resolution"]
    note = (f"Differences to {reference} in percent (negative = less). Time: "
            f"{'CPU' if any_cpu_time(results) else 'wall'} time of the measured region, "
            f"{settings['repeat']} interleaved rounds at scale {settings['scale']}"
            f"{extra_rounds_text(settings)}, paired by round: trimmed mean of the per-round "
            "log ratios, as a percent, with a 95 % paired bootstrap interval "
            "(scipy.stats.bootstrap, BCa). \"Detects\" is the interval's half-width, the "
            f"smallest difference the comparison could have seen; {resolution['resolving']} of "
            f"{resolution['with_interval']} time comparisons resolve ±{target:g} %. "
            "A comparison wider than "
            f"that says \"underpowered\", never \"same time\". Memory: what each run's "
            "resident set grew by from its first checkpoint to the workload's key checkpoint "
            "(see Summary; the library's own pages, a few KiB apart between variants before "
            "the workload allocates anything, cancel), paired like time for live runs, exact "
            "for replays. Instructions and misses: "
            f"{settings.get('instructions_how', NOT_MEASURED)} (exact counts, one run each; "
            "D1 = simulated first-level data cache, LL = last level).")
    return "Verdict", headers, rows, note


def extra_rounds_text(settings: dict) -> str:
    extra = {name: count for name, count in settings.get("extra_rounds", {}).items() if count}
    if not extra:
        return ""
    return (" plus, for runsel's variants, extra rounds where a comparison was still wider "
            f"than the target ({', '.join(f'{name} {count}' for name, count in extra.items())}"
            f"; at most {settings['extend_seconds']:g} s)")


def any_cpu_time(results: dict) -> bool:
    return any(pair.get("time_measure") == "cpu" for data in results["summary"].values()
               for pair in data["allocators"].values())


def published_table(results: dict):
    """Bug 1857133's figures beside ours, each judged."""
    headers = ["claim (bug 1857133)", "measure", "published", "ours", "judgement"]
    rows = []
    for claim in results["verdict"]["published"]:
        label = f"{claim['claim']} ({claim['container']})"
        for figure in claim["figures"]:
            evidence = figure["evidence"] or [None]
            for item in evidence:
                rows.append([label, figure["measure"], f"{figure['published']:+.2f} %",
                             f"{item['what']}: {published_ours(item['comparison'])}" if item
                             else "nothing of ours measures it",
                             item["judgement"] if item else "not resolvable"])
                label = ""
    rules = results["verdict"]["rules"]
    note = ("Published: Mozilla bug 1857133, Windows, against mozjemalloc's tree as built "
            "(runsel's moz_tree); ours against rb_first, the idealized lowest-address policy "
            "(moz_tree departs from it after its current run empties); sp3 as time "
            "(negative = faster), base and tp6 as resident memory. "
            "Ours: sp3 ↔ time of churn and of live webkit; base ↔ memory of steady_state; "
            "tp6 ↔ memory of page_load and of webkit. Refuted: our interval lies below half "
            "the published effect (or on the other side of 0). Confirmed: otherwise, when it "
            "lies on the published side of 0. A published figure below "
            f"{rules['negligible_published_percent']} % claims no change: confirmed when ours "
            "lies within "
            f"±{rules['equivalence_margin_percent']} %, refuted when wholly outside. Otherwise "
            "not resolvable.\n\n"
            + verdict_text.agreement_paragraph(results["verdict"]["published"]))
    return "Bug 1857133 beside ours", headers, rows, note


def published_ours(comparison: dict | None) -> str:
    if not comparison or comparison.get("percent") is None:
        return NOT_MEASURED
    if comparison.get("exact"):
        return f"{comparison['percent']:+.2f} % (exact)"
    return delta_cell(comparison)


def question_table(results: dict):
    """Is there a container with lifo's time and rb_first's memory on every workload?"""
    asked = results["verdict"]["question"]
    answers = asked["containers"]
    labels = [cell["label"] for cell in answers[0]["cells"]] if answers else []
    headers = ["container", *labels, "shown worse on"]
    rows = []
    for answer in answers:
        cells = {cell["label"]: cell for cell in answer["cells"]}
        rows.append([answer["container"],
                     *[question_cell(cells.get(label)) for label in labels],
                     "; ".join(map(verdict_text.worse_text, answer["worse"])) or "nowhere"])
    note = ("Time against lifo's (live workloads, paired by round like the verdict), memory "
            "against rb_first's (the verdict's memory column: growth to the key checkpoint). "
            "\"Shown worse\" means the "
            "interval, or the exact difference of a replay, lies above zero; an interval "
            "that holds zero shows nothing either way. " + verdict_text.question_answer(asked))
    return "Lifo's time and rb_first's memory at once?", headers, rows, note


def question_cell(cell: dict | None) -> str:
    if cell is None:
        return "-"
    memory = f"memory {published_ours(cell['memory_vs_reference'])}"
    if cell["time_vs_lifo"] is None:
        return memory
    return f"time {delta_cell(cell['time_vs_lifo'])}; {memory}"


def choices_table(results: dict):
    """Per workload and container: did the containers have anything to choose between?"""
    headers = ["workload", "container", "picks", "with a choice", "non-full runs at a pick "
               "(median bucket)", "picked run's fullness (mean)", "runs created", "runs destroyed"]
    rows = []
    for workload, data in results["summary"].items():
        for name, pair in data["allocators"].items():
            counted = pair.get("counters")
            if not counted:
                continue
            if "error" in counted:
                rows.append([workload, name, counted["error"], "", "", "", "", ""])
                continue
            total = counted["total"]
            picks, median, fullness = (total["picks"], total["median_nonfull_bucket"],
                                       total["mean_picked_fullness_percent"])
            rows.append([workload, name, f"{picks:,d}",
                         f"{100 * total['picks_with_choice'] / picks:.1f} %" if picks else "-",
                         "-" if median is None else BUCKET_NAMES[median],
                         "-" if fullness is None else f"{fullness:.0f} %",
                         f"{total['runs_created']:,d}", f"{total['runs_destroyed']:,d}"])
    note = ("One run of each workload under each variant's counting library "
            "(libmalloc-counting-<container>.so), counters summed over the bins. A pick is a "
            "small allocation asking the bin's container for a run; \"with a choice\": the "
            "container held two or more non-full runs, so the containers could differ. "
            "Non-full runs at a pick in log2 buckets (0, 1, 2–3, 4–7, …); fullness = regions "
            "in use ÷ regions of the picked run." if rows else
            "Not measured: the counting libraries (ninja -C build "
            "libmalloc-counting-<container>.so) were not built.")
    return "What the containers had to choose between", headers, rows, note


# derived.totals' median_nonfull_bucket indexes these: log2 buckets of non-full runs.
BUCKET_NAMES = ["0", "1"] + [f"{1 << k}–{(1 << (k + 1)) - 1}" for k in range(1, 14)] + ["16384+"]


def exact_replays_table(results: dict):
    """Replays: each container's exact figures at the key checkpoint and the peak."""
    headers = ["replay", "container", "checkpoint", "resident", "committed", "bin_unused",
               "resident vs rb_first", "committed vs rb_first"]
    rows = []
    profiles = set()
    for name, data in results["summary"].items():
        if data.get("kind") != "replay":
            continue
        pairs = data["allocators"]
        for container, pair in pairs.items():
            exact = pair.get("exact")
            profiles.add((exact or {}).get("profile"))
            if not exact:
                rows.append([data.get("label", name), container, "-", NOT_MEASURED, "", "", "", ""])
                continue
            for checkpoint, differences in pair["exact_vs_reference"].items():
                mine = exact_point(exact, checkpoint)
                rows.append([data.get("label", name), container, checkpoint,
                             f"{mine['resident']:,d}", f"{mine['committed']:,d}",
                             f"{mine['bin_unused']:,d}",
                             *[bytes_cell(differences[figure]) if differences[figure] else "-"
                               for figure in ("resident", "committed")]])
    note = ("Exact figures in bytes from one replay per container (tools/trace/format.md); "
            "the reference replayed twice must agree to the byte (Checks)." +
            profile_sentence(profiles))
    return "Exact replays", headers, rows, note



# --- the firefox workload (results.json's "firefox" entry, firefox_workload.py) -----------

def settings_text(results: dict) -> str:
    """What the <container>@<setting> rows are, or "" when the run has none."""
    named = [entry for entry in results["allocators"] if entry.get("setting")]
    if not named:
        return ""
    what = [f"{entry['name']} = {entry['name'].split('@')[0]} under "
            + (f"RUNSEL_CONF={entry['setting']}" if entry["setting"].startswith("purge:")
               else f"the build option {entry['setting']} ({Path(entry['preload']).name})")
            for entry in named]
    default = results["settings"].get("default_purge_policy")
    return ("; ".join(what) + (f"; every other runsel row purges by {default}, the build's "
                               "default" if default else "") + ". ")


def summary_table(results: dict):
    reference = results["reference"]
    headers = ["workload", "allocator", "median ms", "median wall ms",
               f"time vs {reference} (95 % CI)", "detects", "instructions", "minor faults",
               "peak MiB", "MiB at key", "live MiB at key", "fragmentation at key"]
    rows = []
    for workload, data in results["summary"].items():
        if data.get("kind", "live") != "live":
            continue
        key = data["key_checkpoint"]
        for index, (name, pair) in enumerate(data["allocators"].items()):
            point = point_at(pair, key)
            rows.append([f"{workload} ({key})" if index == 0 else workload, name,
                         f"{pair['median_seconds'] * 1e3:.1f}",
                         f"{pair.get('median_wall_seconds', pair['median_seconds']) * 1e3:.1f}",
                         delta_cell(pair["delta_to_reference"]) if name != reference else "-",
                         detectable_cell(pair["delta_to_reference"]),
                         instructions_cell(pair.get("cost") or pair.get("instructions")),
                         "-" if pair["minor_faults"] is None else f"{pair['minor_faults']:.0f}",
                         mib(pair["peak_resident"]), mib(point["resident"]),
                         mib(point["live_requested"]),
                         "-" if point["fragmentation"] is None
                         else f"{point['fragmentation']:.2f}"])
    settings = results["settings"]
    layout = ("address-space randomisation on" if settings.get("aslr")
              else "address-space randomisation off (setarch -R)")
    peers = settings.get("peer_repeat", settings["repeat"])
    rounds = (f"{settings['repeat']} interleaved runs" if peers >= settings["repeat"] else
              f"{settings['repeat']} interleaved runs ({peers} for the peers and the settings)")
    note = (f"Median of {rounds} at scale {settings['scale']}, "
            f"{layout}. {settings_text(results)}\"median ms\": "
            f"{'CPU' if any_cpu_time(results) else 'wall'} time of "
            "the measured region (all threads), which the comparisons use; wall time beside it. "
            "Key = the checkpoint in brackets after the workload: its last one that still "
            "holds a live set (≥ 64 KiB), unless the workload names one. Fragmentation = "
            "(resident − resident at start) ÷ live requested bytes. "
            f"Instructions: {settings['instructions_how']}"
            + (f", scale {settings['instruction_scale']}." if settings["instructions"] != "off"
               else "."))
    return "Summary", headers, rows, note


def targets_table(results: dict):
    """The speed and memory targets (experiments/harness/targets.py), for the reference
    container as built and under each of its settings, judged on this run's figures."""
    judged = results.get("targets") or {"subjects": [], "rows": []}
    subjects = judged["subjects"]
    headers = ["workload", "target", *subjects]
    rows = []
    for row in judged["rows"]:
        rows.append([row["workload"], row["text"],
                     *[(row["judged"].get(name) or {}).get("text", "-") for name in subjects]])
    note = ("Each cell: runsel's figure over the other allocator's, paired by round, with "
            "its 95 % interval; met when the whole interval is at or below the bound, "
            "missed when it is wholly above, unresolved when it straddles. \"needs\" is "
            "the change of runsel's figure that would just meet the bound. Minor faults: "
            "the whole run's; resident: at the key checkpoint (Summary). The slowest peer is "
            "the one of jemalloc, mimalloc and tcmalloc with the highest median time on "
            "that workload.")
    return "Targets", headers, rows, note


def checkpoints_table(results: dict, workload: str):
    data = results["summary"][workload]["allocators"]
    names = list(data)
    first = data[names[0]]
    headers = ["checkpoint", "live MiB", *[f"{name} MiB" for name in names]]
    rows = []
    for index, point in enumerate(first["checkpoints"]):
        rows.append([point["name"], mib(point["live_requested"]),
                     *[mib(data[name]["checkpoints"][index]["resident"])
                       if index < len(data[name]["checkpoints"]) else "-" for name in names]])
    return (f"{workload}: resident memory at each checkpoint", headers, rows,
            "Whole-process resident set (statm), median over repetitions.")


def runsel_stats_table(results: dict, workload: str):
    data = results["summary"][workload]
    key = data["key_checkpoint"]
    headers = ["variant", *[f"{figure} MiB" for figure in STATS_FIGURES], "runs", "non-full runs",
               "purges"]
    rows = []
    for name, pair in data["allocators"].items():
        stats = pair["runsel"].get(key)
        if not stats:
            continue
        rows.append([name, *[mib(stats[figure]) for figure in STATS_FIGURES],
                     str(sum(b["runs"] for b in stats["bins"])),
                     str(sum(b["nonfull_runs"] for b in stats["bins"])), str(stats["purges"])])
    return (f"{workload}: runsel's stats at {key}", headers, rows,
            "committed = allocated + bin_unused + waste + dirty + bookkeeping (runsel_stats).")


def bins_table(results: dict, workload: str):
    """Runs and non-full runs per size class and variant at the key checkpoint."""
    data = results["summary"][workload]
    key = data["key_checkpoint"]
    variants = {name: pair["runsel"][key]["bins"] for name, pair in data["allocators"].items()
                if key in pair["runsel"]}
    if not variants:
        return f"{workload}: runs per bin", [], [], ""
    headers = ["size", *[f"{name} runs / non-full / in use %" for name in variants]]
    rows = []
    for index, bin_ in enumerate(next(iter(variants.values()))):
        cells = []
        for bins in variants.values():
            b = bins[index]
            capacity = b["runs"] * b["regions_per_run"]
            cells.append(f"{b['runs']} / {b['nonfull_runs']} / "
                         f"{100 * b['regions_in_use'] / capacity:.0f}" if capacity else "-")
        if any(cell != "-" for cell in cells):
            rows.append([str(bin_["size"]), *cells])
    return (f"{workload}: runs per bin at {key}", headers, rows,
            "Only size classes with runs. In use % = regions in use ÷ regions in the bin's runs.")


def checks_table(results: dict):
    headers = ["workload", "check", "result", "detail"]
    rows = [[check["workload"], check["check"], "ok" if check["ok"] else "FAILED",
             check["detail"]] for check in results["checks"]]
    rows += [[run["workload"], f"run under {run['allocator']} #{run['repetition'] + 1}",
              "DISCARDED", run["error"]] for run in results["discarded"]]
    if results["missing_allocators"]:
        rows.append(["-", "system allocators installed", "missing",
                     ", ".join(results["missing_allocators"])])
    return ("Checks", headers, rows,
            "Every run proved its allocator (runsel_variant() or the object providing malloc); "
            "a run that could not is discarded and listed here.")


def setup_table(results: dict):
    machine, settings = results["machine"], results["settings"]
    rows = [["command", results["command"]], ["generated", results["generated"]],
            ["duration", f"{results['duration_seconds']:.0f} s ("
             + ", ".join(f"{name} {seconds:.0f} s"
                         + (f" ({results['phase_cpu_seconds'][name]:.0f} s CPU)"
                            if name in results.get("phase_cpu_seconds", {}) else "")
                         for name, seconds in results.get("phase_seconds", {}).items()) + ")"],
            ["machine", f"{machine['cpu']}, {machine['cores']} cores, Linux {machine['kernel']}"],
            ["load average (1 min) at start, end",
             f"{machine.get('load_average_1min_at_start', '?')}, "
             f"{machine.get('load_average_1min', '?')} (other work on the machine widens "
             "the timing intervals)"],
            ["deterministic steps (replays, callgrind counts)",
             settings.get("deterministic_steps", "after the timed runs")
             + (" (`--no-overlap` runs them after, for timing that shares the machine with "
                "none of the report's own work)"
                if settings.get("deterministic_steps", "").startswith("beside") else "")],
            ["repetitions × scale × seed",
             f"{settings['repeat']} × {settings['scale']} × {settings['seed']}"
             + (f" (peers and settings: {settings['peer_repeat']} repetitions)"
                if settings.get("peer_repeat", settings["repeat"]) < settings["repeat"] else "")],
            ["allocators", ", ".join(
                a["name"] + (f" ({a['preload']}" if a["preload"] else "")
                + (f", RUNSEL_CONF={a['setting']}" if (a.get("setting") or "").startswith("purge:")
                   else "") + (")" if a["preload"] else "")
                for a in results["allocators"])]]
    return "Set-up", ["", ""], rows, ""


def answer_tables(results: dict) -> list:
    """The tables under the opening paragraph and picture, before everything else."""
    return [table for table in (corpus_report.answer_table(results),
                                *report_firefox_corpus.tables(results),
                                report_anchors.idealized_table(results),
                                report_anchors.cost_table(results),
                                report_check_price.table(results),
                                *report_headroom.tables(results),
                                corpus_report.published_corpus_table(results),
                                corpus_report.per_class_table(results),
                                corpus_report.purge_timing_table(results),
                                report_cache.table(results)) if table[2]]


def tables(results: dict) -> list:
    """Every table, in report order; the first leading() come before the pictures."""
    listed = [*answer_tables(results), verdict_table(results), published_table(results),
              question_table(results),
              summary_table(results), targets_table(results), choices_table(results),
              checks_table(results)]
    replayed = exact_replays_table(results)
    if replayed[2]:  # after the question, before the summary
        listed.insert(len(answer_tables(results)) + 3, replayed)
    if results.get("firefox"):
        listed += [firefox_recording_table(results), firefox_marks_table(results),
                   firefox_containers_table(results)]
    for workload, data in results["summary"].items():
        if data.get("kind", "live") != "live":
            continue
        listed.append(checkpoints_table(results, workload))
        for table in (runsel_stats_table(results, workload), bins_table(results, workload)):
            if table[2]:
                listed.append(table)
    listed.append(setup_table(results))
    return listed


def leading(results: dict) -> int:
    """How many tables come before the pictures: verdict, published, the question,
    summary, exact replays (when there are some), targets, choices, checks."""
    return len(answer_tables(results)) + (8 if exact_replays_table(results)[2] else 7)

