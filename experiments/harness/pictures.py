"""The report's pictures: one function per picture, results in, PNG out.

Every picture function takes the results dict (results.json) and a path (chunk_occupancy
also a workload name), draws with matplotlib (PNG, no display) and returns the path, or
None when the data for the picture is absent (for example no lifo variant for the
occupancy map).
"""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
from matplotlib import colormaps
from matplotlib.figure import Figure  # drawn without pyplot: no display, no global state

from .allocators import FIREFOX_MATCHING, REFERENCE
from .firefox_names import GROUPS, REFERENCE_NAME
from .report_cells import MIB

LONG_SESSION_PAGES = 20  # a Firefox session this long gets its own picture

# Page codes of runsel_chunk_maps (memory/include/runsel.h).
PAGE_RESERVED, PAGE_FREE, PAGE_DIRTY, PAGE_LARGE, PAGE_SMALL = 0, 1, 2, 3, 16


def allocator_colors(results: dict) -> dict[str, tuple]:
    """One stable colour per allocator from tab10, in results["allocators"] order;
    the palette repeats after ten allocators."""
    palette = colormaps["tab10"].colors
    return {entry["name"]: palette[index % len(palette)]
            for index, entry in enumerate(results["allocators"])}


def live_workloads(results: dict) -> dict:
    """The workloads with timed runs (replays have exact figures instead)."""
    return {name: data for name, data in results["summary"].items()
            if data.get("kind", "live") == "live"}


def workload_grid(count: int, width: float = 5.0, height: float = 3.6):
    columns = min(3, count)
    rows = math.ceil(count / columns)
    figure = Figure(figsize=(width * columns, height * rows))
    axes = figure.subplots(rows, columns, squeeze=False)
    for extra in axes.flat[count:]:
        extra.set_visible(False)
    return figure, list(axes.flat)


def save(figure, path: Path) -> Path:
    figure.tight_layout()
    figure.savefig(path, dpi=90)
    return path


def time_versus_memory(results: dict, path: Path) -> Path:
    """Per workload: median time (x) against peak resident memory (y), one point per
    allocator; lower left is better on both."""
    colors = allocator_colors(results)
    figure, axes = workload_grid(len(live_workloads(results)))
    for axis, (workload, data) in zip(axes, live_workloads(results).items()):
        for name, pair in data["allocators"].items():
            x, y = pair["median_seconds"] * 1e3, pair["peak_resident"] / MIB
            axis.scatter([x], [y], color=colors[name], s=40, zorder=3)
            axis.annotate(name, (x, y), textcoords="offset points", xytext=(4, 3), fontsize=7)
        axis.set_title(workload)
        axis.set_xlabel("median measured time (ms)")
        axis.set_ylabel("peak resident (MiB)")
        axis.grid(alpha=0.3)
    return save(figure, path)


def resident_over_checkpoints(results: dict, path: Path) -> Path:
    """Per workload: resident memory at every checkpoint, one line per allocator, and
    the live requested bytes (black, dashed) that a perfect allocator would need."""
    colors = allocator_colors(results)
    figure, axes = workload_grid(len(live_workloads(results)), width=6.0, height=4.2)
    for axis, (workload, data) in zip(axes, live_workloads(results).items()):
        labels = None
        for name, pair in data["allocators"].items():
            labels = [point["name"] for point in pair["checkpoints"]]
            axis.plot(range(len(labels)), [p["resident"] / MIB for p in pair["checkpoints"]],
                      color=colors[name], marker=".", linewidth=1.2, label=name)
        reference = next(iter(data["allocators"].values()))
        if all(p["live_requested"] is not None for p in reference["checkpoints"]):  # not webkit
            axis.plot(range(len(labels)), [p["live_requested"] / MIB
                                           for p in reference["checkpoints"]],
                      color="black", linestyle="--", linewidth=1, label="live requested")
        axis.set_xticks(range(len(labels)))
        axis.set_xticklabels(labels, rotation=60, ha="right", fontsize=6)
        axis.set_title(workload)
        axis.set_ylabel("resident (MiB)")
        axis.grid(alpha=0.3)
    axes[0].legend(fontsize=6, ncol=2)
    return save(figure, path)


def timing_distributions(results: dict, path: Path) -> Path:
    """Per workload: every repetition's measured time per allocator (dots) and the
    median (bar), to show how much of a difference is noise."""
    colors = allocator_colors(results)
    figure, axes = workload_grid(len(live_workloads(results)))
    for axis, (workload, data) in zip(axes, live_workloads(results).items()):
        names = list(data["allocators"])
        for row, name in enumerate(names):
            times = np.array(data["allocators"][name]["times"]) * 1e3
            jitter = np.linspace(-0.2, 0.2, len(times)) if len(times) > 1 else np.zeros(1)
            axis.scatter(times, row + jitter, color=colors[name], s=10, alpha=0.7)
            median = data["allocators"][name]["median_seconds"] * 1e3
            axis.plot([median] * 2, [row - 0.35, row + 0.35], color="black")
        axis.set_yticks(range(len(names)))
        axis.set_yticklabels(names, fontsize=7)
        axis.invert_yaxis()
        axis.set_title(workload)
        axis.set_xlabel("measured time (ms)")
        axis.grid(alpha=0.3, axis="x")
    return save(figure, path)


