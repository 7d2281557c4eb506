"""Where the report saves its runs and writes itself, each path refused in one line before any run where it cannot be used."""

from __future__ import annotations

import argparse
from collections.abc import Sequence
from pathlib import Path

from benchmarks.common import test_graphs

from reporting.config import FULL, QUICK, ROOT, Config
from reporting.elapsed import read_elapsed


def default_out(quick: bool) -> str:
    """Where a report saves its runs unless ``--out`` says otherwise: the full and the quick one apart."""
    return "out/report_quick" if quick else "out/report"


def report_paths(args: argparse.Namespace) -> tuple[str, Path, Path, str]:
    """Where the report saves its runs, writes itself and its figures, and keeps large graphs: given or default.

    A quick report keeps everything under ``--out`` (its large graphs too); the full one writes the project's
    ``docs/RESULTS.md`` and ``docs/figures`` wherever it runs from, not a ``docs/`` of the working folder.
    """
    out_name = default_out(args.quick) if args.out is None else args.out  # the quick report's rows apart
    out = Path(out_name)
    # "" (an unset variable) is refused by run, not taken for the default: docs/RESULTS.md and docs/figures
    doc = Path(args.doc) if args.doc is not None else (
        out / "RESULTS.md" if args.quick else ROOT / "docs" / "RESULTS.md")
    figures = Path(args.figures) if args.figures is not None else (
        out / "figures" if args.quick else ROOT / "docs" / "figures")
    cache = args.cache if args.cache is not None else (str(out / "cache") if args.quick else "out/bench")
    return out_name, doc, figures, cache


def check_paths(args: argparse.Namespace) -> tuple[str, Path, Path, str]:
    """:func:`report_paths`, each refused in one line where it cannot be used (before any run or folder is made).

    Raises:
        InvalidArgument: naming the flag whose path cannot be used.
    """
    from gnplace.cli.common import check_output_file, check_output_folder

    out_name, doc, figures, cache = report_paths(args)
    out = Path(out_name)
    # refused before the runs, not when the report is written at their end (21 minutes in)
    for folder, flag in ((out_name, "--out"), (args.figures if args.figures is not None else figures, "--figures"),
                         (cache, "--cache")):
        check_output_folder(folder, flag)
    check_output_file(args.doc if args.doc is not None else doc, "--doc")
    check_doc_is_no_folder_it_makes(doc, {"--out": out, "--figures": figures})
    if args.doc:
        check_doc_folder(doc, out)
        check_doc_is_no_run_file(doc, out, Path(cache))
        check_doc_is_no_figure(doc, figures, figure_names(QUICK if args.quick else FULL))
    check_report_kind(out, out_name, args.quick)
    return out_name, doc, figures, cache


def check_report_kind(out: Path, out_flag: str, quick: bool) -> None:
    """Refuse an ``--out`` folder holding the runs of the other report (full or ``--quick``), as one line.

    A quick report's rows in the full report's folder would count their minutes in its time and leave rows of
    other settings beside its own. A folder of before 2026-12 records no kind: accepted.

    Raises:
        InvalidArgument: ``out/elapsed.json`` says the other report made its rows.
    """
    from gnplace.exceptions import InvalidArgument

    kind = read_elapsed(out / "elapsed.json").get("quick")
    if isinstance(kind, bool) and kind != quick:
        theirs, ours = ("a --quick", "a full") if kind else ("a full", "a --quick")
        raise InvalidArgument(f"--out {out_flag}: holds the runs of {theirs} report; {ours} report keeps its own "
                              f"(default: {default_out(quick)}): pick another --out")


def check_doc_folder(doc: Path, out: Path) -> None:
    """Refuse a ``--doc`` whose folder does not exist and is not ``--out`` or under it, as one line.

    The report is written last, after every run (21 minutes in on the full report): a mistyped folder
    (``--doc /nonexistent/dir/x.md``) was met only then, or made wherever the user may write. ``--out``
    is made before the runs, so a report under it is accepted.

    Raises:
        InvalidArgument: naming ``--doc``, the missing folder and what to do.
    """
    from gnplace.exceptions import InvalidArgument

    folder = doc.absolute().parent
    if folder.is_dir() or folder == out.absolute() or out.absolute() in folder.parents:
        return
    raise InvalidArgument(f"--doc {doc}: no folder {doc.parent}; make it first, or name a file in an existing "
                          "folder or under --out")


