"""Datasets of family graphs: determinism, manifest, split, resume, and the shipped files."""

from __future__ import annotations

import gzip
import json
import re
from pathlib import Path

import numpy as np
import pytest

from gnplace.datasets import generate_dataset, generate_graph, graph_summary, load_manifest
from gnplace.exceptions import GnplaceError, InvalidArgument, UnknownName
from gnplace.graph import UPDATE
from gnplace.graph_io import load_graph, save_graph

ROOT = Path(__file__).resolve().parents[1]
FAMILIES = ("cifar10", "ptb", "nmt")


def folder_bytes(folder: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted(folder.iterdir())}


@pytest.mark.usefixtures("short_ptb")
def test_same_seed_gives_byte_identical_files_and_resume_redraws_missing_or_corrupt(tmp_path):
    a = generate_dataset("ptb", 2, tmp_path / "a", seed=7, test_count=1)
    b = generate_dataset("ptb", 2, tmp_path / "b", seed=7, test_count=1)
    assert folder_bytes(a.parent) == folder_bytes(b.parent)
    manifest = load_manifest(a.parent)
    assert [e["split"] for e in manifest["graphs"]].count("test") == 1
    for entry in manifest["graphs"]:
        graph = load_graph(a.parent / entry["file"])
        assert {k: entry[k] for k in ("name", "ops", "groups", "edges", "total_flops", "param_bytes")} == graph_summary(graph)
        assert graph.meta["family"] == "ptb" and graph.meta["seed"] == 7
    # a rerun keeps finished graphs and draws the missing and the corrupt ones again, byte for byte
    (b.parent / "ptb_000.gnpg").unlink()
    (b.parent / "ptb_001.gnpg").write_bytes(b"not a graph")
    calls = []
    generate_dataset("ptb", 2, b.parent, seed=7, test_count=1, progress=lambda i, g: calls.append(i))
    assert folder_bytes(b.parent) == folder_bytes(a.parent) and calls == [0, 1]


@pytest.mark.usefixtures("short_ptb")
def test_resume_redraws_a_graph_file_that_holds_another_index(tmp_path):
    """A file of the same seed and optimizer but another graph (ptb_001 copied over ptb_000 in an interrupted run)
    was kept as graph 0; the cached graph's family and index are checked too."""
    a = generate_dataset("ptb", 2, tmp_path / "a", seed=7, test_count=1)
    b = tmp_path / "b"
    b.mkdir()
    (b / "ptb_000.gnpg").write_bytes((a.parent / "ptb_001.gnpg").read_bytes())  # no manifest: an interrupted run
    generate_dataset("ptb", 2, b, seed=7, test_count=1)
    assert folder_bytes(b) == folder_bytes(a.parent)


@pytest.mark.usefixtures("short_ptb")
def test_a_rerun_draws_again_a_graph_file_edited_since_its_manifest(tmp_path):
    """A finished dataset's graph with one op's FLOP multiplied (its meta as drawn) was kept by a rerun, and the
    manifest rewritten from it."""
    a = generate_dataset("ptb", 2, tmp_path / "a", seed=7, test_count=1)
    before = folder_bytes(a.parent)
    edited = load_graph(a.parent / "ptb_001.gnpg")
    flops = edited.flops.copy()
    flops[0] = flops[0] * 50 + 1
    save_graph(edited.replace(flops=flops), a.parent / "ptb_001.gnpg")
    calls = []
    generate_dataset("ptb", 2, a.parent, seed=7, test_count=1, progress=lambda i, g: calls.append(i))
    assert folder_bytes(a.parent) == before and calls == [0, 1]


@pytest.mark.usefixtures("short_ptb")
def test_a_finished_dataset_of_other_arguments_is_kept_unless_overwritten(tmp_path):
    first = generate_dataset("ptb", 2, tmp_path, seed=7, test_count=1)
    before = folder_bytes(tmp_path)
    assert generate_dataset("ptb", 2, tmp_path, seed=7, test_count=1) == first  # the same arguments: the same bytes
    assert folder_bytes(tmp_path) == before
    for other in (dict(count=1), dict(seed=8), dict(test_count=0), dict(optimizer="adam")):
        arguments = {"count": 2, "seed": 7, "test_count": 1, **other}
        with pytest.raises(InvalidArgument, match="holds another dataset \\(ptb, 2 graphs, seed 7, sgd, 1 in the test"):
            generate_dataset("ptb", arguments.pop("count"), tmp_path, **arguments)
        assert folder_bytes(tmp_path) == before
    generate_dataset("ptb", 1, tmp_path, seed=8, test_count=0, overwrite=True)
    with pytest.raises(InvalidArgument, match="holds another dataset \\(ptb, 1 graph, seed 8, sgd, 0 in the test"):
        generate_dataset("ptb", 1, tmp_path, seed=9, test_count=0)  # one graph, not "1 graphs"
    assert sorted(folder_bytes(tmp_path)) == ["manifest.json", "ptb_000.gnpg"]  # ptb_001 went with the old dataset
    assert load_manifest(tmp_path)["seed"] == 8
    (tmp_path / "manifest.json").write_text("[]")
    with pytest.raises(InvalidArgument, match="not a gnplace dataset's"):
        generate_dataset("ptb", 1, tmp_path, seed=8, test_count=0)