def bin_utilization(results: dict, path: Path) -> Path | None:
    """Per workload, at its key checkpoint: for each runsel variant and small size class,
    the share of regions in use among the bin's runs (100 % = every run full)."""
    colors = allocator_colors(results)
    figure, axes = workload_grid(len(live_workloads(results)))
    drawn = False
    for axis, (workload, data) in zip(axes, live_workloads(results).items()):
        checkpoint = data["key_checkpoint"]
        for name, pair in data["allocators"].items():
            bins = pair["runsel"].get(checkpoint, {}).get("bins")
            if not bins:
                continue
            used = [(b["size"], 100 * b["regions_in_use"] / (b["runs"] * b["regions_per_run"]))
                    for b in bins if b["runs"]]
            axis.plot([size for size, _ in used], [share for _, share in used], marker=".",
                      color=colors[name], linewidth=1, label=name)
            drawn = True
        axis.set_xscale("log", base=2)
        axis.set_ylim(0, 105)
        axis.set_title(f"{workload} at {checkpoint}", fontsize=9)
        axis.set_xlabel("size class (bytes)")
        axis.set_ylabel("regions in use (%)")
        axis.grid(alpha=0.3)
    if not drawn:
        return None
    axes[0].legend(fontsize=6)
    return save(figure, path)


def page_colors(pages: str) -> np.ndarray:
    """One chunk's 256 page codes (hex pairs) as RGB rows: grey header or guard page,
    white free, orange dirty, blue large, small runs green, darker the fuller."""
    codes = np.frombuffer(bytes.fromhex(pages), dtype=np.uint8)
    rgb = np.ones((len(codes), 3))
    rgb[codes == PAGE_RESERVED] = (0.55, 0.55, 0.55)
    rgb[codes == PAGE_DIRTY] = (1.0, 0.65, 0.2)
    rgb[codes == PAGE_LARGE] = (0.3, 0.45, 0.85)
    small = codes >= PAGE_SMALL
    fullness = np.clip((codes[small].astype(float) - PAGE_SMALL) / 100, 0, 1)
    rgb[small] = np.stack([0.85 - 0.75 * fullness, 0.95 - 0.45 * fullness,
                           0.85 - 0.75 * fullness], axis=1)
    return rgb


def occupancy_checkpoint(left: dict, right: dict) -> str | None:
    """Among the checkpoints both have maps for, the one where their resident memory
    (median whole-process resident, not heap_resident) differs most (where the run choice
    showed); None when they share none."""
    shared = [name for name in left["chunk_maps"] if name in right["chunk_maps"]]
    if not shared:
        return None

    def gap(name):
        resident = {p["name"]: p["resident"] for p in left["checkpoints"]}
        other = {p["name"]: p["resident"] for p in right["checkpoints"]}
        return abs(resident[name] - other[name])
    return max(shared, key=gap)


def chunk_occupancy(results: dict, workload: str, path: Path,
                    variants: tuple[str, str] = (REFERENCE, FIREFOX_MATCHING)) -> Path | None:
    """rb_first beside lifo: every arena chunk a row, every page a cell, at the
    checkpoint where the two differ most."""
    pairs = results["summary"][workload]["allocators"]
    if not all(name in pairs and pairs[name]["chunk_maps"] for name in variants):
        return None
    checkpoint = occupancy_checkpoint(pairs[variants[0]], pairs[variants[1]])
    if checkpoint is None:
        return None
    maps = [pairs[name]["chunk_maps"][checkpoint]["chunks"] for name in variants]
    rows = max(len(chunks) for chunks in maps)
    figure = Figure(figsize=(12, 1.2 + 0.12 * max(rows, 8)))
    axes = figure.subplots(1, 2, squeeze=False)
    for axis, name, chunks in zip(axes[0], variants, maps):
        image = np.ones((rows, 256, 3))
        for row, chunk in enumerate(sorted(chunks, key=lambda c: (c["arena"], c["address"]))):
            image[row] = page_colors(chunk["pages"])
        axis.imshow(image, aspect="auto", interpolation="nearest")
        point = next(p for p in pairs[name]["checkpoints"] if p["name"] == checkpoint)
        axis.set_title(f"{name}: {len(chunks)} chunks, resident "
                       f"{point['resident'] / MIB:.1f} MiB", fontsize=9)
        axis.set_xlabel("page in chunk")
        axis.set_ylabel("chunk")
    figure.suptitle(f"{workload} at {checkpoint}: grey header, white free, orange dirty, "
                    "blue large, green small run (darker = fuller)", fontsize=9)
    return save(figure, path)


