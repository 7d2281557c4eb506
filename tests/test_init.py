"""The package's top level: ``import gnplace`` and the names it offers."""

from __future__ import annotations

import ast
import inspect
import re
from pathlib import Path

import gnplace

INIT = Path(gnplace.__file__)


def _bound_names(body: list[ast.stmt]) -> set[str]:
    """The names ``body`` binds at module level (imports, defs, assignments), ``if`` and ``with`` blocks included.

    A function's body is left out: what ``__getattr__`` imports is no name a type checker sees.
    """
    names: set[str] = set()
    for node in body:
        if isinstance(node, ast.Import | ast.ImportFrom):
            names.update((alias.asname or alias.name).split(".")[0] for alias in node.names)
        elif isinstance(node, ast.FunctionDef | ast.ClassDef):
            names.add(node.name)
        elif isinstance(node, ast.Assign):
            names.update(t.id for t in node.targets if isinstance(t, ast.Name))
        elif isinstance(node, ast.If):
            names |= _bound_names(node.body) | _bound_names(node.orelse)
        elif isinstance(node, ast.With):
            names |= _bound_names(node.body)
    return names


def test_every_public_name_exists():
    """Each name of ``__all__`` is there (``apply`` is imported on first use) and none is listed twice."""
    assert len(set(gnplace.__all__)) == len(gnplace.__all__)
    for name in gnplace.__all__:
        assert getattr(gnplace, name) is not None, name


def test_every_public_name_is_listed_by_dir():
    """``dir(gnplace)`` lists each name of ``__all__``: ``apply``, imported on first use, was missing (so a
    notebook's or a REPL's completion of ``gnplace.`` never offered it)."""
    assert set(gnplace.__all__) <= set(dir(gnplace)), sorted(set(gnplace.__all__) - set(dir(gnplace)))
    assert "load_graph" in dir(gnplace) and dir(gnplace) == sorted(dir(gnplace))


def test_every_public_name_is_seen_by_a_type_checker():
    """Each name of ``__all__`` is bound where a type checker reads, not only by the module's ``__getattr__``.

    ``gnplace.apply`` came from ``__getattr__`` alone, typed ``object``, so ``mypy --strict`` refused a
    user's ``gnplace.apply(module, placement, inputs)`` as a call of an object that is not callable.
    """
    bound = _bound_names(ast.parse(INIT.read_text()).body)
    assert set(gnplace.__all__) - {"__version__"} <= bound, sorted(set(gnplace.__all__) - bound)


def test_every_public_callable_documents_its_arguments():
    """``help(gnplace.X)`` names every argument X takes: ``simulate`` said nothing of ``placement``'s three forms,
    ``mode`` or ``timeline``, ``from_networkx`` nothing of ``name``, ``save_placement`` nothing of ``placer``."""
    undocumented = []
    for name in gnplace.__all__:
        obj = getattr(gnplace, name)
        if not callable(obj) or (inspect.isclass(obj) and issubclass(obj, BaseException)) or name == "PLACERS":
            continue
        doc = inspect.getdoc(obj) or ""
        for arg in inspect.signature(obj).parameters:
            if arg not in ("options",) and not re.search(rf"\b{arg}\b", doc):
                undocumented.append(f"{name}({arg})")
    assert not undocumented, undocumented


def test_every_error_a_public_callable_says_it_raises_is_public():
    """``help(gnplace.simulate)`` says it raises ``InvalidArgument`` and ``UnknownName``, and ``load_graph`` and
    ``get_placer`` too, yet neither was ``gnplace.InvalidArgument`` nor ``gnplace.UnknownName`` to catch."""
    import builtins

    missing = []
    for name in gnplace.__all__:
        raises = re.search(r"^Raises:\n((?:[ ].*\n?|\n)*)", inspect.getdoc(getattr(gnplace, name)) or "", re.M)
        for listed in re.findall(r"^    (\w+(?:, \w+)*):", raises.group(1), re.M) if raises else []:
            missing += [f"{name}: {error}" for error in listed.split(", ")
                        if error not in gnplace.__all__ and not hasattr(builtins, error)]
    assert not missing, missing
    assert issubclass(gnplace.InvalidArgument, gnplace.GnplaceError)
    assert issubclass(gnplace.UnknownName, gnplace.GnplaceError)
