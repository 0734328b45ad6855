"""The report's headroom tables (results.json's "headroom", headroom.py): per corpus group,
each container's bin_unused above the packing bound no policy that keeps objects in place
can beat, in KiB and in percent of lifo's. Data in, (title, headers, rows, note) out,
like report.py's other tables; nothing computed here but the layout."""

from __future__ import annotations

MOMENT_HEADERS = {"loaded": "loaded", "closed": "closed", "peak": "peak",
                  "session": "mean over marks"}


def kib_cell(value: float | None) -> str:
    return "-" if value is None else f"{value / 1024:,.1f} KiB"


def share_cell(value: float | None) -> str:
    return "-" if value is None else f"{value:.1f} %"


def headroom_table(group: dict, scale: str):
    """One group: a row for the bound, then one per container, two columns per moment."""
    moments = [m for m in MOMENT_HEADERS if m in group["moments"]]
    count = max(group["moments"][m]["traces"] for m in moments)
    title = (f"Headroom over the packing bound: {group['label']}"
             + (f" ({count} traces)" if count > 1 else ""))
    headers = ["container"]
    for moment in moments:
        headers += [f"{MOMENT_HEADERS[moment]}: above the bound", f"% of {scale}'s"]
    rows = [["packing bound", *[cell for m in moments
                                for cell in (kib_cell(group["moments"][m]["bound"]), "")]]]
    for container in group["containers"]:
        rows.append([container, *[cell for m in moments for cell in (
            kib_cell(group["moments"][m]["excess"][container]),
            share_cell(group["moments"][m]["percent_of_scale"][container]))]])
    return title, headers, rows, table_note(group, scale, moments, count)


def table_note(group: dict, scale: str, moments: list[str], count: int) -> str:
    closing = group["moments"].get("closed") or group["moments"][moments[-1]]
    kept = closing["kept_empty"].get(scale)
    excess = closing["excess"].get(scale)
    below = group["below"]
    session = group["moments"].get("session")
    return " ".join(part for part in (
        "The packing bound is the bin_unused left if every size class's live regions were "
        "packed into the fewest runs, (⌈live ÷ regions per run⌉ × regions per run − live) × "
        "size summed over the classes: no run-selection policy that keeps objects in place "
        "can leave less. Each container's bin_unused above it, in KiB, and in percent of "
        f"{scale}'s (today's mozjemalloc): 100 % is {scale}'s waste, 0 % the bound; a "
        "container at 60 % recovers 40 % of what any policy could.",
        f"Mean over {count} traces, percent from the sums." if count > 1 else "",
        (f"Mean over marks: the mean over every mark of each trace's session "
         f"({session['checkpoints']} marks in all)." if session else ""),
        ("A bin's kept empty run (outside the container, at most one) counts in bin_unused "
         f"and so above the bound: for {scale} after the tabs close "
         f"{kib_cell(kept)} of its {kib_cell(excess)}."
         if kept is not None and excess is not None and "closed" in group["moments"] else ""),
        (f"Every container at or above the bound at all {group['checked']:,d} checkpoints."
         if not below else f"BELOW THE BOUND at {len(below)} checkpoints (a wrong figure): "
         + ", ".join(f"{b['container']} at {b['trace']} {b['checkpoint']}" for b in below[:4])
         + "."),
    ) if part)


def tables(results: dict) -> list:
    """One table per group that has the bound, in results order."""
    found = results.get("headroom") or {}
    return [headroom_table(group, found["scale"]) for group in found.get("groups") or []]
