"""``policy``'s candidates: their batch timings joined, ranked best first, and one found in the blocks it was timed in.

The candidates are kept as the blocks they were timed in until the best is known (:func:`stacked_row`): stacked, the
137 of a 93,567-op graph with the defaults (103 MB) were held twice at once.
"""

from __future__ import annotations

import numpy as np

from gnplace.cluster import Cluster
from gnplace.sim.timer import BatchResult, overflow

__all__ = ["ranking", "stacked_row", "concat_results"]


def ranking(result: BatchResult, cluster: Cluster) -> np.ndarray:
    """Candidates from best to worst: fitting ones by step time first, then by the least overflow."""
    excess = overflow(result.peak_memory, cluster.memory)
    return np.lexsort((result.step_time, excess, result.oom))


def stacked_row(blocks: list[np.ndarray], index: int) -> np.ndarray:
    """Row ``index`` of ``np.concatenate(blocks)``, found in its block rather than stacking them all (a view)."""
    for block in blocks:
        if index < block.shape[0]:
            return block[index]
        index -= block.shape[0]
    raise IndexError("candidate index past the blocks' rows")


def concat_results(first: BatchResult, second: BatchResult) -> BatchResult:
    """Two batch timings as one, candidates of ``first`` first."""
    return BatchResult(*(np.concatenate([a, b]) for a, b in (
        (first.step_time, second.step_time), (first.busy_time, second.busy_time),
        (first.peak_memory, second.peak_memory), (first.oom, second.oom))))
