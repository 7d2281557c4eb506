"""What several benchmarks share: their subcommands, timing a call, graphs, saved rows, figures, learning curves."""

from __future__ import annotations

import argparse
import inspect
import io
import json
import math
import statistics
import time
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

import numpy as np

#: The repository's shipped datasets (``datasets/FAMILY``, ``datasets/real``, ``datasets/examples``).
DATASETS = Path(__file__).resolve().parents[2] / "datasets"

#: The revisions of the placers each placer uses (:meth:`~gnplace.placers.registry.PlacerRegistry.revisions_used`)
#: as they stood when the rows saved by the benchmarks and the report began to record them (2026-12): a row saved
#: before records none, and was made under these. ``finetune`` (revision 18) keeps ``policy`` revision 11's zero-shot
#: candidates, so that its rows stand under ``policy`` revision 12; no other placer used one that declared a revision.
REVISIONS_USED_BEFORE: dict[str, dict[str, str]] = {"finetune": {"policy": "12"}}


def revisions_used(name: str) -> dict[str, str]:
    """The revisions of the placers ``name`` uses, directly or through others, that declare one (empty: none does)."""
    from gnplace.placers.registry import PLACERS

    return PLACERS.revisions_used(name)


def recorded_uses(row: dict[str, Any], field: str, name: str) -> dict[str, str]:
    """What ``row[field]`` records of the revisions placer ``name`` used; for a row saved before, those of then.

    Rows record the field only where it is not empty: a row without it was made under
    :data:`REVISIONS_USED_BEFORE` (nothing, for most placers).
    """
    return dict(row.get(field, REVISIONS_USED_BEFORE.get(name, {})))


def uses_changed(name: str) -> dict[str, str]:
    """The revisions ``name`` uses now, or an empty dict while they are those of :data:`REVISIONS_USED_BEFORE`.

    For keys that are text: a key gains them only once they changed, so that the rows saved before stand until then.
    """
    used = revisions_used(name)
    return {} if used == REVISIONS_USED_BEFORE.get(name, {}) else used


