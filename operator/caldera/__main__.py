"""``python -m caldera`` runs the command line."""

import sys

from caldera.cli import main

sys.exit(main())
