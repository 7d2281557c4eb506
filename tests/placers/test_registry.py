"""Tests of the placer registry ``gnplace.placers``."""

from __future__ import annotations

import pytest

from gnplace.cluster import load_cluster
from gnplace.exceptions import GnplaceError, UnknownName
from gnplace.placers import PLACERS, Placer, get_placer
from gnplace.placers.round_robin import RoundRobinPlacer
from gnplace.placers.single import SinglePlacer
from gnplace.sim.simulator import Simulator
from gnplace.toy import chain_graph


def test_registry_contents():
    assert PLACERS["single"] is SinglePlacer and PLACERS["round_robin"] is RoundRobinPlacer
    assert set(PLACERS) == {"single", "round_robin", "expert", "metis", "heft", "m_etf", "m_sct", "random_search", "annealing", "exact"}
    for name, cls in PLACERS.items():
        assert cls.name == name


@pytest.mark.parametrize("name, cls, text", [("single", SinglePlacer, "SinglePlacer()"), ("round_robin", RoundRobinPlacer, "RoundRobinPlacer()")])
def test_get_placer(name, cls, text):
    placer = get_placer(name)
    assert type(placer) is cls
    assert repr(placer) == text
    assert isinstance(placer, Placer)
    assert get_placer(name) is not placer  # a new one every time


@pytest.mark.parametrize("name", ["nope", "Single", "round-robin", ""])
def test_unknown_placer_lists_choices(name):
    choices = ", ".join(sorted(PLACERS))
    with pytest.raises(UnknownName, match=rf"^unknown placer {name!r} \(choose one of: {choices}\)$"):
        get_placer(name)


def test_unknown_name_is_a_gnplace_error():
    assert issubclass(UnknownName, GnplaceError) and issubclass(UnknownName, ValueError)


def test_options_are_passed_to_the_placer():
    sim = Simulator("placeto")
    assert get_placer("single", simulator=sim).simulator is sim


def test_unknown_option_raises_type_error():
    with pytest.raises(TypeError):
        get_placer("round_robin", temperature=1.0)


@pytest.mark.parametrize("name", sorted(PLACERS))
def test_every_placer_places_every_op(name):
    g, c = chain_graph(6), load_cluster("k80x4")
    p = get_placer(name).place(g, c, seed=0)
    p.check(g)
    assert not p.splits_groups(g)


def test_non_placer_is_not_a_placer():
    assert not isinstance(object(), Placer)
