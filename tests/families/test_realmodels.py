"""The shipped real-model graphs (``datasets/real/``) and the code that builds them."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from gnplace.datasets import graph_summary, load_manifest
from gnplace.exceptions import UnknownName
from gnplace.families.realmodels import REAL_MODELS
from gnplace.graph import BACKWARD, FORWARD, UPDATE
from gnplace.graph_io import load_graph

DATASETS = Path(__file__).resolve().parents[2] / "datasets"
REAL = DATASETS / "real"

# parameter counts of the published architectures (GPT-2 with tied embeddings, BERT-base with its MLM head)
PARAMETERS = {"gpt2": 124_439_808, "bert_base": 109_514_298, "t5_small": 60_506_624, "resnet50": 25_557_032}


@pytest.fixture(scope="module")
def manifest():
    return load_manifest(REAL)


@pytest.fixture(scope="module")
def graphs(manifest):
    return {e["file"]: load_graph(REAL / e["file"]) for e in manifest["graphs"]}


def test_manifest_lists_every_file_in_the_test_split(manifest):
    assert manifest["format"] == "gnplace-dataset" and manifest["family"] == "real"
    files = [e["file"] for e in manifest["graphs"]]
    assert sorted(files) == sorted(p.name for p in REAL.glob("*.gnpg"))
    assert all(e["split"] == "test" and e["family"] == "real" for e in manifest["graphs"])
    expected = [f"{name}.gnpg" if importer == "torch" else f"{name}_onnx.gnpg"
                for name, model in REAL_MODELS.items() for importer in model.importers]
    assert files == expected


def test_manifest_matches_the_graphs(manifest, graphs):
    for entry in manifest["graphs"]:
        graph = graphs[entry["file"]]
        graph.validate()
        assert {k: entry[k] for k in graph_summary(graph)} == graph_summary(graph)
        assert entry["knobs"] == graph.meta["knobs"] and graph.meta["family"] == "real"
        assert 100 < graph.num_ops < 20_000
        assert set(np.unique(graph.phase).tolist()) == {FORWARD, BACKWARD, UPDATE}


def test_architectures_have_their_published_sizes(graphs):
    for name, count in PARAMETERS.items():
        assert graphs[f"{name}.gnpg"].total_param_bytes == 4 * count  # fp32, SGD
    gpt2 = graphs["gpt2.gnpg"]
    assert sum(1 for n in gpt2.node_names if n.startswith("update/") and n.endswith("attn.c_attn.weight")) == 12


def test_torch_and_onnx_imports_agree(graphs):
    for name, model in REAL_MODELS.items():
        if "onnx" not in model.importers:
            continue
        by_torch, by_onnx = graphs[f"{name}.gnpg"], graphs[f"{name}_onnx.gnpg"]
        for phase, rel in ((FORWARD, 0.05), (BACKWARD, 0.05)):
            mine, theirs = by_onnx.flops[by_onnx.phase == phase].sum(), by_torch.flops[by_torch.phase == phase].sum()
            assert mine == pytest.approx(theirs, rel=rel)
        assert by_onnx.total_param_bytes == by_torch.total_param_bytes
        assert int((by_onnx.phase == UPDATE).sum()) == int((by_torch.phase == UPDATE).sum())


def test_shipped_datasets_stay_small():
    total = sum(p.stat().st_size for p in DATASETS.rglob("*") if p.is_file())
    assert total < 50 * 2**20
    assert "## Real models" in (DATASETS / "README.md").read_text()


def test_unknown_model_lists_the_choices():
    from gnplace.families.realmodels import build_model

    with pytest.raises(UnknownName, match="gpt2, bert_base, t5_small"):
        build_model("alexnet")


# each ONNX graph exports its model first (6-13 s on 2 cores): one in the default run, the others slow
REBUILT = [(name, "torch") for name in REAL_MODELS] + [
    pytest.param(name, "onnx", marks=() if name == "resnet50" else pytest.mark.slow)
    for name, model in REAL_MODELS.items() if "onnx" in model.importers]


@pytest.mark.parametrize(("name", "importer"), REBUILT)
def test_rebuilding_a_model_gives_the_shipped_graph(name, importer):
    """With the transformers, torch and onnxscript that ``gnplace[dev]`` pins (datasets/README.md)."""
    pytest.importorskip("transformers")
    if importer == "onnx":
        pytest.importorskip("onnxscript")
    from gnplace.families.realmodels import real_graph, real_onnx_graph

    if importer == "torch":
        assert real_graph(name) == load_graph(REAL / f"{name}.gnpg")
    else:
        assert real_onnx_graph(name) == load_graph(REAL / f"{name}_onnx.gnpg")


def test_an_unknown_output_is_refused_before_building():
    # t5_small with output="hidden" built a module whose forward failed on getattr(result, "hidden");
    # the other models silently returned logits
    from gnplace.families.realmodels import build_model

    with pytest.raises(UnknownName, match=r"unknown output 'hidden' \(choose one of: loss, logits\)"):
        build_model("t5_small", output="hidden")


def test_writing_an_unknown_model_is_refused_before_the_folder_is_made(tmp_path):
    # was a KeyError from REAL_MODELS, after the folder was made
    from gnplace.families.realmodels import write_real_dataset

    with pytest.raises(UnknownName, match="'alexnet'.*gpt2, bert_base"):
        write_real_dataset(tmp_path / "real", names=["alexnet"])
    assert not (tmp_path / "real").exists()


def test_a_folder_holding_another_dataset_is_refused_not_its_manifest_replaced(tmp_path):
    """write_real_dataset into a family's folder replaced its manifest.json without a word (generate refuses)."""
    import shutil

    from gnplace.exceptions import InvalidArgument
    from gnplace.families.realmodels import write_real_dataset

    folder = tmp_path / "ptb"
    folder.mkdir()
    shutil.copy("datasets/ptb/manifest.json", folder / "manifest.json")
    before = (folder / "manifest.json").read_bytes()
    with pytest.raises(InvalidArgument, match=r"holds the 'ptb' dataset \(its manifest\.json\).*another folder$"):
        write_real_dataset(folder, names=["resnet50"])
    assert (folder / "manifest.json").read_bytes() == before and sorted(p.name for p in folder.iterdir()) == [
        "manifest.json"]


