"""Helpers shared by subcommands: the ``--option`` flag, resolving a placer argument, formatting units."""

from __future__ import annotations

import argparse
import codecs
import contextlib
import errno
import math
import os
import re
import sys
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

from gnplace.cluster import Cluster
from gnplace.exceptions import InvalidArgument
from gnplace.graph import OpGraph, require_ops
from gnplace.limits import json_text, scalar_loader
from gnplace.placement import Placement, check_placed, load_placement
from gnplace.placers.registry import PLACERS, make_placer
from gnplace.units import counted

__all__ = [
    "add_option_argument", "add_input_shape_argument", "input_shapes", "parse_placer_options", "resolve_placement",
    "check_count", "check_output_folder", "check_not_input", "check_not_run_output", "require_ops",
    "writing", "describe_os_error", "run_reporting_errors", "checkpoint_readers", "checkpoint_format",
    "check_shared_options", "option_files", "check_output_file", "collect_input_shapes", "add_optimizer_argument",
    "file_path", "whole_number", "names_placement_file", "print_json", "cluster_list",
    "device_names", "ESCAPED", "escaped_streams", "printable_name", "markup_name", "script_parser", "counted",
]


def script_parser(script: str, description: str | None) -> argparse.ArgumentParser:
    """The argument parser of the script at ``script`` (its ``__file__``), named after the file.

    argparse names a parser after ``sys.argv[0]``: an IndexError where ``sys.argv`` is empty (an embedded interpreter,
    ``runpy`` from a program that emptied it), and the calling program's name where a script's ``main`` runs in it.
    """
    return argparse.ArgumentParser(prog=os.path.basename(script), description=description,
                                   formatter_class=argparse.RawDescriptionHelpFormatter)


def add_option_argument(parser: argparse.ArgumentParser) -> None:
    """Add the repeatable ``--option PLACER.NAME=VALUE`` flag to ``parser``."""
    parser.add_argument(
        "--option", "-O", action="append", default=[], metavar="PLACER.NAME=VALUE",
        help="an option of one placer, e.g. annealing.start=heft or exact.time_limit=5 (YAML value; repeatable)",
    )


def add_input_shape_argument(parser: argparse.ArgumentParser) -> None:
    """Add the repeatable ``--input-shape NAME=D1,D2,...`` flag of commands that read an ONNX GRAPH."""
    parser.add_argument("--input-shape", action="append", default=[], metavar="NAME=D1,D2,...",
                        help="ONNX input sizes for dynamic dimensions (repeatable)")


def add_optimizer_argument(parser: argparse.ArgumentParser, *, onnx: bool = True, graph_files: bool = True,
                           real_steps: bool = False) -> None:
    """Add ``--optimizer {sgd,momentum,adam,adamw}``: the optimizer a model is imported with (``None`` if not given).

    It sets the update and state the graph counts (and, ``real_steps``, the steps the real-device executors run);
    ``onnx``: the command imports ONNX files as well as ``MODULE:FACTORY``; ``graph_files``: it also reads graph
    files, which keep their own optimizer (one given must be that one). The help says what the command does: it
    told ``gnplace profile``, which takes MODULE:FACTORY alone, of ONNX, and place, simulate and inspect, which run
    no step, of real steps.
    """
    from gnplace.importers import OPTIMIZERS

    sources = "MODULE:FACTORY or ONNX" if onnx else "MODULE:FACTORY"
    runs = " and real steps run" if real_steps else ""
    also = "; a graph file keeps its own, and one given must be it" if graph_files else ""
    parser.add_argument("--optimizer", default=None, choices=list(OPTIMIZERS),
                        help=f"optimizer of the training step imported from {sources}: the update and state its "
                        f"graph counts{runs} (default: sgd{also})")


def input_shapes(args: argparse.Namespace) -> dict[str, list[int]] | None:
    """The sizes ``--input-shape`` gave, by input name (``None`` when none was given)."""
    return collect_input_shapes(args.input_shape) or None


def collect_input_shapes(texts: Sequence[str]) -> dict[str, list[int]]:
    """The sizes of ``NAME=D1,D2,...`` strings by name; a name given two sizes is refused (:class:`InvalidArgument`).

    The last would win silently, as it would of an ``--option`` given twice.
    """
    if not texts:  # no ONNX import (1.3 s on 2026-12-02's VM) for the commands that give no --input-shape
        return {}
    from gnplace.importers.onnx import parse_input_shape

    shapes: dict[str, list[int]] = {}
    for text in texts:
        name, dims = parse_input_shape(text)
        if name in shapes and shapes[name] != dims:
            raise InvalidArgument(f"--input-shape {name} is given twice, as {','.join(map(str, shapes[name]))} and "
                                  f"{','.join(map(str, dims))}: give it once")
        shapes[name] = dims
    return shapes


SHARED_OPTIONS = frozenset({"timer", "budget", "checkpoint", "seed"})
"""Options given to every placer that accepts them at once (``--budget``, ``--seed``), never through ``--option``."""