def corpus_answer(results: dict, path: Path) -> Path | None:
    """The answer at a glance: containers (rows) against the answer table's figures
    (corpus_report.ANSWER_COLUMNS) and resident when closed, judged over the answer's
    group of the trace corpus (judgement.answer_group; columns); a cell is green where the
    container is resolved lower than the reference, red where higher, grey where not
    resolvable, white otherwise
    (identical on every trace, one trace only, not measured); the mean difference is
    written in it ("=" identical, "-" none). None when there is no judgement."""
    from . import corpus_report
    judged = corpus_report.group_judgement(results)
    if not judged:
        return None
    columns = corpus_report.ANSWER_COLUMNS + corpus_report.PURGE_COLUMNS[:1]
    containers = list(judged["containers"])
    shades = {"lower": (0.55, 0.8, 0.55), "higher": (0.93, 0.55, 0.5),
              "not resolvable": (0.82, 0.82, 0.82), "identical": (1.0, 1.0, 1.0)}
    figure = Figure(figsize=(1.5 * len(columns) + 1.8, 0.42 * len(containers) + 1.6))
    axis = figure.subplots()
    image = np.ones((len(containers), len(columns), 3))
    for row, container in enumerate(containers):
        for column, where in enumerate(columns):
            judged_cell = corpus_report.pick(judged, container, where)
            image[row, column] = shades.get(judged_cell["outcome"], (1.0, 1.0, 1.0))
            text = ("=" if judged_cell["outcome"] == "identical" else
                    "-" if judged_cell["percent"] is None else f"{judged_cell['percent']:+.2f}")
            axis.text(column, row, text, ha="center", va="center", fontsize=8)
    axis.imshow(image, aspect="auto")
    axis.set_yticks(range(len(containers)), containers, fontsize=8)
    axis.set_xticks(range(len(columns)), [
        corpus_report.FIGURE_WORDS[f].replace("allocator ", "").replace(" after a forced purge",
                                                                        "\npurged")
        + ("" if m == "cost" else f"\n{m}") for m, f in columns], fontsize=7)
    axis.set_title(f"% against {judged['reference']} over {len(judged['traces'])} traces: "
                   "green lower, red higher, grey not resolvable", fontsize=9)
    return save(figure, path)


def long_sessions(results: dict) -> list[str]:
    """The Firefox corpus's sessions of at least LONG_SESSION_PAGES pages."""
    return [session["name"] for session in (results.get("firefox_corpus") or {}).get(
        "sessions", []) if len(session.get("pages") or []) >= LONG_SESSION_PAGES]


def firefox_session(results: dict, name: str, path: Path) -> Path | None:
    """One Firefox session's content log under the installed Firefox's run sizes: every
    container's bin_unused at every mark (rb_first and lifo drawn bold), the packing
    bound below which no policy can go, and Firefox's own allocator replaying the log."""
    session = next(s for s in results["firefox_corpus"]["sessions"] if s["name"] == name)
    role, suffix = GROUPS["firefox"]
    process = next((p for p in session["processes"] if p["role"] == role), None)
    if process is None or not process["marks"]:
        return None
    marks = process["marks"]
    rows = [container for container in results["firefox_corpus"]["containers"]
            if container + suffix in marks[0]["figures"]]
    figure = Figure(figsize=(11, 4.8))
    axis = figure.subplots()
    x = range(len(marks))
    palette = colormaps["tab20"].colors
    for index, container in enumerate(rows):
        anchor = container in (REFERENCE, FIREFOX_MATCHING)
        axis.plot(x, [m["figures"][container + suffix]["bin_unused"] / MIB for m in marks],
                  color=palette[index % len(palette)], linewidth=2.4 if anchor else 0.9,
                  alpha=1.0 if anchor else 0.7, label=container, zorder=3 if anchor else 2)
    first = rows[0] + suffix
    if all(m["figures"][first].get("headroom_bound") is not None for m in marks):
        axis.plot(x, [m["figures"][first]["headroom_bound"] / MIB for m in marks],
                  color="black", linestyle="--", linewidth=1, label="packing bound")
    if all(REFERENCE_NAME in m["figures"] for m in marks):
        axis.plot(x, [m["figures"][REFERENCE_NAME]["bin_unused"] / MIB for m in marks],
                  color="black", linestyle=":", linewidth=1.4, label="Firefox's own allocator")
    axis.set_xticks(list(x))
    axis.set_xticklabels([m["label"] for m in marks], rotation=70, ha="right", fontsize=6)
    axis.set_ylabel("bin_unused (MiB)")
    axis.set_title(f"{name}: content log, the installed Firefox's run sizes, every mark")
    axis.grid(alpha=0.3)
    axis.legend(fontsize=6, ncol=3)
    return save(figure, path)
