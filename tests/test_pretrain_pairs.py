"""The pairs pretraining trains and validates on: the families' graphs held out or trained on, their clusters, the
errors that name the config's key, and the digest a resumed run is checked against."""

from __future__ import annotations

import json
import shutil
from collections.abc import Callable
from pathlib import Path

import pytest
import yaml

from gnplace.cluster import Cluster, load_cluster
from gnplace.exceptions import InvalidArgument, InvalidCluster
from gnplace.pretrain_config import load_pretrain_config
from gnplace.pretrain_pairs import pairs_digest, pretrain_pairs

ROOT = Path(__file__).resolve().parents[1]


def test_a_missing_data_root_is_one_line_naming_both_places_looked(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)  # neither the working directory nor the config's repository has it
    with pytest.raises(InvalidArgument, match=r"data.root 'nowhere': no such folder in the working directory or at "
                                              r".*nowhere; .*gnplace generate --family F --out nowhere/F"):
        pretrain_pairs(load_pretrain_config(overrides=["data.root=nowhere"]))
    (tmp_path / "nowhere").mkdir()  # the working directory's folder is read first: now a family is missing
    with pytest.raises(Exception, match="nowhere/cifar10: no such graph file or folder"):
        pretrain_pairs(load_pretrain_config(overrides=["data.root=nowhere"]))


def test_pretraining_never_sees_a_test_graph_and_holds_out_validation_graphs():
    pairs, val_pairs = pretrain_pairs(load_pretrain_config())
    train_graphs = {Path(g).stem for g, _ in pairs}
    val_graphs = {Path(g).stem for g, _ in val_pairs}
    manifests = {f: json.loads((ROOT / "datasets" / f / "manifest.json").read_text()) for f in ("cifar10", "ptb", "nmt")}
    test_graphs = {e["name"] for m in manifests.values() for e in m["graphs"] if e["split"] == "test"}
    assert not (train_graphs | val_graphs) & test_graphs
    assert not train_graphs & val_graphs and len(val_graphs) == 6 and len(train_graphs) == 66
    clusters = {c.name for _, c in pairs}
    assert {"k80x2", "k80x4", "v100x8", "tight4", "cpu_gpu"} < clusters
    assert sum(name.startswith("rand") for name in clusters) == 12
    assert all(isinstance(c, Cluster) for _, c in pairs)


def test_a_family_of_no_more_graphs_than_it_holds_out_is_refused(tiny_config):
    """Three graphs with val_per_family 3 leave none to train on: refused by the family, not trained without it."""
    with pytest.raises(InvalidArgument, match=r"^family 'alpha': 3 training graphs, cannot hold out 3$"):
        pretrain_pairs(load_pretrain_config(tiny_config, ["data.val_per_family=3"]))
    pairs, val_pairs = pretrain_pairs(load_pretrain_config(tiny_config, ["data.val_per_family=2"]))
    assert sorted({Path(g).stem for g, _ in pairs}) == ["alpha_0", "beta_0"]  # the last ones are held out
    assert sorted({Path(g).stem for g, _ in val_pairs}) == ["alpha_1", "alpha_2", "beta_1", "beta_2"]


def test_one_family_folder_named_twice_is_refused_not_drawn_twice(tiny_config, tmp_path):
    """data.families=[mine, ./mine] (or a link to it) passed the check of names given twice: every pair twice."""
    root = Path(yaml.safe_load(tiny_config.read_text())["data"]["root"])
    shutil.copytree(root / "alpha", tmp_path / "data" / "mine")
    (tmp_path / "data" / "link").symlink_to(tmp_path / "data" / "mine")
    for second in ("./mine", "link"):
        config = load_pretrain_config(tiny_config, [f"data.root={tmp_path / 'data'}", f"data.families=[mine,{second}]"])
        with pytest.raises(InvalidArgument, match=rf"^data: families 'mine' and '{second}' are one folder \("):
            pretrain_pairs(config)
    config = load_pretrain_config(tiny_config, [f"data.root={tmp_path / 'data'}", "data.families=[mine]"])
    assert len(pretrain_pairs(config)[0]) == 2 * 2  # 2 training graphs (one held out) on 2 clusters


def test_the_constructor_config_trains_on_small_cifar10_graphs_and_imitates_searches():
    config = load_pretrain_config(ROOT / "configs" / "constructor.yaml")
    assert config.data.teacher_budget > 0 and config.learner.imitation_steps == config.schedule.iterations
    pairs, val_pairs = pretrain_pairs(config)
    from gnplace.graph_io import load_graph

    assert pairs and all(load_graph(g).num_ops <= config.data.max_ops for g, _ in pairs)
    held_out = {Path(g).name for g, _ in val_pairs}
    assert held_out and not held_out & {Path(g).name for g, _ in pairs}  # max_ops never moves a graph out of held-out