_FLOAT = re.compile(r"[-+]?(\d+\.?\d*|\.\d+)[eE][-+]?\d+")  # exponent notation YAML 1.1 leaves a string
_NON_FINITE = re.compile(r"[-+]?(nan|inf|infinity)", re.IGNORECASE)  # YAML 1.1 reads only .nan and .inf as floats


def _yaml_number(value: Any) -> Any:
    """``value``, or the float a string of it spells that YAML 1.1 leaves a string (``1e-3``, ``nan``, ``inf``)."""
    if isinstance(value, str) and (_FLOAT.fullmatch(value.strip()) or _NON_FINITE.fullmatch(value.strip())):
        return float(value)
    return value


def parse_placer_options(items: Sequence[str], placers: Sequence[str]) -> dict[str, dict[str, Any]]:
    """Options per placer from ``PLACER.NAME=VALUE`` strings; values are read as YAML scalars or lists.

    Numbers are read as written (:func:`~gnplace.limits.scalar_loader`): ``010`` and ``1:30`` stay text,
    which an option that needs a number refuses, where YAML 1.1 made them 8 and 90.

    Raises:
        InvalidArgument: if an item is malformed, names a placer not in ``placers``, or gives one
            option two different values.

    Examples:
        >>> parse_placer_options(["annealing.start=heft", "annealing.batch=8"], ["annealing"])
        {'annealing': {'start': 'heft', 'batch': 8}}
    """
    import yaml

    options: dict[str, dict[str, Any]] = {}
    for item in items:
        target, sep, text = item.partition("=")
        placer, dot, name = target.partition(".")
        if not sep or not dot or not placer or not name.isidentifier():
            raise InvalidArgument(f"--option {item!r}: expected PLACER.NAME=VALUE, e.g. annealing.start=heft")
        if name in SHARED_OPTIONS:
            # the timer: place and evaluate time every placer on the simulator of -c ("shared" named no way to set it)
            flag = f"; use --{name}" if name in ("budget", "seed", "checkpoint") else \
                "; every placer here is timed on the simulator of -c (gnplace finetune --timer times real steps)"
            raise InvalidArgument(f"--option {item!r}: {name!r} is shared by every placer, not per placer{flag}")
        if placer not in placers:
            raise InvalidArgument(f"--option {item!r}: placer {placer!r} is not among those run ({', '.join(placers)})")
        try:
            # blank is kept as given: YAML reads " " as null, a placer's default (-O ppo.out=" " ran with no folder)
            # numbers as written (scalar_loader): YAML 1.1 read -O annealing.steps=010 as octal 8
            value = yaml.load(text, Loader=scalar_loader()) if text.strip() else text  # noqa: S506 - SafeLoader's
        except yaml.YAMLError as err:
            problem = one_line(str(getattr(err, "problem", None) or err))
            raise InvalidArgument(f"--option {item!r}: value is not a YAML scalar ({problem})") from None
        except RecursionError:  # "[[[[..." thousands deep recurses in the parser
            raise InvalidArgument(f"--option {item[:60]!r}...: value nested too deep to be a YAML scalar") from None
        except ValueError as err:  # PyYAML's own builders: a date such as 2024-13-45, an int of 5,000 digits
            raise InvalidArgument(f"--option {item[:60]!r}: a value YAML cannot read ({one_line(str(err))})") from None
        value = [_yaml_number(v) for v in value] if isinstance(value, list) else _yaml_number(value)
        scalars = value if isinstance(value, list) else [value]
        if any(isinstance(v, dict) for v in scalars):
            raise InvalidArgument(f"--option {item!r}: value must be a number, string, boolean or list")
        if any(isinstance(v, float) and not math.isfinite(v) for v in scalars):
            raise InvalidArgument(f"--option {item!r}: value must be a finite number")
        given = options.setdefault(placer, {})
        if name in given and given[name] != value:  # the last would win silently: say which value is meant
            raise InvalidArgument(f"--option {placer}.{name} is given twice, as {given[name]!r} and {value!r}: "
                                  "give it once")
        given[name] = value
    return options


def names_placement_file(placer: str) -> bool:
    """Whether ``placer`` (``--placer``'s value) names a placement file rather than a registered placer."""
    return placer not in PLACERS and (placer.endswith(".json") or Path(placer).is_file() or Path(placer).is_dir())


def resolve_placement(
    graph: OpGraph, cluster: Cluster, placer: str, *, seed: int | None = None, timer: Any = None,
    budget: int | None = None, options: dict[str, Any] | None = None,
) -> tuple[str, Placement]:
    """The placement named by ``placer``: a registered placer name, else a placement file.

    A registered placer is run with ``timer``, ``budget`` and ``options``.
    """
    if names_placement_file(placer):
        return Path(placer).name, load_placement(placer, graph, cluster)
    placed = make_placer(placer, timer=timer, budget=budget, **(options or {})).place(graph, cluster, seed=seed)
    return placer, check_placed(placed, graph, cluster, placer)


