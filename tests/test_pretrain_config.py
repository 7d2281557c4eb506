"""Pretraining's config: read from YAML, overridden, and checked before Lightning is imported."""

from __future__ import annotations

import subprocess
import sys

import pytest

from gnplace.exceptions import InvalidArgument
from gnplace.pretrain_config import DEFAULT_CONFIG, load_pretrain_config


def test_the_shipped_config_reads_and_overrides_apply():
    config = load_pretrain_config(DEFAULT_CONFIG, ["schedule.iterations=5", "learner.lr=3e-4"], seed=9)
    assert config.schedule.iterations == 5 and config.learner.lr == 3e-4 and config.learner.seed == 9
    assert config.data.families == ("cifar10", "ptb", "nmt")
    assert load_pretrain_config().digest() == load_pretrain_config(DEFAULT_CONFIG).digest() != config.digest()


@pytest.mark.parametrize("text, message", [
    ("data: {colour: red}", "unknown key data.colour"),
    ("schedule: {iterations: many}", "must be a number"),
    ("schedule: {iterations: 2.5}", "must be an integer"),
    ("optimiser: {}", "unknown section"),
    ("1: 2\nfoo: 3", "unknown section 1"),  # keys of two types: a TypeError from sorted()
    ("data: {1: 2, foo: 3, null: 4}", "unknown key data.1"),
    ("learner: {algo: sarsa}", "algo"),
    ("data: [1, 2", "not valid YAML"),
    ("data: 3.5", "section .data. must be a mapping"),
    ("schedule: {iterations: .inf}", "too large"),
    ("a: &x [1]\nb: *x", "anchors"),
    ("learner: {seed: -1}", "seed >= 0, got -1"),
    ("schedule: {checkpoint_every_s: -5}", "checkpoint_every_s must be a positive number of seconds"),
    ("learner: {alpha: 0}", "alpha > 0, got 0"),
    ("learner: {kl_target: 0}", "kl_target > 0, got 0"),
    ("data: {random_cluster_seed: -1}", "data: random_cluster_seed must be >= 0, got -1"),
    ("data: {max_nodes: 0}", "max_nodes must be >= 1, got 0"),
    ("data: {random_clusters: 1000000000}", "random_clusters must be at most 10,000"),
    ("data: {families: [ptb, ptb]}", "families names ptb more than once"),
    # val/oom of a family named so overwrote the overall share, and val/best_vs_auto picks best.ckpt
    ("data: {families: [ptb, oom]}", r"families names 'oom', which validation logs as an overall figure \(val/oom\)"),
    ("data: {families: [best_vs_auto]}", r"names 'best_vs_auto', which .*\(val/best_vs_auto\); rename that folder"),
    ("data: {teacher_budget: -1}", "data: teacher_budget must be >= 0, got -1"),
    ("data: {max_ops: -5}", "data: max_ops must be >= 0, got -5"),
    ("data: {val_left_out: true}", "val_left_out needs max_ops"),
    ("data: {val_left_out: 1, max_ops: 10}", "val_left_out must be true or false"),
])
def test_a_malformed_config_is_one_clear_error(tmp_path, text, message):
    path = tmp_path / "bad.yaml"
    path.write_text(text)
    with pytest.raises(InvalidArgument, match=message):
        load_pretrain_config(path)
    with pytest.raises(InvalidArgument, match="no such config"):
        load_pretrain_config(tmp_path / "missing.yaml")
    with pytest.raises(InvalidArgument, match="SECTION.KEY=VALUE"):
        load_pretrain_config(overrides=["iterations=3"])


@pytest.mark.parametrize("override, message", [
    # no family: refused only once the pairs were counted, as "1 processes need a pair each ... (0)"
    ("data.families=[]", "data: families is empty; name at least one dataset folder under data.root"),
    ("data.families=['']", r"data: families holds an empty name \(\[''\]\)"),
    ("data.presets=[k80x2, '']", r"data: presets holds an empty name \(\['k80x2', ''\]\)"),  # was ".: is a folder"
    ("data.val_clusters=[' ']", r"data: val_clusters holds an empty name"),
    ("data.root=''", r"data: root is empty; name the folder of the datasets"),  # was "cifar10: no such graph file"
    # the held-out graphs were left out of training and validated on no cluster, without a word
    ("data.val_clusters=[]", r"data: val_clusters is empty, so the 2 graphs of each family held out for validation "
                             r"\(val_per_family\) would be neither validated nor trained on; name a cluster, or set "
                             r"val_per_family: 0 to validate nothing$"),
])
def test_an_empty_list_or_name_in_the_data_section_is_named(override, message):
    with pytest.raises(InvalidArgument, match=f"^{message}"):
        load_pretrain_config(overrides=[override])


def test_no_validation_clusters_with_no_graph_held_out_validates_nothing():
    config = load_pretrain_config(overrides=["data.val_clusters=[]", "data.val_per_family=0"])
    assert config.data.val_clusters == () and config.data.val_per_family == 0


def test_an_empty_config_path_is_named_as_empty_not_as_the_current_folder():
    with pytest.raises(InvalidArgument, match=r"^config path is empty; name the YAML config file"):
        load_pretrain_config("")


