"""The report's table of what the link checks cost: per container, the allocator's own
instructions per call hardened (results.json's "cost_hardened", every link verified, as
the drop-in libraries run) and as shipped ("cost", no link verification: the verdict's
figure), and their difference, over the corpus traces whose replays were counted both
ways (callgrind windows, cost.py). Data in, (title, headers, rows, note) out, like
report.py's other tables; read from the stored cost blocks only.
"""

from __future__ import annotations

from . import judgement
from .anchors import GROUP_LABELS, interval
from .report_anchors import interval_cell, mean_label

FIGURE = "instructions_per_call"
HARDENED, SHIPPED = "cost_hardened", "cost"


def per_trace(entries: dict[str, dict]) -> dict[str, dict[str, dict[str, float]]]:
    """{container: {trace: {"hardened", "shipped", "price"}}} over the traces whose replay
    of that container was counted both ways."""
    found: dict[str, dict[str, dict[str, float]]] = {}
    for trace, entry in entries.items():
        if "error" in entry:
            continue
        for container, pair in entry.get("allocators", {}).items():
            hardened = judgement.cost_value(pair.get(HARDENED), FIGURE)
            shipped = judgement.cost_value(pair.get(SHIPPED), FIGURE)
            if hardened is None or shipped is None:
                continue
            found.setdefault(container, {})[trace] = {
                "hardened": hardened, "shipped": shipped, "price": hardened - shipped}
    return found


def cell(traces: dict[str, dict[str, float]], key: str, signed: bool) -> str:
    judged = interval({trace: figures[key] for trace, figures in traces.items()})
    return interval_cell(judged, "", 2, signed=signed)


def table(results: dict):
    """(title, headers, rows, note): one row per (group of traces, container)."""
    title = "The price of the link checks, per allocator call"
    corpus = results.get("corpus") or {}
    headers = ["traces", "container", "counted on", "hardened", "as shipped",
               "the checks' price"]
    rows = []
    for group, data in (corpus.get("groups") or {}).items():
        for container, traces in per_trace(data.get("entries") or {}).items():
            rows.append([GROUP_LABELS.get(group, group), container,
                         mean_label({"traces": traces})[len("mean over "):],
                         cell(traces, "hardened", False), cell(traces, "shipped", False),
                         cell(traces, "price", True)])
    if not rows:
        return title, headers, [], ""
    cost = corpus.get("cost") or {}
    hardened = cost.get("hardened_traces")
    fewer = (f" The hardened builds are counted on the first {hardened} of the "
             f"{cost.get('traces')} traces whose cost is counted (to keep the report's "
             "time), so this table covers those." if hardened is not None
             and cost.get("traces") is not None and hardened < cost["traces"] else "")
    note = ("The allocator's own instructions per allocator call, callgrind over "
            f"{cost.get('windows')} windows of {cost.get('window_records')} records spread "
            "over each trace, on each container's profiling twin built hardened (every "
            "link a container follows verified, as the drop-in libraries run) and as "
            "shipped (no link verification; every check all containers share kept: the "
            "run header's keyed check, the bitmap's double-free check, the page map); the "
            "checks' price is hardened minus as shipped. The verdict, the corpus table and "
            "the anchors use the as-shipped figures. Each trace's figure is exact for it; "
            "with several traces, the mean and its 95 % interval over them (Student's t), "
            f"groups never pooled.{fewer}")
    return title, headers, rows, note
