"""Checks of the seed placers' update-memory limit shared by their tests (``rnn_pg``, ``spotlight``, ``post``,
``hierarchical``): imported as ``from tests.rl.update_limit import ...``."""

from __future__ import annotations

import pytest

from gnplace.cluster import load_cluster
from gnplace.exceptions import InvalidArgument
from gnplace.placers.base import Placer
from gnplace.toy import mlp_training_graph


def policy_features() -> int:
    """Features of a unit of the seq2seq policies: the node features and the sequence's own."""
    from gnplace.policy.features import NODE_FEATURES
    from gnplace.policy.seq2seq import SEQUENCE_EXTRA_FEATURES

    return len(NODE_FEATURES) + len(SEQUENCE_EXTRA_FEATURES)


def assert_refused_before_building(placer: Placer, monkeypatch: pytest.MonkeyPatch, networks: list[type],
                                   message: str) -> None:
    """``placer`` refuses an MLP on k80x2 with one line matching ``message``, before any of ``networks`` is built
    and before any evaluation."""

    def built(*args: object, **kwargs: object) -> None:
        raise AssertionError("a network was built")

    for network in networks:
        monkeypatch.setattr(network, "__init__", built)
    with pytest.raises(InvalidArgument, match=message):
        placer.place(mlp_training_graph(layers=3, width=256, batch=32), load_cluster("k80x2"), seed=0)
    assert placer.last_evaluations == 0  # type: ignore[attr-defined]
