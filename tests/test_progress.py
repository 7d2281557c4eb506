from __future__ import annotations

import pytest

from gnplace.cluster import load_cluster
from gnplace.placers.annealing import AnnealingPlacer
from gnplace.placers.random_search import RandomSearchPlacer
from gnplace.progress import evaluation_bar
from gnplace.toy import mlp_training_graph


def test_a_disabled_bar_prints_nothing(capsys):
    with evaluation_bar("x", 10, enabled=False) as advance_to:
        advance_to(5)
    assert capsys.readouterr() == ("", "")


@pytest.mark.parametrize("placer", [AnnealingPlacer, RandomSearchPlacer])
def test_a_search_with_a_bar_keeps_stdout_clean_and_places_the_same(capsys, placer):
    """The bar goes to stderr (stdout may be ``--json``) and does not touch the search's random stream."""
    graph, cluster = mlp_training_graph(layers=3, width=256, batch=32), load_cluster("k80x2")
    shown = placer(budget=120, progress=True).place(graph, cluster, seed=3)
    assert capsys.readouterr().out == ""
    hidden = placer(budget=120, progress=False).place(graph, cluster, seed=3)
    assert (shown.devices == hidden.devices).all()


@pytest.mark.parametrize("name", ["net[v2]", "net[/]", "[bold]net"])
def test_a_label_is_shown_as_it_is_not_read_as_rich_markup(monkeypatch, name):
    """A graph named ``net[/]`` stopped the search (rich's MarkupError) and ``net[v2]`` was shown as ``net``."""
    import rich.console

    consoles = []

    class Recording(rich.console.Console):
        def __init__(self, **kwargs):
            super().__init__(**kwargs, force_terminal=True, record=True, width=100)
            consoles.append(self)

    monkeypatch.setattr(rich.console, "Console", Recording)
    with evaluation_bar(f"annealing {name}", 10, enabled=True) as advance_to:
        advance_to(5)
    assert f"annealing {name} " in consoles[0].export_text()
