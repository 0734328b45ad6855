"""Records stock Firefox (the firefox-esr package) over the webkit workload's pinned
corpus: headless, a fresh profile, no network, driven over Marionette on loopback,
with the rtld-audit recorder (build/tools/firefox/librunsel-firefox-audit.so) writing
one logalloc log per process and the real allocator's figures at each mark. The same
pages in the same order as the webkit workload (file:// URLs), at most 4 tabs open,
marks tab_N_loaded after each page and tabs_closed after all page tabs close.

Then it checks its own logs (the parent's and the busiest content process's): lines,
coverage against the allocator's own num_operations (up to the first mark where it falls:
an arena disposed of takes its count with it), frees of blocks allocated before
recording could see them (dropped), live-address reuses (must be 0) and every tab mark;
a recording that fails a check is refused. Recordings are cached by Firefox version,
corpus and recorder.

    python3 -m harness.firefox_record [--pages N] [--out DIR] [--force]
        [--build-dir DIR] [--page-timeout SECONDS]   (in experiments/; default 4 pages,
        --out results/firefox, one folder per Firefox version and corpus)
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from webkit import webkit_corpus  # the pinned pages this workload shares
from webkit.trace_marks import MarksFull, TraceMarks

from .allocators import FIREFOX_RECORDER_TARGET
from .firefox_logs import RecordFailed, keep_parent_and_busiest_content, problems_of, summarize
from .interpreter import ROOT
from .marionette import Marionette, MarionetteError

FIREFOX = "firefox-esr"
RECORDER = Path("tools") / "firefox" / f"lib{FIREFOX_RECORDER_TARGET}.so"
MAX_TABS = 4
SETTLE_SECONDS = 3.0
RUN_FORMAT = 2  # run.json's layout: a cached recording of another layout is recorded again
SCROLL = ("const done = arguments[arguments.length - 1];"
          "(async () => {"
          "const height = document.documentElement.scrollHeight;"
          "const step = Math.max(innerHeight, height / 24);"
          "const frame = () => new Promise(go => {"
          " requestAnimationFrame(go); setTimeout(go, 50); });"
          "for (let y = 0; y <= height; y += step) { scrollTo(0, y); await frame(); }"
          "scrollTo(0, 0); await frame(); return height; })().then(done, e => done(-1));")
# A fresh profile that never reaches the network and shows nothing first.
PREFERENCES = {
    "app.update.auto": False, "app.update.enabled": False,
    "browser.shell.checkDefaultBrowser": False,
    "browser.startup.homepage_override.mstone": "ignore", "browser.startup.page": 0,
    "browser.newtabpage.enabled": False, "browser.aboutwelcome.enabled": False,
    "browser.safebrowsing.malware.enabled": False, "browser.safebrowsing.phishing.enabled": False,
    "browser.safebrowsing.downloads.enabled": False,
    "browser.safebrowsing.update.enabled": False,
    "browser.search.update": False, "browser.discovery.enabled": False,
    "browser.ping-centre.telemetry": False, "datareporting.policy.dataSubmissionEnabled": False,
    "datareporting.healthreport.uploadEnabled": False, "toolkit.telemetry.enabled": False,
    "toolkit.telemetry.unified": False, "extensions.update.enabled": False,
    "extensions.getAddons.cache.enabled": False, "app.normandy.enabled": False,
    "network.captive-portal-service.enabled": False,
    "network.connectivity-service.enabled": False, "network.dns.disablePrefetch": True,
    "network.prefetch-next": False, "network.predictor.enabled": False,
    "network.proxy.type": 1, "network.proxy.http": "127.0.0.1", "network.proxy.http_port": 9,
    "network.proxy.ssl": "127.0.0.1", "network.proxy.ssl_port": 9,
    "network.proxy.allow_hijacking_localhost": False,
    "services.settings.server": "http://127.0.0.1:9/",
    "security.OCSP.enabled": 0, "browser.region.network.url": "",
    "dom.ipc.processPrelaunch.enabled": False,  # no spare process started at a random time
    # A page that calls window.print() (the Rust book's print.html, page 25, does 100 ms
    # after its load) would open a modal print dialog that no one closes: the content
    # process waits in it and Marionette times out. With printing off the call returns.
    "print.enabled": False,
    "toolkit.startup.max_resumed_crashes": -1, "browser.sessionstore.resume_from_crash": False,
    "marionette.port": 0,  # replaced by the port chosen
}
# Sandboxed processes may not open files; the recorder opens each process's log when
# that process first allocates, which can come after its sandbox starts.
NO_SANDBOX = {"MOZ_DISABLE_CONTENT_SANDBOX": "1", "MOZ_DISABLE_RDD_SANDBOX": "1",
              "MOZ_DISABLE_SOCKET_PROCESS_SANDBOX": "1", "MOZ_DISABLE_GMP_SANDBOX": "1",
              "MOZ_DISABLE_UTILITY_SANDBOX": "1", "MOZ_DISABLE_VR_SANDBOX": "1"}


# --- what is recorded, and the cache key -------------------------------------------------


def firefox_version() -> str:
    """The installed firefox-esr package's version, or a one-line error."""
    if shutil.which(FIREFOX) is None:
        raise RecordFailed("firefox-esr is missing (Debian package firefox-esr: "
                           "apt-get install firefox-esr; tools/runsel installs it)")
    version = webkit_corpus.installed_version(FIREFOX)
    if version is None:
        raise RecordFailed(f"{FIREFOX} is on the PATH but not from the Debian package "
                           "firefox-esr (apt-get install firefox-esr)")
    return version