@pytest.mark.usefixtures("short_ptb")
def test_an_interrupted_overwrite_leaves_no_manifest_over_a_mix_of_two_datasets(tmp_path):
    generate_dataset("ptb", 2, tmp_path, seed=0, test_count=1)

    def stop(index, graph):
        raise KeyboardInterrupt  # Ctrl-C after the first graph of the new dataset

    with pytest.raises(KeyboardInterrupt):
        generate_dataset("ptb", 2, tmp_path, seed=1, test_count=1, overwrite=True, progress=stop)
    assert load_graph(tmp_path / "ptb_000.gnpg").meta["seed"] == 1
    assert not (tmp_path / "manifest.json").exists()  # was seed 0's, listing ptb_000 as it was before
    generate_dataset("ptb", 2, tmp_path, seed=1, test_count=1, overwrite=True)
    assert load_manifest(tmp_path)["seed"] == 1


@pytest.mark.usefixtures("short_ptb")
def test_a_smaller_run_after_an_interrupted_larger_one_leaves_only_its_dataset(tmp_path):
    generate_dataset("ptb", 3, tmp_path, seed=7, test_count=1)
    (tmp_path / "manifest.json").unlink()  # as if killed before the manifest
    (tmp_path / "ptb_notes.gnpg").write_text("a user's file")
    save_graph(generate_graph("nmt", 0, seed=7)[0], tmp_path / "nmt_000.gnpg")  # another family's graph
    generate_dataset("ptb", 2, tmp_path, seed=7, test_count=1)
    assert sorted(folder_bytes(tmp_path)) == ["manifest.json", "nmt_000.gnpg", "ptb_000.gnpg", "ptb_001.gnpg",
                                              "ptb_notes.gnpg"]


@pytest.mark.usefixtures("short_ptb")
def test_graphs_of_another_seed_beyond_this_runs_count_are_kept_unless_overwritten(tmp_path):
    """``generate -s 0 -n 1`` into a folder with seed-3 graphs at other indices deleted them as its own leftovers."""
    other = generate_graph("ptb", 0, seed=3)[0]
    save_graph(other, tmp_path / "ptb_005.gnpg")
    generate_dataset("ptb", 1, tmp_path, seed=0, test_count=0)
    assert sorted(folder_bytes(tmp_path)) == ["manifest.json", "ptb_000.gnpg", "ptb_005.gnpg"]
    (tmp_path / "manifest.json").unlink()
    generate_dataset("ptb", 1, tmp_path, seed=0, test_count=0, overwrite=True)
    assert sorted(folder_bytes(tmp_path)) == ["manifest.json", "ptb_000.gnpg"]


@pytest.mark.usefixtures("short_ptb")
def test_other_seed_gives_other_graphs(tmp_path):
    g1, _ = generate_graph("ptb", 0, seed=1)
    g2, _ = generate_graph("ptb", 0, seed=2)
    assert g1 != g2


def test_unknown_family_lists_choices(tmp_path):
    with pytest.raises(UnknownName, match="cifar10"):
        generate_dataset("imagenet", 1, tmp_path)


@pytest.mark.usefixtures("short_ptb")
def test_impossible_size_range_is_a_clear_error():
    with pytest.raises(GnplaceError, match="ptb: no graph with 1..2 ops"):
        generate_graph("ptb", 0, min_ops=1, max_ops=2, max_draws=1)


def test_load_manifest_rejects_other_files(tmp_path):
    with pytest.raises(GnplaceError, match="not a readable dataset manifest"):
        load_manifest(tmp_path)
    for other in ({"format": "other"}, ["format", "gnplace-dataset"], "gnplace-dataset"):
        (tmp_path / "manifest.json").write_text(json.dumps(other))
        with pytest.raises(GnplaceError, match="not a gnplace dataset manifest"):
            load_manifest(tmp_path)
    (tmp_path / "manifest.json").write_bytes(b"\xff\xfe{")
    with pytest.raises(GnplaceError, match="not a readable dataset manifest"):
        load_manifest(tmp_path)


def test_load_manifest_refuses_a_newer_version_and_reads_one_written_by_hand(tmp_path):
    """A manifest's version was never read: a newer gnplace's (version 2) was taken as this one's."""
    manifest = tmp_path / "manifest.json"
    for version in (2, "1", 1.0, True, None):
        manifest.write_text(json.dumps({"format": "gnplace-dataset", "version": version, "graphs": []}))
        with pytest.raises(GnplaceError, match=rf"^{re.escape(str(manifest))}: dataset manifest version "
                                               rf"{re.escape(repr(version))}; this gnplace reads version 1 \(a newer "
                                               r"gnplace's dataset: generate it again with this one\)$"):
            load_manifest(tmp_path)
    manifest.write_text(json.dumps({"format": "gnplace-dataset", "graphs": []}))  # written by hand: no version
    assert load_manifest(tmp_path)["graphs"] == []
    manifest.write_text(json.dumps({"format": "gnplace-dataset", "version": 1, "graphs": []}))
    assert load_manifest(tmp_path)["version"] == 1



def test_a_manifest_naming_graphs_outside_its_folder_is_refused(tmp_path):
    """A shared dataset's manifest listing ../secret.gnpg, an absolute path or a link out had evaluate read those."""
    from gnplace.evaluate import collect_graphs
    from gnplace.toy import chain_graph

    save_graph(chain_graph(3), tmp_path / "secret.gnpg")
    folder = tmp_path / "dataset"
    folder.mkdir()
    save_graph(chain_graph(3), folder / "own.gnpg")
    (folder / "sub").mkdir()
    save_graph(chain_graph(3), folder / "sub" / "deeper.gnpg")
    (folder / "link.gnpg").symlink_to(tmp_path / "secret.gnpg")
    (folder / "loop.gnpg").symlink_to("loop.gnpg")
    manifest = folder / "manifest.json"
    for name in ("../secret.gnpg", str(tmp_path / "secret.gnpg"), "link.gnpg", "loop.gnpg", "sub/../own.gnpg",
                 "own\x00.gnpg"):
        graphs = [{"file": "own.gnpg", "split": "train"}, {"file": name, "split": "test"}]
        manifest.write_text(json.dumps({"format": "gnplace-dataset", "graphs": graphs}))
        with pytest.raises(GnplaceError, match=rf"^{re.escape(str(manifest))}: graph entry 1 names .*, which is not a "
                                               "file inside the dataset's folder"):
            collect_graphs([str(folder)])
    graphs = [{"file": "own.gnpg", "split": "train"}, {"file": "sub/deeper.gnpg", "split": "test"}]
    manifest.write_text(json.dumps({"format": "gnplace-dataset", "graphs": graphs}))
    assert collect_graphs([str(folder)]) == [folder / "own.gnpg", folder / "sub" / "deeper.gnpg"]


