"""The search teacher: an annealing search's placement, kept per pair and read back."""

from __future__ import annotations

import json
import subprocess
import sys

import numpy as np
import pytest

from gnplace.cluster import load_cluster
from gnplace.placers.annealing import AnnealingPlacer
from gnplace.rl import teacher
from gnplace.rl.teacher import cache_path, search_placement
from gnplace.toy import mlp_training_graph


@pytest.fixture()
def pair():
    return mlp_training_graph(layers=3, width=256, batch=32), load_cluster("k80x2")


def _spy(init, made):
    def spied(self, *args, **kwargs):
        init(self, *args, **kwargs)
        made.append(self.initial_temperature)
    return spied


def test_the_teacher_is_the_annealing_search_and_keeps_its_placement(pair, tmp_path, monkeypatch):
    graph, cluster = pair
    expected = AnnealingPlacer(budget=40, initial_temperature=0.05).place(graph, cluster, seed=3).devices
    made = []
    monkeypatch.setattr(AnnealingPlacer, "__init__", _spy(AnnealingPlacer.__init__, made))
    first = search_placement(graph, cluster, budget=40, seed=3, cache=tmp_path)
    assert made == [0.05]  # the shipped constructors' teacher: annealing revision 3's T_0, not today's default
    assert np.array_equal(first.devices, expected)
    assert cache_path(tmp_path, graph, cluster, 40, 3).is_file()

    def no_search(*args, **kwargs):
        raise AssertionError("searched again")

    monkeypatch.setattr(AnnealingPlacer, "place", no_search)
    assert np.array_equal(search_placement(graph, cluster, budget=40, seed=3, cache=tmp_path).devices, expected)
    with pytest.raises(AssertionError, match="searched again"):  # another budget is another search
        search_placement(graph, cluster, budget=41, seed=3, cache=tmp_path)


#: A fresh process: a worker's task searches one pair of a graph file, and what it had to import.
_WORKER = """
import sys
from gnplace.cluster import load_cluster
from gnplace.rl.teacher import search_pair
search_pair((sys.argv[1], load_cluster("k80x2"), 40, 3, sys.argv[2]))
print(sorted(m for m in ("torch", "lightning", "torch_geometric") if m in sys.modules))
"""


def test_a_workers_task_keeps_the_search_and_imports_neither_torch_nor_lightning(pair, tmp_path):
    """Pretraining's teacher workers run :func:`search_pair`; each spent 12 s importing pretraining before."""
    from gnplace.graph_io import save_graph

    graph, cluster = pair
    path = save_graph(graph, tmp_path / "g.gnpg")
    done = subprocess.run([sys.executable, "-c", _WORKER, str(path), str(tmp_path / "cache")], capture_output=True,
                          text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.split() == ["[]"]
    from gnplace.placement import load_placement

    kept = cache_path(tmp_path / "cache", graph, cluster, 40, 3)  # the search the worker kept: the teacher's
    expected = AnnealingPlacer(budget=40, initial_temperature=0.05).place(graph, cluster, seed=3).devices
    assert np.array_equal(load_placement(kept, graph, cluster).devices, expected)


def test_the_cache_name_follows_the_graph_cluster_budget_and_seed(pair, tmp_path):
    graph, cluster = pair
    names = {cache_path(tmp_path, graph, cluster, 40, 0), cache_path(tmp_path, graph, cluster, 40, 1),
             cache_path(tmp_path, graph, cluster, 50, 0), cache_path(tmp_path, graph, load_cluster("k80x4"), 40, 0),
             cache_path(tmp_path, mlp_training_graph(layers=4, width=256, batch=32), cluster, 40, 0)}
    assert len(names) == 5
    assert teacher.__all__ == ["search_placement", "cache_path"]


def test_a_graph_name_never_makes_a_path_and_a_damaged_search_says_what_to_do(pair, tmp_path):
    from gnplace.exceptions import InvalidPlacement

    graph, cluster = pair
    odd = graph.replace(name="../net/0")
    path = cache_path(tmp_path, odd, cluster, 40, 0)
    assert path.parent == tmp_path and "/" not in path.name and not path.name.startswith(".")
    search_placement(odd, cluster, budget=40, seed=0, cache=tmp_path)
    assert [p.name for p in tmp_path.iterdir()] == [path.name]
    path.write_text("{ not json")
    with pytest.raises(InvalidPlacement, match="delete it to search the pair again"):
        search_placement(odd, cluster, budget=40, seed=0, cache=tmp_path)


def test_the_cache_names_of_today_stand(pair, tmp_path, auto_uses, revisions_of_before):
    """annealing's revision is 5 and auto's candidates are at today's revisions (``auto_uses``): the names of today.

    2026-11-30: m_etf and m_sct revision 2 (the ETF fix) moved the names, which carry the placers' revisions since
    (2026-12-04: the memory repair's, of every memory-aware candidate); without those, the name is the one made before.
    """
    import hashlib

    graph, cluster = pair
    assert teacher.search_recipe() == {"uses": auto_uses}
    text = f"{graph.fingerprint()}|{cluster.fingerprint()}|40|3"
    today = hashlib.sha256(f'{text}|{json.dumps({"uses": auto_uses}, sort_keys=True)}'.encode()).hexdigest()
    assert cache_path(tmp_path, graph, cluster, 40, 3).name.endswith(f"-{today[:16]}.json")
    revisions_of_before()  # as before 2026-11-30: no placer the search uses declared one
    assert teacher.search_recipe() == {}
    before = hashlib.sha256(text.encode()).hexdigest()
    assert cache_path(tmp_path, graph, cluster, 40, 3).name.endswith(f"-{before[:16]}.json")


@pytest.mark.parametrize("revised", ["m_etf", "auto", "annealing"])
def test_a_new_revision_of_the_search_or_its_start_searches_again(pair, tmp_path, monkeypatch, revised):
    """m_etf's new revision changes auto's placement, annealing's start: the search made before is not the answer."""
    from gnplace.placers.registry import PLACERS

    graph, cluster = pair
    search_placement(graph, cluster, budget=20, seed=0, cache=tmp_path)
    before = cache_path(tmp_path, graph, cluster, 20, 0)
    monkeypatch.setattr(PLACERS.resolve(revised), "revision", {"annealing": "6", "m_etf": "4"}.get(revised, "2"),
                        raising=False)  # the next one (m_etf's is 3 since 2026-12-04); auto declares none
    searched = []
    place = AnnealingPlacer.place
    monkeypatch.setattr(AnnealingPlacer, "place", lambda self, *a, **k: searched.append(1) or place(self, *a, **k))
    search_placement(graph, cluster, budget=20, seed=0, cache=tmp_path)
    assert searched == [1] and cache_path(tmp_path, graph, cluster, 20, 0) != before
    assert len(list(tmp_path.iterdir())) == 2  # the search of before stays, under its own name


def test_the_search_shows_no_progress_of_its_own(pair, monkeypatch):
    """Pretraining counts the pairs searched; each search also wrote its own lines, even under --no-progress."""
    made = []
    init = AnnealingPlacer.__init__

    def spied(self, *args, **kwargs):
        init(self, *args, **kwargs)
        made.append(self.progress)

    monkeypatch.setattr(AnnealingPlacer, "__init__", spied)
    graph, cluster = pair
    search_placement(graph, cluster, budget=50, seed=0)
    assert made == [False]
