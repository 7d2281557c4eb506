"""Regenerate every shipped graph file; the same code always writes byte-identical files.

Usage::

    python scripts/make_datasets.py [--out datasets] [--families cifar10,ptb,nmt] [--count 32] [--seed 0] [--real]
        [--overwrite]

Writes ``datasets/examples/`` (exact MLP training graphs used by the demo and the README) and, for
each family, ``datasets/<family>/``: ``count`` training graphs (same as ``gnplace generate``), their
``manifest.json`` with a 24/8 train/test split, and the statistics table ``datasets/README.md``.
An interrupted run resumes: finished graph files are kept (``--real``'s models are built again). A family
folder holding a dataset drawn with other arguments is refused unless ``--overwrite`` replaces it.

``--real`` also builds ``datasets/real/``: training graphs of GPT-2, BERT-base, T5-small, ViT-Base
and ResNet-50 from transformers configs (:mod:`gnplace.families.realmodels`; needs
``pip install 'gnplace[models]'``, about 80 s on a 2-core machine). ``--families ''`` skips the families.
"""

from __future__ import annotations

import argparse
import functools
import sys
from pathlib import Path
from statistics import median

from gnplace.cli.common import check_count, check_output_folder, run_reporting_errors, script_parser, whole_number
from gnplace.datasets import MAX_GRAPHS, generate_dataset, load_manifest
from gnplace.exceptions import InvalidArgument
from gnplace.graph import FORWARD, OpGraph
from gnplace.graph_io import save_graph, write_atomically
from gnplace.progress import CountBar, count_bar
from gnplace.toy import mlp_training_graph
from gnplace.units import format_bytes, format_flops, format_seconds

#: The shipped families, in the order of the README's rows.
FAMILIES = ("cifar10", "ptb", "nmt")

EXAMPLES = [
    dict(layers=8, width=2048, batch=512, branches=2),  # two towers: parallelism for 2+ devices
    dict(layers=8, width=6144, batch=256, branches=1),  # 1.1 GiB of weights: only fits tight4 when split
]


def write_examples(out: Path) -> None:
    """The demo's example graphs."""
    for knobs in EXAMPLES:
        graph = mlp_training_graph(**knobs)
        path = save_graph(graph, out / "examples" / f"{graph.name}.gnpg")
        print(f"{path}: {graph.num_ops} ops, {graph.num_groups} groups")


def write_real(out: Path) -> None:
    """``datasets/real/``: the real-model graphs, printing each one's size and build time."""
    from gnplace.families.realmodels import write_real_dataset

    def report(file: str, graph: OpGraph, seconds: float) -> None:
        forward = float(graph.flops[graph.phase == FORWARD].sum())
        print(f"{out / 'real' / file}: {graph.num_ops} ops, {graph.num_groups} groups, forward {format_flops(forward)}, "
              f"step {format_flops(graph.total_flops)}, parameters {format_bytes(graph.total_param_bytes)}, "
              f"built in {format_seconds(seconds)}", flush=True)

    write_real_dataset(out / "real", progress=report)