@pytest.mark.usefixtures("short_ptb")
def test_generate_replaces_links_in_its_folder_never_writing_through_them(tmp_path):
    """A shared folder's ptb_000.gnpg linked to a file elsewhere had it overwritten by the graph; a manifest.json
    linked to a path that did not exist created a file there."""
    outside = tmp_path / "precious.txt"
    outside.write_text("keep me")
    out = tmp_path / "shared"
    out.mkdir()
    (out / "ptb_000.gnpg").symlink_to(outside)
    (out / "manifest.json").symlink_to(tmp_path / "created.json")
    generate_dataset("ptb", 1, out, test_count=0)
    assert outside.read_text() == "keep me" and not (tmp_path / "created.json").exists()
    assert not (out / "ptb_000.gnpg").is_symlink() and not (out / "manifest.json").is_symlink()
    assert load_graph(out / "ptb_000.gnpg").name == "ptb_000"
    assert [e["file"] for e in load_manifest(out)["graphs"]] == ["ptb_000.gnpg"]

# ------------------------------------------------------------------------------------ shipped
@pytest.mark.parametrize("family", FAMILIES)
def test_shipped_dataset_matches_its_manifest(family):
    folder = ROOT / "datasets" / family
    manifest = load_manifest(folder)
    entries = manifest["graphs"]
    assert len(entries) == 32
    assert [e["split"] for e in entries].count("test") == 8
    ops = []
    for entry in entries:
        graph = load_graph(folder / entry["file"])  # validates: a DAG with consistent sizes
        assert graph_summary(graph) == {k: entry[k] for k in ("name", "ops", "groups", "edges", "total_flops", "param_bytes")}
        assert graph.meta["family"] == family
        ops.append(graph.num_ops)
        params = [n for n in graph.node_names if n.startswith("update/")]
        assert int((graph.phase == UPDATE).sum()) == len(params) == len(set(params))
    assert 200 <= min(ops) and max(ops) <= 5000
    assert max(ops) / min(ops) >= 4  # a spread of sizes


@pytest.mark.parametrize("family", FAMILIES)
def test_shipped_graph_regenerates_byte_identical(family, tmp_path):
    folder = ROOT / "datasets" / family
    manifest = load_manifest(folder)
    smallest = min(manifest["graphs"], key=lambda e: e["ops"])
    index = int(smallest["file"].rsplit("_", 1)[1].split(".")[0])
    graph, _ = generate_graph(family, index, seed=manifest["seed"], optimizer=manifest["optimizer"])
    path = save_graph(graph, tmp_path / smallest["file"])
    assert path.read_bytes() == (folder / smallest["file"]).read_bytes()


def test_every_shipped_graph_file_is_format_version_2():
    files = sorted((ROOT / "datasets").glob("*/*.gnpg"))
    assert len(files) == 3 * 32 + 2 + 10  # families, examples, real models
    for path in files:
        data = json.loads(gzip.decompress(path.read_bytes()))
        assert data["version"] == 2 and len(data["nodes"]["op_kind"]) == len(data["nodes"]["name"]), path


@pytest.mark.usefixtures("short_ptb")
@pytest.mark.parametrize("index, seed", [(0, -1), (-1, 0), (0, 1.5), (True, 0)])
def test_generate_graph_names_a_bad_seed_or_index(index, seed):
    """numpy's "expected non-negative integer" and "seed must be integer" named neither argument."""
    with pytest.raises(InvalidArgument, match=r"generate_graph: (seed|index) must be a whole number >= 0"):
        generate_graph("ptb", index, seed=seed)


@pytest.mark.usefixtures("short_ptb")
def test_an_unknown_family_or_a_negative_seed_is_refused_before_any_folder_is_made(tmp_path):
    with pytest.raises(UnknownName, match="unknown family 'foo'"):
        generate_dataset("foo", 2, tmp_path / "a")
    with pytest.raises(InvalidArgument, match="seed must be a whole number >= 0, got -1"):
        generate_dataset("ptb", 1, tmp_path / "b", seed=-1)
    assert not (tmp_path / "a").exists() and not (tmp_path / "b").exists()
    with pytest.raises(InvalidArgument, match=r"test_count must be a whole number from 0 to count \(4\), got -1"):
        generate_dataset("ptb", 4, tmp_path / "c", test_count=-1)  # put 3 of 4 in the test split
    import numpy as np

    generate_dataset("ptb", 1, tmp_path / "d", seed=np.int64(3), test_count=0)  # was a JSON error, half written
    assert load_manifest(tmp_path / "d")["seed"] == 3
    saved = (tmp_path / "d" / "manifest.json").read_bytes()
    with pytest.raises(UnknownName, match="unknown optimizer 'bogus'"):  # was refused once the manifest was deleted
        generate_dataset("ptb", 1, tmp_path / "d", seed=5, optimizer="bogus", overwrite=True)
    with pytest.raises(UnknownName, match="unknown optimizer 'bogus'"):
        generate_dataset("ptb", 1, tmp_path / "e", optimizer="bogus")
    assert (tmp_path / "d" / "manifest.json").read_bytes() == saved and not (tmp_path / "e").exists()


