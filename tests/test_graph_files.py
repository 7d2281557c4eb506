"""Which graph files a list of paths names (:mod:`gnplace.graph_files`)."""

from __future__ import annotations

import json

import pytest

from gnplace.exceptions import GnplaceError, InvalidGraph
from gnplace.graph_files import collect_graphs
from gnplace.graph_io import load_graph, save_graph


@pytest.fixture()
def graphs(mlp_graph_folder):
    return mlp_graph_folder


def test_collect_graphs(graphs, tmp_path):
    assert [p.name for p in collect_graphs([str(graphs)])] == ["mlp2.gnpg", "mlp3.gnpg"]
    assert len(collect_graphs([str(graphs / "mlp2.gnpg")])) == 1
    with pytest.raises(GnplaceError, match=r"no such graph file or folder$"):
        collect_graphs([str(tmp_path / "missing")])
    with pytest.raises(GnplaceError, match=r"^pkg.models:net: no such graph file or folder \(a module:factory "
                                           r"reference: evaluate reads graph files and folders; save .*save_graph"):
        collect_graphs(["pkg.models:net"])  # said only "no such graph file or folder", where an ONNX file is helped
    (tmp_path / "empty").mkdir()
    with pytest.raises(GnplaceError, match="no graphs"):
        collect_graphs([str(tmp_path / "empty")])
    with pytest.raises(GnplaceError, match=r"no manifest\.json, so no 'test' split to choose \(--split all takes"):
        collect_graphs([str(graphs)], split="test")  # a folder of bare graph files has no split to choose from


def test_a_folder_of_json_graphs_says_that_a_folders_graphs_are_its_gnpg_files(graphs, tmp_path):
    """``gnplace import -o m.json`` writes plain JSON graphs; a folder of them said "no graphs", naming none of them."""
    folder = tmp_path / "mine"
    folder.mkdir()
    for name in ("a", "b"):
        save_graph(load_graph(graphs / "mlp2.gnpg"), folder / f"{name}.json")
    with pytest.raises(GnplaceError, match=r"mine: no graphs \(split 'all'\): a folder's graphs are its \*\.gnpg files, "
                                           r"and its 2 \.json files are read only where named one by one \(or saved "
                                           r"as \.gnpg\)$"):
        collect_graphs([str(folder)])
    assert len(collect_graphs([str(folder / "a.json"), str(folder / "b.json")])) == 2


def test_json_graphs_beside_gnpg_files_in_a_folder_are_warned_of_and_other_json_files_are_not(graphs, tmp_path):
    """A folder's *.gnpg files were read and its plain-JSON graphs (gnplace import -o m.json) skipped without a word."""
    import warnings

    folder = tmp_path / "mine"
    folder.mkdir()
    save_graph(load_graph(graphs / "mlp2.gnpg"), folder / "a.gnpg")
    (folder / "placement.json").write_text('{"devices": [0, 1]}')  # another kind of JSON file: no graph
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert collect_graphs([str(folder)]) == [folder / "a.gnpg"]
    save_graph(load_graph(graphs / "mlp2.gnpg"), folder / "b.json")
    with pytest.warns(UserWarning, match=r"mine: 1 plain-JSON graph file left out \(b\.json\): a folder's graphs are "
                                         r"its \*\.gnpg files; name them one by one, or save them as \.gnpg$"):
        assert collect_graphs([str(folder)]) == [folder / "a.gnpg"]


def test_collect_graphs_takes_one_path_as_one_and_refuses_what_is_no_path(graphs):
    """A str was iterated character by character ("g: no such graph file or folder"); None was a TypeError."""
    assert collect_graphs(str(graphs)) == collect_graphs([str(graphs)])
    assert collect_graphs(graphs / "mlp2.gnpg") == [graphs / "mlp2.gnpg"]
    assert collect_graphs(p for p in [graphs / "mlp2.gnpg"]) == [graphs / "mlp2.gnpg"]  # any iterable of paths
    for bad in (None, 3, [None]):
        with pytest.raises(GnplaceError, match=r"^graphs are given by paths \(a str or os.PathLike, or a list of them\)"):
            collect_graphs(bad)