def whole_number(text: str) -> int:
    """An argparse ``type``: a whole number >= 0 (a seed, a count), else argparse's one-line error."""
    try:
        value = int(text)
    except ValueError:
        if text.strip().isdigit():  # past Python's 4,300 digits: printed whole, and said not to be a whole number
            raise argparse.ArgumentTypeError(f"{len(text.strip()):,} digits: too many (at most 4,300)") from None
        raise argparse.ArgumentTypeError(f"expected a whole number >= 0, got {text!r}") from None
    if value < 0:
        raise argparse.ArgumentTypeError(f"expected a whole number >= 0, got {value}")
    return value


def cluster_list(text: str) -> list[str]:
    """The clusters a comma-separated ``--clusters`` value names, each once, in order (empty if none).

    Spaces around a name are dropped (``"k80x2, k80x4"``), and so are empty items (``"k80x2,,k80x4"``); a
    cluster named twice (a file by two paths) is one cluster: ``scripts/train.py`` trained on its pairs twice as
    often, without a word, and ``demo.py`` placed every graph on it twice.

    Examples:
        >>> cluster_list(" k80x2, k80x4,,k80x2 ")
        ['k80x2', 'k80x4']
    """
    from gnplace.evaluate import cluster_slot

    names = (name.strip() for name in text.split(","))
    return list({cluster_slot(name): name for name in names if name}.values())


def file_path(text: str) -> str:
    """An argparse ``type``: a path that names something, else argparse's one-line error.

    An empty or blank value (an unset variable) was dropped silently by one command (``evaluate --checkpoint ""``)
    and read as a file named by spaces by another (``: no such checkpoint file``).
    """
    if not text.strip():
        raise argparse.ArgumentTypeError(f"expected a file's path, got {text!r}")
    return text


def device_names(text: str) -> str:
    """An argparse ``type``: a ``--devices`` value (torch devices separated by commas), else argparse's one-line error.

    An empty or blank value (an unset variable) was read as no ``--devices`` at all: ``profile --timer local``
    timed its default devices, and ``finetune --timer sim`` took it without the refusal the flag gets there.
    """
    if not text.strip():
        raise argparse.ArgumentTypeError(f"expected torch devices separated by commas, e.g. cuda:0,cpu, got {text!r}")
    return text


def check_count(value: int | None, flag: str, *, minimum: int = 0, maximum: int | None = None) -> None:
    """Refuse ``value`` out of ``minimum..maximum`` (``None``: not given, accepted) with an :class:`InvalidArgument`."""
    if value is not None and value < minimum:
        raise InvalidArgument(f"{flag} must be at least {minimum}, got {value}")
    if value is not None and maximum is not None and value > maximum:
        raise InvalidArgument(f"{flag} must be at most {maximum}, got {value}")


def check_output_file(path: str | os.PathLike[str], flag: str, suffixes: Sequence[str] = ()) -> None:
    """Refuse an output file ``path`` that names no file (empty, or ``-``, stdout elsewhere) or cannot be written.

    An empty value (an unset variable) would write nothing and a ``-`` a file of that name, both with status 0.

    Raises:
        InvalidArgument: naming ``flag`` and what is wrong.
    """
    from gnplace.graph_io import check_writable

    text = os.fspath(path)
    if not text.strip():
        raise InvalidArgument(f"{flag} is empty; name the file to write")
    if text == "-":
        raise InvalidArgument(f"{flag} -: writes a file, not stdout; name the file (./- for a file named '-')")
    check_writable(text, flag, suffixes)


def check_not_input(
    path: str | os.PathLike[str] | None, source: str, flag: str = "--output",
    others: Sequence[str | os.PathLike[str] | None] = (),
) -> None:
    """Refuse an output file that is an input: ``source`` or one of ``others``.

    ``source`` is a graph or ONNX file, or the file of ``FILE.py:factory``; ``others`` are the
    command's other input files (a checkpoint, a cluster file, a placement file), where given. The
    files an ONNX input keeps its external data (weights) in are inputs too.

    Raises:
        InvalidArgument: if writing ``path`` would overwrite the input.
    """
    if path is None:
        return
    inputs = [Path(source)]
    if ":" in source:
        inputs.append(Path(source.rsplit(":", 1)[0]))  # a factory's file
        inputs += _module_files(source.rsplit(":", 1)[0])  # mymodel:make's mymodel.py was overwritten
    inputs += [Path(other) for other in others if other is not None]
    target = Path(path).resolve()
    for given in inputs:
        if given.is_file() and target == given.resolve():
            raise InvalidArgument(f"{flag} {os.fspath(path)}: is the input {given.name}; write to another file")
        if given.suffix.lower() == ".onnx" and given.is_file() and target.is_file() and target.is_relative_to(
                given.resolve().parent):  # only an existing file beside the model can be its external data
            from gnplace.importers.onnx_model import external_data_files

            if target in external_data_files(given):
                raise InvalidArgument(f"{flag} {os.fspath(path)}: holds the external data (weights) of the input "
                                      f"{given.name}; write to another file")