@pytest.mark.usefixtures("short_ptb")
def test_graphs_of_another_run_without_a_manifest_are_not_drawn_over(tmp_path):
    """Graph files drawn with another seed, their manifest gone: refused without overwrite, not replaced."""
    out = tmp_path / "ds"
    generate_dataset("ptb", 2, out, seed=1)
    (out / "manifest.json").unlink()
    before = {p.name: p.read_bytes() for p in out.iterdir()}
    with pytest.raises(InvalidArgument, match=r"ptb_000.gnpg holds a graph drawn with other arguments \(ptb, seed 1"):
        generate_dataset("ptb", 2, out, seed=0)
    assert {p.name: p.read_bytes() for p in out.iterdir()} == before
    generate_dataset("ptb", 2, out, seed=0, overwrite=True)
    assert load_manifest(out)["seed"] == 0


@pytest.mark.usefixtures("short_ptb")
def test_the_dataset_script_splits_as_generate_does_and_a_bad_split_is_one_error(tmp_path, capsys, load_script):
    script = load_script("make_datasets")
    assert script.main(["--out", str(tmp_path), "--families", "ptb", "--count", "2"]) == 0  # was an IndexError
    assert [e["split"] for e in load_manifest(tmp_path / "ptb")["graphs"]] == ["train", "train"]  # 2 // 4 in test
    assert "| ptb | test | 0 | - | - | - | - |" in (tmp_path / "README.md").read_text()
    capsys.readouterr()
    assert script.main(["--out", str(tmp_path / "b"), "--families", "ptb", "--count", "2", "--test-count", "3"]) == 2
    assert capsys.readouterr().err.strip() == \
        "make_datasets: error: --test-count 3 is more than --count 2"


@pytest.mark.parametrize("families", ["ptb", "nmt,ptb,nmt", "cifar10,ptb,nmt"])
def test_the_dataset_script_writes_the_same_readme_whichever_families_it_rebuilds(tmp_path, load_script, monkeypatch,
                                                                                  families):
    """``--families ptb`` on the shipped folder rebuilt ptb and moved its rows after nmt's in datasets/README.md."""
    import shutil

    script = load_script("make_datasets")
    monkeypatch.setattr(script, "write_examples", lambda out: None)  # the graphs are there: the README alone is at stake
    monkeypatch.setattr(script, "generate_dataset", lambda *args, **kwargs: None)
    for family in ("cifar10", "ptb", "nmt"):
        (tmp_path / family).mkdir()
        shutil.copy(ROOT / "datasets" / family / "manifest.json", tmp_path / family / "manifest.json")
    assert script.main(["--out", str(tmp_path), "--families", families]) == 0
    written = (tmp_path / "README.md").read_text()
    assert (ROOT / "datasets" / "README.md").read_text().startswith(written)  # the shipped one, less its real models


def test_the_dataset_script_writes_the_shipped_readme_with_its_real_models(tmp_path, load_script):
    """A paragraph added to datasets/README.md by hand was gone after a rerun of the script, which writes it."""
    import shutil

    script = load_script("make_datasets")
    for folder in ("cifar10", "ptb", "nmt", "real"):
        shutil.copytree(ROOT / "datasets" / folder, tmp_path / folder)
    script.write_readme(tmp_path, ["cifar10", "ptb", "nmt"])
    assert (tmp_path / "README.md").read_text() == (ROOT / "datasets" / "README.md").read_text()


