#!/usr/bin/python3
"""The webkit workload: WebKitGTK (WebKit2 4.1, through Python GObject) loads a pinned
corpus of real pages into tabs under a private Xvfb, runs their scripts, scrolls each,
keeps several tabs open, closes them, waits and exits. Prints one JSON document like
the other workloads (experiments/README.md), with the resident memory of every web
process at each checkpoint and, per web process, the proof of which allocator served it.

    /usr/bin/python3 experiments/webkit/driver.py [--pages N] [--tabs K] [--time-limit S]

Run it under the allocator to measure with LD_PRELOAD; the driver sets Malloc=1 (so
WebKit hands every allocation to the process's malloc) and passes the preload on to
WebKit's processes, but not to Xvfb. Needs Debian's python3 (python3-gi).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

from trace_marks import MarksFull, TraceMarks
from web_processes import (
    main_process_exit_stats,
    mapped_allocator,
    memory_of,
    prove_allocators,
    read_stats_lines,
    web_cpu_seconds,
    web_processes,
)
from webkit_corpus import CORPUS, CorpusError, corpus_pages, page_url, pin_corpus

SETTLE_SECONDS = 2.0  # after the tabs close, before the last checkpoint
EXIT_SECONDS = 20.0   # for the web processes to exit once their last view is gone


class RunFailed(Exception):
    """The run cannot go on (a page did not load, time is up, ...): exit 1 with this."""


# --- the browser -------------------------------------------------------------------------


def start_xvfb() -> tuple[subprocess.Popen, str]:
    """A private X server, without the allocator under test (LD_PRELOAD is for WebKit)."""
    if shutil.which("Xvfb") is None:
        raise RunFailed("Xvfb is missing (Debian: apt-get install xvfb)")
    read_end, write_end = os.pipe()
    environment = {k: v for k, v in os.environ.items()
                   if k not in ("LD_PRELOAD", "RUNSEL_STATS", "RUNSEL_TRACE", "RUNSEL_TRACE_MARKS",
                                "Malloc")}
    server = subprocess.Popen(["Xvfb", "-displayfd", str(write_end), "-screen", "0", "1280x1024x24",
                               "-nolisten", "tcp", "-noreset"], pass_fds=(write_end,),
                              env=environment, stdout=subprocess.DEVNULL,
                              stderr=subprocess.PIPE)
    os.close(write_end)
    with os.fdopen(read_end) as pipe:
        display = pipe.readline().strip()
    if not display:
        server.kill()
        raise RunFailed(f"Xvfb did not start: {server.stderr.read().decode()[-500:]}")
    return server, ":" + display


class Browser:
    """One window, tabs in a notebook; every page tab is related to a blank home tab, so
    all pages share one web process, like tabs of one site in a browser."""

    def __init__(self, Gtk, WebKit2, GLib, args, marks: TraceMarks, pages: list[dict]):
        self.Gtk, self.WebKit2, self.GLib = Gtk, WebKit2, GLib
        self.args, self.marks, self.pages = args, marks, pages
        self.checkpoints, self.seen_pids, self.proofs, self.loaded = [], set(), {}, []
        self.failure = None
        self.started = time.monotonic()
        self.busy_seconds = 0.0  # page loads, scripts, scrolls and closes: the measured part
        self.busy_cpu_seconds, self.cpu_mark = 0.0, 0.0  # the web processes' CPU time in it
        self.context = WebKit2.WebContext.new_ephemeral()
        self.window = Gtk.Window()
        self.window.set_default_size(1280, 1000)
        self.notebook = Gtk.Notebook()
        self.window.add(self.notebook)
        self.home = self.new_view(None)
        self.home.load_uri("about:blank")
        self.window.show_all()
        self.tabs = []  # open page tabs, oldest first: (view, page index)

    def new_view(self, related):
        WebKit2 = self.WebKit2
        view = (WebKit2.WebView(web_context=self.context) if related is None
                else WebKit2.WebView(related_view=related))
        settings = view.get_settings()
        settings.set_enable_javascript(True)
        view.connect("web-process-terminated",
                     lambda _, reason: self.fail("a web process ended early "
                                                 f"({reason.value_nick})"))
        # No modal dialogs in an unattended run: the Rust book's print.html calls
        # window.print() once loaded; alert()/confirm() would wait for a click.
        view.connect("print", lambda *_: True)
        view.connect("script-dialog", lambda *_: True)
        view.connect("permission-request", lambda _, request: request.deny() or True)
        self.notebook.append_page(view, None)
        view.show()
        return view

    def fail(self, message: str) -> None:
        if self.failure is None:
            self.failure = message
        self.Gtk.main_quit()

    # Each step runs from the main loop; any exception ends the run with its message.
    def step(self, function, *arguments) -> bool:
        try:
            function(*arguments)
        except (RunFailed, MarksFull) as failure:
            self.fail(str(failure))
        except Exception as failure:  # noqa: BLE001 (a bug in a step still ends the run)
            self.fail(f"{type(failure).__name__}: {failure}")
        return False

    def later(self, seconds: float, function, *arguments) -> None:
        self.GLib.timeout_add(int(seconds * 1000), self.step, function, *arguments)

    def run(self) -> None:
        self.GLib.timeout_add(int(self.args.time_limit * 1000), self.time_up)
        threading.Thread(target=self.watchdog, daemon=True).start()
        self.later(0, self.load, 0)
        self.Gtk.main()
        if self.failure:
            raise RunFailed(self.failure)

    def time_up(self) -> bool:
        where = (f" while loading {page_url(self.pages[len(self.loaded)])}"
                 if len(self.loaded) < len(self.pages) else "")
        self.fail(f"the run exceeded its time limit of {self.args.time_limit:.0f} s{where}")
        return False

    def watchdog(self) -> None:
        """Ends the process if the main loop cannot (a nested loop that never returns)."""
        time.sleep(self.args.time_limit + 15)
        print(f"webkit driver: the run exceeded its time limit of {self.args.time_limit:.0f} s "
              f"and did not stop; killing it", file=sys.stderr, flush=True)
        for pid in web_processes(os.getpid()):
            os.kill(pid, signal.SIGKILL)
        os._exit(1)

    def load(self, index: int) -> None:
        if index == len(self.pages):
            self.close_all()
            return
        while len(self.tabs) >= self.args.tabs:  # the oldest tab makes room
            self.close_tab(self.tabs.pop(0)[0])
        url = page_url(self.pages[index])
        begun, self.cpu_mark = time.monotonic(), web_cpu_seconds(os.getpid())
        view = self.new_view(self.home)
        self.tabs.append((view, index))
        self.notebook.set_current_page(self.notebook.page_num(view))
        state = {"done": False}

        def changed(_, event):
            if event == self.WebKit2.LoadEvent.FINISHED and not state["done"]:
                state["done"] = True
                self.step(self.wait_ready, view, index, begun,
                          time.monotonic() + self.args.page_timeout)

        def failed(_, event, failing_uri, error):
            state["done"] = True
            self.fail(f"page {index + 1} failed to load: {failing_uri}: {error.message}")
            return True

        view.connect("load-changed", changed)
        view.connect("load-failed", failed)
        view.load_uri(url)

    def evaluate(self, view, script: str, then, retry=None) -> None:
        """Runs `script`, then `then(text)`. A failure ends the run, unless `retry` is given:
        then `retry(failure)` decides (a page still building its search results can answer
        a poll with an unsupported result type)."""
        def finished(view, result):
            # Every exception, not only the GLib.Error of a script that threw: one raised
            # out of this GLib callback would only be printed, and the run would not end.
            try:
                value = view.evaluate_javascript_finish(result)
            except Exception as failure:  # noqa: BLE001 (GLib.Error, and bugs: see above)
                if retry is not None:
                    self.step(retry, failure)
                else:
                    self.fail(f"{view.get_uri()}: script failed: {failure}")
                return
            self.step(then, value.to_string() if not value.is_undefined() else "")
        view.evaluate_javascript(script, -1, None, None, None, finished)

    def wait_ready(self, view, index: int, begun: float, deadline: float) -> None:
        """Polls the page's ready expression and its title: the page, and the search its
        own scripts run, are done."""
        page = self.pages[index]
        ready = page.get("ready", "true")
        script = (f"JSON.stringify([document.title, Boolean({ready}), "
                  "document.getElementsByTagName('*').length])")

        def checked(text: str) -> None:
            title, is_ready, elements = json.loads(text)
            expected = page.get("title", "")
            if is_ready and expected in title:
                self.scroll(view, index, begun, title, elements, deadline)
            elif time.monotonic() > deadline:
                raise RunFailed(f"page {index + 1} did not load: {page_url(page)}: title "
                                f"{title!r} (expected {expected!r}), ready: {is_ready} "
                                f"after {self.args.page_timeout:.0f} s")
            else:
                self.later(0.05, self.evaluate, view, script, checked, failed)

        def failed(failure) -> None:
            if time.monotonic() > deadline:
                raise RunFailed(f"{view.get_uri()}: script failed: {failure}")
            self.later(0.05, self.evaluate, view, script, checked, failed)
        self.evaluate(view, script, checked, failed)

    def scroll(self, view, index: int, begun: float, title: str, elements: int,
               deadline: float) -> None:
        """Scrolls to the bottom in at most 24 steps, one frame each, then back to the top."""
        body = ("const height = document.documentElement.scrollHeight;"
                "const step = Math.max(innerHeight, height / 24);"
                "const frame = () => new Promise(done => {"
                " requestAnimationFrame(done); setTimeout(done, 50); });"
                "for (let y = 0; y <= height; y += step) { scrollTo(0, y); await frame(); }"
                "scrollTo(0, 0); await frame(); return height;")

        def scrolled(view, result):
            try:
                height = view.call_async_javascript_function_finish(result).to_int32()
            except Exception as failure:  # noqa: BLE001 (as in evaluate: a GLib callback)
                # A search page still building its results can answer with an
                # unsupported result type: scroll again until the page's deadline.
                if time.monotonic() > deadline:
                    self.fail(f"{view.get_uri()}: scrolling failed: {failure}")
                else:
                    self.later(0.1, self.scroll, view, index, begun, title, elements, deadline)
                return
            self.step(self.page_done, index, begun, title, elements, height)
        view.call_async_javascript_function(body, -1, None, None, None, None, scrolled)

    def page_done(self, index: int, begun: float, title: str, elements: int, height: int) -> None:
        self.busy_seconds += time.monotonic() - begun
        self.busy_cpu_seconds += web_cpu_seconds(os.getpid()) - self.cpu_mark
        self.loaded.append({"url": page_url(self.pages[index]), "title": title,
                            "elements": elements, "height": height,
                            "seconds": round(time.monotonic() - begun, 3)})
        self.checkpoint(f"tab_{index + 1}_loaded")
        print(f"webkit driver: page {index + 1}/{len(self.pages)} in "
              f"{self.loaded[-1]['seconds']:.1f} s, web processes "
              f"{self.checkpoints[-1]['resident'] >> 20} MiB: {self.loaded[-1]['url']}",
              file=sys.stderr, flush=True)
        self.later(0, self.load, index + 1)

    def close_tab(self, view) -> None:
        self.notebook.remove_page(self.notebook.page_num(view))
        view.try_close()
        view.destroy()

    def close_all(self) -> None:
        begun, self.cpu_mark = time.monotonic(), web_cpu_seconds(os.getpid())
        for view, _ in self.tabs:
            self.close_tab(view)
        self.tabs = []
        self.busy_seconds += time.monotonic() - begun
        self.later(SETTLE_SECONDS, self.closed)

    def closed(self) -> None:
        # The web process tears the pages down after the views are gone: its CPU time
        # until now counts (freeing is allocator work), the idle wait costs none.
        self.busy_cpu_seconds += web_cpu_seconds(os.getpid()) - self.cpu_mark
        self.checkpoint("tabs_closed")
        self.Gtk.main_quit()

    def checkpoint(self, name: str) -> None:
        """Publishes the mark, then reads every web process's memory and allocator."""
        self.marks.publish(name)
        processes = []
        for pid in web_processes(os.getpid()):
            memory = memory_of(pid)
            if memory is None:
                continue
            processes.append(memory)
            self.seen_pids.add(pid)
            if pid not in self.proofs:
                self.proofs[pid] = mapped_allocator(pid)
        if not processes:
            raise RunFailed(f"checkpoint {name}: no web process is running")
        self.checkpoints.append({
            "name": name, "seconds": round(time.monotonic() - self.started, 3),
            "resident": sum(process["pss"] for process in processes),
            "live_requested": None,  # not countable from outside the process
            "minor_faults": sum(process["minor_faults"] for process in processes),
            "web_processes": processes,
        })

    def shut_down(self) -> None:
        """Closes the home tab and the window; waits until every web process has exited
        (runsel writes its stats line at exit)."""
        for view, _ in self.tabs:
            self.close_tab(view)
        self.close_tab(self.home)
        self.window.destroy()
        deadline = time.monotonic() + EXIT_SECONDS
        while time.monotonic() < deadline:
            while self.GLib.MainContext.default().iteration(False):
                pass
            if not web_processes(os.getpid()):
                return
            time.sleep(0.05)
        raise RunFailed(f"web processes {web_processes(os.getpid())} did not exit within "
                        f"{EXIT_SECONDS:.0f} s of their last tab closing")


