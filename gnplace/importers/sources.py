"""One argument for any graph a user has: a graph file, an ONNX file or a Python ``module:factory``.

:func:`load_graph_source` is what ``gnplace place`` and ``scripts/place.py`` call on their GRAPH
argument:

* ``*.gnpg`` / ``*.json``: a graph file (:func:`gnplace.graph_io.load_graph`);
* ``*.onnx``: an ONNX model, imported with :func:`gnplace.importers.onnx.from_onnx` (``input_shapes``
  for dynamic dimensions);
* ``package.module:factory`` (or ``path/to/file.py:factory``): a function that returns
  ``(module, example_inputs)``, imported with :func:`gnplace.importers.torch.from_module`; the
  module's output on the inputs is the training loss (a scalar), or ``(module, example_inputs,
  loss)`` with ``loss`` a callable that maps the module's output to it (``lambda out: out.sum()``,
  a criterion bound to its targets).

A ``module:factory`` is code: it is imported and run, as ``python -m`` runs a module, so it names only code the
user trusts. Nothing read from a file (a graph file, a dataset manifest, a placement, a checkpoint, an ONNX
model) is ever taken for a reference: those are data.

``optimizer`` is the optimizer whose update and state an imported model's graph counts (and the
real-device executors run); a graph file already names its own on its update ops, so there an
``optimizer`` given must be that one.
"""

from __future__ import annotations

import importlib
import importlib.machinery
import importlib.util
import os
import reprlib
import sys
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from pathlib import Path
from types import ModuleType
from typing import Any

from gnplace.exceptions import InvalidArgument, InvalidGraph
from gnplace.graph import OpGraph
from gnplace.importers import check_optimizer

__all__ = ["load_graph_source", "load_factory", "load_model_source", "load_step_source", "refuse_input_shapes"]


def _failure(err: BaseException) -> str:
    """What the user's code did, in a few words: ``ValueError: ...`` or ``SystemExit (sys.exit(2))``."""
    if isinstance(err, SystemExit):
        return f"SystemExit (sys.exit({err.code!r}); a module that parses the command line on import?)"
    return f"{type(err).__name__}: {err}"


class _Imports:
    """A user's factory and the modules it brought, put where Python looks only while its code runs.

    A ``FILE.py:FACTORY`` is imported with its folder on ``sys.path`` (its imports of files beside it work,
    as under ``python FILE.py``), and a ``MODULE:FACTORY`` found only in the working folder with that folder
    there. Left there after the load, the folder and the modules it gave (the factory's file, the files
    beside it) stood for those names in the caller for good: a second factory file of the same name in
    another folder, which imports its own ``helper.py``, got the first one's helper and so the first one's
    model. Outside :meth:`active`, ``sys.path`` is the caller's, and ``sys.modules`` holds only modules
    the caller would import under those names itself (a library the factory imported first, say).

    Args:
        folder (str | None): the folder the factory's imports need on ``sys.path``, or ``None`` for none.
    """

    def __init__(self, folder: str | None) -> None:
        self.folder = folder
        self.own: dict[str, ModuleType] = {}  # modules the caller does not see: put back while the factory runs

    @contextmanager
    def active(self) -> Iterator[None]:
        """``sys.path`` with the factory's folder (last) and ``sys.modules`` with its modules; the caller's after."""
        saved_path = list(sys.path)
        saved_modules = dict(sys.modules)
        if self.folder is not None and self.folder not in sys.path:
            sys.path.append(self.folder)
        sys.modules.update(self.own)
        try:
            yield
        finally:
            loaded = dict(sys.modules)
            sys.path[:] = saved_path
            seen: dict[str, bool] = {}  # the caller's import of each top-level name: found the same file?
            for name, module in loaded.items():
                if saved_modules.get(name) is module:
                    continue
                top = name.partition(".")[0]
                if top not in seen:
                    seen[top] = top not in self.own and _caller_imports(top, loaded.get(top), saved_path)
                if name in self.own or not seen[top]:
                    self.own[name] = module
                    if name in saved_modules:
                        sys.modules[name] = saved_modules[name]
                    else:
                        sys.modules.pop(name, None)


