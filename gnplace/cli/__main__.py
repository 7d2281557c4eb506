"""``python -m gnplace.cli``."""

import sys

from gnplace.cli import main

sys.exit(main())
