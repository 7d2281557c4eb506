"""One GRAPH argument for graph files, ONNX files and Python ``module:factory`` references."""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import onnx
import pytest
import torch
from onnx import TensorProto, helper, numpy_helper

from gnplace.exceptions import InvalidArgument, InvalidGraph, UnsupportedGraph
from gnplace.importers.sources import load_factory, load_graph_source, load_model_source, load_step_source

ROOT = Path(__file__).resolve().parents[2]

FACTORY = '''
import torch

class Net(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.body = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.ReLU(), torch.nn.Linear(16, 1))

    def forward(self, x):
        return self.body(x).square().mean()  # the training loss


def make():
    return Net(), (torch.zeros(4, 8),)

def not_a_pair():
    return 3

def logits():
    return torch.nn.Linear(8, 3), (torch.zeros(4, 8),)

def logits_and_loss():
    target = torch.tensor([0, 1, 2, 0])
    return torch.nn.Linear(8, 3), (torch.zeros(4, 8),), lambda out: torch.nn.functional.cross_entropy(out, target)

def loss_not_callable():
    return torch.nn.Linear(8, 3), (torch.zeros(4, 8),), "cross_entropy"

class Regression(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = torch.nn.Linear(4, 2)

    def forward(self, x, y):
        return (self.fc(x) - y).square().mean()

def inputs_as_a_list():
    return Regression(), [torch.zeros(8, 4), torch.zeros(8, 2)]

def inputs_as_a_tuple():
    return Regression(), (torch.zeros(8, 4), torch.zeros(8, 2))

def broken():
    raise ValueError("no weights here")

def loss_none():
    return Net(), (torch.zeros(4, 8),), None  # the module's output is the loss
'''


def _onnx_file(path: Path, dynamic: bool = False) -> Path:
    w = numpy_helper.from_array(np.ones((16, 4), dtype=np.float32), "w")
    node = helper.make_node("MatMul", ["x", "w"], ["y"], name="mm")
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", 16] if dynamic else [8, 16])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, ["batch", 4] if dynamic else [8, 4])
    graph = helper.make_graph([node], "g", [x], [y], [w])
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), path)
    return path


def test_graph_files_onnx_files_and_factories_give_training_graphs(tmp_path):
    assert load_graph_source(str(ROOT / "datasets" / "examples" / "mlp2x8w2048b512.gnpg")).num_ops > 0
    from_onnx = load_graph_source(str(_onnx_file(tmp_path / "m.onnx")))
    assert from_onnx.num_ops > 1 and (from_onnx.phase == 2).any()  # backward and an update were synthesised
    dynamic = load_graph_source(str(_onnx_file(tmp_path / "d.onnx", dynamic=True)), input_shapes={"x": [8, 16]})
    assert dynamic.num_ops == from_onnx.num_ops
    (tmp_path / "mymodels.py").write_text(FACTORY)
    graph = load_graph_source(f"{tmp_path / 'mymodels.py'}:make")
    assert graph.name == "make" and "addmm" in graph.op_types and (graph.phase == 2).sum() == 4


def test_a_factory_may_give_its_inputs_as_a_list_as_from_module_takes_them(tmp_path):
    (tmp_path / "mymodels.py").write_text(FACTORY)
    as_list = load_graph_source(f"{tmp_path / 'mymodels.py'}:inputs_as_a_list")  # was: forward() missing 'y'
    as_tuple = load_graph_source(f"{tmp_path / 'mymodels.py'}:inputs_as_a_tuple")
    assert as_list.num_ops == as_tuple.num_ops > 0 and as_list.op_types == as_tuple.op_types