def corpus_key(pages: list[dict]) -> str:
    """The pages recorded, by URL and pinned sums."""
    text = json.dumps([[webkit_corpus.page_url(page), page.get("sha256", [])] for page in pages])
    return hashlib.sha256(text.encode()).hexdigest()[:12]


def recorder_key(recorder: Path) -> str:
    return hashlib.sha256(recorder.read_bytes()).hexdigest()[:12]


# --- the browser ---------------------------------------------------------------------------


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def write_profile(profile: Path, port: int) -> None:
    profile.mkdir(parents=True, exist_ok=True)
    lines = []
    for name, value in {**PREFERENCES, "marionette.port": port}.items():
        lines.append(f"user_pref({json.dumps(name)}, {json.dumps(value)});")
    (profile / "user.js").write_text("\n".join(lines) + "\n")


class Session:
    """One headless firefox-esr under the recorder, driven page by page."""

    def __init__(self, recorder: Path, logs: Path, marks_path: Path, pages: list[dict],
                 page_timeout: float, scratch: Path):
        self.pages, self.page_timeout = pages, page_timeout
        self.marks = TraceMarks(str(marks_path))
        port = free_port()
        profile = scratch / "profile"
        write_profile(profile, port)
        self.home = scratch / "home.html"  # a file:// tab that keeps the file process alive
        self.home.write_text("<!doctype html><title>home</title><p>runsel firefox workload\n")
        environment = {key: value for key, value in os.environ.items()
                       if key not in ("LD_PRELOAD", "MOZ_HEADLESS", "DISPLAY", "WAYLAND_DISPLAY")}
        environment.update(NO_SANDBOX, LD_AUDIT=str(recorder), RUNSEL_FIREFOX_LOG_DIR=str(logs),
                           RUNSEL_FIREFOX_MARKS=str(marks_path), MOZ_HEADLESS="1",
                           MOZ_CRASHREPORTER_DISABLE="1", MOZ_DISABLE_AUTO_SAFE_MODE="1",
                           HOME=str(scratch))
        command = [FIREFOX, "--headless", "--marionette", "--no-remote", "--profile",
                   str(profile), "about:blank"]
        print("+ LD_AUDIT=" + str(recorder) + " " + " ".join(command), file=sys.stderr, flush=True)
        self.process = subprocess.Popen(command, env=environment, stdout=subprocess.DEVNULL,
                                        stderr=open(scratch / "firefox.stderr", "wb"),
                                        start_new_session=True)
        self.client = Marionette(port, timeout=max(120.0, page_timeout))
        self.loaded: list[dict] = []
        self.home_handle = ""  # the first window's, which stays open

    def alive(self) -> bool:
        return self.process.poll() is None

    def run(self) -> None:
        self.client.connect(time.monotonic() + 120, self.alive)
        self.client.command("WebDriver:NewSession", {"capabilities": {"alwaysMatch": {
            "pageLoadStrategy": "normal", "acceptInsecureCerts": False}}})
        self.client.command("WebDriver:SetTimeouts", {
            "script": int(self.page_timeout * 1000), "pageLoad": int(self.page_timeout * 1000)})
        self.home_handle = self.client.command("WebDriver:GetWindowHandle")
        self.client.command("WebDriver:Navigate", {"url": self.home.as_uri()})
        tabs: list[str] = []
        for index, page in enumerate(self.pages):
            while len(tabs) >= MAX_TABS:  # the oldest tab makes room
                self.close(tabs.pop(0))
            tabs.append(self.load(index, page))
        for handle in tabs:
            self.close(handle)
        time.sleep(SETTLE_SECONDS)
        self.mark("tabs_closed")

    def load(self, index: int, page: dict) -> str:
        begun = time.monotonic()
        handle = self.client.command("WebDriver:NewWindow", {"type": "tab"})["handle"]
        self.client.command("WebDriver:SwitchToWindow", {"handle": handle})
        url = webkit_corpus.page_url(page)
        self.client.command("WebDriver:Navigate", {"url": url})
        ready = page.get("ready", "true")
        script = (f"return [document.title, Boolean({ready}), "
                  "document.getElementsByTagName('*').length];")
        deadline = begun + self.page_timeout
        while True:
            title, is_ready, elements = self.client.command(
                "WebDriver:ExecuteScript", {"script": script, "args": []})
            if is_ready and page.get("title", "") in title:
                break
            if time.monotonic() > deadline:
                raise RecordFailed(f"page {index + 1} did not load: {url}: title {title!r}, "
                                   f"ready: {is_ready} after {self.page_timeout:.0f} s")
            time.sleep(0.1)
        height = self.client.command("WebDriver:ExecuteAsyncScript", {"script": SCROLL, "args": []})
        self.loaded.append({"url": url, "title": title, "elements": elements, "height": height,
                            "seconds": round(time.monotonic() - begun, 3)})
        self.mark(f"tab_{index + 1}_loaded")
        print(f"firefox record: page {index + 1}/{len(self.pages)} in "
              f"{self.loaded[-1]['seconds']:.1f} s: {url}", file=sys.stderr, flush=True)
        return handle

    def mark(self, label: str) -> None:
        """Publishes the label; a script in the current tab makes its content process
        allocate, so it writes the mark now, not at its next call of its own."""
        try:
            self.marks.publish(label)
        except MarksFull as failure:
            raise RecordFailed(str(failure)) from None
        self.client.command("WebDriver:ExecuteScript",
                            {"script": "return [document.title, new Array(64).fill(0).length];",
                             "args": []})

    def close(self, handle: str) -> None:
        """Closes a tab, then goes back to the home tab: the closed tab's browsing context
        is gone, and Marionette refuses every command there (a new tab included)."""
        self.client.command("WebDriver:SwitchToWindow", {"handle": handle})
        self.client.command("WebDriver:CloseWindow")
        self.client.command("WebDriver:SwitchToWindow", {"handle": self.home_handle})

    def quit(self) -> None:
        try:
            if self.alive() and self.client.socket is not None:
                self.client.command("Marionette:Quit", {"flags": ["eAttemptQuit"]}, timeout=60)
        except (MarionetteError, OSError):
            pass
        finally:
            self.client.close()
        try:
            self.process.wait(timeout=60)
        except subprocess.TimeoutExpired:
            os.killpg(self.process.pid, signal.SIGKILL)
            self.process.wait()