#: The files the report keeps its runs in under ``--out`` (beside its section 1's evaluation folders and section 2's
#: Placeto checkpoints).
RUN_FILES = ("elapsed.json", "learned.jsonl", "exact.jsonl", "exact_sampled.jsonl", "scale.jsonl", "curves.jsonl")
#: The folders under ``--out`` of section 1's evaluations (``gnplace.evaluate``'s): every placer, the baselines.
RUN_FOLDERS = ("table", "baselines")


def check_doc_is_no_run_file(doc: Path, out: Path, cache: Path) -> None:
    """Refuse a ``--doc`` that is one of the files the report keeps its runs in.

    The report is written over ``--doc`` at the end: ``--doc OUT/learned.jsonl`` replaced section 2's
    saved runs with the report, and the next run did all nine again (and ``OUT/curves.jsonl``, section 6's, and
    ``OUT/baselines/results.csv``, section 1's non-learned placers', were still taken).

    Raises:
        InvalidArgument: naming ``--doc`` and whose runs it holds.
    """
    from gnplace.exceptions import InvalidArgument

    target = doc.resolve()
    taken = {(out / name).resolve(): f"{out / name}" for name in RUN_FILES}
    for folder in (*(out / name for name in RUN_FOLDERS), cache):  # section 1's evaluations, the scale section's cache
        if folder.resolve() == target or folder.resolve() in target.parents:
            raise InvalidArgument(f"--doc {doc}: under {folder}, where the report keeps runs; name another file")
    if target in taken:
        raise InvalidArgument(f"--doc {doc}: the report keeps its runs in {taken[target]}; name another file")
    if target.parent == out.resolve() and target.name.startswith("placeto_") and target.suffix == ".pt":
        raise InvalidArgument(f"--doc {doc}: the report keeps its Placeto checkpoints as {out / 'placeto_*.pt'}; "
                              "name another file")


#: The figures the report writes in ``--figures`` (sections 2 and 5), before the report itself.
FIGURES = ("report_learned.png", "report_curves.png", "report_scale.png")
#: Section 1's figure of every non-learned placer (``docs/baselines.md``'s).
BASELINE_FIGURE = "baselines_ratios.png"


def figure_names(config: Config) -> list[str]:
    """Every file the report draws into ``--figures``: :data:`FIGURES`, :data:`BASELINE_FIGURE` and section 6's."""
    from benchmarks.search import curve_stem

    from gnplace.graph_io import load_graph

    stems = [curve_stem(load_graph(p).name, config.curve_cluster)
             for f in config.families for p in test_graphs(f, config.curve_per_family)]
    return [*FIGURES, BASELINE_FIGURE, *(f"{stem}{suffix}" for stem in stems for suffix in (".png", ".json"))]


def check_doc_is_no_figure(doc: Path, figures: Path, names: Sequence[str] = FIGURES) -> None:
    """Refuse a ``--doc`` that is one of the figures the report writes (``names`` in ``--figures``).

    The figures are written just before the report: ``--doc docs/figures/report_scale.png`` replaced the figure of
    the report before, and the one just drawn, with the report's text, the image it links to.

    Raises:
        InvalidArgument: naming ``--doc`` and the figure.
    """
    from gnplace.exceptions import InvalidArgument

    target = doc.resolve()
    for name in names:
        if (figures / name).resolve() == target:
            raise InvalidArgument(f"--doc {doc}: the report draws its figure {figures / name} there; name another "
                                  "file")


def check_doc_is_no_folder_it_makes(doc: Path, folders: dict[str, Path]) -> None:
    """Refuse a ``--doc`` that is the folder ``--out`` or ``--figures`` names, not made yet.

    ``check_output_file`` refuses an existing folder; one the report makes before its runs (``--doc X
    --out X``) was met only when the report was written over it, at the end.

    Raises:
        InvalidArgument: naming ``--doc`` and the flag whose folder it is.
    """
    from gnplace.exceptions import InvalidArgument

    for flag, folder in folders.items():
        if doc.resolve() == folder.resolve():
            raise InvalidArgument(f"--doc {doc}: the folder {flag} names, which the report makes; name a file")
