"""``auto``: the best of the fast placers, by the timer."""

from __future__ import annotations

import pytest

from gnplace.cluster import load_cluster
from gnplace.exceptions import InvalidArgument
from gnplace.placers import make_placer
from gnplace.placers.auto import FAST_PLACERS, AutoPlacer
from gnplace.sim.simulator import Simulator
from gnplace.toy import layered_graph, mixed_cluster, mlp_training_graph


def test_name_repr_and_registry():
    assert AutoPlacer.name == "auto" and type(make_placer("auto")) is AutoPlacer
    assert repr(AutoPlacer()) == f"AutoPlacer(candidates={FAST_PLACERS!r})"
    with pytest.raises(InvalidArgument, match="other than 'auto'"):
        AutoPlacer(candidates=("auto",))
    with pytest.raises(InvalidArgument, match="other than 'auto'"):
        AutoPlacer(candidates="auto")


def test_one_name_is_one_candidate():
    # -O auto.candidates=heft reads as the text 'heft', which was taken letter by letter ("unknown placer 'h'")
    assert make_placer("auto", candidates="heft").candidates == ("heft",)


@pytest.mark.parametrize("value", [None, 0, True, 0.5])
def test_candidates_that_are_no_name_nor_list_are_refused_by_name(value):
    # -O auto.candidates=null said "placer 'auto': an option value of the wrong type (): 'NoneType' object is not
    # iterable", naming no option
    with pytest.raises(InvalidArgument, match=r"^AutoPlacer: candidates must be a placer's name or a list of names"):
        make_placer("auto", candidates=value)


@pytest.mark.parametrize("cluster", [load_cluster("k80x4"), load_cluster("cpu_gpu"), mixed_cluster()])
def test_is_the_minimum_of_its_candidates(cluster):
    g = layered_graph(120, width=6, seed=4).replace(group=[i // 3 for i in range(120)])
    sim = Simulator()
    placer = AutoPlacer()
    step = sim.time(g, cluster, placer.place(g, cluster, seed=0)).step_time
    others = {n: sim.time(g, cluster, make_placer(n).place(g, cluster, seed=0)).step_time for n in FAST_PLACERS}
    assert step == min(others.values())
    assert placer.last_step_times == pytest.approx(others)
    assert others[placer.last_choice] == step


def test_first_candidate_wins_ties():
    g, c = mlp_training_graph(layers=2, width=8, batch=4), load_cluster("cpu_gpu")  # every placer: all on the GPU
    placer = AutoPlacer(candidates=("heft", "single"))
    placer.place(g, c)
    assert placer.last_step_times["heft"] == placer.last_step_times["single"] and placer.last_choice == "heft"


def test_uses_its_timer(counting_simulator):
    g, c = mlp_training_graph(layers=3, width=64, batch=8), load_cluster("k80x2")
    AutoPlacer(candidates=("single", "round_robin"), timer=counting_simulator).place(g, c)
    assert counting_simulator.batches[-1] == 2  # the candidates are timed together at the end


def test_no_progress_reaches_a_search_among_its_candidates(bars_asked):
    """``-p auto -O auto.candidates=[heft,random_search] --no-progress`` drew random_search's bar on a terminal:
    auto had no ``progress`` for place (or evaluate) to turn off, and its candidates kept their own default."""
    import gnplace.placers.random_search as random_search

    shown = bars_asked(random_search)
    placer = make_placer("auto", candidates=["heft", "random_search"])
    placer.progress = False  # as gnplace place --no-progress and evaluate's workers set it
    placer.place(layered_graph(12, seed=0), load_cluster("k80x2"), seed=0)
    assert shown == [False]


def test_a_placement_that_fits_wins_over_a_faster_one_out_of_memory():
    """Fits first, then the step: round robin's half on cpu_gpu's 16 GiB GPU is twice as fast as all on the CPU, and over
    its memory; ``last_oom`` says which candidate overflows."""
    g, c = mlp_training_graph(layers=2, width=49152, batch=256), load_cluster("cpu_gpu")
    placer = AutoPlacer(candidates=("single", "round_robin"))
    placed = placer.place(g, c)
    assert placer.last_step_times["round_robin"] < placer.last_step_times["single"]
    assert placer.last_oom == {"single": False, "round_robin": True}
    assert placer.last_choice == "single" and not Simulator().time(g, c, placed).is_oom
