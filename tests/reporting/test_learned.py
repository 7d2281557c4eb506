"""``scripts/reporting/learned.py``: section 2's rows, the learned placers with one budget and Placeto zero-shot."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.parametrize("history", [[], [[1, float("nan")]], [[1, 1.1], [8, -0.5]], [[0.5]], None])
def test_a_saved_row_whose_learning_curve_the_report_cannot_read_is_made_again(tmp_path, load_script, history):
    """A line edited by hand with ``"history": []`` stood, and the seeds' claims raised IndexError after every section
    had run (``rb["history"][-1][1]``); a curve with a point the figure leaves out is made again too."""
    learned = load_script("reporting.learned")
    common = load_script("benchmarks.common")
    path = tmp_path / "learned.jsonl"
    full = {"key": "a", **_learned_row(learned), "history": [[1, 1.1], [8, 0.9]]}
    path.write_text(json.dumps({**full, "history": history}) + "\n" + json.dumps({**full, "key": "b"}) + "\n")
    ran = []
    rows = common.Store(path).run([{"key": "a"}, {"key": "b"}], lambda t: ran.append(t["key"]) or {**full, **t}, 1,
                                  "test", fields=learned.LEARNED_FIELDS, readable=learned.learned_row_readable)
    assert ran == ["a"] and [r["history"] for r in rows] == [full["history"]] * 2


def _learned_row(learned):
    """A row of section 2 with each field the report reads, of the kind :func:`learned_row` writes."""
    return {**{field: 1 for field in learned.LEARNED_FIELDS}, "graph": "g.gnpg", "cluster": "k80x4", "placer": "post",
            "family": "ptb", "name": "g", "step_s": 0.01, "vs_auto": 0.9, "vs_bound": 1.5, "oom": False,
            "seconds": 2.5, "evaluations": 64, "updates": None, "history": [[1, 1.1], [8, 0.9]]}


@pytest.mark.parametrize(("section", "field", "value"), [
    ("learned", "oom", None), ("learned", "evaluations", None), ("learned", "seconds", "2.5"),
    ("learned", "family", None), ("learned", "step_s", None), ("learned", "vs_auto", True),
    ("learned", "vs_bound", None), ("exact", "auto", None), ("exact", "exact_ms", "5.5"),
    ("scale", "placer", None)])
def test_a_saved_row_holding_a_value_of_another_kind_than_the_report_reads_is_made_again(tmp_path, load_script,
                                                                                          section, field, value):
    """A line edited by hand (``"oom": null``, ``"auto": null``) stood, and the report was a TypeError once every
    section had run (section 2's table, section 4's, the figures); it is made again, as a row without a field is."""
    learned = load_script("reporting.learned")
    common = load_script("benchmarks.common")
    exact = load_script("reporting.exact")
    scale = load_script("reporting.scale")
    full, fields, readable = {
        "learned": (_learned_row(learned), learned.LEARNED_FIELDS, learned.learned_row_readable),
        "exact": ({"name": "g@12", "groups_placed": 12, "status": "optimal", "exact_ms": 5.5, "auto": 1.07,
                   "policy": 1.01}, exact.EXACT_FIELDS, exact.exact_row_readable),
        "scale": ({"ops": 500, "placer": "m_etf", "seconds": 0.4}, scale.SCALE_FIELDS, scale.scale_row_readable),
    }[section]
    path = tmp_path / "rows.jsonl"
    path.write_text(json.dumps({"key": "a", **full, field: value}) + "\n" + json.dumps({"key": "b", **full}) + "\n")
    ran = []
    rows = common.Store(path).run([{"key": "a"}, {"key": "b"}], lambda t: ran.append(t["key"]) or {**full, **t}, 1,
                                  "test", fields=fields, readable=readable)
    assert ran == ["a"] and [r[field] for r in rows] == [full[field]] * 2


def test_section_two_and_four_rows_run_again_on_a_regenerated_graph_or_an_edited_cluster(tmp_path, load_script):
    """Their keys name the graph file by its stem and the cluster by its name: old rows answered new inputs."""
    import shutil

    from gnplace.graph_io import load_graph, save_graph

    learned = load_script("reporting.learned")
    common = load_script("benchmarks.common")
    keys = load_script("reporting.keys")
    graph = tmp_path / "mlp.gnpg"
    shutil.copy(ROOT / "datasets" / "examples" / "mlp1x8w6144b256.gnpg", graph)
    cluster = tmp_path / "pair.yaml"
    cluster.write_text((ROOT / "gnplace" / "clusters" / "k80x2.yaml").read_text().replace("name: k80x2", "name: pair"))
    store, ran = common.Store(tmp_path / "learned.jsonl"), []

    def row(task):
        ran.append(task["key"])
        auto, bound = learned._references(task["graph"], task["cluster"])
        return {**task, "auto_s": auto, "bound_s": bound}

    def run():
        task = {"key": keys.learned_key(str(graph), str(cluster), "single", 4), "graph": str(graph),
                "cluster": str(cluster), **keys.inputs_identity(str(graph), str(cluster))}
        return store.run([task], row, 1, "section 2", keys.IDENTITY, learned.learned_row_stands)[0]

    first = run()
    assert run() == first and len(ran) == 1  # the same inputs: resumed
    save_graph(load_graph(graph).replace(name="regenerated"), graph)  # the dataset made again
    assert run()["graph_sha256"] != first["graph_sha256"] and len(ran) == 2
    cluster.write_text(cluster.read_text().replace("default: placeto", "default: {bandwidth: 1 GB/s, latency: 5 us}"))
    assert run()["cluster_fingerprint"] != first["cluster_fingerprint"] and len(ran) == 3
    # a row saved before rows recorded their inputs stands where auto's step and the bound are today's
    legacy = {k: v for k, v in run().items() if k not in keys.IDENTITY}
    assert learned.learned_row_stands(legacy, legacy)
    assert not learned.learned_row_stands({**legacy, "auto_s": legacy["auto_s"] * 1.01}, legacy)


@pytest.fixture
def toy_family(tmp_path, load_script, monkeypatch):
    """``reporting.learned`` with a family ``toy`` of two train graphs and one test graph in ``tmp_path``; a quick
    config; ``reporting.keys`` and ``benchmarks.common``; the train graphs."""
    import dataclasses

    from gnplace.graph_io import save_graph
    from gnplace.toy import mlp_training_graph

    learned = load_script("reporting.learned")
    train = [str(save_graph(mlp_training_graph(layers=k, width=64, batch=8), tmp_path / f"train{k}.gnpg"))
             for k in (2, 3)]
    test = [str(save_graph(mlp_training_graph(layers=4, width=64, batch=8), tmp_path / "test.gnpg"))]
    monkeypatch.setattr(learned, "train_graphs", lambda family, count: train[:count])
    monkeypatch.setattr(learned, "test_graphs", lambda family, count: test[:count])
    config = dataclasses.replace(load_script("reporting.config").QUICK, rl_clusters=("k80x2",), placeto_train_graphs=2,
                                 placeto_episodes=2)
    return learned, config, train, load_script("reporting.keys"), load_script("benchmarks.common")


def _regenerate(path):
    """The graph at ``path`` made again with other costs (the same ops and name)."""
    from gnplace.graph_io import load_graph, save_graph

    graph = load_graph(path)
    save_graph(graph.replace(flops=graph.flops * 2), path)


def test_placeto_is_pretrained_again_on_a_changed_train_split(toy_family, tmp_path, monkeypatch):
    """The checkpoint was named by family, cluster, episodes and revision: a regenerated train graph reused it."""
    import gnplace.rl.placeto

    learned, config, train, keys, common = toy_family
    pretrained = []
    real = gnplace.rl.placeto.pretrain_placeto
    monkeypatch.setattr(gnplace.rl.placeto, "pretrain_placeto",
                        lambda graphs, *args, **kwargs: (pretrained.append(graphs), real(graphs, *args, **kwargs))[1])
    out = tmp_path / "out"
    out.mkdir()
    first = learned.pretrain_placeto_family("toy", config, "k80x2", out)
    assert learned.pretrain_placeto_family("toy", config, "k80x2", out) == first and len(pretrained) == 1  # cached
    _regenerate(train[1])  # the same graphs by name and ops, other costs
    second = learned.pretrain_placeto_family("toy", config, "k80x2", out)
    assert second != first and len(pretrained) == 2 and Path(second).is_file()
    assert second.endswith(f"_{keys.training_digest(train)[:12]}.pt")


def test_placeto_zero_shot_rows_run_again_with_the_model_of_a_changed_train_split(toy_family, tmp_path):
    """Its rows stood on the test graph and cluster alone, whatever the model placing them was pretrained on."""
    learned, config, train, keys, common = toy_family
    out = tmp_path / "out"
    out.mkdir()
    store, ran = common.Store(out / "learned.jsonl"), []

    def row(task):
        ran.append(task["checkpoint"])
        return dict(task)

    def run():
        tasks = learned.placeto_zero_shot_tasks("toy", config, out)
        return store.run(tasks, row, 1, "section 2", keys.LEARNED_IDENTITY, learned.learned_row_stands)[0]

    first = run()
    assert run() == first and len(ran) == 1  # the same train split: resumed
    _regenerate(train[0])
    second = run()
    assert second["checkpoint"] != first["checkpoint"] and ran == [first["checkpoint"], second["checkpoint"]]
    assert second["placeto_train_sha256"] == keys.training_digest(train) != first["placeto_train_sha256"]
    # a row saved before rows recorded the train split: nothing in it tells the model's graphs, it runs again
    legacy = {k: v for k, v in second.items() if k not in keys.LEARNED_IDENTITY}
    assert not learned.learned_row_stands(legacy, second)


def test_placetos_pretraining_says_it_reused_the_saved_model(tmp_path, load_script, capsys):
    """A rerun said nothing of Placeto's saved model (sections 1, 2 and 4 said what they reused)."""
    learned = load_script("reporting.learned")
    quick = load_script("reporting.config").QUICK
    saved = learned.placeto_checkpoint("ptb", quick, "k80x4", tmp_path)
    saved.write_bytes(b"the model pretrained before")
    assert learned.pretrain_placeto_family("ptb", quick, "k80x4", tmp_path) == str(saved)
    assert f"placeto pretrained on ptb: saved, {saved}" in capsys.readouterr().out