def test_a_factory_may_give_the_loss_of_a_module_that_returns_logits(tmp_path):
    (tmp_path / "mymodels.py").write_text(FACTORY)
    with pytest.raises(UnsupportedGraph, match=r"not a tensor of shape \(4, 3\).*return \(module, example_inputs, "
                                                r"loss\)"):
        load_graph_source(f"{tmp_path / 'mymodels.py'}:logits")
    graph = load_graph_source(f"{tmp_path / 'mymodels.py'}:logits_and_loss")
    assert {"addmm", "_log_softmax"} <= set(graph.op_types) and (graph.phase == 2).sum() == 2  # weight, bias
    step, module = load_step_source(f"{tmp_path / 'mymodels.py'}:logits_and_loss")
    assert isinstance(module, torch.nn.Linear) and step.graph.num_ops == graph.num_ops
    with pytest.raises(InvalidArgument, match=r"\(module, example_inputs, loss\) with loss a callable"):
        load_graph_source(f"{tmp_path / 'mymodels.py'}:loss_not_callable")


def test_bad_sources_are_one_clear_error(tmp_path):
    (tmp_path / "mymodels.py").write_text(FACTORY)
    with pytest.raises(InvalidGraph, match="no such graph file"):
        load_graph_source(str(tmp_path / "missing.gnpg"))
    with pytest.raises(InvalidGraph):
        load_graph_source(str(tmp_path / "missing.onnx"))
    with pytest.raises(InvalidArgument, match="cannot import"):
        load_graph_source("no_such_module_here:make")
    with pytest.raises(InvalidArgument, match="no callable"):
        load_factory(f"{tmp_path / 'mymodels.py'}:absent")
    with pytest.raises(InvalidArgument, match=r"return \(module, example_inputs\)"):
        load_graph_source(f"{tmp_path / 'mymodels.py'}:not_a_pair")
    with pytest.raises(InvalidArgument, match="MODULE:FACTORY"):
        load_factory("nocolon")
    with pytest.raises(InvalidArgument, match="the factory raised TypeError: .*missing 1 required positional"):
        load_graph_source("gnplace.execute.examples:Regression")  # a class that needs its body
    with pytest.raises(InvalidArgument, match="the factory raised ValueError: no weights here"):
        load_graph_source(f"{tmp_path / 'mymodels.py'}:broken")


@pytest.mark.parametrize("load", [load_factory, load_graph_source, load_step_source, load_model_source])
def test_a_source_given_as_a_path_loads_and_one_of_no_text_is_one_clear_error(tmp_path, load):
    """``load_factory(Path("models.py:make"))`` was an AttributeError ('rpartition'), a ``Path`` of a factory given
    to the others a TypeError ('not iterable'), and 3 or None either of them."""
    (tmp_path / "mymodels.py").write_text(FACTORY)
    assert load(tmp_path / "mymodels.py:make") is not None
    for spec in (3, None):
        with pytest.raises(InvalidArgument, match=r"^a source is given as a str \(a graph file, an ONNX file or "):
            load(spec)


def test_a_factory_name_that_is_no_identifier_and_a_missing_file_are_refused_before_any_import(tmp_path):
    """Neither is a failure of the user's code: the file is not run for a name it cannot define."""
    (tmp_path / "runs.py").write_text("raise RuntimeError('ran')\n")
    with pytest.raises(InvalidArgument, match=r"^'.*runs\.py:make\(\)': expected MODULE:FACTORY or FILE\.py:FACTORY$"):
        load_factory(f"{tmp_path / 'runs.py'}:make()")
    with pytest.raises(InvalidArgument, match=r"^'.*absent\.py:make': no such file .*absent\.py$"):
        load_factory(f"{tmp_path / 'absent.py'}:make")