def _caller_imports(name: str, module: ModuleType | None, path: list[str]) -> bool:
    """Whether ``import name`` on ``path`` (the caller's ``sys.path``) would find the file ``module`` was made from.

    ``name`` is a top-level name: a submodule is the caller's if its top package is (it is found in the
    package's own folder). A module not made from a file (built in, frozen, made by hand) is left alone.
    The finders of ``sys.meta_path`` are asked as ``import`` asks them: an editable install (``pip install -e``,
    gnplace's own included) is found by a finder of its own, not on ``sys.path``, and its modules that the factory
    imported first (``gnplace.importers.torch``, which records the step) were dropped, so that the caller's next
    import made a second copy of them (``apply(step=...)`` refused the ``ImportedStep`` of the first).
    """
    spec = getattr(module, "__spec__", None)
    if spec is None or not (spec.has_location or spec.submodule_search_locations):
        return True
    found = None
    for finder in sys.meta_path:
        find_spec = getattr(finder, "find_spec", None)
        if find_spec is None:
            continue
        try:
            found = find_spec(name, path) if finder is importlib.machinery.PathFinder else find_spec(name, None)
        except Exception:  # noqa: BLE001 - another package's finder may raise anything: not found by it
            continue
        if found is not None:
            break
    if found is None:
        return False
    if spec.has_location and spec.origin is not None:
        return found.origin is not None and Path(found.origin).resolve() == Path(spec.origin).resolve()
    return [Path(p).resolve() for p in found.submodule_search_locations or []] == [
        Path(p).resolve() for p in spec.submodule_search_locations or []]


def _import_module(target: str) -> tuple[ModuleType, _Imports]:
    """``importlib.import_module(target)``, looking in the working folder last if ``target`` is not found elsewhere.

    ``python -m gnplace`` puts the working folder first on ``sys.path``; the ``gnplace`` command and
    ``scripts/place.py`` put their own folder there, so ``mypkg.models:make`` run from the folder that
    holds ``mypkg`` was not found. Installed packages and ``PYTHONPATH`` still come first. The working
    folder is on ``sys.path`` only while the factory's code runs (:class:`_Imports`).
    """
    try:
        return importlib.import_module(target), _Imports(None)
    except ModuleNotFoundError as err:
        here = str(Path.cwd())
        missing = err.name or ""
        on_path = {str(Path(p or ".").resolve()) for p in sys.path}
        if here in on_path or not (target == missing or target.startswith(missing + ".")):
            raise  # found where Python looks, or a module the user's module imports is what is missing
        imports = _Imports(here)
        with imports.active():
            return importlib.import_module(target), imports


def _load_file(path: Path) -> tuple[ModuleType, _Imports]:
    """The module of the factory file ``path``, executed with its folder on ``sys.path`` (:class:`_Imports`).

    Its folder goes last on the path, so that a file there does not hide a module of that name
    (gnplace/execute/profile.py hid the standard library's profile from torch's import of cProfile: a
    traceback).
    """
    module_spec = importlib.util.spec_from_file_location(_module_name(path), path)
    assert module_spec is not None and module_spec.loader is not None
    module = importlib.util.module_from_spec(module_spec)
    imports = _Imports(str(path.resolve().parent))
    imports.own[module_spec.name] = module  # registered while it runs, as `python FILE.py` registers __main__
    with imports.active():
        module_spec.loader.exec_module(module)
    return module, imports


def _as_spec(spec: Any) -> str:
    """``spec`` as a str: a path given as an ``os.PathLike`` is its text; anything else is refused in one line.

    Raises:
        InvalidArgument: if ``spec`` is neither a str nor an ``os.PathLike`` (3 and None were an AttributeError
            or TypeError from deep inside).
    """
    if isinstance(spec, os.PathLike):
        spec = os.fspath(spec)
    if not isinstance(spec, str):
        raise InvalidArgument(f"a source is given as a str (a graph file, an ONNX file or MODULE:FACTORY) or a path, "
                              f"got {reprlib.repr(spec)}")
    return spec


def load_factory(spec: str) -> Callable[..., Any]:
    """The callable named by ``"module:factory"`` or ``"file.py:factory"``.

    Loading leaves the caller's ``sys.path`` and module names as they were: a factory file's folder (and
    the working folder, where a module is found only there) is on the path, and the modules found there
    under their names, only while the factory's code runs, on import and on each call of the callable
    returned. Two files of one name in two folders, each with its own helpers beside it, load each its own.

    Raises:
        InvalidArgument: if the module or the attribute cannot be found, or is not callable, or ``spec`` is no
            str or ``os.PathLike``.
    """
    factory, imports = _load_factory(_as_spec(spec))
    if imports.folder is None and not imports.own:
        return factory  # imported as any module is: nothing to put in place
    return _in_imports(factory, imports)