def real_table(out: Path) -> list[str]:
    """The README section of ``datasets/real/`` (empty if it was not built)."""
    if not (out / "real" / "manifest.json").exists():
        return []
    from gnplace.families.realmodels import REAL_MODELS
    from gnplace.graph_io import load_graph

    lines = [
        "",
        "## Real models (`datasets/real/`)",
        "",
        "Built by `python scripts/make_datasets.py --real` (`gnplace.families.realmodels`, needs `pip install 'gnplace[models]'`)",
        "from transformers configs with random weights, no download; all in the test split. `torch` graphs come from",
        "`gnplace.importers.torch.from_module` with the model's own loss; `onnx` graphs from `torch.onnx.export(dynamo=True)`",
        "of the forward pass to the logits, read by `gnplace.importers.onnx.from_onnx` (synthesised backward, a",
        "one-FLOP-per-logit loss). Batch 8; sequences of 128 tokens, images of 224 x 224. With transformers 5.24.0",
        "(what `gnplace[dev]` pins), torch 2.13.0, onnxscript 0.7.2 and onnx 1.23.2 every file rebuilds to the shipped graph",
        "(`tests/families/test_realmodels.py`). They were rebuilt on 2026-12-02: `gpt2` and `bert_base`, built before",
        "with an earlier transformers whose version was not recorded, gained the node of their token input (1,123 and",
        "1,068 ops); the ONNX graphs took the importer's backward of that day (a norm's gradients as one op reading its",
        "input, as aten's; a bias gradient reading the output's gradient alone; no op for an add's pass-through",
        "gradient), which reads fewer bytes: `resnet50_onnx` went from 704 ops to 566, from 5.59 GB of backward reads to",
        "2.75 (the torch graph 2.43) and from a one-V100 step of 37.71 ms to 32.73 (torch 32.11), `vit_base_onnx` from",
        "115.99 ms to 111.50 (torch 109.96). The exporter gives each of `resnet50`'s 53 convolutions an explicit zero",
        "bias, which the importer counts (one FLOP per output): 66.097 forward GFLOP, where the torch graph has 66.008.",
        "On 2026-12-05 `gpt2_onnx`, `bert_base_onnx` and `t5_small_onnx` were rebuilt with their training-mode dropout,",
        "which the ONNX importer had folded away as a view: an op of 2 FLOP per element keeping a one-byte mask, and its",
        "gradient (790 ops to 864, 893 to 967, 1,247 to 1,375; 6-17% more output bytes); the other files did not change.",
        "On 2026-12-06 `gpt2_onnx` was rebuilt with the gradient of the exporter's split (`SplitToSequence` and",
        "`SequenceAt`: each layer's query, key and value) as a concatenation of its parts, as aten's and the torch",
        "graph's: 12 `grad_sum` ops (elementwise, 2 FLOP per element) became `Split_grad` (data movement, 0 FLOP), 56.6",
        "MFLOP less backward (-0.011%), the same ops, groups, edges and bytes; the other files did not change.",
        "The same day `gpt2`, `bert_base`, `t5_small` and `vit_base` were rebuilt with 172 backward ops moved from the",
        "root's group to their modules' (above); `resnet50` and the ONNX graphs did not change.",
        "The torch graphs' meta records tied parameters (`tied_parameters`, for the device maps of",
        "`gnplace.execute.device_map`).",
        "",
        "| graph | model | importer | ops | groups | edges | forward GFLOP | GFLOP per step | parameter MiB |",
        "| --- | --- | --- | --- | --- | --- | --- | --- | --- |",
    ]
    for entry in load_manifest(out / "real")["graphs"]:
        graph = load_graph(out / "real" / entry["file"])
        forward = float(graph.flops[graph.phase == FORWARD].sum())
        model = REAL_MODELS[graph.meta["model"]].description if graph.meta.get("model") in REAL_MODELS else graph.meta.get("model", "")
        if graph.meta.get("importer") == "onnx":
            model = "the same network, exported to ONNX"
        lines.append(
            f"| {entry['file']} | {model} | {graph.meta.get('importer', '')} | {entry['ops']} | {entry['groups']} "
            f"| {entry['edges']} | {forward / 1e9:.1f} | {entry['total_flops'] / 1e9:.1f} | {entry['param_bytes'] / 2**20:.1f} |"
        )
    return lines


#: The first line of the statistics table this script writes: a README.md that starts otherwise is someone else's.
README_TITLE = "# Shipped graph datasets"


def _check_readme_is_ours(readme: Path, overwrite: bool) -> None:
    """Refuse, before anything is written, a ``README.md`` under ``--out`` that this script did not write.

    ``--out .`` in a project would otherwise end with its README replaced by the statistics table.

    Raises:
        InvalidArgument: unless ``overwrite``, for a README.md of other text (or a folder of that name).
    """
    if overwrite or not (readme.exists() or readme.is_symlink()):
        return
    try:
        with readme.open("rb") as f:
            ours = f.read(len(README_TITLE)) == README_TITLE.encode()
    except OSError:  # a folder, a dangling link, unreadable: not ours either
        ours = False
    if not ours:
        raise InvalidArgument(f"--out {readme.parent}: holds a README.md this script did not write (it would be "
                              "replaced by the statistics table); give another folder, or --overwrite to replace it")


def write_readme(out: Path, families: list[str]) -> None:
    """``datasets/README.md``: one statistics row per family and split, then the real models."""
    lines = [
        README_TITLE,
        "",
        f"Generated by `python scripts/make_datasets.py` (the same as {_generate_commands(out, families)});",
        "rerunning it rewrites byte-identical files. Each folder holds the graphs (`.gnpg`, see the top-level README)",
        "and `manifest.json` (name, family, ops, groups, edges, total FLOP, parameter bytes, knobs, split).",
        "FLOP and bytes are per training step (forward, backward and SGD update); parameter bytes include optimizer state.",
        "On 2026-12-06 every family graph was rebuilt with the backward of a module's own op that runs between two of its",
        "children (a cell's adds and poolings between its layers, a recurrent layer's time-step selects and adds, an",
        "attention's matmuls between its projections) in that module, not in the root's group (`grad/root/...`): 1,140",
        "of cifar10's 68,272 ops, 561 of ptb's 82,973 and 2,142 of nmt's 91,775 moved to their module's group, and nmt's",
        "attention memory layer, no longer read from two groups, lost its `read/` op (one op and one edge fewer in each",
        "nmt graph); FLOP and bytes did not change.",
        "",
        "| family | split | graphs | ops (min / median / max) | groups (median) | GFLOP per step (min / max) | parameter MiB (min / max) |",
        "| --- | --- | --- | --- | --- | --- | --- |",
    ]
    for family in families:
        manifest = load_manifest(out / family)
        for split in ("train", "test"):
            rows = [e for e in manifest["graphs"] if e["split"] == split]
            ops = sorted(e["ops"] for e in rows)
            groups = sorted(e["groups"] for e in rows)
            flops = [e["total_flops"] / 1e9 for e in rows]
            params = [e["param_bytes"] / 2**20 for e in rows]
            if not rows:  # a split a small --count leaves empty
                lines.append(f"| {family} | {split} | 0 | - | - | - | - |")
                continue
            lines.append(
                f"| {family} | {split} | {len(rows)} | {ops[0]} / {median(ops):g} / {ops[-1]} | {median(groups):g} "
                f"| {min(flops):.1f} / {max(flops):.1f} | {min(params):.2f} / {max(params):.2f} |"
            )
    lines += real_table(out)
    write_atomically(out / "README.md", ("\n".join(lines) + "\n").encode())  # a kill never truncates it