def add_command(sub: Any, name: str, handler: Callable[[argparse.Namespace], int], help: str) -> argparse.ArgumentParser:
    """Add subcommand ``name`` to ``bench.py``: ``handler(args)`` runs it and its docstring is the ``--help`` text."""
    parser: argparse.ArgumentParser = sub.add_parser(
        name, help=help, description=inspect.cleandoc(handler.__doc__ or help),
        formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.set_defaults(handler=handler)
    return parser


def add_per_family_argument(parser: argparse.ArgumentParser, default: int | None, what: str = "test graphs") -> None:
    """``--per-family N``: the first N ``what`` of each family, 0 (or a default of None) meaning all of them.

    One meaning for every benchmark that takes it (``search --per-family 0`` ran all of them, ``finetune
    --per-family 0`` none); :func:`test_graphs` reads it (``args.per_family or None``).
    """
    shown = "all" if default is None else str(default)
    parser.add_argument("--per-family", type=int, default=default if default is not None else 0, metavar="N",
                        help=f"the first N {what} of each family (default: {shown}; 0: all of them)")


def check_clusters(*specs: Iterable[str]) -> None:
    """Load every cluster spec (a preset or a YAML file) once, so that an unknown one is one error line before any run.

    Raises:
        GnplaceError: the cluster loader's error for the first spec that is not a cluster.
    """
    from gnplace.cluster import load_cluster

    for spec in dict.fromkeys(s for group in specs for s in group):
        load_cluster(spec)


def check_distinct_names(specs: Iterable[str], flag: str = "--clusters") -> None:
    """Refuse two cluster specs of one name in one list (two files named ``cluster.yaml``, as ``gnplace profile`` writes).

    Benchmarks whose rows and tables name a cluster by its name would merge the two.

    Raises:
        InvalidArgument: the two specs and their name.
    """
    from gnplace.cluster import load_cluster
    from gnplace.exceptions import InvalidArgument

    seen: dict[str, str] = {}
    for spec in dict.fromkeys(specs):
        name = load_cluster(spec).name
        if name in seen:
            raise InvalidArgument(f"{flag} {seen[name]} {spec}: both clusters are named {name!r}, and this benchmark's "
                                  "rows and tables name clusters by name: give one another name (its name: key)")
        seen[name] = spec


def shipped_families() -> list[str]:
    """The families of the shipped datasets: the folders of :data:`DATASETS` with a ``manifest.json``."""
    return sorted(folder.name for folder in DATASETS.iterdir() if (folder / "manifest.json").is_file())


def check_families(names: Iterable[str], flag: str = "--families") -> None:
    """Refuse a name that is no shipped family, before any run (an :class:`~gnplace.exceptions.UnknownName`).

    It read as ``datasets/NAME/manifest.json: not a readable dataset manifest``, a file the user never named.
    """
    from gnplace.exceptions import UnknownName

    known = shipped_families()
    for name in names:
        if name not in known:
            raise UnknownName(f"{flag} {name}: no such family in {DATASETS} (choose from: {', '.join(known)})")


def check_output_folder(path: str | Path, flag: str = "--out") -> Path:
    """``path`` as a :class:`Path`, refused if empty or it names a file: the folder a benchmark writes its results into.

    Checked before the run, whose ``mkdir`` said only ``FILE: File exists``; the folder itself is made by the
    caller, once every argument has been checked (a refused run leaves no empty folder behind).

    Raises:
        InvalidArgument: naming ``flag``, the file and what to do.
    """
    from gnplace.exceptions import InvalidArgument

    if not str(path).strip():  # Path("") is the working folder: the results went among the user's files
        raise InvalidArgument(f"{flag} is empty; name the folder to write into (. for the current one)")
    folder = Path(path)
    if folder.exists() and not folder.is_dir():
        raise InvalidArgument(f"{flag} {folder}: a file, not a folder; name a folder for the results (made if "
                              "missing), or move the file away")
    blocking = next((parent for parent in folder.parents if parent.exists() and not parent.is_dir()), None)
    if blocking is not None:
        raise InvalidArgument(f"{flag} {folder}: {blocking} is a file, not a folder; name a folder for the results")
    return folder


def check_placers(names: Iterable[str], flag: str = "--placers") -> None:
    """Refuse an unknown placer name before any run (an :class:`~gnplace.exceptions.UnknownName` naming ``flag``).

    A name given twice is refused too (an :class:`~gnplace.exceptions.InvalidArgument`): ``placers --placers
    single single`` timed it twice and printed two rows of it.
    """
    from gnplace.exceptions import InvalidArgument, UnknownName
    from gnplace.placers.registry import PLACERS

    seen: set[str] = set()
    for name in names:
        if name not in PLACERS:
            raise UnknownName(f"{flag} {name}: unknown placer (choose from: {', '.join(sorted(PLACERS.names()))})")
        if name in seen:
            raise InvalidArgument(f"{flag} names {name} twice: give each placer once")
        seen.add(name)


def check_step_sources(sources: Iterable[str]) -> None:
    """Resolve each ``MODULE:FACTORY`` (without calling it), so that a typo is one line before any run.

    Raises:
        InvalidArgument: the source's own message (not ``MODULE:FACTORY``, no such module or factory).
    """
    from gnplace.importers.sources import load_factory

    for source in sources:
        load_factory(source)


FIGURE_DPI = 110
"""The resolution of the benchmarks' figures (dots an inch): each is made at it (``plt.subplots(..., dpi=FIGURE_DPI)``),
so laid out at the resolution :func:`save_figure` writes it at (text measured at another is another width: hinting)."""


def save_figure(fig: Any, path: Path) -> Path:
    """Write a matplotlib figure to ``path`` as PNG through a temporary file and a rename (a kill never truncates it).

    Written at :data:`FIGURE_DPI`, the resolution it was made and laid out at: pyplot's figures were laid out at its
    100 dpi and written at 110, their margins measured on text of other widths.

    Args:
        fig (matplotlib.figure.Figure): the figure, made at :data:`FIGURE_DPI` (left open: the caller closes it).
        path (Path): the PNG file.

    Returns:
        Path: ``path``.

    Raises:
        ValueError: if ``fig`` is at another resolution (laid out at one, it would be written at another).
    """
    from gnplace.graph_io import write_atomically

    if fig.dpi != FIGURE_DPI:
        raise ValueError(f"a figure of {fig.dpi:g} dpi: make it at FIGURE_DPI ({FIGURE_DPI}), the resolution it is "
                         "written at, so that it is laid out at it")
    image = io.BytesIO()
    fig.savefig(image, format="png", dpi=FIGURE_DPI)
    return write_atomically(path, image.getvalue())


class Store:
    """Rows saved one JSON line each (in ``path``) as they finish, keyed so that a rerun skips what is done.

    Each row holds ``key``, a string naming what determines it. A line cut short by a kill is skipped (its
    task runs again).

    Raises:
        InvalidArgument: if a line of ``path`` is JSON but not such a row (another program's file).
    """

    def __init__(self, path: Path) -> None:
        from gnplace.exceptions import InvalidArgument
        from gnplace.graph_io import append_to

        self.path = path
        self.rows: dict[str, dict[str, Any]] = {}
        if path.exists():
            data = path.read_bytes()
            undecodable = 0
            for raw in data.split(b"\n"):
                try:
                    line = raw.decode("utf-8")
                except UnicodeDecodeError:  # a line cut by a kill inside a character is skipped as a cut JSON
                    undecodable += 1  # line is (its task runs again); a file of nothing else is another program's
                    continue
                try:
                    row = json.loads(line)
                except (json.JSONDecodeError, RecursionError):  # a line cut short by a kill: its task runs again
                    # (a line "[[[..." thousands deep is no row either)
                    continue
                if not isinstance(row, dict) or not isinstance(row.get("key"), str):
                    raise InvalidArgument(f"{path}: not the rows of an earlier run (JSON lines of rows with a key); "
                                          "move it away or pick another --out")
                self.rows[row["key"]] = row
            if undecodable and not self.rows:  # bytes that are not UTF-8 text and no row: a UnicodeDecodeError before
                raise InvalidArgument(f"{path}: not the rows of an earlier run ({undecodable} line(s) not UTF-8 text, "
                                      "no row); move it away or pick another --out")
            # cut short by a kill: new rows start on a line of their own (once the file is known to be rows: another
            # program's file, refused above, is left as it was)
            if data and not data.endswith(b"\n"):
                append_to(path, b"\n")

    def add(self, row: dict[str, Any]) -> None:
        """Save ``row`` (it must hold ``key``).

        Raises:
            OSError: naming the file, if the disk has no room for the line (the file as it was before).
        """
        from gnplace.graph_io import append_to

        append_to(self.path, (json.dumps(row) + "\n").encode())
        self.rows[row["key"]] = row

    def saved(self, key: str, identity: dict[str, Any], legacy: Callable[[dict[str, Any]], bool] | None = None
              ) -> dict[str, Any] | None:
        """The row saved under ``key`` if it was made on the inputs of ``identity`` (None: none, or another's).

        ``identity`` holds what a row records of the inputs that determine it beside its key (the graph file's
        SHA-256, the cluster's fingerprint): a row recording them stands where each is the same. A row recording none
        of them (saved before they were recorded) stands where ``legacy(row)`` says so from values it recorded
        (no ``legacy``: it does not); it is then saved again with ``identity``, so that the check runs once.
        """
        row = self.rows.get(key)
        if row is None or not identity:  # nothing recorded beside the key: the key says it all
            return row
        if any(field in row for field in identity):
            return row if all(row.get(field) == value for field, value in identity.items()) else None
        if legacy is None or not legacy(row):
            return None
        self.add({**row, **identity})
        return self.rows[key]

    def run(self, tasks: list[dict[str, Any]], fn: Callable[[dict[str, Any]], dict[str, Any]], jobs: int,
            label: str, identity: tuple[str, ...] = (),
            legacy: Callable[[dict[str, Any], dict[str, Any]], bool] | None = None,
            fields: tuple[str, ...] = (),
            readable: Callable[[dict[str, Any]], bool] | None = None) -> list[dict[str, Any]]:
        """Run the tasks not yet saved (in ``jobs`` processes), saving each row; all rows of ``tasks``, in order.

        ``identity`` names the fields of a task that its row records (``fn`` copies them) and that a saved row must
        match to stand, ``legacy(row, task)`` judges a row saved before it recorded them (:meth:`saved`); a row
        that does not stand runs again, its new row replacing it. So does a saved row without one of ``fields``
        (what the caller reads of each row): a line edited by hand, or one of an older program, was a ``KeyError``
        after every task had run; and one holding all of them where ``readable(row)`` says the caller cannot read
        their values (a learning curve of no points was an ``IndexError`` there).
        """
        def stands(task: dict[str, Any]) -> bool:
            check = None if legacy is None else (lambda row: legacy(row, task))
            row = self.saved(task["key"], {field: task[field] for field in identity}, check)
            return (row is not None and all(field in row for field in fields)
                    and (readable is None or readable(row)))

        todo = [t for t in tasks if not stands(t)]
        print(f"[report] {label}: {len(tasks) - len(todo)} saved, {len(todo)} to run", flush=True)
        from gnplace.workers import task_mapper

        # one task runs here (a worker spends seconds importing torch); more start at most one worker each
        with task_mapper(jobs if len(todo) > 1 else 1) as mapper:
            for i, row in enumerate(mapper(fn, todo)):
                self.add(row)
                print(f"[report] {label} {i + 1}/{len(todo)}: {row['key']}", flush=True)
        return [self.rows[t["key"]] for t in tasks]


def median_seconds(fn: Callable[[], Any], repeat: int) -> float:
    """Median wall seconds of ``fn()`` over ``repeat`` calls, after one warm-up call."""
    fn()
    samples = []
    for _ in range(repeat):
        start = time.perf_counter()
        fn()
        samples.append(time.perf_counter() - start)
    return statistics.median(samples)


#: The modules that make :func:`large_graph`'s graphs (the family generator, the importer, the file format): the
#: sources they import from ``gnplace`` are part of a cached graph's recipe, so that a change to any of them regenerates it.
LARGE_GRAPH_MODULES = ("gnplace.families.cifar10", "gnplace.importers.torch", "gnplace.graph_io")


def _module_file(name: str) -> Path | None:
    """The source file of ``gnplace`` module ``name`` (None: not a module of the package, e.g. a class imported)."""
    base = Path(__file__).resolve().parents[2].joinpath(*name.split("."))
    return next((p for p in (base.with_suffix(".py"), base / "__init__.py") if p.is_file()), None)


def source_files(modules: Iterable[str]) -> dict[str, Path]:
    """The source files of ``modules`` and of every ``gnplace`` module they import, directly or not, by module name.

    Read from the sources (every ``import gnplace...`` and ``from gnplace... import``, in functions too), nothing
    imported.
    """
    import ast

    found: dict[str, Path] = {}
    todo = list(modules)
    while todo:
        name = todo.pop()
        path = _module_file(name)
        if name in found or path is None:
            continue
        found[name] = path
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Import):
                todo += [alias.name for alias in node.names if alias.name.startswith("gnplace")]
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and (node.module or "").startswith("gnplace"):
                todo += [str(node.module), *(f"{node.module}.{alias.name}" for alias in node.names)]
    return found


