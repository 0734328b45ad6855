"""The webkit workload's pinned corpus (corpus.json): real pages from Debian-packaged HTML,
each package's version and each file's sha256 pinned, checked before a run and rewritten
by `driver.py --pin`. Standard library only.
"""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
from pathlib import Path

CORPUS = Path(__file__).resolve().parent / "corpus.json"


class CorpusError(Exception):
    """The corpus cannot be used: it does not match this machine, the pages asked for are
    not in it, or it cannot be pinned (a package is not installed)."""


def sha256(path: str) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as file:
        for block in iter(lambda: file.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def installed_version(package: str) -> str | None:
    completed = subprocess.run(["dpkg-query", "-W", "-f=${Version}", package],
                               capture_output=True, text=True)
    return completed.stdout.strip() if completed.returncode == 0 and completed.stdout else None


def pinned_files(page: dict) -> list[str]:
    return [page["path"], *page.get("files", [])]


def check_corpus(corpus: dict) -> list[str]:
    """Every difference between the manifest and this machine, as sentences."""
    problems = []
    for package, version in corpus["packages"].items():
        installed = installed_version(package)
        if installed != version:
            problems.append(f"package {package}: the corpus pins version {version}, "
                            f"installed: {installed or 'none'}")
    for page in corpus["pages"]:
        for path, pinned in zip(pinned_files(page), page.get("sha256", [])):
            if not os.path.isfile(path):
                problems.append(f"{path} (from {page['package']}): missing")
            elif sha256(path) != pinned:
                problems.append(f"{path} (from {page['package']}): sha256 {sha256(path)}, "
                                f"the corpus pins {pinned}")
        if page["package"] not in corpus["packages"] or \
                len(page.get("sha256", [])) != len(pinned_files(page)):
            problems.append(f"{page['path']}: not pinned (run driver.py --pin)")
    return problems


def pin_corpus(path: Path) -> None:
    """Rewrites the manifest's versions and sha256 sums from what is installed."""
    corpus = json.loads(path.read_text())
    corpus["packages"] = {}
    for page in corpus["pages"]:
        version = installed_version(page["package"])
        if version is None:
            raise CorpusError(f"--pin: package {page['package']} is not installed")
        corpus["packages"][page["package"]] = version
        page["sha256"] = [sha256(file) for file in pinned_files(page)]
    path.write_text(json.dumps(corpus, indent=1, ensure_ascii=False) + "\n")


def page_url(page: dict) -> str:
    return "file://" + page["path"] + page.get("query", "")


def corpus_pages(path: Path, first: int, pages: int | None) -> list[dict]:
    """Pages first..first+pages-1 (1-based; all from `first` when `pages` is None) of the
    corpus at `path`, once it matches this machine."""
    corpus = json.loads(path.read_text())
    problems = check_corpus(corpus)
    if problems:
        raise CorpusError(f"the corpus does not match {path}:\n  " + "\n  ".join(problems)
                          + "\n(pinned pages keep runs comparable; after a deliberate package "
                          "update, run driver.py --pin)")
    count = len(corpus["pages"])
    last = first - 1 + (pages or count - first + 1)
    if first < 1 or last > count or last < first:
        raise CorpusError(f"--first {first} --pages {pages}: pages {first}-{last} are not "
                          f"in the corpus (it has pages 1-{count})")
    return corpus["pages"][first - 1:last]
