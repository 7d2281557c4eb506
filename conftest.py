"""pytest's set-up for the package's doctests (``gnplace/**.py``); the tests' own is ``tests/conftest.py``.

Under ``--import-mode=importlib`` pytest imports a module it collects doctests from by its file. One that
``import gnplace`` imports too, collected before anything had imported gnplace, ran twice: pytest's copy
replaced the package's in ``sys.modules``, so ``pytest gnplace/cluster.py gnplace/placement.py`` failed
(placement's examples made clusters of the second ``Cluster`` class, which ``Placement`` refused as no
Cluster). Imported here first, each such module is found in ``sys.modules`` and runs once.

It is also the first file pytest imports (``tests/conftest.py`` comes after it), so the one place to set what numba
reads at its import (``import gnplace`` imports numba).
"""

import os

#: numba's parallel kernel (the simulator's batches) on one thread, in the tests and the processes they start: each
#: of ``make test``'s two xdist workers started a thread per core, and every batch waited at OpenMP's barrier for a
#: thread the other worker's held (3,000 batches of 8 placements of a 60-op graph: 48 s on two threads, 2.0 s on
#: one, with other processes on the 2-core VM; the same step times, each placement a thread's alone). A test of
#: thread counts sets its own (``NUMBA_NUM_THREADS=2`` in the process it starts).
os.environ["NUMBA_NUM_THREADS"] = "1"

import gnplace  # noqa: E402, F401