def parse_arguments(argv):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--pages", type=int,
                        help="load N pages of the corpus, from --first on (default all)")
    parser.add_argument("--first", type=int, default=1,
                        help="the corpus page to start from, counted from 1 (default 1)")
    parser.add_argument("--tabs", type=int, default=4, help="tabs kept open (default 4)")
    parser.add_argument("--time-limit", type=float, default=600, help="whole run, seconds")
    parser.add_argument("--page-timeout", type=float, default=60, help="per page, seconds")
    parser.add_argument("--corpus", type=Path, default=CORPUS)
    parser.add_argument("--url", action="append", default=[],
                        help="load this URL instead of the corpus (repeatable; not pinned)")
    parser.add_argument("--check", action="store_true",
                        help="check that WebKitGTK, Xvfb and the pinned corpus are here, then exit")
    parser.add_argument("--pin", action="store_true",
                        help="rewrite the corpus's versions and sha256 sums, then exit")
    parser.add_argument("--out", type=Path, help="write the JSON document here, not stdout")
    parser.add_argument("--seed", type=int, default=1, help="ignored (the harness passes it)")
    parser.add_argument("--scale", type=float, default=1, help="ignored (the harness passes it)")
    return parser.parse_args(argv)


def select_pages(args) -> list[dict]:
    if args.url:
        return [{"package": "-", "path": url.removeprefix("file://"), "title": ""}
                for url in args.url]
    return corpus_pages(args.corpus, args.first, args.pages)


