"""``python -m gnplace``: the ``gnplace`` command from the interpreter that has the package."""

import sys

from gnplace.cli import main

sys.exit(main())
