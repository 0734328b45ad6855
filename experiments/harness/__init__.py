"""runsel's Python tooling, one package (experiments/ on the import path; tools/runsel_cli.py,
the command line and entry shim, puts it there). Dependencies go one way, from the top:

    trace_cli                      tools/runsel's trace and replay subcommands
    harness                        the report run: runs, counts, results.json
    runs, counting, replays, cost, webkit_record   running and proving measurements
    firefox_workload, firefox_record, firefox_replay, marionette
                                   stock Firefox: recorded (driven over Marionette),
                                   checked, replayed on runsel and on its own allocator
    metrics, comparisons, verdict, targets         figures computed from the runs
    report, pictures               results.json in, report.md / report.html out
    allocators, build_steps, presets, interpreter  shared by the CLI and the harness

Modules run on their own with `python3 -m harness.<module>` from experiments/ (or with
PYTHONPATH=experiments from the repository root).
"""