def _load_factory(spec: str) -> tuple[Callable[..., Any], _Imports]:
    """:func:`load_factory`'s callable, unwrapped, and the imports its code is to run with."""
    target, _, attr = spec.rpartition(":")
    if not target or not attr.isidentifier():
        raise InvalidArgument(f"{spec!r}: expected MODULE:FACTORY or FILE.py:FACTORY")
    try:
        if target.endswith(".py"):
            path = Path(target)
            if not path.is_file():
                raise InvalidArgument(f"{spec!r}: no such file {target}")
            module, imports = _load_file(path)
        else:
            module, imports = _import_module(target)
    except InvalidArgument:
        raise
    except (Exception, SystemExit) as err:  # noqa: BLE001 - a user's module may raise (or exit) on import
        raise InvalidArgument(f"{spec!r}: cannot import {target} ({_failure(err)})") from err
    factory = getattr(module, attr, None)
    if not callable(factory):
        raise InvalidArgument(f"{spec!r}: {target} has no callable {attr!r}")
    return factory, imports


def _in_imports(factory: Callable[..., Any], imports: _Imports) -> Callable[..., Any]:
    """``factory``, called with its folder and modules in place (its own imports at call time find them)."""
    import functools

    @functools.wraps(factory)
    def call(*args: Any, **kwargs: Any) -> Any:
        with imports.active():
            return factory(*args, **kwargs)

    return call


def _module_name(path: Path) -> str:
    """The name a factory file is imported under: its stem, unless that names another module (``profile.py``).

    Registered under the name of a module of the standard library (or of an installed package), the file
    would stand for that module in every later import of it: torch's import of cProfile found a file
    ``profile.py`` instead of the standard library's, a traceback.
    """
    try:
        found = importlib.util.find_spec(path.stem)
    except (ImportError, ValueError):
        found = None
    if found is None or found.origin is None or Path(found.origin).resolve() == path.resolve():
        return path.stem
    return f"gnplace_factory_{path.stem}"


def load_graph_source(
    spec: str, *, input_shapes: Mapping[str, Sequence[int]] | None = None, optimizer: str | None = None
) -> OpGraph:
    """The training graph named by ``spec`` (see the module docstring).

    Args:
        spec (str): a graph file, an ONNX file or ``module:factory``.
        input_shapes (Mapping, optional): ONNX input sizes for dynamic dimensions (default: the file's);
            refused for any other source.
        optimizer (str, optional): optimizer of imported models, one of
            :data:`~gnplace.importers.OPTIMIZERS`; for a graph file, checked against the optimizer its
            update ops name (default: ``"sgd"`` for imported models, the file's own for a graph file).

    Raises:
        InvalidGraph: if a file is missing or malformed.
        InvalidArgument: if a factory cannot be found, raises or does not return ``(module, example_inputs)``
            or ``(module, example_inputs, loss)``, ``input_shapes`` are given for a source that is not an
            ONNX file, or ``optimizer`` is not the one a graph file's update ops name.
        UnknownName: for an unknown ``optimizer``.

    Examples:
        >>> load_graph_source("datasets/examples/mlp2x8w2048b512.gnpg").num_ops > 0
        True
    """
    spec = _as_spec(spec)
    path = Path(spec)
    if path.suffix.lower() == ".onnx":
        from gnplace.importers.onnx import from_onnx

        return from_onnx(path, input_shapes=input_shapes, optimizer=optimizer or "sgd")
    graph_file = path.suffix.lower() in (".gnpg", ".json") or path.exists()
    if input_shapes:
        refuse_input_shapes(spec, graph_file=graph_file)
    if graph_file:
        from gnplace.graph_io import load_graph

        graph = load_graph(path)
        if optimizer is not None:
            _check_graph_optimizer(spec, graph, optimizer)
        return graph
    if ":" in spec:
        return load_step_source(spec, optimizer=optimizer or "sgd")[0].graph
    raise InvalidGraph(f"{spec}: no such graph file (give a .gnpg or .onnx file, or MODULE:FACTORY)")


def refuse_input_shapes(spec: str, *, graph_file: bool = False) -> None:
    """Refuse ``--input-shape`` for ``spec``, a graph file or a ``module:factory``: only an ONNX file has free sizes.

    Raises:
        InvalidArgument: always, naming what ``spec`` is.
    """
    what = "a graph file" if graph_file else "a MODULE:FACTORY"
    raise InvalidArgument(f"{spec}: input shapes (--input-shape) apply to ONNX models only, and this is {what} "
                          "(a factory's shapes are those of its example inputs)")