def large_graph_recipe(layers: int) -> str:
    """SHA-256 (hex) of everything that makes :func:`large_graph`'s graph of ``layers`` cells.

    The generator's inputs (family, cells, channels, batch, seed), the content of the ``gnplace`` sources that
    generate, import and write it (:data:`LARGE_GRAPH_MODULES` and what they import) and the torch and numpy versions
    (torch records the training step, numpy draws the architecture).
    """
    import hashlib

    import torch

    from gnplace.evaluate import file_digest

    sources = {name: file_digest(path) for name, path in sorted(source_files(LARGE_GRAPH_MODULES).items())}
    recipe = {"family": "cifar10", "layers": layers, "channels": 16, "batch": 32, "seed": 0, "sources": sources,
              "torch": torch.__version__, "numpy": np.__version__}
    return hashlib.sha256(json.dumps(recipe, sort_keys=True).encode()).hexdigest()


def _cached_large_graph(path: Path, recipe: str) -> Any | None:
    """The graph cached at ``path`` if its record (``path`` with ``.json``) says ``recipe`` made it and it is intact."""
    from gnplace.graph_io import load_graph

    try:
        record = json.loads(path.with_suffix(".json").read_text(encoding="utf-8"))
    except (OSError, ValueError, RecursionError):  # none (a cache of before 2026-11-30), or cut short: made again
        return None
    if not isinstance(record, dict) or record.get("recipe") != recipe or not path.exists():
        return None
    graph = load_graph(path)
    return graph if graph.fingerprint() == record.get("fingerprint") else None