def test_an_unknown_optimizer_is_refused_before_building_or_writing(tmp_path):
    # the importer refused it, after write_real_dataset had made the folder and built GPT-2 (and the ONNX
    # graph after exporting the model)
    from gnplace.families.realmodels import real_graph, real_onnx_graph, write_real_dataset

    with pytest.raises(UnknownName, match=r"^unknown optimizer 'lamb' \(choose one of: sgd, "):
        write_real_dataset(tmp_path / "real", names=["gpt2"], optimizer="lamb")
    assert not (tmp_path / "real").exists()
    for make in (real_graph, real_onnx_graph):
        with pytest.raises(UnknownName, match="unknown optimizer 'lamb'"):
            make("gpt2", optimizer="lamb")


def test_an_empty_list_of_models_is_refused_not_read_as_all_five(tmp_path):
    from gnplace.exceptions import InvalidArgument
    from gnplace.families.realmodels import write_real_dataset

    with pytest.raises(InvalidArgument, match="names is empty"):
        write_real_dataset(tmp_path / "real", names=[])
    assert not (tmp_path / "real").exists()


def test_a_dataset_folder_that_is_no_path_is_one_clear_error():
    from gnplace.exceptions import InvalidArgument
    from gnplace.families.realmodels import write_real_dataset

    with pytest.raises(InvalidArgument, match=r"^a dataset folder is given by its path \(str or os.PathLike\), got None"):
        write_real_dataset(None, names=["gpt2"])  # pathlib's TypeError, as generate_dataset's was


def test_a_model_named_twice_is_built_once(tmp_path, monkeypatch):
    """It was built twice and listed twice in the manifest (each graph counted twice by what reads it)."""
    import gnplace.families.realmodels as realmodels
    from gnplace.toy import chain_graph

    built = []

    def stand_in(importer):
        def build(name, optimizer="sgd"):
            built.append((name, importer))
            graph = chain_graph(3).replace(name=name if importer == "torch" else f"{name}_onnx")
            graph.meta["knobs"] = {}
            return graph
        return build

    monkeypatch.setattr(realmodels, "real_graph", stand_in("torch"))
    monkeypatch.setattr(realmodels, "real_onnx_graph", stand_in("onnx"))
    manifest = realmodels.write_real_dataset(tmp_path / "real", names=["t5_small", "t5_small"])
    assert built == [("t5_small", "torch"), ("t5_small", "onnx")]
    files = [entry["file"] for entry in json.loads(manifest.read_text())["graphs"]]
    assert files == ["t5_small.gnpg", "t5_small_onnx.gnpg"]


def test_a_model_name_that_is_not_a_string_is_one_unknown_name(tmp_path):
    # a list was looked up in REAL_MODELS as is: "TypeError: unhashable type: 'list'", a traceback
    from gnplace.families.realmodels import build_model, real_graph, write_real_dataset

    for call in (lambda: build_model(["gpt2"]), lambda: real_graph(["gpt2"]),
                 lambda: write_real_dataset(tmp_path / "real", names=[["gpt2"]])):
        with pytest.raises(UnknownName, match=r"^unknown real model \['gpt2'\] \(choose one of: gpt2, "):
            call()
    assert not (tmp_path / "real").exists()


def test_one_name_given_as_a_string_is_refused_not_read_as_its_letters(tmp_path):
    # names="gpt2" was refused as "unknown real model 'g'"
    from gnplace.exceptions import InvalidArgument
    from gnplace.families.realmodels import write_real_dataset

    with pytest.raises(InvalidArgument, match=r"names must be a list of model names, got 'gpt2' \(give \['gpt2'\]\)"):
        write_real_dataset(tmp_path / "real", names="gpt2")
    assert not (tmp_path / "real").exists()


def test_building_a_model_leaves_transformers_logging_as_the_caller_set_it():
    """transformers' logger was set to ERROR for the rest of the process: a program's own use of it went silent."""
    import logging

    pytest.importorskip("transformers")
    from gnplace.families.realmodels import build_model

    library = logging.getLogger("transformers")
    level = library.level
    library.setLevel(logging.INFO)
    try:
        build_model("t5_small")
        assert library.level == logging.INFO
    finally:
        library.setLevel(level)
