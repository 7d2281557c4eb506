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
"""

from __future__ import annotations

import argparse
import sys
import time

__all__ = ["warm_up", "main"]

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
    modules = [f"block{i // 10}.op" for i in range(graph.num_ops)]  # module units (the ppo search's) too
    coarsen(graph.replace(module=modules), 8, cluster, modules=True)
    done.append("coarsen")
    make_placer("policy", samples=2).place(graph, cluster)
    done.append("policy")
    return done


def main() -> int:
    """``python -m gnplace.warmup``: compile the kernels, saying what it did and how long it took.

    A Ctrl-C is one ``gnplace: interrupted`` line and 130, as in a command: it printed the traceback of the kernel
    it stopped (numba hands it back as a SystemError).
    """
    from gnplace.cli.common import run_reporting_errors

    return run_reporting_errors(_compile, argparse.Namespace(), "gnplace")


def _compile(args: argparse.Namespace) -> int:
    """:func:`warm_up`, then one line on stderr saying what it compiled and in how many seconds."""
    started = time.perf_counter()
    done = warm_up()
    print(f"gnplace: compiled and cached the numba kernels of {', '.join(done)} in "
          f"{time.perf_counter() - started:.0f} s", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
