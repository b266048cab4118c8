"""`python -m runner.cli`: the same command line as the `ansible-operator` script."""

import sys

from runner.cli.main import main

sys.exit(main())
