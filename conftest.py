"""pytest's set-up for the package's doctests (``gnplace/**.py``); the tests' own is ``tests/conftest.py``.

Under ``--import-mode=importlib`` pytest imports a module it collects doctests from by its file. One that
``import gnplace`` imports too, collected before anything had imported gnplace, ran twice: pytest's copy
replaced the package's in ``sys.modules``, so ``pytest gnplace/cluster.py gnplace/placement.py`` failed
(placement's examples made clusters of the second ``Cluster`` class, which ``Placement`` refused as no
Cluster). Imported here first, each such module is found in ``sys.modules`` and runs once.
"""

import gnplace  # noqa: F401