def test_reading_and_checking_a_config_imports_neither_torch_nor_lightning():
    """``gnplace pretrain`` and ``scripts/train.py`` read their settings first: a bad one costs no 10 s import."""
    code = (
        "import sys\n"
        "from gnplace.pretrain_config import load_pretrain_config\n"
        "from gnplace.rl.config import LearnerConfig\n"
        "config = load_pretrain_config(overrides=['learner.samples=8'])\n"
        "assert config.learner == LearnerConfig(**{**config.learner.__dict__, 'samples': 8})\n"
        "print(sorted(m for m in ('torch', 'torch_geometric', 'lightning') if m in sys.modules))\n"
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "[]"


@pytest.mark.parametrize("key", ["learner.lr", "schedule.checkpoint_every_s"])
def test_an_int_past_a_floats_range_is_refused_in_one_line(key):
    """``--set learner.lr=<400 digits>`` was an OverflowError traceback from ``math.isfinite``."""
    from gnplace.exceptions import InvalidArgument
    from gnplace.pretrain_config import load_pretrain_config

    with pytest.raises(InvalidArgument, match=key.split(".")[-1]):
        load_pretrain_config(None, [f"{key}={10**400}"])


@pytest.mark.parametrize("override", ["schedule.iterations=nan", "learner.lr=.nan", "learner.lr=NaN"])
def test_a_nan_value_is_said_to_be_no_number_not_too_large(override):
    """``--set schedule.iterations=nan`` was refused as "schedule.iterations is too large, got nan"."""
    key = override.split("=")[0]
    with pytest.raises(InvalidArgument, match=rf"^pretrain config: {key} must be a number, got nan$"):
        load_pretrain_config(overrides=[override])


def test_a_config_that_is_a_pipe_is_said_to_be_one(tmp_path):
    """It was refused as "no such config file", of a file that is there."""
    import os

    pipe = tmp_path / "config.yaml"
    os.mkfifo(pipe)
    with pytest.raises(InvalidArgument, match=r"config.yaml: is not a regular file \(a device or a pipe\), not a config"):
        load_pretrain_config(pipe)


@pytest.mark.parametrize("override, message", [
    ("schedule.iterations=0", "schedule: iterations must be >= 1, got 0"),
    ("schedule.pairs_per_step=-2", "schedule: pairs_per_step must be >= 1, got -2"),
    ("schedule.steps_per_epoch=0", "schedule: steps_per_epoch must be >= 1, got 0"),
    ("data.val_per_family=-1", "data: val_per_family must be >= 0, got -1"),
    ("data.random_clusters=-3", "data: random_clusters must be >= 0, got -3"),
])
def test_a_value_below_its_least_names_its_key_and_value(override, message):
    """``steps_per_epoch: 0`` was refused as "iterations, pairs_per_step and steps_per_epoch must be >= 1"."""
    with pytest.raises(InvalidArgument, match=f"^{message}$"):
        load_pretrain_config(overrides=[override])


@pytest.mark.parametrize("override", ["learner.lr =3e-4", " learner.lr=3e-4", "learner . lr = 3e-4"])
def test_spaces_around_an_overrides_key_are_no_part_of_it(override):
    """``--set "learner.lr =3e-4"`` was refused as "unknown key learner.lr", a key that is known."""
    assert load_pretrain_config(overrides=[override]).learner.lr == 3e-4


@pytest.mark.parametrize("override, shown", [
    ("data.families=[null]", "None"), ("data.families=[[cifar10]]", r"\['cifar10'\]"),
    ("data.presets=[k80x2, {a: 1}]", r"\{'a': 1\}"), ("data.val_clusters=[true]", "True"),
])
def test_a_list_item_that_is_no_name_is_refused_at_once(override, shown):
    """``families: [null]`` was read as the folder "None", refused after Lightning's import as no such folder."""
    key = override.split("=")[0]
    with pytest.raises(InvalidArgument, match=rf"^pretrain config: {key} must be a list of names, got {shown} in it$"):
        load_pretrain_config(overrides=[override])
    assert load_pretrain_config(overrides=["data.presets=[k80x2, 7]"]).data.presets == ("k80x2", "7")


@pytest.mark.parametrize("text", ["", "# nothing yet\n", "\n\n", "data:\nschedule:\nlearner:\n", "learner: {}\n", "{}"])
def test_a_config_without_a_setting_is_refused(tmp_path, text):
    """An empty file ran pretraining on the code's defaults (samples 32, no prior, no modules: not the shipped
    recipe's) without a word, even with overrides."""
    path = tmp_path / "empty.yaml"
    path.write_text(text)
    with pytest.raises(InvalidArgument, match=r"empty.yaml: holds no settings \(empty, or comments or empty sections "
                       r"alone\); name the values to run with, as configs/pretrain.yaml does$"):
        load_pretrain_config(path, ["schedule.iterations=2"])
    path.write_text("schedule: {iterations: 2}\n")  # one setting is a config: the rest take their defaults
    assert load_pretrain_config(path).schedule.iterations == 2


def test_the_docs_name_every_key_whose_default_is_not_the_shipped_configs():
    """Nothing said that a key a config leaves out takes the code's default, which for 10 keys is not the shipped
    recipe's (``samples`` 32, not 16; no prior): the README, ``--config``'s help and the reader's docstring name them."""
    from pathlib import Path

    from gnplace.cli.pretrain import add_arguments
    from gnplace.pretrain_config import PretrainConfig

    shipped, coded = load_pretrain_config().to_dict(), PretrainConfig().to_dict()
    differ = [f"{s}.{k}" for s in shipped for k in shipped[s] if shipped[s][k] != coded[s][k]]
    assert differ  # (else the docs' list is moot, and this test with it)
    readme = " ".join((Path(__file__).resolve().parents[1] / "README.md").read_text().split())
    docstring = " ".join((load_pretrain_config.__doc__ or "").split())
    assert all(f"`{key}`" in readme and f"``{key}``" in docstring for key in differ), differ
    assert f"{len(differ)} differ" in readme
    import argparse

    parser = argparse.ArgumentParser()
    add_arguments(parser)
    help_text = " ".join(parser.format_help().split())
    assert f"not configs/pretrain.yaml's value ({len(differ)} differ" in help_text


@pytest.mark.parametrize("name", ["pretrain.yaml", "constructor.yaml", "constructor-cifar10-ptb.yaml"])
def test_each_shipped_config_names_every_setting_and_is_its_checkpoints(name):
    """The configs say "every hyperparameter", and pretrain.yaml lacked data.teacher_budget, max_ops, val_left_out
    and all three learner.screen and screen_model (run at the code's defaults)."""
    import dataclasses

    import yaml

    from gnplace.policy.checkpoint import read_checkpoint
    from gnplace.pretrain_config import DataConfig, ScheduleConfig
    from gnplace.rl.config import LearnerConfig

    path = DEFAULT_CONFIG.parent / name
    written = yaml.safe_load(path.read_text())
    for section, cls in (("data", DataConfig), ("schedule", ScheduleConfig), ("learner", LearnerConfig)):
        assert [f.name for f in dataclasses.fields(cls)] == list(written[section]), section  # each, in order
    made = {"pretrain.yaml": "gnplace-base.ckpt", "constructor.yaml": "gnplace-construct.ckpt",
            "constructor-cifar10-ptb.yaml": "gnplace-construct-cifar10-ptb.ckpt"}[name]
    meta = read_checkpoint(DEFAULT_CONFIG.parents[1] / "checkpoints" / made)["meta"]
    assert meta["config_digest"] == load_pretrain_config(path).digest()


def test_a_leading_zero_is_a_decimal_number_not_yaml_1_1_octal():
    # --set schedule.iterations=010 ran 8 iterations (YAML 1.1's octal); the text is now read as it is written
    config = load_pretrain_config(overrides=["schedule.iterations=010", "learner.samples=08"])
    assert config.schedule.iterations == 10 and config.learner.samples == 8


def test_random_clusters_up_to_the_most_are_taken():
    from gnplace.pretrain_config import MAX_RANDOM_CLUSTERS

    config = load_pretrain_config(overrides=[f"data.random_clusters={MAX_RANDOM_CLUSTERS}"])
    assert config.data.random_clusters == MAX_RANDOM_CLUSTERS
    with pytest.raises(InvalidArgument, match=r"random_clusters must be at most 10,000, got 10001"):
        load_pretrain_config(overrides=[f"data.random_clusters={MAX_RANDOM_CLUSTERS + 1}"])


def test_a_list_given_as_text_drops_its_empty_items():
    """``--set data.families=cifar10,,ptb,`` (a doubled or trailing comma) names two families, as YAML's [cifar10, ptb]."""
    config = load_pretrain_config(overrides=["data.families=cifar10,,ptb,"])
    assert config.data.families == ("cifar10", "ptb")


def test_a_blank_data_root_is_refused_as_empty():
    with pytest.raises(InvalidArgument, match=r"^data: root is empty"):
        load_pretrain_config(overrides=['data.root="  "'])


def test_numpy_numbers_are_recorded_as_python_numbers_a_weights_only_load_reads():
    """A config made in Python with np.int64(3) iterations recorded it as such: checkpoints that
    ``torch.load(weights_only=True)`` refuses, each resume "not a readable checkpoint"."""
    import io

    import numpy as np
    import torch

    from gnplace.pretrain_config import DataConfig, PretrainConfig, ScheduleConfig

    config = PretrainConfig(schedule=ScheduleConfig(iterations=np.int64(3)), data=DataConfig(max_nodes=np.int64(50)))
    recorded = config.to_dict()
    assert type(recorded["schedule"]["iterations"]) is int and type(recorded["data"]["max_nodes"]) is int
    buffer = io.BytesIO()
    torch.save(recorded, buffer)
    buffer.seek(0)
    assert torch.load(buffer, weights_only=True) == recorded
    assert config.digest() == PretrainConfig(schedule=ScheduleConfig(iterations=3),
                                             data=DataConfig(max_nodes=50)).digest()
