"""runsel's Python tooling, one package, imported from experiments/ (tools/runsel puts it
on PYTHONPATH and runs the command line, `python3 -m harness`; by hand,
`PYTHONPATH=experiments python3 -m harness.<module>` from the repository root).

Its modules in layers, from the top (LAYERS below, which the style test checks: every
module of the package is listed once, a module imports modules of its own layer or of
the layers below it, never above, and no imports go round in a cycle):

    tests          the unit tests (meson test --suite harness) and their fixture
    command line   tools/runsel's subcommands: parser, report/render/corpus, test, bench,
                   trace/replay and the replay's tables; standard library only
    report run     the harness: every step of `tools/runsel report`, results.json, then
                   the report rendered from it
    runs           running and proving measurements: timed runs, counting runs, exact
                   replays, callgrind, the Dask fan-out and its shipping, the webkit and
                   Firefox workloads (recorded, checked, replayed), the headroom's bounds,
                   the run's clock
    render         results.json in, report.md / report.html and the pictures out; imports
                   no module that runs anything
    figures        figures computed from the runs' data: comparisons, judgements over the
                   corpus, the verdict, the targets, the anchors, the derived figures, and
                   results.json's schema and reading
    shared         names, presets, options and build steps shared by the command line and
                   the harness; standard library only
"""

LAYERS = (
    ("tests", ("test_cli_testing", "test_cluster", "test_comparisons", "test_firefox_corpus",
               "test_harness", "test_headroom", "test_judgement", "test_progress", "test_report",
               "test_trace_workload", "report_fixture")),
    ("command line", ("__main__", "cli", "cli_report", "cli_testing", "cli_bench", "cli_trace",
                      "replay_figures")),
    ("report run", ("harness",)),
    ("runs", ("runs", "counting", "replays", "cost", "fanout", "shipping", "metrics", "phases",
              "behind_cache", "headroom", "webkit_record", "firefox_corpus", "firefox_groups",
              "firefox_workload", "firefox_replay", "firefox_record", "firefox_logs",
              "marionette")),
    ("render", ("report", "report_tables", "report_anchors", "report_cache", "report_cells",
                "report_check_price", "report_firefox", "report_firefox_corpus",
                "report_headroom", "corpus_report", "pictures", "verdict_text")),
    ("figures", ("comparisons", "judgement", "verdict", "targets", "anchors", "derived",
                 "results")),
    ("shared", ("__init__", "allocators", "presets", "options", "build_steps", "interpreter",
                "progress", "firefox_names", "worker_view")),
)
