"""gnplace: place the ops of deep-learning training graphs on devices, learned once per family.

Quick start::

    import gnplace
    graph = gnplace.load_graph("datasets/examples/mlp2x8w2048b512.gnpg")
    cluster = gnplace.load_cluster("k80x4")
    placement = gnplace.get_placer("round_robin").place(graph, cluster)
    result = gnplace.simulate(graph, cluster, placement)
    print(result.step_time, gnplace.lower_bound(graph, cluster).value)
"""
# ruff: noqa: E402 (numba's cache folder is settled before the modules that compile kernels are imported)

from typing import TYPE_CHECKING

from gnplace.startup import check_thread_settings, command_imports

with command_imports():  # a command's Ctrl-C or bad setting in these imports: one line, not a traceback
    check_thread_settings()  # before numba reads NUMBA_NUM_THREADS (0 was a ValueError inside numba)
    from gnplace.numba_cache import ensure_numba_cache

    ensure_numba_cache()  # before the kernels' modules: each kernel finds numba's cache folder when it is decorated

    from gnplace.cluster import Cluster, Device, load_cluster
    from gnplace.exceptions import (
        BudgetExhausted,
        ExecutionFailed,
        GnplaceError,
        InfeasiblePlacement,
        InvalidArgument,
        InvalidCheckpoint,
        InvalidCluster,
        InvalidGraph,
        InvalidPlacement,
        MissingDependency,
        UnknownName,
        UnsupportedGraph,
    )
    from gnplace.graph import OpGraph
    from gnplace.graph_io import from_networkx, load_graph, save_graph, to_networkx
    from gnplace.placement import Placement, load_placement, save_placement
    from gnplace.placers import PLACERS, get_placer
    from gnplace.sim import Simulator, StepResult, lower_bound, simulate

if TYPE_CHECKING:  # what a type checker sees of ``gnplace.apply``, which __getattr__ imports on first use
    from gnplace.execute.apply import apply

__version__ = "0.1.0"

__all__ = [
    "apply",
    "Cluster", "Device", "load_cluster",
    "GnplaceError", "BudgetExhausted", "ExecutionFailed", "InfeasiblePlacement", "InvalidArgument", "InvalidCheckpoint",
    "InvalidCluster", "InvalidGraph", "InvalidPlacement", "MissingDependency", "UnknownName", "UnsupportedGraph",
    "OpGraph", "from_networkx", "load_graph", "save_graph",
    "to_networkx", "Placement", "load_placement", "save_placement", "PLACERS", "get_placer", "Simulator", "StepResult",
    "lower_bound", "simulate",
]


def __getattr__(name: str) -> object:
    """``gnplace.apply`` is imported on first use: it needs torch, which ``import gnplace`` does not load."""
    if name == "apply":
        from gnplace.execute.apply import apply

        return apply
    raise AttributeError(f"module 'gnplace' has no attribute {name!r}")


def __dir__() -> list[str]:
    """The module's names with ``apply``, which ``__getattr__`` imports (a notebook's completion missed it)."""
    return sorted({*globals(), "apply"})