#: Ops of one ENAS cifar10 cell, about: :func:`large_graph` stacks ``round(ops / 119)`` cells.
OPS_PER_CELL = 119
#: The benchmarks whose ``--ops`` are :func:`large_graph`'s (stacked cifar10 cells, at most ``MAX_LAYERS`` of them).
LARGE_GRAPH_BENCHMARKS = ("scale", "devices-place", "memory", "latency")


def large_graph_max_ops() -> int:
    """The most ``ops`` :func:`large_graph` takes: those of ``cifar10.MAX_LAYERS`` cells (1,190,000)."""
    from gnplace.families.cifar10 import MAX_LAYERS

    return MAX_LAYERS * OPS_PER_CELL


def large_graph(ops: int, cache: Path) -> Any:
    """An ENAS cifar10 training graph of about ``ops`` ops (more cells stacked), cached in ``cache``.

    The file ``cifar10_L{cells}.gnpg`` comes with ``cifar10_L{cells}.json``, which records the recipe
    (:func:`large_graph_recipe`) and the graph's :meth:`~gnplace.graph.OpGraph.fingerprint`: a cached graph is
    used only while both hold, else it is made again (a cache without the record, of before 2026-11-30, once).
    """
    from gnplace.families import cifar10
    from gnplace.graph_io import save_graph, write_atomically
    from gnplace.importers.torch import from_module

    layers = max(1, round(ops / OPS_PER_CELL))
    path = cache / f"cifar10_L{layers}.gnpg"
    recipe = large_graph_recipe(layers)
    cached = _cached_large_graph(path, recipe)
    if cached is not None:
        return cached
    model, inputs = cifar10.sample(np.random.default_rng(0), layers=layers, channels=16, batch=32)
    graph = from_module(model, inputs, name=f"cifar10_L{layers}")
    save_graph(graph, path)  # then its record: a kill between the two leaves a record that no longer matches
    write_atomically(path.with_suffix(".json"),
                     json.dumps({"recipe": recipe, "fingerprint": graph.fingerprint()}).encode())
    return graph


