"""Compile gnplace's numba kernels into numba's on-disk cache ahead of the first command.

``python -m gnplace.warmup`` (``make install`` runs it) places and simulates a small random graph the
way the commands do, so that each kernel is compiled for the argument types the commands pass it and
numba caches it beside the package (``__pycache__``; ``NUMBA_CACHE_DIR`` where set). A later process
loads the kernels from there instead of compiling them: the first ``gnplace simulate`` after an install
takes seconds, not the 20 s of compiling the simulator (measured in the README's install paragraph).

What is compiled: the event simulator (one step and a batch), the lower bound's
longest path, list scheduling (``heft``, ``m_etf``, ``m_sct``, so ``auto`` too), coarsening, and the
placement MDP's decision features (the ``policy`` placer, with the shipped checkpoint); fine-tuning, ``evaluate``
and ``simulate`` then compile nothing either. The ``placeto`` comparator's list scheduling compiles on its
first use. A kernel edited later is compiled again on first use (numba checks each source file's stamp).

Where numba finds no writable place to cache in (a package installed read-only, run by a user whose home is
not writable), :func:`ensure_numba_cache`, which ``import gnplace`` calls, gives it one under the temporary folder.
"""

from __future__ import annotations

import os
import sys
import tempfile
import time
from pathlib import Path

__all__ = ["ensure_numba_cache", "warm_up", "main"]

#: The package's folders that hold numba kernels (``cache=True``), relative to the package.
KERNEL_FOLDERS = (".", "sim", "placers", "rl")


def _writable(folder: str | Path) -> bool:
    """Whether a file can be made in ``folder`` (made if missing), as numba checks a cache folder it may use."""
    try:
        os.makedirs(folder, exist_ok=True)
        tempfile.TemporaryFile(dir=folder).close()
    except OSError:
        return False
    return True


def _own_folder(folder: Path) -> bool:
    """Whether ``folder`` is made or found, a folder of this user's that others cannot write in (the cache is code)."""
    try:
        folder.mkdir(mode=0o700, exist_ok=True)
        found = folder.lstat()
    except OSError:
        return False
    import stat

    ours = not hasattr(os, "getuid") or found.st_uid == os.getuid()
    return stat.S_ISDIR(found.st_mode) and ours and not found.st_mode & 0o022 and _writable(folder)


def ensure_numba_cache() -> str | None:
    """Give numba a cache folder under the temporary folder where it has no writable one; returns it, or None.

    numba caches a kernel compiled with ``cache=True`` in ``NUMBA_CACHE_DIR`` (where set), else beside its source
    (``__pycache__``), else in the user's cache folder (``~/.cache/numba``); where none of these could be written
    (a package installed read-only, run by a user whose home is not writable: a container's arbitrary user) the
    first kernel's decoration failed with ``RuntimeError: cannot cache function ...: no locator available``, and
    ``import gnplace`` with it. Then the kernels are cached in ``gnplace-numba-UID`` under the temporary folder
    (``tempfile.gettempdir()``; a folder of this user's, which others cannot write in), set as ``NUMBA_CACHE_DIR``
    for this process and those it starts. None where numba had a folder, or where the temporary one fails too.
    """
    from numba.core import config
    from numba.misc.appdirs import AppDirs

    given = getattr(config, "CACHE_DIR", "")  # (set from the environment when numba loads: stubs lack it)
    package = Path(__file__).resolve().parent
    if given and _writable(given):
        return None
    if all(_writable(package / sub / "__pycache__") for sub in KERNEL_FOLDERS):
        return None
    if _writable(AppDirs(appname="numba", appauthor=False).user_cache_dir):
        return None
    try:
        folder = Path(tempfile.gettempdir()) / f"gnplace-numba-{os.getuid() if hasattr(os, 'getuid') else 'user'}"
    except OSError:  # no usable temporary folder either: numba's own error stands
        return None
    if not _own_folder(folder):
        return None
    os.environ["NUMBA_CACHE_DIR"] = str(folder)
    config.CACHE_DIR = str(folder)  # type: ignore[attr-defined]  # numba read the environment when it loaded
    return str(folder)


def warm_up() -> list[str]:
    """Run the numba kernels of placing and simulating once on a small graph; returns what ran, in order.

    About 10 s where the kernels are cached already; 45-48 s on this 2-core machine where none is.
    """
    import numpy as np

    from gnplace.cluster import load_cluster
    from gnplace.coarsen import coarsen
    from gnplace.placers import make_placer
    from gnplace.sim.bounds import lower_bound
    from gnplace.sim.simulator import Simulator
    from gnplace.toy import layered_graph

    graph = layered_graph(60, seed=0)
    graph = graph.replace(group=np.arange(graph.num_ops) // 2)  # colocation groups, as imported graphs have
    cluster = load_cluster("k80x4")
    done = []
    simulator = Simulator()  # Placeto's mode passes the kernels the same types: other costs, no other compile
    simulator.time(graph, cluster, np.arange(graph.num_ops) % cluster.num_devices, timeline=True)
    simulator.time_batch(graph, cluster, np.arange(2 * graph.num_ops).reshape(2, -1) % cluster.num_devices)
    done.append("simulate")
    lower_bound(graph, cluster)
    done.append("bound")
    for name in ("heft", "m_etf", "m_sct"):
        make_placer(name).place(graph, cluster)
        done.append(name)
    coarsen(graph, 8, cluster)
    done.append("coarsen")
    make_placer("policy", samples=2).place(graph, cluster)
    done.append("policy")
    return done


def main() -> int:
    """``python -m gnplace.warmup``: compile the kernels, saying what it did and how long it took."""
    started = time.perf_counter()
    done = warm_up()
    print(f"gnplace: compiled and cached the numba kernels of {', '.join(done)} in "
          f"{time.perf_counter() - started:.0f} s", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
