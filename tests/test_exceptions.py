"""The exception hierarchy, and the command line turning each error into one line and exit status 2."""

from __future__ import annotations

import inspect
from pathlib import Path

import pytest

import gnplace.exceptions as exceptions
from gnplace.cli import main
from gnplace.exceptions import (
    BudgetExhausted,
    ExecutionFailed,
    GnplaceError,
    InfeasiblePlacement,
    InvalidArgument,
    InvalidCheckpoint,
    InvalidCluster,
    InvalidGraph,
    InvalidPlacement,
    MissingDependency,
    Terminated,
    UnknownName,
    UnknownPlacer,
    UnsupportedGraph,
)
from gnplace.graph import OpGraph
from gnplace.graph_io import save_graph
from gnplace.toy import chain_graph

EXAMPLE = Path(__file__).resolve().parents[1] / "datasets" / "examples" / "mlp2x8w2048b512.gnpg"
GiB = 2**30

VALUE_ERRORS = {InvalidGraph, InvalidCluster, InvalidPlacement, UnknownName, UnknownPlacer, InvalidArgument,
                InvalidCheckpoint}
NOT_VALUE_ERRORS = {GnplaceError, InfeasiblePlacement, UnsupportedGraph, BudgetExhausted, MissingDependency,
                    ExecutionFailed}


def test_all_lists_every_exception_class_defined_here():
    defined = {
        name for name, obj in vars(exceptions).items() if inspect.isclass(obj) and issubclass(obj, BaseException)
    }
    assert set(exceptions.__all__) == defined
    assert {getattr(exceptions, name) for name in exceptions.__all__} == VALUE_ERRORS | NOT_VALUE_ERRORS | {Terminated}


def test_a_run_stopped_by_sigterm_is_an_interrupt_not_an_error():
    # bad input is a GnplaceError; SIGTERM is not bad input, and whoever keeps their work on Ctrl-C keeps it here too
    assert issubclass(Terminated, KeyboardInterrupt) and not issubclass(Terminated, Exception)


@pytest.mark.parametrize("name", [name for name in exceptions.__all__ if name != "Terminated"])
def test_every_exception_derives_from_gnplace_error(name):
    cls = getattr(exceptions, name)
    assert issubclass(cls, GnplaceError) and issubclass(cls, Exception)
    with pytest.raises(GnplaceError, match="the message"):
        raise cls("the message")


@pytest.mark.parametrize("cls", sorted(VALUE_ERRORS, key=lambda c: c.__name__))
def test_bad_values_are_also_value_errors(cls):
    assert issubclass(cls, ValueError)
    with pytest.raises(ValueError, match="caught as ValueError"):
        raise cls("caught as ValueError")


@pytest.mark.parametrize("cls", sorted(NOT_VALUE_ERRORS, key=lambda c: c.__name__))
def test_infeasible_and_unsupported_are_not_value_errors(cls):
    assert not issubclass(cls, ValueError)


def test_the_package_reexports_the_common_ones():
    import gnplace

    for name in ("GnplaceError", "InvalidGraph", "InvalidCluster", "InvalidPlacement", "InfeasiblePlacement"):
        assert getattr(gnplace, name) is getattr(exceptions, name)


def _run(argv, capsys):
    """Exit status and stderr of ``gnplace argv``; nothing may reach stdout."""
    code = main([str(a) for a in argv])
    captured = capsys.readouterr()
    assert captured.out == ""
    return code, captured.err


def _assert_one_error_line(err: str, message: str) -> None:
    assert err.startswith(f"gnplace: error: {message}"), err
    assert err.count("\n") == 1 and err.endswith("\n")
    assert "Traceback" not in err


def test_cli_reports_invalid_graph(tmp_path, capsys):
    code, err = _run(["simulate", tmp_path / "none.gnpg"], capsys)
    assert code == 2
    _assert_one_error_line(err, f"{tmp_path / 'none.gnpg'}: no such graph file")


def test_cli_reports_invalid_cluster(capsys):
    code, err = _run(["simulate", EXAMPLE, "-c", "k80x99"], capsys)
    assert code == 2
    _assert_one_error_line(err, "unknown cluster 'k80x99'")


def test_cli_reports_invalid_placement(tmp_path, capsys):
    path = tmp_path / "p.json"
    path.write_text('{"format": "gnplace-placement", "version": 1, "placement": {"nope": "gpu0"}}')
    code, err = _run(["simulate", EXAMPLE, "-c", "k80x2", "-p", path], capsys)
    assert code == 2
    _assert_one_error_line(err, f"{path}: op 'nope' is not in graph")


def test_cli_reports_unknown_name(capsys):
    code, err = _run(["place", EXAMPLE, "-p", "magic"], capsys)
    assert code == 2
    _assert_one_error_line(err, "unknown placer 'magic'")


def test_cli_reports_infeasible_placement(tmp_path, capsys):
    heavy = OpGraph(["a", "b"], [(0, 1)], flops=[1e9, 1e9], out_bytes=[1000, 0], param_bytes=[2 * GiB, 0], name="heavy")
    path = save_graph(heavy, tmp_path / "heavy.gnpg")
    code, err = _run(["place", path, "-c", "tight4", "-p", "exact"], capsys)
    assert code == 2
    _assert_one_error_line(err, "no placement of 'heavy' fits the memory of 'tight4': colocation group 0 (op 'a') "
                               "holds 2.00 GiB")


def test_cli_reports_unsupported_graph(tmp_path, capsys):
    path = save_graph(chain_graph(61), tmp_path / "long.gnpg")
    code, err = _run(["place", path, "-c", "k80x2", "-p", "exact"], capsys)
    assert code == 2
    _assert_one_error_line(err, "graph 'chain61' has 61 colocation groups, more than ExactPlacer's max_groups=60")


def test_cli_reports_invalid_argument(tmp_path, capsys):
    code, err = _run(["import", tmp_path / "m.onnx", "-o", tmp_path / "g.gnpg", "--input-shape", "x=8,big"], capsys)
    assert code == 2
    _assert_one_error_line(err, "bad input shape 'x=8,big'")
    assert not (tmp_path / "g.gnpg").exists()


def test_cli_lets_other_errors_through(monkeypatch):
    """Only :class:`GnplaceError` is bad input; a bug keeps its traceback."""
    import gnplace.cli.place as place_cmd

    def broken(spec):
        raise RuntimeError("a bug, not bad input")

    monkeypatch.setattr(place_cmd, "load_cluster", broken)
    with pytest.raises(RuntimeError, match="a bug, not bad input"):
        main(["place", str(EXAMPLE)])