def _split_files(family: str, split: str) -> list[str]:
    """The graph files of one split of a shipped family, in its manifest's order."""
    from gnplace.datasets import load_manifest

    folder = DATASETS / family
    return [str(folder / e["file"]) for e in load_manifest(folder)["graphs"] if e["split"] == split]


def test_graphs(family: str, count: int | None) -> list[str]:
    """The first ``count`` test graphs of a shipped family (all if None or 0, as ``--per-family 0`` means)."""
    files = _split_files(family, "test")
    return files[:count] if count else files


def held_out_graphs(family: str, count: int | None) -> list[str]:
    """The first ``count`` training graphs of a shipped family that no shipped checkpoint trained on (all if None or 0).

    They are the last ``data.val_per_family`` training graphs of ``configs/pretrain.yaml``, which pretraining held out
    for validation; the constructors' configs hold out the same ones. A benchmark tunes on them so that the test
    graphs stay unseen by its choices as well as by the checkpoints.
    """
    from gnplace.pretrain_config import load_pretrain_config

    held = load_pretrain_config().data.val_per_family
    files = _split_files(family, "train")
    files = files[len(files) - held:] if held else []
    return files[:count] if count else files


def first_reaching(history: list[list[float]], target: float) -> int | None:
    """Evaluations after which a learning curve first reached ``target`` (None: never)."""
    for evaluations, value in history:
        if value <= target * (1 + 1e-9):
            return int(evaluations)
    return None


def best_at(history: list[list[float]], evaluations: int) -> float:
    """The best value of a learning curve after at most ``evaluations`` evaluations (inf: none yet)."""
    values = [v for e, v in history if e <= evaluations]
    return min(values) if values else math.inf


def hidden_curves(curves: dict[str, Any]) -> dict[str, str]:
    """The learning curves a figure draws wholly under a later one, each with the last of those (the one on top).

    A curve of several points is drawn as steps (``ax.step(..., where="post")``): from its first evaluations to its
    last, the best value so far. It is hidden under a later curve of steps whose span holds its span and whose value
    is the same at every evaluation of it (annealing and PPO, one budget of one batch or no better placement, both
    flat at auto's step). A curve of one point is drawn as a star, hidden only under a later star at the same point.

    Args:
        curves (dict[str, Any]): each curve's ``[n, 2]`` points (evaluations ascending, value), by name, in the order
            drawn; a curve of no points is drawn as nothing, and hides nothing.

    Returns:
        dict[str, str]: the name of each hidden curve's topmost cover, by the hidden curve's name (empty: none is
        hidden).

    Examples:
        >>> hidden_curves({"annealing": [[1, 1.0], [8, 1.0]], "ppo": [[1, 1.0], [4, 1.0], [16, 1.0]],
        ...                "heft": [[2, 1.0]], "rnn_pg": [[2, 1.0]]})
        {'annealing': 'ppo', 'heft': 'rnn_pg'}
    """
    points = {name: np.asarray(curve, dtype=float).reshape(-1, 2) for name, curve in curves.items()}
    names = [name for name in points if len(points[name])]
    hidden = {}
    for k, name in enumerate(names):
        cover = next((top for top in reversed(names[k + 1:]) if _covers(points[top], points[name])), None)
        if cover is not None:
            hidden[name] = cover
    return hidden