def _module_files(target: str) -> list[Path]:
    """The files ``import target`` could load a ``MODULE:FACTORY``'s module from: on ``sys.path`` or the working folder.

    Found without importing anything (a package's ``__init__`` runs user code): ``a.b`` is ``a/b.py`` or
    ``a/b/__init__.py`` under each folder Python looks in, and the working folder, where gnplace looks last.
    """
    import sys

    parts = target.split(".")
    if not all(part.isidentifier() for part in parts):
        return []
    folders = [Path(entry or ".") for entry in sys.path if isinstance(entry, str)] + [Path.cwd()]
    return [folder.joinpath(*parts[:-1], name) for folder in folders
            for name in (f"{parts[-1]}.py", f"{parts[-1]}/__init__.py")]


def check_not_run_output(
    path: str | os.PathLike[str] | None, folder: str | os.PathLike[str], flag: str, folder_flag: str,
    names: Sequence[str] = ("last.ckpt", "logs"),
) -> None:
    """Refuse an output file that a run writes into ``folder`` itself, under one of ``names`` or inside one.

    ``gnplace place -p ppo -O ppo.out=D -o D/last.ckpt`` wrote the placement file over the checkpoint the
    search had just saved there, which ``-O ppo.resume=true`` then refused as corrupt. The default
    ``names`` are what a search writes into its folder: Lightning's ``last.ckpt`` and its ``logs``.

    Raises:
        InvalidArgument: if ``path`` is one of the run's outputs.
    """
    if path is None:
        return
    target = Path(path).resolve()
    for name in names:
        own = (Path(folder) / name).resolve()
        if target == own or target.is_relative_to(own):
            raise InvalidArgument(f"{flag} {os.fspath(path)}: is where the search writes its {name} "
                                  f"({folder_flag}={os.fspath(folder)}); write to another file")


def option_files(options: dict[str, Any]) -> list[str]:
    """The values of placer ``options`` that name a file (a constructor checkpoint, a start placement).

    An output must not overwrite them as it must not overwrite the command's own inputs. A value may name
    several, comma-separated (``-O policy.constructor=a.ckpt,b.ckpt``).

    Examples:
        >>> option_files({"samples": 4, "constructor": ["README.md", "no-such-file"]})
        ['README.md']
        >>> option_files({"constructor": "README.md, Makefile"})
        ['README.md', 'Makefile']
    """
    values = [v for value in options.values() for v in (value if isinstance(value, list) else [value])]
    names: list[str] = []
    for v in values:
        if isinstance(v, str) and v:
            names += [v] if Path(v).is_file() else [part.strip() for part in v.split(",")]
    return [name for name in names if name and Path(name).is_file()]


def check_output_folder(path: str | os.PathLike[str], flag: str = "--out") -> None:
    """Refuse an output folder ``path`` that is empty, ``-`` or a file, before any work (:class:`InvalidArgument`).

    An empty path is refused rather than read as the current folder, where a run would write among the user's files;
    so is a folder under a file (``FILE/sub``), which a run could only fail to make once its work is done.
    """
    if not os.fspath(path).strip():
        raise InvalidArgument(f"{flag} is empty; name the folder to write into (. for the current one)")
    if os.fspath(path) == "-":  # taken for stdout, as a file output's "-" is refused: it made a folder named "-"
        raise InvalidArgument(f"{flag} -: writes a folder, not stdout; name the folder (./- for a folder named '-')")
    if Path(path).exists() and not Path(path).is_dir():
        raise InvalidArgument(f"{flag} {os.fspath(path)}: is a file, expected a folder")
    from gnplace.graph_io import check_parent_folder

    check_parent_folder(path, flag)


def note_nothing_to_resume(last: str | os.PathLike[str], prog: str,
                           journal: str | os.PathLike[str] | None = None, *, slurm: bool = False) -> None:
    """Say on stderr that ``--resume`` found no checkpoint ``last``, so the run starts afresh (rank 0 only).

    A measurement ``journal`` there (:mod:`gnplace.execute.journal`) is named: the new run answers from it. ``slurm``:
    a SLURM job's tasks are ranks of the run (:func:`~gnplace.workers.is_launched_rank`).
    """
    from gnplace.workers import is_launched_rank

    if not is_launched_rank(slurm=slurm) and not Path(last).exists():
        answered = ""
        if journal is not None and Path(journal).is_file() and Path(journal).stat().st_size > 0:
            answered = f", answering the steps measured before from {os.fspath(journal)}"
        print(f"{prog}: --resume: no {os.fspath(last)} yet, so a new run starts{answered}", file=sys.stderr)


@contextlib.contextmanager
def writing(path: str | os.PathLike[str]) -> Iterator[None]:
    """Turn an :class:`OSError` raised while writing ``path`` into one :class:`InvalidArgument` line.

    The line names the file the error names, where it names one: ``path`` may be a folder of several files (``generate
    --out``, ``profile -o``), and a full disk there was ``cannot write OUT: No space left on device``, not which of
    them was cut short.
    """
    try:
        yield
    except OSError as err:
        where = os.fsdecode(err.filename) if err.filename is not None else os.fspath(path)
        raise InvalidArgument(f"cannot write {where}: {err.strerror or err}") from err