def import_webkit():
    """(Gtk, WebKit2, GLib) from Debian's python3-gi, gir1.2-webkit2-4.1 and gir1.2-gtk-3.0."""
    try:
        import gi
        gi.require_version("Gtk", "3.0")
        gi.require_version("WebKit2", "4.1")
        from gi.repository import GLib, Gtk, WebKit2
    except (ImportError, ValueError) as failure:
        raise RunFailed(f"{sys.executable} cannot load WebKit2 4.1 through GObject ({failure}); "
                        "Debian: apt-get install python3-gi gir1.2-webkit2-4.1") from failure
    return Gtk, WebKit2, GLib


def check_requirements(args) -> None:
    import_webkit()
    if shutil.which("Xvfb") is None:
        raise RunFailed("Xvfb is missing (Debian: apt-get install xvfb)")
    select_pages(args)


def run(args) -> dict:
    pages = select_pages(args)
    marks = TraceMarks(os.environ.get("RUNSEL_TRACE_MARKS"))
    stats_directory = tempfile.mkdtemp(prefix="runsel-webkit-")
    server, display = start_xvfb()
    try:
        os.environ.update({"DISPLAY": display, "GDK_BACKEND": "x11", "Malloc": "1",
                           "NO_AT_BRIDGE": "1", "GTK_A11Y": "none",
                           "RUNSEL_STATS": f"{stats_directory}/stats.%p"})
        os.environ.pop("WAYLAND_DISPLAY", None)
        Gtk, WebKit2, GLib = import_webkit()
        started = time.monotonic()
        browser = Browser(Gtk, WebKit2, GLib, args, marks, pages)
        browser.run()
        browser.shut_down()
        wall = time.monotonic() - started
        allocator, proofs = prove_allocators(browser, read_stats_lines(stats_directory))
    finally:
        server.send_signal(signal.SIGTERM)
        server.wait(timeout=10)
        shutil.rmtree(stats_directory, ignore_errors=True)
    return {
        "workload": "webkit", "seed": args.seed, "scale": args.scale, "introspect": True,
        "allocator": allocator,
        "measured_seconds": round(browser.busy_seconds, 4), "wall_seconds": round(wall, 3),
        "measured_cpu_seconds": round(browser.busy_cpu_seconds, 3),
        "checksum": None, "deterministic": False,
        "key_checkpoint": browser.checkpoints[-2]["name"],  # the last tab loaded
        "checkpoints_of_interest": ["tabs_closed"],
        "notes": f"WebKitGTK {WebKit2.get_major_version()}.{WebKit2.get_minor_version()}."
                 f"{WebKit2.get_micro_version()}, {len(pages)} pages, at most {args.tabs} tabs "
                 "open; resident = sum of the web processes' Pss",
        "pages": browser.loaded,
        "web_processes": proofs,
        "runsel_exit": main_process_exit_stats(proofs),
        "checkpoints_overflowed": False,
        "checkpoints": browser.checkpoints,
    }


def main(argv=None) -> int:
    args = parse_arguments(argv)
    try:
        if args.pin:
            pin_corpus(args.corpus)
            print(f"driver: pinned {args.corpus}", file=sys.stderr)
            return 0
        if args.check:
            check_requirements(args)
            return 0
        document = run(args)
    except (RunFailed, CorpusError, MarksFull) as failure:
        print(f"webkit driver: {failure}", file=sys.stderr)
        return 1
    text = json.dumps(document, indent=1)
    if args.out:
        args.out.write_text(text + "\n")
    else:
        print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
