"""`python3 -m harness`: runsel's command line (cli.py); tools/runsel runs it."""

import sys

from .cli import main

sys.exit(main())