def symlink_loop(err: RuntimeError) -> OSError | None:
    """The ``ELOOP`` :class:`OSError` behind ``err`` where it is pathlib's report of a symbolic link loop, else None.

    Before Python 3.13, ``Path.resolve()`` of a path through a link that leads back to itself (``ln -s a b; ln -s b
    a``) raises ``RuntimeError("Symlink loop from ...")`` from the ``OSError`` it met, not that ``OSError``:
    ``gnplace place G -o a`` was that ``RuntimeError``'s traceback and exit status 1.
    """
    context = err.__context__
    if str(err).startswith("Symlink loop from ") and isinstance(context, OSError) and context.errno == errno.ELOOP:
        return context
    return None


def describe_os_error(err: OSError) -> str:
    """``err`` as one line: ``FILE: reason`` (``FILE -> FILE2: reason`` for a rename).

    A missing file with no name where the current folder is gone (deleted since the shell entered it) says so:
    ``os.getcwd()`` fails there, and the line was ``[Errno 2] No such file or directory``, naming nothing.
    """
    if err.filename is None:
        if isinstance(err, FileNotFoundError):
            try:
                os.getcwd()
            except FileNotFoundError:
                return "the current folder no longer exists (deleted since it was entered): change to another one"
        return one_line(str(err))
    where = os.fsdecode(err.filename) + (f" -> {os.fsdecode(err.filename2)}" if err.filename2 is not None else "")
    return f"{where}: {err.strerror or type(err).__name__}"


#: A run of more decimal digits than this in a message is shown by its head and its length.
LONG_DIGITS = 40

_long_digits = re.compile(rf"\d{{{LONG_DIGITS + 1},}}")


#: The control characters but newline and tab (C0, DEL, C1), as the ``\\xNN`` escapes :func:`printable` writes.
_CONTROLS = {code: f"\\x{code:02x}" for code in (*range(0x09), *range(0x0B, 0x20), 0x7F, *range(0x80, 0xA0))}


def printable(text: str) -> str:
    """``text`` with its control characters but newline and tab written as ``\\xNN`` escapes.

    A name from a file someone shared (a graph's, a cluster's, a device's) was printed as it was: one holding
    ESC's sequences retitled, recoloured or cleared the terminal it was printed on, a carriage return wrote
    over the line before it.

    Examples:
        >>> printable("g\\x1b]0;title\\x07\\rA\\tB")
        'g\\\\x1b]0;title\\\\x07\\\\x0dA\\tB'
    """
    return text.translate(_CONTROLS)


#: The line breaks :func:`printable` keeps, as escapes: newline, and Unicode's line and paragraph separators.
_LINE_BREAKS = {0x0A: "\\x0a", 0x2028: "\\u2028", 0x2029: "\\u2029"}


def printable_name(name: str) -> str:
    """``name`` (a graph's, a cluster's, a device's) as :func:`printable` writes it, its line breaks escaped too.

    :func:`printable` keeps newlines, which messages meant to span lines hold; a name holding one split the
    header it was printed in (``gnplace inspect``'s ``evil`` on one line, ``name: 98 ops`` on the next) and
    a table's row in two. The other line breaks (``\\r``, ``\\x0b``, ``\\x0c``, ``\\x1c``-``\\x1e``,
    ``\\x85``) are control characters :func:`printable` escapes already.

    Examples:
        >>> print(printable_name("evil\\nname\\u2028x\\x85y"))
        evil\\x0aname\\u2028x\\x85y
    """
    return printable(name).translate(_LINE_BREAKS)


def markup_name(name: str) -> str:
    """:func:`printable_name`'s ``name`` as rich markup: its ``[red]`` and ``[/]`` printed as they are."""
    from rich.markup import escape

    return escape(printable_name(name))


def one_line(text: str) -> str:
    """``text`` with its whitespace, newlines included, folded into single spaces, and control characters escaped.

    A number of more than :data:`LONG_DIGITS` digits (``-O m_etf.min_speed=`` 10**400) is shown as its first
    twelve digits and its length, ``100000000000...(401 digits)``, so that the line stays readable. Control
    characters are :func:`printable`'s escapes.
    """
    folded = printable(" ".join(text.split()))
    return _long_digits.sub(lambda run: f"{run[0][:12]}...({len(run[0])} digits)", folded)


TORCH_UNSAFE_LOAD_WARNING = r"(?s).*weights_only"
"""torch's warning about loading a checkpoint with ``weights_only=False``: gnplace loads with
``weights_only=True`` and refuses what that cannot read, so the warning only repeats the refusal."""


#: Where :func:`print_json` writes: the command's standard output while :func:`_json_only_on_stdout` holds it.
_json_out: list[Any] = []


def print_json(payload: Any) -> None:
    """Print ``payload`` as indented JSON on the command's standard output: what ``--json`` promises.

    Under ``--json`` (:func:`run_reporting_errors`) everything else written to stdout goes to stderr, so that the
    output parses: a ``MODULE:FACTORY`` that prints while it loads put its lines before the ``{``.
    """
    out = _json_out[-1] if _json_out else sys.stdout
    print(json_text(payload, indent=1), file=out)  # NaN and infinity as null: they are not JSON
    out.flush()  # here, inside the command, where a closed pipe is reported as one