def covered_stretches(curves: dict[str, Any]) -> dict[str, list[tuple[float, float, str]]]:
    """The stretches of evaluations over which a figure draws a curve of steps under a later one, and the later one.

    :func:`hidden_curves` names a curve hidden from its first evaluations to its last; one hidden over a stretch of
    them alone (PPO flat at auto's step under fine-tuning's until fine-tuning's first better placement, or the seeds'
    first batches, timed alike, under the last seed drawn) was said nowhere: its curve seemed to start where it came
    out. A curve of steps is under a later one of steps over each stretch of positive length where both are drawn
    (from first evaluations to last) at the same value; the later is the topmost of those. Stars are points, no
    stretch: they cover none and none is counted under a line. Touching drops (vertical) are not counted either.

    Args:
        curves (dict[str, Any]): each curve's ``[n, 2]`` points (evaluations ascending, value), by name, in the order
            drawn.

    Returns:
        dict: by the name of each curve under a later one over a stretch, its stretches ``(first, last, cover)`` in
        order of evaluations, each as long as one cover stays topmost (empty: none is).

    Examples:
        >>> covered_stretches({"ppo": [[1, 1.0], [200, 0.9], [1000, 0.9]], "finetune": [[1, 1.0], [60, 0.95],
        ...                    [1000, 0.95]], "rnn_pg": [[16, 1.1], [1000, 1.1]]})
        {'ppo': [(1.0, 60.0, 'finetune')]}
    """
    points = {name: np.asarray(curve, dtype=float).reshape(-1, 2) for name, curve in curves.items()}
    lines = [name for name in points if len(points[name]) > 1]
    found = {}
    for k, name in enumerate(lines):
        stretches = _stretches_under(points[name], [(top, points[top]) for top in reversed(lines[k + 1:])])
        if stretches:
            found[name] = stretches
    return found


def _stretches_under(under: np.ndarray, tops: list[tuple[str, np.ndarray]]) -> list[tuple[float, float, str]]:
    """:func:`covered_stretches` of curve ``under`` below the curves ``tops`` (topmost first), by name."""
    start, end = under[0, 0], under[-1, 0]
    xs = np.union1d(under[:, 0], np.concatenate([top[:, 0] for _, top in tops] or [np.empty(0)]))
    xs = xs[(xs >= start) & (xs <= end)]  # steps' corners: every curve is constant between two of them
    stretches: list[tuple[float, float, str]] = []
    for lo, hi in zip(xs[:-1], xs[1:]):
        value = _step_values(under, np.array([lo]))[0]
        cover = next((name for name, top in tops if top[0, 0] <= lo and hi <= top[-1, 0]
                      and _step_values(top, np.array([lo]))[0] == value), None)
        if cover is None:
            continue
        if stretches and stretches[-1][1] == lo and stretches[-1][2] == cover:
            stretches[-1] = (stretches[-1][0], float(hi), cover)
        else:
            stretches.append((float(lo), float(hi), cover))
    return stretches


def _covers(top: np.ndarray, under: np.ndarray) -> bool:
    """Whether curve ``top`` (``[n, 2]``, not empty), drawn over ``under``, hides it (:func:`hidden_curves`)."""
    if len(top) == 1 or len(under) == 1:  # stars: a star covers a star at its point; lines and stars, nothing
        return len(top) == len(under) == 1 and bool((top == under).all())
    start, end = under[0, 0], under[-1, 0]
    if top[0, 0] > start or top[-1, 0] < end:
        return False
    xs = np.union1d(top[:, 0], under[:, 0])
    xs = xs[(xs >= start) & (xs <= end)]  # steps' corners: both are constant between them
    return bool((_step_values(top, xs) == _step_values(under, xs)).all())


def _step_values(curve: np.ndarray, xs: np.ndarray) -> np.ndarray:
    """A curve of steps' value at each of ``xs`` (each at or past its first evaluations): its last point's at or before."""
    return curve[np.searchsorted(curve[:, 0], xs, side="right") - 1, 1]
