"""The checkpoint files ``policy`` loads (:mod:`gnplace.rl.policy_files`)."""

from __future__ import annotations

from pathlib import Path

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


def _weights(policy):
    """All of ``policy``'s weights, flattened into one tensor."""
    import torch

    return torch.cat([tensor.detach().flatten() for tensor in policy.state_dict().values()])


def _two_policies(tmp_path):
    """Two policy files of one shape (so one size) and other weights, and the weights of each."""
    import torch

    from gnplace.policy.checkpoint import save_policy
    from gnplace.policy.gnn import PlacementPolicy, PolicyConfig

    written = []
    for seed, name in ((1, "a"), (2, "b")):
        torch.manual_seed(seed)
        policy = PlacementPolicy(PolicyConfig(hidden=8, layers=1, head=4))
        (tmp_path / name).mkdir()
        written.append((save_policy(tmp_path / name / "p.ckpt", policy), _weights(policy)))
    return written


def test_a_file_rewritten_at_its_size_is_loaded_again(tmp_path):
    """The cache's key is the file's size and its mtime: a retrained policy of the same shape is not the old one."""
    import os

    import torch

    (first, first_alpha), (second, second_alpha) = _two_policies(tmp_path)
    os.utime(first, ns=(10**18, 10**18))
    assert torch.equal(_weights(cached_policy(first)[0]), first_alpha)
    assert first.stat().st_size == second.stat().st_size
    first.write_bytes(second.read_bytes())
    os.utime(first, ns=(2 * 10**18, 2 * 10**18))
    assert torch.equal(_weights(cached_policy(first)[0]), second_alpha)


def test_one_relative_name_in_two_folders_is_two_files(tmp_path, monkeypatch):
    import os

    import torch

    (first, first_alpha), (second, second_alpha) = _two_policies(tmp_path)
    for path in (first, second):  # the same size and mtime: only the folder tells them apart
        os.utime(path, ns=(10**18, 10**18))
    assert first.stat().st_size == second.stat().st_size and not torch.equal(first_alpha, second_alpha)
    monkeypatch.chdir(first.parent)
    assert torch.equal(_weights(cached_policy("p.ckpt")[0]), first_alpha)
    monkeypatch.chdir(second.parent)
    assert torch.equal(_weights(cached_policy("p.ckpt")[0]), second_alpha)


def test_a_missing_shipped_checkpoint_says_to_reinstall(tmp_path, monkeypatch):
    import gnplace.rl.policy_files as files

    base, constructor = tmp_path / "base.ckpt", tmp_path / "construct.ckpt"
    monkeypatch.setattr(files, "SHIPPED_CHECKPOINT", base)
    monkeypatch.setattr(files, "SHIPPED_CONSTRUCTORS", (tmp_path / "other.ckpt", constructor))
    for path in (base, constructor):
        with pytest.raises(InvalidCheckpoint, match=r"no such checkpoint file \(the shipped checkpoint is missing from "
                                                    r"this install: reinstall gnplace, or pass another checkpoint\)$"):
            cached_policy(path)
    with pytest.raises(InvalidCheckpoint, match=r"own.ckpt: no such checkpoint file$"):
        cached_policy(tmp_path / "own.ckpt")


@pytest.mark.parametrize("given, expected", [
    ("off", ()), (" FALSE ", ()), (["none", "b.ckpt"], ("none", "b.ckpt")), ([Path("a.ckpt")], ("a.ckpt",)),
    ((Path("a.ckpt"), "b.ckpt"), ("a.ckpt", "b.ckpt")), ([], ()),
])
def test_constructor_paths_read_none_alone_and_paths_in_a_sequence(given, expected):
    assert constructor_paths(given) == tuple(Path(p) for p in expected)


def test_a_constructor_sequence_of_other_things_is_refused():
    with pytest.raises(InvalidArgument, match=r"constructors must be checkpoint paths, got \['a.ckpt', 3\]$"):
        constructor_paths(["a.ckpt", 3])


@pytest.mark.parametrize("meta, expected", [
    ({"config": {"learner": {"prior": float("inf")}, "data": {"modules": 1, "anchored": True}}},
     {"prior": 0.0, "modules": False, "anchored": True, "mode": "construct"}),
    ({"config": {"learner": {"prior": -2.0, "mode": "REFINE"}, "data": {"modules": "yes", "anchored": 1}}},
     {"prior": 0.0, "modules": False, "anchored": False, "mode": "construct"}),
])
def test_pretraining_takes_only_a_finite_positive_prior_and_true_flags(meta, expected):
    assert pretraining(meta) == expected


def test_each_caller_gets_its_own_copy_of_the_meta():
    """The meta was the cache's own dict: ``placer.meta["config"]["x"] = 1`` changed every later caller's meta."""
    policy, meta = cached_policy(SHIPPED_CHECKPOINT)
    meta["config"]["learner"]["mode"] = "refine"
    meta["added"] = 1
    again, fresh = cached_policy(SHIPPED_CHECKPOINT, mode="construct")  # read the cache's meta, not the edit
    assert again is policy and "added" not in fresh and pretraining(fresh)["mode"] == "construct"