def _is_fd1(stream: Any) -> bool:
    """Whether ``stream`` writes to file descriptor 1 (the process's stdout, not a test's capture)."""
    try:
        return bool(stream.fileno() == 1)
    except (AttributeError, OSError, ValueError):  # io.UnsupportedOperation is an OSError and a ValueError
        return False


@contextlib.contextmanager
def _json_only_on_stdout(active: bool) -> Iterator[None]:
    """While ``active``, send what is written to stdout to stderr, but :func:`print_json`'s output.

    Where ``sys.stdout`` is file descriptor 1, the descriptor itself is pointed at stderr, so that what C
    code writes there (``printf`` in the user's extension, ``os.write(1, ...)``) moves too; the JSON goes
    to a copy of the original descriptor, which is put back at the end.
    """
    if not active:
        yield
        return
    from gnplace.cstdout import flush_c_stdio

    original = None
    if _is_fd1(sys.stdout):
        sys.stdout.flush()
        flush_c_stdio()
        original = os.dup(1)
        _json_out.append(open(original, "w", encoding=sys.stdout.encoding, closefd=False))
        os.dup2(2, 1)
    else:
        _json_out.append(sys.stdout)
    try:
        with contextlib.redirect_stdout(sys.stderr):
            yield
    finally:
        out = _json_out.pop()
        if original is not None:
            sys.stdout.flush()
            flush_c_stdio()  # what C code buffered goes to stderr, where fd 1 points now
            with contextlib.suppress(OSError):  # a closed pipe: already reported by print_json's flush
                out.close()
            os.dup2(original, 1)
            os.close(original)


def stdout_console(**options: Any) -> Any:
    """A :class:`rich.console.Console` on stdout (``options`` as its own) whose closed pipe is a BrokenPipeError.

    rich's own exits 1 when the reader has gone (``gnplace simulate | true``), which read as an error and, for
    ``evaluate``, as "some runs failed"; :func:`run_reporting_errors` turns the BrokenPipeError into 141, as a
    shell reports a program its pipe's close stopped.

    A width of 0 (``COLUMNS=0``, as some containers' terminals set it), which rich takes as it is and then prints
    nothing at all, is rich's width of a terminal that reports none: 80 columns. A line of text is printed whole
    (``soft_wrap``, unless given): rich broke it at the width, 80 columns in a file or pipe, so that a path printed
    (``timeline written to PATH``) came out in pieces on two or three lines, to be copied back together; a table
    still fits the width.
    """
    options.setdefault("soft_wrap", True)
    from rich.console import Console

    class _PipedConsole(Console):
        def on_broken_pipe(self) -> None:
            self.quiet = True  # nothing more to write
            raise BrokenPipeError(32, "Broken pipe")

        def render_str(self, text: str, **options: Any) -> Any:  # each string printed, table cells too
            return super().render_str(printable(text), **options)  # a name's ESC sequences as escapes

    console = _PipedConsole(**options)
    if console.width < 1:
        console.width = 80
    return console


def _escape_unencodable(error: UnicodeError) -> tuple[str, int]:
    r"""What an output's encoding lacks, escaped: a name's undecodable byte as ``\xNN``, else as ``backslashreplace``.

    A file name that is not UTF-8 (``$'g\xff.gnpg'``) reaches Python with its byte as a surrogate (``\udcff``),
    which ``backslashreplace`` printed as ``g\udcff.gnpg``, a spelling of Python's own; the byte's is the
    shell's (``$'g\xff.gnpg'``) and ``ls``'s. The output stays text its encoding holds (JSON readers, logs).

    Examples:
        >>> print("g\udcff.gnpg, cl\xfcster".encode("ascii", ESCAPED).decode())
        g\xff.gnpg, cl\xfcster
    """
    if not isinstance(error, UnicodeEncodeError):
        raise error
    chunk = error.object[error.start:error.end]
    escaped = [f"\\x{ord(c) - 0xDC00:02x}" if 0xDC80 <= ord(c) <= 0xDCFF else c.encode("ascii", "backslashreplace")
               .decode("ascii") for c in chunk]
    return "".join(escaped), error.end


#: The ``errors`` the commands' output streams are reconfigured with (:func:`_escape_unencodable`).
ESCAPED = "gnplace.escape"
codecs.register_error(ESCAPED, _escape_unencodable)