def test_the_dataset_script_killed_while_writing_its_readme_leaves_the_one_of_before(tmp_path, load_script,
                                                                                     monkeypatch):
    """``datasets/README.md`` was written in place: a kill halfway left half a table."""
    import pathlib
    import shutil

    script = load_script("make_datasets")
    monkeypatch.setattr(script, "write_examples", lambda out: None)  # the README alone is at stake
    monkeypatch.setattr(script, "generate_dataset", lambda *args, **kwargs: None)
    (tmp_path / "ptb").mkdir()
    shutil.copy(ROOT / "datasets" / "ptb" / "manifest.json", tmp_path / "ptb" / "manifest.json")
    (tmp_path / "README.md").write_text("# Shipped graph datasets\n\nthe README of before\n")

    def halfway(write):
        def halted(self, data, *args, **kwargs):  # half the text reaches the file, then the kill
            write(self, data[: len(data) // 2], *args, **kwargs)
            raise KeyboardInterrupt

        return halted

    with monkeypatch.context() as patched, pytest.raises(KeyboardInterrupt):
        patched.setattr(pathlib.Path, "write_text", halfway(pathlib.Path.write_text))
        patched.setattr(pathlib.Path, "write_bytes", halfway(pathlib.Path.write_bytes))
        script.run(script.argparse.Namespace(out=str(tmp_path), families="ptb", count=32, test_count=None, seed=0,
                                             real=False, overwrite=False))
    assert (tmp_path / "README.md").read_text() == "# Shipped graph datasets\n\nthe README of before\n"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["README.md", "ptb"]  # no temporary file left


def test_a_manifest_that_is_a_pipe_is_one_error_not_a_hang(tmp_path):
    """``load_manifest`` read it with ``read_text``, which blocks on a FIFO (generate and evaluate hung)."""
    import os

    folder = tmp_path / "d"
    folder.mkdir()
    os.mkfifo(folder / "manifest.json")
    with pytest.raises(GnplaceError, match=r"manifest.json: not a readable dataset manifest \(is not a regular file"):
        load_manifest(folder)
    (folder / "manifest.json").unlink()
    (folder / "manifest.json").write_text('{"format": "gnplace-dataset", "format": "x"}')
    with pytest.raises(GnplaceError, match="not a readable dataset manifest .*twice"):
        load_manifest(folder)


@pytest.mark.usefixtures("short_ptb")
def test_an_overwrite_deletes_only_the_replaced_datasets_graph_files(tmp_path):
    """A manifest listing itself and notes.txt: the overwrite deleted the manifest it had just written and the notes;
    a listed folder failed the run after all its work ("cannot write ...: Is a directory")."""
    (tmp_path / "notes.txt").write_text("precious")
    (tmp_path / "sub").mkdir()
    listed = [{"file": name, "split": "train"} for name in ("manifest.json", "notes.txt", "sub")]
    (tmp_path / "manifest.json").write_text(json.dumps({
        "format": "gnplace-dataset", "version": 1, "family": "ptb", "seed": 0, "optimizer": "sgd", "graphs": listed}))
    generate_dataset("ptb", 1, tmp_path, seed=3, test_count=0, overwrite=True)
    assert (tmp_path / "notes.txt").read_text() == "precious" and (tmp_path / "sub").is_dir()
    assert [e["file"] for e in load_manifest(tmp_path)["graphs"]] == ["ptb_000.gnpg"]


def test_the_dataset_script_refuses_an_empty_out_before_writing(tmp_path, capsys, load_script, monkeypatch):
    """``--out ""`` wrote the examples and the statistics table into the working folder, over its README.md."""
    script = load_script("make_datasets")
    monkeypatch.chdir(tmp_path)
    (tmp_path / "README.md").write_text("mine\n")
    assert script.main(["--out", "", "--families", ""]) == 2
    assert "make_datasets: error: --out is empty" in capsys.readouterr().err
    assert (tmp_path / "README.md").read_text() == "mine\n" and sorted(p.name for p in tmp_path.iterdir()) == ["README.md"]


def test_the_dataset_script_keeps_a_readme_it_did_not_write(tmp_path, capsys, load_script):
    """``--out`` a project folder replaced its README.md with the statistics table; now refused before anything is
    written, unless ``--overwrite``; the script's own table is rewritten as before."""
    script = load_script("make_datasets")
    (tmp_path / "README.md").write_text("my notes\n")
    assert script.main(["--out", str(tmp_path), "--families", ""]) == 2
    assert "holds a README.md this script did not write" in capsys.readouterr().err
    assert sorted(p.name for p in tmp_path.iterdir()) == ["README.md"]  # nothing written, the README kept
    assert (tmp_path / "README.md").read_text() == "my notes\n"
    assert script.main(["--out", str(tmp_path), "--families", "", "--overwrite"]) == 0
    assert (tmp_path / "README.md").read_text().startswith(script.README_TITLE)
    assert script.main(["--out", str(tmp_path), "--families", ""]) == 0  # its own: rewritten


@pytest.mark.usefixtures("short_ptb")
def test_the_dataset_script_replaces_a_dataset_of_other_arguments_only_under_overwrite(tmp_path, capsys, load_script,
                                                                                        monkeypatch):
    """Its refusal said "gnplace generate --overwrite", an option the script did not have."""
    script = load_script("make_datasets")
    monkeypatch.setattr(script, "write_examples", lambda out: None)
    assert script.main(["--out", str(tmp_path), "--families", "ptb", "--count", "1", "--test-count", "0"]) == 0
    capsys.readouterr()
    again = ["--out", str(tmp_path), "--families", "ptb", "--count", "1", "--test-count", "0", "--seed", "1"]
    assert script.main(again) == 2
    err = capsys.readouterr().err
    assert "holds another dataset (ptb, 1 graph, seed 0" in err and "scripts/make_datasets.py" in err
    assert load_manifest(tmp_path / "ptb")["seed"] == 0  # nothing replaced
    assert script.main([*again, "--overwrite"]) == 0
    assert load_manifest(tmp_path / "ptb")["seed"] == 1


def test_the_dataset_readme_names_the_count_and_seed_each_family_was_drawn_with(tmp_path, load_script, monkeypatch):
    """It said ``--count 32 --seed 0`` whatever ``--count``, ``--test-count`` and ``--seed`` drew.

    Graphs of few steps and layers (what is checked is the manifests' counts and seeds): 25 s to draw otherwise.
    """
    from gnplace.families import cifar10, nmt, ptb

    for module, small in ((ptb, {"steps": 2}), (nmt, {"layers": 1, "src_steps": 2, "tgt_steps": 2}),
                          (cifar10, {"layers": 1})):
        monkeypatch.setattr(module, "random_knobs", lambda rng, *a, drawn=module.random_knobs, small=small, **k:
                            {**drawn(rng, *a, **k), **small})
    script = load_script("make_datasets")
    for family, count, tests, seed in (("ptb", 4, 1, 3), ("nmt", 4, 1, 3)):
        generate_dataset(family, count, tmp_path / family, seed=seed, test_count=tests)
    script.write_readme(tmp_path, ["ptb", "nmt"])
    assert "(the same as `gnplace generate --family F --count 4 --seed 3`);" in (tmp_path / "README.md").read_text()
    generate_dataset("cifar10", 2, tmp_path / "cifar10", seed=0, test_count=1)
    script.write_readme(tmp_path, ["cifar10", "ptb", "nmt"])
    assert ("(the same as `gnplace generate --family cifar10 --count 2 --test-count 1 --seed 0`, `gnplace generate "
            "--family ptb --count 4 --seed 3`, `gnplace generate --family nmt --count 4 --seed 3`);") in \
        (tmp_path / "README.md").read_text()


def test_a_manifest_that_cannot_be_renamed_into_place_leaves_no_tmp(tmp_path, disk_full_at):
    from gnplace.datasets import write_manifest

    disk_full_at()  # (the disk filled up at the rename)
    with pytest.raises(OSError, match="No space left"):
        write_manifest(tmp_path, family="ptb", seed=0, optimizer="sgd", entries=[])
    assert list(tmp_path.iterdir()) == []  # a manifest.json.tmp was left behind


HOLD = """
import sys, time
from gnplace.runlock import folder_lock
with folder_lock(sys.argv[1]):
    print("held", flush=True)
    time.sleep(60)
"""


@pytest.mark.usefixtures("short_ptb")
def test_a_folder_another_run_generates_into_is_refused_and_left_as_it_is(tmp_path):
    """Two ``gnplace generate`` into one folder at once both passed the check for another dataset, then wrote
    their graphs over each other's: the manifest of one (seed 0) listed a graph the other drew (seed 1)."""
    import subprocess
    import sys

    pytest.importorskip("fcntl")
    from gnplace.runlock import LOCK_NAME

    out = tmp_path / "ds"
    holder = subprocess.Popen([sys.executable, "-c", HOLD, str(out)], stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout is not None and holder.stdout.readline() == "held\n"
        with pytest.raises(InvalidArgument, match=rf"^--out {out}: another gnplace run is writing into this folder"):
            generate_dataset("ptb", 1, out, seed=1)
        assert [p.name for p in out.iterdir()] == [LOCK_NAME]  # nothing drawn beside the other run
    finally:
        holder.kill()
        holder.wait()
    generate_dataset("ptb", 1, out, seed=1)  # the holder's end lets the next run in, and the lock goes with it
    assert sorted(p.name for p in out.iterdir()) == ["manifest.json", "ptb_000.gnpg"]


def test_a_dataset_folder_that_is_no_path_is_one_clear_error():
    """generate_dataset("ptb", 1, None) and load_manifest(None) were pathlib's TypeError."""
    with pytest.raises(InvalidArgument, match=r"^a dataset folder is given by its path \(str or os\.PathLike\), got None$"):
        generate_dataset("ptb", 1, None)  # type: ignore[arg-type]
    with pytest.raises(InvalidArgument, match=r"^a dataset folder is given by its path \(str or os\.PathLike\), got None$"):
        load_manifest(None)  # type: ignore[arg-type]


@pytest.mark.usefixtures("short_ptb")
def test_generate_graph_takes_numpy_integers_as_generate_dataset_does(tmp_path):
    """A numpy integer seed or index went into the graph's meta as it was, and save_graph refused the graph."""
    graph, _ = generate_graph("ptb", np.uint8(1), seed=np.int64(3))
    assert (graph.meta["seed"], graph.meta["index"]) == (3, 1)
    assert load_graph(save_graph(graph, tmp_path / "g.gnpg")) == generate_graph("ptb", 1, seed=3)[0]


@pytest.mark.parametrize("kwargs, message", [
    (dict(min_ops=-1), "min_ops must be a whole number >= 0, got -1"),
    (dict(min_ops=300, max_ops=200), r"max_ops must be a whole number >= min_ops \(300\), got 200"),
    (dict(max_ops=1e9), "max_ops must be a whole number >= min_ops \\(200\\), got 1000000000.0"),
    (dict(max_draws=0), "max_draws must be a whole number >= 1, got 0"),
])
def test_generate_graph_refuses_a_size_range_no_draw_could_meet_before_drawing(kwargs, message, monkeypatch):
    """min_ops above max_ops built max_draws graphs (20, minutes) before saying that none was kept."""
    from gnplace.families import ptb

    monkeypatch.setattr(ptb, "sample", lambda *a, **k: pytest.fail("a graph was built"))
    with pytest.raises(InvalidArgument, match=f"generate_graph: {message}"):
        generate_graph("ptb", 0, **kwargs)


def test_the_test_split_is_the_first_quarter_of_the_seeds_permutation(tmp_path, monkeypatch):
    """The module's rule: the test split is the first ``test_count`` (default ``count // 4``) entries of
    ``numpy.random.default_rng(seed).permutation(count)``; the shipped datasets were split by it (a mutant of a third
    passed). Each graph is a tiny stand-in: the split alone is under test."""
    import gnplace.datasets as datasets
    from gnplace.toy import chain_graph

    def tiny(family, index, *, seed, optimizer):
        meta = {"family": family, "seed": seed, "index": index, "optimizer": optimizer, "knobs": {}}
        return chain_graph(2).replace(name=f"{family}_{index:03d}", meta=meta), {}

    monkeypatch.setattr(datasets, "generate_graph", tiny)
    entries = load_manifest(generate_dataset("ptb", 12, tmp_path / "d", seed=3).parent)["graphs"]
    test = sorted(np.random.default_rng(3).permutation(12)[:3].tolist())
    assert [i for i, e in enumerate(entries) if e["split"] == "test"] == test != [0, 1, 2]
    assert all(e["split"] == "train" for i, e in enumerate(entries) if i not in test)
    for family in FAMILIES:
        manifest = load_manifest(ROOT / "datasets" / family)
        shipped = [i for i, e in enumerate(manifest["graphs"]) if e["split"] == "test"]
        assert shipped == sorted(np.random.default_rng(manifest["seed"]).permutation(32)[:8].tolist()), family


def _drawn_sizes(monkeypatch, sizes):
    """generate_graph("ptb", ...)'s draws made chains of ``sizes`` ops in turn (no module is built or imported)."""
    import gnplace.importers.torch as importers
    from gnplace.families import ptb
    from gnplace.toy import chain_graph

    draws = iter(sizes)
    monkeypatch.setattr(ptb, "random_knobs", lambda rng: {})
    monkeypatch.setattr(ptb, "sample", lambda rng, **knobs: (None, None))
    monkeypatch.setattr(importers, "from_module", lambda model, inputs, **kwargs: chain_graph(next(draws)))


@pytest.mark.parametrize("sizes, kept", [([199, 200], 200), ([5001, 5000], 5000), ([5001, 4999, 5000], 4999)])
def test_generate_graph_keeps_the_first_draw_from_200_to_5000_ops_both_included(sizes, kept, monkeypatch):
    """The documented default range [200, 5000] (the shipped datasets' sizes), its ends included (mutants of either
    end, or of a max_ops of 5001, passed)."""
    _drawn_sizes(monkeypatch, sizes)
    assert generate_graph("ptb", 0)[0].num_ops == kept


def test_generate_graph_gives_up_after_20_draws_by_default(monkeypatch):
    _drawn_sizes(monkeypatch, [100] * 20 + [300])
    with pytest.raises(GnplaceError, match=r"^ptb: no graph with 200\.\.5000 ops in 20 draws for index 4$"):
        generate_graph("ptb", 4)
    _drawn_sizes(monkeypatch, [100] * 19 + [300])
    assert generate_graph("ptb", 4)[0].num_ops == 300


@pytest.mark.parametrize("count", [0, 1_000_001, 2.0, True])
def test_a_count_from_1_to_a_million_graphs_is_asked_before_anything_is_drawn(count, tmp_path):
    with pytest.raises(InvalidArgument, match=rf"^count must be a whole number from 1 to 1,000,000, got {count!r}$"):
        generate_dataset("ptb", count, tmp_path / "d")
    assert not (tmp_path / "d").exists()


def test_generate_graph_writes_numpy_knobs_as_json_numbers_in_the_meta(monkeypatch):
    """A family's knobs of numpy scalars, in lists and tuples too, go into the graph's JSON meta as plain numbers (a
    mutant keeping them, or keeping a tuple of them, passed: the shipped families draw Python numbers)."""
    import gnplace.importers.torch as importers
    from gnplace.families import ptb
    from gnplace.toy import chain_graph

    monkeypatch.setattr(ptb, "random_knobs", lambda rng: {"steps": np.int64(3), "rates": (np.float32(0.5), 2)})
    monkeypatch.setattr(ptb, "sample", lambda rng, **knobs: (None, None))
    monkeypatch.setattr(importers, "from_module", lambda model, inputs, **kwargs: chain_graph(300).replace(
        name=kwargs["name"], meta=kwargs["meta"]))
    knobs = generate_graph("ptb", 0)[0].meta["knobs"]
    assert knobs == {"steps": 3, "rates": [0.5, 2]}
    assert [type(knobs["steps"]), *map(type, knobs["rates"])] == [int, float, int]


def test_a_dataset_drawn_again_without_resume_draws_every_graph_again(tmp_path, monkeypatch):
    """resume=False draws the graphs again over an interrupted run's files (a mutant reading them anyway passed)."""
    import gnplace.datasets as datasets
    from gnplace.toy import chain_graph

    drawn = []

    def tiny(family, index, *, seed, optimizer):
        drawn.append(index)
        meta = {"family": family, "seed": seed, "index": index, "optimizer": optimizer, "knobs": {}}
        return chain_graph(2).replace(name=f"{family}_{index:03d}", meta=meta), {}

    monkeypatch.setattr(datasets, "generate_graph", tiny)
    manifest = generate_dataset("ptb", 2, tmp_path / "d", test_count=0)
    manifest.unlink()  # an interrupted run: its graphs are there, no manifest
    generate_dataset("ptb", 2, tmp_path / "d", test_count=0)
    assert drawn == [0, 1]  # resumed: both read
    manifest.unlink()
    generate_dataset("ptb", 2, tmp_path / "d", test_count=0, resume=False)
    assert drawn == [0, 1, 0, 1]


def test_an_overwrite_with_another_optimizer_draws_every_graph_again(tmp_path, monkeypatch):
    """A graph file of the same family, seed and index but another optimizer is another dataset's (a mutant keeping
    it passed: the new manifest listed sgd graphs as adam ones)."""
    import gnplace.datasets as datasets
    from gnplace.toy import chain_graph

    drawn = []

    def tiny(family, index, *, seed, optimizer):
        drawn.append((index, optimizer))
        meta = {"family": family, "seed": seed, "index": index, "optimizer": optimizer, "knobs": {}}
        return chain_graph(2).replace(name=f"{family}_{index:03d}", meta=meta), {}

    monkeypatch.setattr(datasets, "generate_graph", tiny)
    generate_dataset("ptb", 2, tmp_path / "d", test_count=0)
    folder = generate_dataset("ptb", 2, tmp_path / "d", test_count=0, optimizer="adam", overwrite=True).parent
    assert drawn == [(0, "sgd"), (1, "sgd"), (0, "adam"), (1, "adam")]
    assert [load_graph(folder / f"ptb_00{i}.gnpg").meta["optimizer"] for i in (0, 1)] == ["adam", "adam"]


def _tiny_draws(monkeypatch, drawn=None):
    """generate_dataset's graphs made 2-op chains with the meta of a real draw (``drawn``: their indices, in turn)."""
    import gnplace.datasets as datasets
    from gnplace.toy import chain_graph

    def tiny(family, index, *, seed, optimizer):
        if drawn is not None:
            drawn.append(index)
        meta = {"family": family, "seed": seed, "index": index, "optimizer": optimizer, "knobs": {}}
        return chain_graph(2).replace(name=f"{family}_{index:03d}", meta=meta), {}

    monkeypatch.setattr(datasets, "generate_graph", tiny)
    return tiny


def test_a_count_of_exactly_a_million_graphs_is_taken(tmp_path, monkeypatch):
    """MAX_GRAPHS is in the range (a mutant refusing it passed): the run gets past the check, stopped right after."""
    import gnplace.datasets as datasets

    class Checked(Exception):
        pass

    def stop(*args, **kwargs):
        raise Checked

    monkeypatch.setattr(datasets, "as_path", stop)  # the first call after the count and test_count checks
    with pytest.raises(Checked):
        generate_dataset("ptb", datasets.MAX_GRAPHS, tmp_path / "d")
    assert datasets.MAX_GRAPHS == 1_000_000


def test_an_overwrite_leaves_a_folder_the_old_manifest_lists_as_a_graph(tmp_path, monkeypatch):
    """A folder named x.gnpg that the replaced manifest lists is no graph file: left alone, not a crash
    (IsADirectoryError) after the new dataset was written."""
    _tiny_draws(monkeypatch)
    (tmp_path / "x.gnpg").mkdir()
    (tmp_path / "manifest.json").write_text(json.dumps({
        "format": "gnplace-dataset", "version": 1, "family": "ptb", "seed": 0, "optimizer": "sgd",
        "graphs": [{"file": "x.gnpg", "split": "train"}]}))
    generate_dataset("ptb", 1, tmp_path, seed=3, test_count=0, overwrite=True)
    assert (tmp_path / "x.gnpg").is_dir()
    assert [e["file"] for e in load_manifest(tmp_path)["graphs"]] == ["ptb_000.gnpg"]


def test_an_overwrite_keeps_a_graph_in_a_subfolder_the_old_manifest_names(tmp_path, monkeypatch):
    """The replaced dataset's graphs are deleted only beside the manifest: sub/a.gnpg, which an old manifest named, is
    a file of the user's subfolder (a mutant deleting it passed)."""
    from gnplace.toy import chain_graph

    _tiny_draws(monkeypatch)
    (tmp_path / "sub").mkdir()
    save_graph(chain_graph(2), tmp_path / "sub" / "a.gnpg")
    (tmp_path / "manifest.json").write_text(json.dumps({
        "format": "gnplace-dataset", "version": 1, "family": "ptb", "seed": 0, "optimizer": "sgd",
        "graphs": [{"file": "sub/a.gnpg", "split": "train"}]}))
    generate_dataset("ptb", 1, tmp_path, seed=3, test_count=0, overwrite=True)
    assert (tmp_path / "sub" / "a.gnpg").is_file()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["manifest.json", "ptb_000.gnpg", "sub"]


def test_graphs_of_another_optimizer_without_a_manifest_are_not_drawn_over(tmp_path, monkeypatch):
    """An interrupted sgd run's graphs: an adam run into its folder refuses them, as it does another seed's (a mutant
    comparing family and seed alone drew over them)."""
    drawn = []
    _tiny_draws(monkeypatch, drawn)
    generate_dataset("ptb", 2, tmp_path, test_count=0).unlink()
    before = folder_bytes(tmp_path)
    with pytest.raises(InvalidArgument, match=r"ptb_000.gnpg holds a graph drawn with other arguments \(ptb, seed 0, "
                                              r"sgd\)"):
        generate_dataset("ptb", 2, tmp_path, test_count=0, optimizer="adam")
    assert folder_bytes(tmp_path) == before and drawn == [0, 1]


def test_only_files_named_as_graphs_count_as_an_interrupted_runs_leftovers(tmp_path, monkeypatch):
    """ptb graphs of this seed named ptb_x.gnpg or ptb_1.gnpg are not family_NNN.gnpg: kept (mutants loosening or
    dropping the name's pattern deleted them); ptb_005.gnpg is a leftover of a larger run: deleted."""
    from gnplace.toy import chain_graph

    _tiny_draws(monkeypatch)
    meta = {"family": "ptb", "seed": 0, "index": 5, "optimizer": "sgd", "knobs": {}}
    for name in ("ptb_x.gnpg", "ptb_1.gnpg", "ptb_005.gnpg"):
        save_graph(chain_graph(2).replace(name="ptb_005", meta=meta), tmp_path / name)
    generate_dataset("ptb", 1, tmp_path, test_count=0)
    assert sorted(folder_bytes(tmp_path)) == ["manifest.json", "ptb_000.gnpg", "ptb_1.gnpg", "ptb_x.gnpg"]


def test_an_overwrite_deletes_an_unreadable_manifest_before_drawing(tmp_path, monkeypatch):
    """A manifest.json that is no dataset's goes at once under overwrite, as a replaced dataset's does: an interrupted
    run leaves no manifest over the new graphs (a mutant keeping it passed: the new one replaced it at the end)."""
    import gnplace.datasets as datasets

    def stop(*args, **kwargs):
        raise KeyboardInterrupt

    monkeypatch.setattr(datasets, "generate_graph", stop)
    (tmp_path / "manifest.json").write_text("[]")
    with pytest.raises(KeyboardInterrupt):
        generate_dataset("ptb", 1, tmp_path, overwrite=True)
    assert not (tmp_path / "manifest.json").exists()


def test_a_manifest_entry_naming_no_file_is_left_to_its_reader(tmp_path):
    """Entries with an empty, a missing or a non-string file name, or that are no mapping, are not refused as paths
    out of the folder (nor a TypeError): the readers say what is missing."""
    graphs = [{"file": ""}, {"file": 5}, {"file": None}, {"file": ["a"]}, {}, "x.gnpg", 3]
    (tmp_path / "manifest.json").write_text(json.dumps({"format": "gnplace-dataset", "graphs": graphs}))
    assert load_manifest(tmp_path)["graphs"] == graphs