def test_a_folder_or_device_given_as_a_graph_file_is_named_as_what_it_is(graphs, tmp_path):
    """A folder ``x.gnpg`` the glob matched, or ``/dev/null``, was reported as "no such graph file" at run time."""
    from gnplace.exceptions import InvalidGraph

    (graphs / "x.gnpg").mkdir()
    with pytest.raises(InvalidGraph, match=rf"^{graphs / 'x.gnpg'}: is a folder, not a graph file \(matched by "
                                           rf"{graphs / '[*]'}\.gnpg\)$"):
        collect_graphs([str(graphs)])
    with pytest.raises(InvalidGraph, match=r"x\.gnpg: is a folder holding no graphs, not a graph file$"):
        collect_graphs([str(graphs / "x.gnpg")])
    with pytest.raises(InvalidGraph, match=r"^/dev/null: not a regular file \(a device, pipe or socket\), so not a "
                                           r"graph file$"):
        collect_graphs(["/dev/null"])
    (graphs / "x.gnpg").rmdir()
    manifest = {"format": "gnplace-dataset", "graphs": [{"file": "mlp2.gnpg"}, {"file": "gone.gnpg"}]}
    (graphs / "manifest.json").write_text(json.dumps(manifest))
    with pytest.raises(GnplaceError, match=r"gone\.gnpg: no such graph file \(listed by .*manifest\.json\)$"):
        collect_graphs([str(graphs)])


def test_an_empty_graph_path_is_refused():
    with pytest.raises(GnplaceError, match="an empty graph path"):  # Path("") was the current folder
        collect_graphs([""])


def test_a_graph_named_twice_by_two_spellings_of_its_path_is_one_graph(graphs, monkeypatch):
    """Its folder given absolute and the file relative (or through a '..') name one file: it is read once (a mutant
    telling paths apart by their spelling passed)."""
    monkeypatch.chdir(graphs.parent)
    found = collect_graphs([str(graphs), f"{graphs.name}/mlp2.gnpg", f"{graphs.name}/../{graphs.name}/mlp3.gnpg"])
    assert found == [graphs / "mlp2.gnpg", graphs / "mlp3.gnpg"]


def test_a_manifest_folder_gives_the_graphs_of_the_split_asked(graphs, tmp_path):
    """Its manifest's split, by entry (a mutant giving every graph listed, whatever the split, passed)."""
    import shutil

    folder = tmp_path / "data"
    shutil.copytree(graphs, folder)
    entries = [{"file": "mlp2.gnpg", "split": "train"}, {"file": "mlp3.gnpg", "split": "test"}]
    manifest = {"format": "gnplace-dataset", "version": 1, "graphs": entries}
    (folder / "manifest.json").write_text(json.dumps(manifest))
    assert collect_graphs(folder, split="test") == [folder / "mlp3.gnpg"]
    assert collect_graphs(folder, split="train") == [folder / "mlp2.gnpg"]
    assert collect_graphs(folder) == [folder / "mlp2.gnpg", folder / "mlp3.gnpg"]
    del entries[1]["split"]
    (folder / "manifest.json").write_text(json.dumps(manifest))
    with pytest.raises(InvalidGraph, match=r"manifest\.json: graph entry 1 needs a 'split' \(a string\), got None$"):
        collect_graphs(folder, split="test")
    assert len(collect_graphs(folder)) == 2  # all: no split needed


@pytest.mark.parametrize("spec", ["", "  "])
def test_a_blank_graph_path_is_refused_as_empty(spec):
    with pytest.raises(GnplaceError, match=r"^an empty graph path: name a graph file or a folder"):
        collect_graphs([spec])


def test_a_manifest_folder_with_no_graph_of_the_split_says_nothing_of_its_json_files(graphs, tmp_path):
    """The note on *.json graphs is for folders without a manifest, whose graphs a manifest names (a mutant giving it
    in a manifest's folder too passed)."""
    import shutil

    folder = tmp_path / "data"
    shutil.copytree(graphs, folder)
    manifest = {"format": "gnplace-dataset", "version": 1, "graphs": [{"file": "mlp2.gnpg", "split": "train"}]}
    (folder / "manifest.json").write_text(json.dumps(manifest))
    (folder / "notes.json").write_text("{}")
    with pytest.raises(GnplaceError, match=r"data: no graphs \(split 'test'\)$"):
        collect_graphs(folder, split="test")


def test_a_folder_of_json_graphs_only_is_refused_without_a_warning_of_them(graphs, tmp_path):
    """The note of the refusal says it; a warning that they were left out, then the refusal, said it twice (a mutant
    looking for them where no *.gnpg was found passed)."""
    import warnings

    folder = tmp_path / "mine"
    folder.mkdir()
    for name in ("a", "b"):
        save_graph(load_graph(graphs / "mlp2.gnpg"), folder / f"{name}.json")
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        with pytest.raises(GnplaceError, match=r"mine: no graphs \(split 'all'\): a folder's graphs are its \*\.gnpg "
                                               r"files, and its 2 \.json files are read only where named one by one"):
            collect_graphs(folder)