def record(build_dir: Path, out: Path, pages: int | None, page_timeout: float,
           force: bool = False) -> dict:
    """Records (or reuses) the session; returns its run.json document."""
    version = firefox_version()
    try:
        chosen = webkit_corpus.corpus_pages(webkit_corpus.CORPUS, 1, pages)
    except webkit_corpus.CorpusError as failure:
        raise RecordFailed(str(failure)) from None
    key = f"{version}-{corpus_key(chosen)}-{len(chosen)}p"
    for other in out.glob("*-*p") if out.exists() else []:  # another Firefox's: never mixed
        if other.is_dir() and not other.name.startswith(f"{version}-"):
            shutil.rmtree(other)
    return record_pages(build_dir, out / key, chosen, page_timeout, force)


def record_pages(build_dir: Path, session_dir: Path, chosen: list[dict], page_timeout: float,
                 force: bool = False) -> dict:
    """Records (or reuses, when its run.json passed with the same Firefox and recorder)
    one session over the pages `chosen`, in that order, into session_dir; returns its
    run.json document. Raises RecordFailed with the reason."""
    version = firefox_version()
    recorder = (build_dir / RECORDER).resolve()
    if not recorder.exists():
        raise RecordFailed(f"{recorder} is not built (ninja -C {build_dir} {RECORDER})")
    run_file = session_dir / "run.json"
    if run_file.exists() and not force:
        document = json.loads(run_file.read_text())
        if document.get("passed") and document.get("format") == RUN_FORMAT and \
                document.get("recorder") == recorder_key(recorder) and all(
                (session_dir / process["log"]).exists() for process in document["processes"]):
            print(f"firefox record: reusing {session_dir} (Firefox {version}, same corpus)",
                  file=sys.stderr)
            document["reused"], document["directory"] = True, str(session_dir)
            return document
    if session_dir.exists():
        shutil.rmtree(session_dir)
    logs = session_dir
    logs.mkdir(parents=True)
    started = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="runsel-firefox-") as scratch_name:
        scratch = Path(scratch_name)
        marks_path = scratch / "marks"
        marks_path.write_bytes(bytes(TraceMarks.SIZE))
        session = Session(recorder, logs, marks_path, chosen, page_timeout, scratch)
        try:
            session.run()
        except (MarionetteError, OSError) as failure:
            stderr = (scratch / "firefox.stderr").read_text(errors="replace")[-600:]
            raise RecordFailed(f"driving Firefox failed: {failure}; "
                               f"its stderr: {stderr}") from failure
        finally:
            session.quit()
        parent_pid = session.process.pid
    wall = time.monotonic() - started

    kept = keep_parent_and_busiest_content(logs, parent_pid)
    labels = [f"tab_{i + 1}_loaded" for i in range(len(chosen))] + ["tabs_closed"]
    processes, problems = [], []
    for role, _, pid, log in kept:
        named = log.rename(logs / f"{role}.{pid}.log.gz")
        marks_file = (logs / f"{pid}.marks.jsonl").rename(logs / f"{role}.{pid}.marks.jsonl")
        summary = summarize(pid, named, marks_file, role)
        summary["log"], summary["marks_file"] = named.name, marks_file.name
        processes.append(summary)
        problems += problems_of(summary, labels)
    document = {
        "workload": "firefox", "format": RUN_FORMAT, "firefox": version,
        "corpus": corpus_key(chosen),
        "recorder": recorder_key(recorder), "pages": session.loaded,
        "marks": labels, "wall_seconds": round(wall, 1), "processes": processes,
        "problems": problems, "passed": not problems, "reused": False,
        "note": "headless firefox-esr, fresh profile, no network, sandboxes off (the recorder "
                "opens its log files from every process), at most 4 tabs open",
    }
    run_file.write_text(json.dumps(document, indent=1) + "\n")
    document["directory"] = str(session_dir)
    if problems:
        raise RecordFailed("the recording fails its checks (kept in "
                           f"{session_dir} for inspection):\n  " + "\n  ".join(problems))
    return document


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--build-dir", type=Path, default=ROOT / "build")
    parser.add_argument("--out", type=Path, default=ROOT / "results" / "firefox")
    parser.add_argument("--pages", type=int, default=4, help="corpus pages (default 4)")
    parser.add_argument("--page-timeout", type=float, default=300,
                        help="seconds per page (recording slows Firefox about 3x)")
    parser.add_argument("--force", action="store_true", help="record even when cached")
    args = parser.parse_args()
    try:
        document = record(args.build_dir, args.out, args.pages, args.page_timeout, args.force)
    except RecordFailed as failure:
        print(f"firefox record: {failure}", file=sys.stderr)
        return 1
    for process in document["processes"]:
        print(f"{process['role']} {process['pid']}: {process['lines']} lines, {process['calls']} "
              f"calls, coverage {process['coverage']:.1%} of num_operations "
              f"{process['num_operations']}, frees dropped {process['frees_dropped']} "
              f"({process['frees_dropped_share']:.1%} of {process['frees']}), live reuses "
              f"{process['live_reuses']}: {process['log']}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