@contextlib.contextmanager
def escaped_streams() -> Iterator[None]:
    """Inside, a closed ``sys.stdout`` or ``sys.stderr`` writes to ``os.devnull``; both escape what encodings lack.

    A closed stream (``>&-``, ``2>&-``: Python sets it to None) drops what is written there, as the caller asked,
    and the command still runs: a closed stdout made every command end in a traceback and status 1 (``place -o
    FILE >&-`` after writing FILE), and a closed stderr sent the error and warning lines to stdout, into a
    ``--json`` document (``print(file=None)`` prints on stdout). A name the streams' encoding lacks
    (``PYTHONIOENCODING=ascii``, a cluster ``clüster``) prints as ``cl\\xfcster``: the scripts, which the
    ``gnplace`` command's own set-up did not reach, ended in a UnicodeEncodeError traceback.

    Both streams are as they were after (their ``errors``, and None for a closed one): ``gnplace.cli.main`` called
    from a program left its ``sys.stdout`` and ``sys.stderr`` escaping for the rest of the process.
    """
    opened: list[tuple[str, Any]] = []  # (name, the devnull file put in place of None)
    kept: list[tuple[Any, str]] = []  # (stream, its errors before)
    for name in ("stdout", "stderr"):
        if getattr(sys, name) is None:
            opened.append((name, open(os.devnull, "w", encoding="utf-8")))
            setattr(sys, name, opened[-1][1])
        stream = getattr(sys, name)
        if hasattr(stream, "reconfigure") and stream.errors != ESCAPED:
            kept.append((stream, stream.errors))
            stream.reconfigure(errors=ESCAPED)
    try:
        yield
    finally:
        for stream, errors in kept:
            with contextlib.suppress(OSError, ValueError):  # a closed pipe or file: it takes nothing more anyway
                stream.reconfigure(errors=errors)
        for name, devnull in opened:
            if getattr(sys, name) is devnull:
                setattr(sys, name, None)
            devnull.close()


def _terminated(err: BaseException) -> bool:
    """Whether ``err`` carries a :class:`~gnplace.exceptions.Terminated` (a SIGTERM) in its cause or context chain."""
    from gnplace.exceptions import Terminated, in_chain

    return in_chain(err, Terminated)


def _tell_waiting_ranks(reason: str) -> None:
    """Under ``torchrun``, the ranks serving a rank 0 that stops before its timer joined them hear ``reason`` at once.

    They waited ``GNPLACE_DIST_TIMEOUT`` (300 s) for it (:func:`~gnplace.execute.dist.release_waiting_ranks`); a run
    that never loaded the distributed executor has nothing to tell and imports nothing.
    """
    import sys

    dist_module = sys.modules.get("gnplace.execute.dist")
    if dist_module is not None:
        dist_module.release_waiting_ranks(reason)


def run_reporting_errors(run: Callable[[argparse.Namespace], int | None], args: argparse.Namespace, prog: str,
                         interrupted: str = "interrupted") -> int:
    """``run(args)``'s exit status; bad input is one ``PROG: error:`` line and 2, never a traceback.

    A :class:`~gnplace.exceptions.GnplaceError`, an :class:`OSError` (a file that cannot be read or
    written: ``PROG: error: FILE: reason``, a symbolic link loop too, which pathlib reports as a ``RuntimeError``
    before Python 3.13: :func:`symlink_loop`) and a ``SystemExit`` with a message are reported as one
    line with status 2; other exceptions (programming errors) propagate. Warnings print as one
    ``PROG: warning: ...`` line each, and torch's warning about unsafe checkpoint loading, which
    only repeats the refusal of such a file, is silenced. The ``gnplace`` command and the scripts
    (``scripts/pretrain.py``, ``scripts/finetune.py``, ``scripts/place.py``, ``scripts/train.py``,
    ``scripts/bench.py``)
    report errors the same way; a closed pipe on stdout (``| head``) gives 141 quietly; Ctrl-C prints
    ``PROG: INTERRUPTED`` and gives 130, and a SIGTERM that
    stopped a run under Lightning, a run of worker processes or ``gnplace evaluate``'s run in its own process
    (:class:`~gnplace.exceptions.Terminated`, numba's loops' ``SystemError`` of one too)
    ``PROG: SIGTERM: INTERRUPTED`` and 143 (elsewhere SIGTERM ends the process as it always does).
    """
    import sys
    import warnings

    from gnplace.exceptions import GnplaceError, Terminated, after_interrupt

    def show(message: Any, category: Any, filename: str, lineno: int, file: Any = None, line: Any = None) -> None:
        print(f"{prog}: warning: {one_line(str(message))}", file=sys.stderr)

    with escaped_streams(), warnings.catch_warnings():
        warnings.showwarning = show
        warnings.filterwarnings("ignore", message=TORCH_UNSAFE_LOAD_WARNING, category=UserWarning)
        try:
            with _json_only_on_stdout(bool(getattr(args, "json", False))):
                code = int(run(args) or 0)
            sys.stdout.flush()  # here, where a closed pipe is caught, not at exit, where Python reports it
            return code
        except GnplaceError as err:
            return _refused(prog, one_line(str(err)))
        except BrokenPipeError:  # the reader went away (`gnplace ... --json | head`): nothing is wrong with the input
            _stdout_to_devnull()  # Python's flush at exit would fail
            return 141  # 128 + SIGPIPE, what a shell reports for a program the pipe's close stopped
        except OSError as err:
            return _refused(prog, describe_os_error(err))
        except SystemExit as err:
            if after_interrupt(err):  # Lightning's trainer exits 1 on Ctrl-C, after its own shutdown
                print(f"{prog}: {interrupted}", file=sys.stderr)
                return 130
            if err.code is None or isinstance(err.code, int):
                raise
            return _refused(prog, one_line(str(err.code)))
        except Terminated:
            print(f"{prog}: SIGTERM: {interrupted}", file=sys.stderr)
            _tell_waiting_ranks("stopped by SIGTERM")
            return 143
        except KeyboardInterrupt:
            print(f"{prog}: {interrupted}", file=sys.stderr)
            _tell_waiting_ranks("interrupted")
            return 130
        except SystemError as err:
            if not after_interrupt(err):  # numba's compiled loops hand a Ctrl-C back as a SystemError
                raise
            if _terminated(err):  # (and a SIGTERM of gnplace evaluate -j 1, raised as Terminated)
                print(f"{prog}: SIGTERM: {interrupted}", file=sys.stderr)
                return 143
            print(f"{prog}: {interrupted}", file=sys.stderr)
            return 130
        except RuntimeError as err:
            loop = symlink_loop(err)
            if loop is None:
                raise
            return _refused(prog, describe_os_error(loop))


