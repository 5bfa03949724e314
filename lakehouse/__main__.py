"""``python -m lakehouse``: the same as the ``lakehouse`` command."""

import sys

from lakehouse.cli import main

sys.exit(main())
