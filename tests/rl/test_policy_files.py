"""The checkpoint files ``policy`` loads (:mod:`gnplace.rl.policy_files`)."""

from __future__ import annotations

import pytest

from gnplace.exceptions import InvalidArgument, InvalidCheckpoint
from gnplace.rl.policy_files import (
    SHIPPED_CHECKPOINT,
    SHIPPED_CONSTRUCTORS,
    cached_policy,
    constructor_paths,
    pretraining,
)


@pytest.mark.parametrize("given", ["", " ", [""], "a.ckpt,"])
def test_an_empty_constructor_path_is_refused_not_read_as_none(given):
    """``scripts/place.py --constructor ''`` (an unset variable) ran with no constructor and exit 0: 'none' says so."""
    with pytest.raises(InvalidArgument, match="constructor names an empty path.*give 'none'"):
        constructor_paths(given)
    assert constructor_paths("none") == () and constructor_paths(["None"]) == ()


def test_constructor_paths_read_a_comma_list_a_sequence_or_the_shipped_ones(tmp_path):
    assert constructor_paths(None) == SHIPPED_CONSTRUCTORS
    assert [p.name for p in constructor_paths("a.ckpt, b.ckpt")] == ["a.ckpt", "b.ckpt"]
    assert constructor_paths(tmp_path / "a,b.ckpt") == (tmp_path / "a,b.ckpt",)  # a path is one file
    with pytest.raises(InvalidArgument, match="constructor must be a checkpoint path"):
        constructor_paths(3)


def test_cached_policy_loads_once_per_file_version_and_refuses_a_missing_file(tmp_path):
    first, meta = cached_policy(SHIPPED_CHECKPOINT)
    assert cached_policy(SHIPPED_CHECKPOINT)[0] is first and pretraining(meta)["mode"] == "construct"
    with pytest.raises(InvalidCheckpoint, match="no such checkpoint file"):
        cached_policy(tmp_path / "missing.ckpt")
    with pytest.raises(InvalidCheckpoint, match="trained with mode=construct"):
        cached_policy(SHIPPED_CHECKPOINT, mode="refine")


@pytest.mark.parametrize("meta, expected", [
    ({}, {"prior": 0.0, "modules": False, "anchored": False, "mode": "construct"}),
    ({"config": {"learner": {"prior": 4, "mode": "refine"}, "data": {"modules": True}}},
     {"prior": 4.0, "modules": True, "anchored": False, "mode": "refine"}),
    ({"config": {"learner": {"prior": 10**400}}}, {"prior": 0.0, "modules": False, "anchored": False,
                                                   "mode": "construct"}),
    ({"config": []}, {"prior": 0.0, "modules": False, "anchored": False, "mode": "construct"}),
])
def test_pretraining_reads_how_a_checkpoint_was_trained_and_defaults_what_it_lacks(meta, expected):
    assert pretraining(meta) == expected