def test_a_folder_named_like_a_json_file_is_no_json_file_to_note(tmp_path):
    folder = tmp_path / "mine"
    (folder / "old.json").mkdir(parents=True)
    with pytest.raises(GnplaceError, match=r"mine: no graphs \(split 'all'\)$"):
        collect_graphs(folder)


def test_the_json_files_beside_graphs_are_read_only_where_regular_and_a_deep_one_is_no_graph(graphs, monkeypatch):
    """A pipe named p.json beside the graphs was read (a wait for a writer, forever); JSON nested past the parser's
    recursion was a RecursionError out of collect_graphs."""
    import os
    import warnings
    from pathlib import Path

    os.mkfifo(graphs / "p.json")
    (graphs / "deep.json").write_text("[" * 100_000 + "]" * 100_000)
    read = Path.read_bytes
    monkeypatch.setattr(Path, "read_bytes", lambda self: read(self) if self.is_file() else pytest.fail(f"read {self}"))
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert collect_graphs(graphs) == [graphs / "mlp2.gnpg", graphs / "mlp3.gnpg"]


def test_a_missing_path_with_a_colon_inside_gets_no_module_factory_hint(tmp_path):
    with pytest.raises(GnplaceError, match=r"run:3/g\.gnpg: no such graph file or folder$"):
        collect_graphs([str(tmp_path / "run:3" / "g.gnpg")])


@pytest.mark.parametrize(("graphs_listed", "message"), [
    (5, r"'graphs' must be a list of entries, got int$"),
    ({"file": "mlp2.gnpg"}, r"'graphs' must be a list of entries, got dict$"),
    ([{"file": ""}], r"graph entry 0 needs a 'file' name \(a string\), got \{'file': ''\}$"),
    ([{"file": "mlp2.gnpg"}, {"file": 5}], r"graph entry 1 needs a 'file' name \(a string\), got \{'file': 5\}$"),
])
def test_a_manifest_whose_graphs_are_no_list_of_file_names_is_one_invalid_graph(graphs, graphs_listed, message):
    """An int for ``graphs`` or for a file name was a TypeError; an empty name was the folder itself."""
    (graphs / "manifest.json").write_text(json.dumps({"format": "gnplace-dataset", "graphs": graphs_listed}))
    with pytest.raises(InvalidGraph, match=r"manifest\.json: " + message):
        collect_graphs(graphs)


def test_a_graph_a_manifest_lists_that_is_gone_is_missing_not_invalid(graphs):
    """As documented: a path that does not exist is a GnplaceError; InvalidGraph is for a folder or a device."""
    (graphs / "manifest.json").write_text(json.dumps({"format": "gnplace-dataset", "graphs": [{"file": "gone.gnpg"}]}))
    with pytest.raises(GnplaceError) as info:
        collect_graphs(graphs)
    assert type(info.value) is GnplaceError


def test_the_note_on_one_json_file_says_it_is_read_where_named(graphs, tmp_path):
    """It said "its 1 .json file are read only where named"."""
    folder = tmp_path / "mine"
    folder.mkdir()
    save_graph(load_graph(graphs / "mlp2.gnpg"), folder / "a.json")
    with pytest.raises(GnplaceError, match=r"mine: no graphs \(split 'all'\): a folder's graphs are its \*\.gnpg files, "
                                           r"and its 1 \.json file is read only where named one by one \(or saved as "
                                           r"\.gnpg\)$"):
        collect_graphs(folder)


def test_a_quoted_pattern_is_named_as_one(graphs, tmp_path):
    """``-g 'data/*.gnpg'`` (quoted: no shell expanded it) said only "no such graph file or folder"."""
    with pytest.raises(GnplaceError, match=r"mlp\*\.gnpg: no such graph file or folder \(a pattern, which matches 2 "
                                           r"paths but is not expanded here: leave it unquoted"):
        collect_graphs([str(graphs / "mlp*.gnpg")])
    with pytest.raises(GnplaceError, match=r"no such graph file or folder$"):  # a pattern matching nothing: as before
        collect_graphs([str(tmp_path / "none*.gnpg")])
