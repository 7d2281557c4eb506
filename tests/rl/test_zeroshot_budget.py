"""``policy``'s evaluation count and its bar's total (:mod:`gnplace.rl.zeroshot_budget`)."""

from __future__ import annotations

import numpy as np

from gnplace.cluster import load_cluster
from gnplace.graph_io import load_graph
from gnplace.rl import zeroshot
from gnplace.rl.zeroshot_budget import Repairs, advance_past
from gnplace.toy import toy_cluster


def test_a_graph_with_more_placements_than_the_search_times_is_searched_as_before():
    """Graphs of 156 to 1,436 placements on two devices were searched (1,432 evaluations) though each can be timed."""
    from gnplace.toy import chain_graph

    placer, cluster = zeroshot.PolicyPlacer(), load_cluster("k80x2")  # the defaults: 156 candidates, 1,280 polish
    assert placer._candidates(cluster) == 156 and placer._searched(cluster, chain_graph(11)) == 156 + 4 * 320
    assert placer.placement_space(chain_graph(10), cluster) == 1024 and placer.placement_space(chain_graph(11),
                                                                                                 cluster) is None
    assert placer._searched(cluster, chain_graph(16_000)) == 156 + 320  # a large graph's polish: 2 ** 8 placements
    assert placer.placement_space(load_graph("datasets/examples/mlp1x8w6144b256.gnpg"), cluster) == 512
    assert placer.placement_space(load_graph("datasets/examples/mlp2x8w2048b512.gnpg"), cluster) is None  # 17 groups
    placer.place(chain_graph(11), cluster, seed=0)
    assert placer.last_choice != "every placement" and placer.last_evaluations > 1024  # its search, polish included
    assert placer.evaluations_needed(cluster, chain_graph(11)) == 156 + 4 * 320



def test_where_memory_repairs_pass_the_plan_the_bars_total_grows_with_them_and_says_so(monkeypatch):
    """On a memory-tight cluster the repairs (auto's heuristics', the chosen placement's) time hundreds of placements
    more than evaluations_needed plans (2,582 and 2,736 of 1,436 planned seen): the bar stood past 100%. Its total is
    raised as soon as the count and the polish still to come pass the plan, the notes say memory repairs did it, and it
    ends at the evaluations made; the placement is the same as without a bar."""
    import contextlib

    from gnplace.placers.groups import memory_need

    graph = load_graph("datasets/examples/mlp2x8w2048b512.gnpg")
    cluster = toy_cluster(4, memory=0.3 * memory_need(graph, toy_cluster(4)))
    options = dict(samples=2, last_rounds=1, polish=20, polish_ops=0, constructor="none")
    expected = zeroshot.PolicyPlacer(**options, progress=False).place(graph, cluster, seed=0).devices
    bars, calls = [], []

    @contextlib.contextmanager
    def recorded(label, total, enabled=None, unit="evaluations"):
        bars.append(total)
        yield lambda done, note="", total=None: calls.append((done, note, total))

    monkeypatch.setattr(zeroshot, "evaluation_bar", recorded)
    placer = zeroshot.PolicyPlacer(**options, progress=True)
    assert np.array_equal(placer.place(graph, cluster, seed=0).devices, expected)
    planned, made = placer.evaluations_needed(cluster, graph), placer.last_evaluations
    assert bars == [planned] and made > 2 * planned
    shown = planned
    for done, note, total in calls:
        shown = max(shown, total or 0)
        assert done <= shown and (total is None or total > planned and "memory repairs" in note), (done, total)
    grown = [(done, total) for done, _, total in calls if total]
    assert grown[0][1] == grown[0][0] + 20  # the count so far and the polish still to come
    assert calls[-1][0] == calls[-1][2] == made  # it ends full



def test_the_module_chain_has_a_budget_in_op_evaluations_as_the_polish():
    """A graph of n ops gets at most ``polish_ops // n`` evaluations of it: a 93,567-op graph would have spent 1,000
    timings of 0.1 s each; with ``polish_ops`` 0, ``module_chain`` on every graph."""
    graph = load_graph("datasets/ptb/ptb_004.gnpg")  # 4,436 ops
    assert zeroshot.PolicyPlacer(module_chain=1000).module_chain_evaluations(graph) == 1000  # 5,120,000 // 4,436
    assert zeroshot.PolicyPlacer(module_chain=1000, polish_ops=2_218_000).module_chain_evaluations(graph) == 500
    assert zeroshot.PolicyPlacer(module_chain=1000, polish_ops=4_436).module_chain_evaluations(graph) == 0  # one
    assert zeroshot.PolicyPlacer(module_chain=1000, polish_ops=0).module_chain_evaluations(graph) == 1000
    assert zeroshot.PolicyPlacer(module_chain=1000).module_chain_evaluations() == 1000


def test_the_bars_total_is_the_plan_until_the_count_and_the_polish_to_come_pass_it():
    """Under the plan, ``shown`` is told the count and note alone; past it, the count and the polish still to come as
    its total, the note saying memory repairs did it; the polish's own steps shrink what is still to come."""
    told = []
    repairs = Repairs(lambda done, note="", total=None: told.append((done, note, total)), planned=100, polish=20)
    repairs(50, "samples")
    repairs(85, "memory repair")
    repairs(90)
    repairs.polish(90, 15)  # 15 of the polish's 20 made: 5 to come
    advance_past(repairs, 90, "polish", 16)
    assert told == [(50, "samples", None), (85, "memory repair (memory repairs)", 105), (90, "memory repairs", 110),
                    (105, "polish (memory repairs)", 110), (106, "polish (memory repairs)", 111)]