def test_a_graph_file_of_another_suffix_loads_and_a_factory_file_on_the_path_keeps_its_name(tmp_path, monkeypatch):
    """An existing file is a graph file whatever its suffix; a factory file found under its own name on sys.path is
    imported under that name (renamed, its own ``import`` of itself would make a second copy)."""
    import shutil

    shutil.copy(ROOT / "datasets" / "examples" / "mlp2x8w2048b512.gnpg", tmp_path / "graph.saved")
    assert load_graph_source(str(tmp_path / "graph.saved")).num_ops > 0
    (tmp_path / "selfnamed_xyz.py").write_text("def make():\n    return __name__\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    assert load_factory(f"{tmp_path / 'selfnamed_xyz.py'}:make")() == "selfnamed_xyz"


def test_a_factory_may_give_a_loss_of_none_and_a_model_file_of_a_capital_suffix_is_no_factory(tmp_path):
    from gnplace.importers.sources import load_model_source

    (tmp_path / "mymodels.py").write_text(FACTORY)
    module, inputs, loss = load_model_source(f"{tmp_path / 'mymodels.py'}:loss_none")
    assert isinstance(module, torch.nn.Module) and len(inputs) == 1 and loss is None
    with pytest.raises(InvalidArgument, match=r"^'C:/models/net\.ONNX': running steps on real devices needs the "
                                              r"PyTorch model"):
        load_model_source("C:/models/net.ONNX")  # a Windows path: its drive's colon names no factory


def test_an_unknown_optimizer_is_refused_before_the_factorys_code_runs(tmp_path):
    from gnplace.exceptions import UnknownName

    (tmp_path / "marks.py").write_text(f"open({str(tmp_path / 'ran')!r}, 'w').close()\n\ndef make():\n    pass\n")
    with pytest.raises(UnknownName):
        load_step_source(f"{tmp_path / 'marks.py'}:make", optimizer="nadam_xyz")
    assert not (tmp_path / "ran").exists()


def test_input_shapes_for_a_source_that_is_not_onnx_are_refused(tmp_path):
    """--input-shape sizes an ONNX model's dynamic inputs; given for anything else it would be silently dropped."""
    (tmp_path / "mymodels.py").write_text(FACTORY)
    graph_file = str(ROOT / "datasets" / "examples" / "mlp2x8w2048b512.gnpg")
    with pytest.raises(InvalidArgument, match="apply to ONNX models only, and this is a graph file"):
        load_graph_source(graph_file, input_shapes={"x": [8, 16]})
    with pytest.raises(InvalidArgument, match="apply to ONNX models only, and this is a MODULE:FACTORY"):
        load_graph_source(f"{tmp_path / 'mymodels.py'}:make", input_shapes={"x": [8, 16]})
    assert load_graph_source(graph_file, input_shapes={}).num_ops > 0  # none given: nothing to refuse


def test_a_factory_file_imports_files_beside_it_and_exits_are_one_error(tmp_path):
    folder = tmp_path / "pkg"
    folder.mkdir()
    (folder / "helper.py").write_text(FACTORY)
    (folder / "model.py").write_text("from helper import make\n")
    assert load_graph_source(f"{folder / 'model.py'}:make").num_ops > 0  # as `python pkg/model.py` would see it
    (tmp_path / "exits.py").write_text("import sys\nsys.exit(2)\n")
    with pytest.raises(InvalidArgument, match=r"cannot import .*exits\.py \(SystemExit \(sys\.exit\(2\)"):
        load_graph_source(f"{tmp_path / 'exits.py'}:make")
    (tmp_path / "quits.py").write_text("import sys\n\ndef make():\n    sys.exit(0)\n")
    with pytest.raises(InvalidArgument, match=r"the factory raised SystemExit \(sys\.exit\(0\)"):
        load_graph_source(f"{tmp_path / 'quits.py'}:make")


def test_factory_files_of_one_name_in_two_folders_load_each_its_own_and_leave_the_caller_as_it_was(tmp_path):
    """The first file's folder stayed on sys.path and its model.py and helper.py in sys.modules: a second
    folder's model.py, importing its own helper.py, got the first one's (a Linear(2, 1) for a Linear(3, 1))."""
    path_before = list(sys.path)
    for width in (2, 3):
        folder = tmp_path / f"w{width}"
        folder.mkdir()
        (folder / "helper.py").write_text(f"import torch\n\ndef make():\n    return torch.nn.Linear({width}, 1), "
                                          f"(torch.ones(4, {width}),), lambda out: out.sum()\n")
        (folder / "model.py").write_text("import sys\nimport model\nfrom helper import make\n\nassert model.make is make\n"
                                         "sys.path.insert(0, '/nonexistent')\n\ndef lazy():\n    import helper\n"
                                         "    return helper.make()\n")
        step, module = load_step_source(f"{folder / 'model.py'}:make")
        assert module.in_features == width and step.graph.num_ops > 0
        lazy = load_factory(f"{folder / 'model.py'}:lazy")  # imports beside the file when called, not on import
        assert sys.path == path_before and not {"model", "helper"} & set(sys.modules)
        assert lazy()[0].in_features == width


def test_a_file_beside_a_factory_file_hides_no_module_of_its_name(tmp_path):
    """The factory's folder went first on sys.path: gnplace/execute/profile.py hid the standard library's profile
    from torch's import of cProfile, and `gnplace inspect gnplace/execute/examples.py:branchy` was a traceback."""
    import subprocess
    import sys

    (tmp_path / "profile.py").write_text("")  # as gnplace/execute/profile.py beside examples.py
    (tmp_path / "model.py").write_text(FACTORY)
    (tmp_path / "own").mkdir()
    (tmp_path / "own" / "profile.py").write_text(FACTORY)  # the factory file itself named as that module
    for factory in (tmp_path / "model.py", tmp_path / "own" / "profile.py"):
        code = (f"from gnplace.importers.sources import load_factory\nload_factory({str(factory)!r} + ':make')\n"
                "import cProfile\nprint(callable(cProfile.run))\n")
        result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
        assert result.stdout.strip() == "True", (factory, result.stderr)


def test_a_factory_files_folder_goes_last_on_the_path_while_its_code_runs(tmp_path, monkeypatch):
    """A file beside the factory named as a module of the standard library does not stand for it then either."""
    (tmp_path / "tabnanny.py").write_text("")
    (tmp_path / "model.py").write_text("def make():\n    import tabnanny\n    return tabnanny.__file__\n")
    monkeypatch.delitem(sys.modules, "tabnanny", raising=False)  # imported afresh, found where the path says
    assert Path(load_factory(f"{tmp_path / 'model.py'}:make")()).parent != tmp_path


def test_a_factory_files_modules_are_its_own_while_it_runs_and_the_callers_after(tmp_path, monkeypatch):
    """The file is registered under its name while it runs (a dataclass of string annotations looks its module up),
    a call imports the helper it loaded, not a second copy, and a module of that name the caller has is put back."""
    (tmp_path / "helper.py").write_text("")
    (tmp_path / "model.py").write_text("from __future__ import annotations\n\nimport dataclasses\nimport sys\n\n"
                                       "import helper\n\n\n@dataclasses.dataclass\nclass Config:\n    width: int = 2\n"
                                       "\n\ndef same():\n    import helper as again\n"
                                       "    sys.modules['handmade_xyz'] = type(sys)('handmade_xyz')\n"
                                       "    return again is helper\n")
    same = load_factory(f"{tmp_path / 'model.py'}:same")
    callers = type(sys)("helper")
    monkeypatch.setitem(sys.modules, "helper", callers)
    monkeypatch.setitem(sys.modules, "handmade_xyz", None)  # removed again after the test
    assert same() is True
    assert sys.modules["helper"] is callers  # the caller's, not the factory's, and not dropped
    assert sys.modules["handmade_xyz"] is not None  # made by hand, from no file: left to the caller


def test_modules_an_editable_install_finds_stay_loaded_after_a_factory_imported_them_first(tmp_path, monkeypatch):
    """An editable install (``pip install -e``, gnplace's own) is found by a finder of sys.meta_path, not on sys.path:
    its modules that a factory imported first were dropped from sys.modules, and the caller's next import made a
    second copy (gnplace.apply refused load_step_source's ImportedStep as another class's)."""
    import importlib.machinery

    source = tmp_path / "installed"
    (source / "editable_lib_xyz").mkdir(parents=True)
    (source / "editable_lib_xyz" / "__init__.py").write_text(
        "import torch\n\nclass Net(torch.nn.Linear):\n    pass\n")

    class EditableFinder:  # as setuptools' __editable___*_finder: the package's folder is not on sys.path
        @staticmethod
        def find_spec(name, path=None, target=None):
            if name != "editable_lib_xyz":
                return None
            return importlib.machinery.PathFinder.find_spec(name, [str(source)])

    monkeypatch.setattr(sys, "meta_path", [*sys.meta_path, EditableFinder])
    monkeypatch.delitem(sys.modules, "editable_lib_xyz", raising=False)
    (tmp_path / "model.py").write_text("import torch\nimport editable_lib_xyz\n\ndef make():\n"
                                       "    return editable_lib_xyz.Net(2, 1), (torch.ones(4, 2),), lambda out: out.sum()\n")
    _, module = load_step_source(f"{tmp_path / 'model.py'}:make")
    import editable_lib_xyz

    assert isinstance(module, editable_lib_xyz.Net)  # the caller's import is the module the factory used
    assert "model" not in sys.modules  # the factory's own file is still the factory's alone


def test_a_module_factory_in_the_working_folder_is_found_as_python_m_finds_it(tmp_path, monkeypatch):
    """The gnplace command puts its own folder on sys.path, not the working one: mypkg.models:make was not found."""
    package = tmp_path / "mypkg_cwd_test"
    package.mkdir()
    (package / "__init__.py").write_text("")
    (package / "models.py").write_text("import torch\n\ndef make():\n    return torch.nn.Linear(2, 1), (torch.ones(1, 2),)\n")
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(sys, "path", [p for p in sys.path if p not in ("", ".", str(tmp_path))])
    monkeypatch.delitem(sys.modules, "mypkg_cwd_test", raising=False)
    monkeypatch.delitem(sys.modules, "mypkg_cwd_test.models", raising=False)
    path_before = list(sys.path)
    factory = load_factory("mypkg_cwd_test.models:make")
    assert sys.path == path_before and "mypkg_cwd_test" not in sys.modules  # the working folder was appended for good
    assert isinstance(factory()[0], torch.nn.Linear)
    (package / "broken.py").write_text("import no_such_dependency_xyz\n")
    with pytest.raises(InvalidArgument, match="cannot import mypkg_cwd_test.broken .*no_such_dependency_xyz"):
        load_factory("mypkg_cwd_test.broken:make")  # a missing dependency of the user's module stays the error


def test_the_optimizer_reaches_every_source_and_a_graph_files_own_is_not_overridden(tmp_path):
    """The real-execution paths imported every model with SGD; a graph file now refuses another optimizer."""
    from gnplace.exceptions import UnknownName
    from gnplace.execute.optim import graph_optimizer

    (tmp_path / "mymodels.py").write_text(FACTORY)
    factory = f"{tmp_path / 'mymodels.py'}:make"
    step, _ = load_step_source(factory, optimizer="adam")
    assert graph_optimizer(step.graph) == "adam"
    assert graph_optimizer(load_graph_source(factory, optimizer="momentum")) == "momentum"
    assert graph_optimizer(load_graph_source(factory)) == "sgd"  # the default, as before
    onnx_file = str(_onnx_file(tmp_path / "m.onnx"))
    assert graph_optimizer(load_graph_source(onnx_file, optimizer="adamw")) == "adamw"
    assert graph_optimizer(load_graph_source(onnx_file)) == "sgd"  # an ONNX file's default too
    graph_file = str(ROOT / "datasets" / "examples" / "mlp2x8w2048b512.gnpg")  # an SGD graph
    assert load_graph_source(graph_file, optimizer="sgd").num_ops == load_graph_source(graph_file).num_ops
    with pytest.raises(InvalidArgument, match=r"mlp2x8w2048b512\.gnpg: a graph file's optimizer is fixed when it is "
                                              r"imported, and its update ops are sgd's \(sgd_update\), not adam's: "):
        load_graph_source(graph_file, optimizer="adam")
    for call in (lambda: load_step_source(factory, optimizer="lion"), lambda: load_graph_source(graph_file,
                                                                                                optimizer="lion")):
        with pytest.raises(UnknownName, match=r"^unknown optimizer 'lion' \(choose one of: sgd, momentum, adam, adamw\)$"):
            call()
