"""`python -m adapter` runs the command line."""

import sys

from adapter.cli import main

sys.exit(main())