def _check_graph_optimizer(spec: str, graph: OpGraph, optimizer: str) -> None:
    """Refuse ``optimizer`` for the graph file ``spec`` unless its update ops name that one.

    Raises:
        UnknownName: for an unknown ``optimizer``.
        InvalidArgument: if the graph's update ops name another optimizer, or none.
    """
    from gnplace.execute.optim import graph_optimizer

    check_optimizer(optimizer)
    own = graph_optimizer(graph)
    if own == optimizer:
        return
    has = f"its update ops are {own}'s ({own}_update)" if own else "its update ops name no optimizer"
    raise InvalidArgument(f"{spec}: a graph file's optimizer is fixed when it is imported, and {has}, not "
                          f"{optimizer}'s: leave --optimizer out, or import the model again with it")


def load_step_source(spec: str, *, optimizer: str = "sgd") -> tuple[Any, Any]:
    """The recorded training step of ``module:factory`` and the module: ``(ImportedStep, torch.nn.Module)``.

    Real-device timing, ``gnplace profile`` and ``gnplace.apply`` need the step itself, not only its
    graph, so they take a factory. ``optimizer`` (one of :data:`~gnplace.importers.OPTIMIZERS`, default
    ``"sgd"``) is the update the graph counts and the executors run.

    Raises:
        InvalidArgument: if ``spec`` is not ``module:factory``, or the factory raises or does not return
            ``(module, example_inputs)`` or ``(module, example_inputs, loss)``.
        UnknownName: for an unknown ``optimizer``.
    """
    from gnplace.importers.torch import import_step

    spec = _as_spec(spec)
    _refuse_no_factory(spec)
    check_optimizer(optimizer)  # before the user's code runs
    factory, imports = _load_factory(spec)
    with imports.active():  # the module's forward, recorded below, may import files beside it too
        module, inputs, loss = _called(spec, factory)
        return import_step(module, inputs, loss=loss, optimizer=optimizer, name=spec.rpartition(":")[2]), module


def load_model_source(spec: str) -> tuple[Any, tuple[Any, ...], Callable[[Any], Any] | None]:
    """What ``module:factory`` returns, checked: ``(module, example_inputs, loss)``, the inputs a tuple.

    ``loss`` is None where the module's output is the loss. For a caller that runs the model itself besides
    recording it (``bench.py apply`` times eager steps against placed ones).

    Raises:
        InvalidArgument: as :func:`load_step_source`.
    """
    spec = _as_spec(spec)
    _refuse_no_factory(spec)
    factory, imports = _load_factory(spec)
    with imports.active():
        return _called(spec, factory)


def _refuse_no_factory(spec: str) -> None:
    """Refuse a ``spec`` that names no ``module:factory`` (a graph or ONNX file): a real step needs the model."""
    if ":" not in spec or Path(spec).suffix.lower() in (".gnpg", ".json", ".onnx"):
        raise InvalidArgument(
            f"{spec!r}: running steps on real devices needs the PyTorch model: give MODULE:FACTORY (a function "
            "returning (module, example_inputs))"
        )


def _called(spec: str, factory: Callable[..., Any]) -> tuple[Any, tuple[Any, ...], Callable[[Any], Any] | None]:
    """``factory()`` of ``spec``, checked: ``(module, example_inputs as a tuple, loss or None)``."""
    import torch

    try:
        made = factory()
    except (Exception, SystemExit) as err:  # noqa: BLE001 - the user's code: any failure is one line
        raise InvalidArgument(f"{spec!r}: the factory raised {_failure(err)}") from err
    if not (isinstance(made, tuple) and len(made) in (2, 3) and isinstance(made[0], torch.nn.Module)
            and (len(made) == 2 or made[2] is None or callable(made[2]))):
        raise InvalidArgument(f"{spec!r}: the factory must return (module, example_inputs) or (module, "
                              "example_inputs, loss) with loss a callable from the module's output to a scalar")
    module, inputs, loss = made if len(made) == 3 else (*made, None)
    # the positional inputs of forward, as from_module reads them (a list is one input each, as a tuple is)
    return module, tuple(inputs) if isinstance(inputs, tuple | list) else (inputs,), loss