def _refused(prog: str, message: str) -> int:
    """Print ``PROG: error: message``, tell the ranks waiting on this one why it stopped, and return exit status 2."""
    print(f"{prog}: error: {message}", file=sys.stderr)
    _tell_waiting_ranks(message)
    return 2


def _stdout_to_devnull() -> None:
    """Point the file descriptor of ``sys.stdout`` at ``os.devnull`` (where it has one: not under a test's capture).

    The descriptor opened on ``os.devnull`` to copy from is closed after: it stayed open for the rest of a
    program that had called :func:`gnplace.cli.main` and met a closed pipe, one more each time.
    """
    with contextlib.suppress(OSError, ValueError):
        target = sys.stdout.fileno()
        devnull = os.open(os.devnull, os.O_WRONLY)
        try:
            os.dup2(devnull, target)
        finally:
            os.close(devnull)


def checkpoint_readers(path: str, placers: list[str]) -> list[str]:
    """The placers among ``placers`` that read the checkpoint file ``path`` (by its ``"format"``).

    A training run's ``last.ckpt`` (no ``"format"``) is a policy checkpoint, as the ``policy`` placer reads it.

    Raises:
        InvalidCheckpoint: if the file is unreadable, records no ``"format"`` and is no training run's
            checkpoint, or records a format that is not a name.
        InvalidArgument: if none of ``placers`` takes a checkpoint of its format.
    """
    from gnplace.policy.checkpoint import read_checkpoint

    infos = [PLACERS.info(name) for name in placers]
    takers = [f"{i.name} ({i.checkpoint_format})" for i in infos if "checkpoint" in i.accepts]
    which = f"; of the placers run, these take one: {', '.join(takers)}" if takers else \
        "; none of the placers run takes a checkpoint"
    found = checkpoint_format(read_checkpoint(path), f"--checkpoint {path}", which)
    readers = [i.name for i in infos if "checkpoint" in i.accepts and i.checkpoint_format == found]
    if not readers:
        raise InvalidArgument(f"--checkpoint {path} is a {found!r} checkpoint{which}")
    return readers


def checkpoint_format(data: dict[str, Any], where: str, which: str = "") -> str:
    """The ``"format"`` of a checkpoint's ``data``; a training run's Lightning checkpoint (none recorded) is a policy's.

    ``where`` begins the message (``--checkpoint FILE``) and ``which`` ends it (the placers that take one).

    Raises:
        InvalidCheckpoint: if ``data`` records no format and is no training run's checkpoint (weights under
            ``state_dict`` and the run's ``gnplace`` record), or records one that is not a non-empty string.

    Examples:
        >>> checkpoint_format({"format": "gnplace-placeto"}, "x.ckpt")
        'gnplace-placeto'
        >>> checkpoint_format({"state_dict": {}, "gnplace": {"iteration": 3}}, "last.ckpt")
        'gnplace-policy'
    """
    from gnplace.exceptions import InvalidCheckpoint
    from gnplace.policy.checkpoint import FORMAT, is_training_checkpoint

    if "format" not in data:
        if is_training_checkpoint(data):  # which load_policy reads as a policy's
            return FORMAT
        raise InvalidCheckpoint(f"{where}: records no \"format\" and is not a training run's checkpoint, so not a "
                                f"gnplace checkpoint{which}")
    found = data["format"]
    if not isinstance(found, str) or not found.strip():
        raise InvalidCheckpoint(f"{where}: records a malformed \"format\", {type(found).__name__} {repr(found)[:60]} "
                                f"(expected a name such as {FORMAT!r}){which}")
    return found


def check_shared_options(placer: str, budget: int | None, checkpoint: str | None) -> None:
    """Refuse ``--budget`` or ``--checkpoint`` for a placer that would ignore it (``gnplace place``, one placer).

    Raises:
        InvalidArgument: if ``placer`` takes no budget and ``budget`` is given, or reads no checkpoint of the
            format of ``checkpoint``.
        InvalidCheckpoint: if ``checkpoint`` is unreadable.
    """
    if budget is not None and "budget" not in PLACERS.info(placer).accepts:
        takers = ", ".join(n for n in PLACERS.names() if "budget" in PLACERS.info(n).accepts)
        raise InvalidArgument(f"--budget: {placer} spends no evaluation budget (these do: {takers})")
    if checkpoint is not None:
        checkpoint_readers(checkpoint, [placer])
