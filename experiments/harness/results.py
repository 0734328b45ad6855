"""results.json: what the harness writes, and what the report is rendered from.

The schema's version, writing and reading; nothing else. The harness computes every
figure (metrics.py, verdict.py, targets.py, and derived.py for the figures the report's
tables quote), writes them here, then renders the report from what was written; the
renderer (report.py) only lays them out, so `tools/runsel render results.json` re-renders
report.md and report.html byte for byte as the run wrote them. Layout:
experiments/README.md, "results.json".
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

from . import derived

SCHEMA_VERSION = 3


# --- writing and reading ------------------------------------------------------------------


def write(results: dict, out: Path) -> Path:
    """Writes results.json into `out`; returns its path."""
    out.mkdir(parents=True, exist_ok=True)
    path = out / "results.json"
    path.write_text(json.dumps(results, indent=1) + "\n")
    return path


def written(path: Path) -> dict:
    """A results.json just written, read back as JSON (what the report is rendered from,
    so that a later `tools/runsel render` gives the same bytes)."""
    return json.loads(path.read_text())


def upgrade(results: dict) -> dict:
    """A schema 2 results.json (verdict sentences stored as text, no derived figures)
    brought to this schema from its own summary: the verdict and the derived figures are
    recomputed by the modules that compute them for a run (verdict.py, derived.py)."""
    from . import verdict  # the statistics modules (scipy), needed only here
    derived.derive(results["summary"])
    results["verdict"] = verdict.build(results["summary"])
    results["schema_version"] = SCHEMA_VERSION
    return results


def load(path: Path) -> dict:
    """results.json as the renderer needs it; a clear one-line exit when it cannot be."""
    try:
        results = json.loads(path.read_text())
    except OSError as error:
        sys.exit(f"render: cannot read {path}: {error.strerror}")
    except ValueError as error:
        sys.exit(f"render: {path} is not JSON: {error}")
    version = results.get("schema_version") if isinstance(results, dict) else None
    if version == 2:
        print(f"render: {path} is schema 2: verdict and derived figures recomputed from its "
              "summary", file=sys.stderr)
        return upgrade(results)
    if version != SCHEMA_VERSION:
        sys.exit(f"render: {path} has schema_version {version!r}; this renderer reads "
                 f"{SCHEMA_VERSION} (and 2)")
    return results