def test_val_left_out_validates_on_the_graphs_max_ops_leaves_out_and_trains_on_the_same_pairs():
    config = load_pretrain_config(ROOT / "configs" / "constructor.yaml", ["data.val_left_out=false"])
    pairs, val_pairs = pretrain_pairs(config)
    more = load_pretrain_config(ROOT / "configs" / "constructor.yaml")
    assert more.data.val_left_out  # both constructor configs validate so
    same_pairs, more_val = pretrain_pairs(more)
    from gnplace.graph_io import load_graph

    def named(listed):
        return [(g, c.name) for g, c in listed]

    assert named(same_pairs) == named(pairs)
    assert named(more_val[:len(val_pairs)]) == named(val_pairs)  # the held-out pairs first, as before
    added = {g for g, _ in more_val[len(val_pairs):]}
    trained = {g for g, _ in pairs}
    every = {g for g, _ in more_val} | trained
    assert added and not added & trained and all(load_graph(g).num_ops > config.data.max_ops for g in added)
    assert len(every) == 24  # each of the 24 cifar10 training-split graphs is trained or validated on
    assert {c.name for _, c in more_val} == set(config.data.val_clusters)


@pytest.mark.parametrize("key", ["presets", "val_clusters"])
def test_an_unknown_cluster_of_the_config_names_its_key(key):
    with pytest.raises(InvalidCluster, match=f"^data.{key}: unknown cluster 'k80x9': give a YAML file or one of"):
        pretrain_pairs(load_pretrain_config(overrides=[f"data.{key}=[k80x2, k80x9]"]))


def test_a_cluster_file_named_relative_to_the_config_repository_is_found_from_another_folder(tiny_config, tmp_path,
                                                                                           monkeypatch):
    base = tiny_config.parent.parent  # the config's repository, where data.root's relative paths start as well
    (base / "clusters").mkdir(exist_ok=True)
    (base / "clusters" / "two.yaml").write_text((ROOT / "gnplace" / "clusters" / "k80x2.yaml").read_text())
    monkeypatch.chdir(tmp_path)  # not the repository: the file is not in the working folder
    config = load_pretrain_config(tiny_config, ["data.presets=[clusters/two.yaml]",
                                                "data.val_clusters=[clusters/two.yaml]"])
    pairs, val_pairs = pretrain_pairs(config)
    assert {c.name for _, c in pairs[:1] + val_pairs} == {load_cluster("k80x2").name}
    (tmp_path / "clusters").mkdir()  # the working folder's file goes first, as data.root's folder does
    (tmp_path / "clusters" / "two.yaml").write_text("not: [a cluster")
    with pytest.raises(InvalidCluster, match="data.presets: clusters/two.yaml"):
        pretrain_pairs(config)


def test_the_pairs_digest_is_unchanged_while_no_revision_changed(
    tiny_config: Path, monkeypatch: pytest.MonkeyPatch, auto_uses: dict[str, str],
    revisions_of_before: Callable[[], None],
) -> None:
    """The digest of today's pairs, and without a placer revision the value runs made before recorded.

    2026-11-30: m_etf and m_sct revision 2 (the ETF fix) added their recipe to today's digests (2026-12-04: the memory
    repair's revisions of every candidate); a recipe is added only where one changed, so that with auto's candidates
    declaring none, as before, the digest is the one of before.
    """
    import hashlib

    from gnplace.evaluate import file_digest
    from gnplace.placers.m_etf import METFPlacer

    pairs, val_pairs = pretrain_pairs(load_pretrain_config(tiny_config))
    listed = [[[file_digest(g), c.fingerprint()] for g, c in group] for group in (pairs, val_pairs)]
    recipe = {"recipe": {"uses": auto_uses}}
    assert pairs_digest(pairs, val_pairs) == hashlib.sha256(json.dumps([*listed, recipe]).encode()).hexdigest()
    today = pairs_digest(pairs, val_pairs, 30)
    assert today == hashlib.sha256(json.dumps([*listed, {"teacher_budget": 30}, recipe]).encode()).hexdigest()
    monkeypatch.setattr(METFPlacer, "revision", "4")  # the next one
    assert pairs_digest(pairs, val_pairs, 30) != today
    revisions_of_before()  # as before 2026-11-30: no recipe, the digests of before
    assert pairs_digest(pairs, val_pairs) == hashlib.sha256(json.dumps(listed).encode()).hexdigest()
    before = pairs_digest(pairs, val_pairs, 30)
    assert before == hashlib.sha256(json.dumps([*listed, {"teacher_budget": 30}]).encode()).hexdigest()