def _generate_commands(out: Path, families: list[str]) -> str:
    """The ``gnplace generate`` command that writes each family's dataset, as its manifest records it.

    One command with ``F`` for the family where they agree (the shipped datasets: 32 graphs, seed 0); the
    text said ``--count 32 --seed 0`` whatever ``--count`` and ``--seed`` made them.
    """
    commands: dict[str, list[str]] = {}
    for family in families:
        manifest = load_manifest(out / family)
        count = len(manifest["graphs"])
        tests = sum(e["split"] == "test" for e in manifest["graphs"])
        flags = f"--count {count}" + (f" --test-count {tests}" if tests != count // 4 else "") + \
            f" --seed {manifest['seed']}"
        commands.setdefault(flags, []).append(family)
    if len(commands) <= 1:
        return f"`gnplace generate --family F {next(iter(commands), '')}`".replace(" `", "`")
    return ", ".join(f"`gnplace generate --family {f} {flags}`" for flags, names in commands.items() for f in names)


def _advance(bar: CountBar, family: str, index: int, graph: OpGraph) -> None:
    """Progress callback of ``generate_dataset``: one graph of ``family`` done."""
    bar.advance(f"{family}: {graph.name} {graph.num_ops} ops")


def main(argv: list[str] | None = None) -> int:
    """Write every shipped graph under ``--out``; bad arguments are one ``make_datasets: error:`` line, exit 2."""
    parser = script_parser(__file__, __doc__)
    parser.add_argument("--out", "-o", default=str(Path(__file__).resolve().parent.parent / "datasets"),
                        help="folder the graphs and the statistics table README.md go into (default: the project's "
                             "datasets/, wherever it runs from)")
    parser.add_argument("--families", default="cifar10,ptb,nmt",
                        help="comma-separated families to generate, '' for none (--real alone) (default: cifar10,ptb,nmt)")
    parser.add_argument("--count", type=int, default=32,
                        help="graphs drawn for each family, training and test (default: 32)")
    parser.add_argument("--test-count", type=int, default=None,
                        help="graphs of each family in the test split (default: a quarter of --count, as gnplace generate)")
    parser.add_argument("--seed", type=whole_number, default=0,
                        help="dataset seed of each family, as gnplace generate's (default: 0)")
    parser.add_argument("--real", action="store_true", help="also build datasets/real/ (needs gnplace[models])")
    parser.add_argument("--overwrite", action="store_true",
                        help="replace a family's dataset drawn with other arguments (as gnplace generate --overwrite), and a "
                             "README.md in --out this script did not write")
    args = parser.parse_args(argv)
    # a rerun resumes the families (each finished graph file kept); --real builds every real model again
    kept = "the families' graphs written; --real builds its models again" if args.real else "the graphs written"
    return run_reporting_errors(run, args, "make_datasets", f"interrupted (a rerun keeps {kept})")


def run(args: argparse.Namespace) -> int:
    """Write the datasets ``args`` name, then the statistics table."""
    from gnplace.families import get_family

    check_output_folder(args.out)  # "" wrote into the working folder, over its README.md
    # a family named twice is built once; "ptb, nmt" names nmt, as evaluate's lists do
    families = list(dict.fromkeys(f.strip() for f in args.families.split(",") if f.strip()))
    if families:  # refused before any graph is written: a bad --seed or family failed after the examples and the
        check_count(args.count, "--count", minimum=1, maximum=MAX_GRAPHS)  # families before it were built (minutes)
        check_count(args.test_count, "--test-count")
        if args.test_count is not None and args.test_count > args.count:
            raise InvalidArgument(f"--test-count {args.test_count} is more than --count {args.count}")
        for family in families:
            get_family(family)
    out = Path(args.out)
    _check_readme_is_ours(out / "README.md", args.overwrite)
    write_examples(out)
    for family in families:  # a bar each on a terminal; in a log file a line every half minute
        with count_bar(family, args.count, "graphs") as bar:
            generate_dataset(family, args.count, out / family, seed=args.seed, test_count=args.test_count,
                             overwrite=args.overwrite, progress=functools.partial(_advance, bar, family))
    if args.real:
        write_real(out)
    # keep the rows of families built before (--families '' --real rebuilds only the real set), in one order
    # whatever --families says: `--families ptb` rebuilds ptb and rewrites the same README
    listed = [f for f in FAMILIES if f in families or (out / f / "manifest.json").exists()]
    write_readme(out, listed + [f for f in families if f not in FAMILIES])
    print(f"wrote {out / 'README.md'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
