"""Training graphs of real architectures that nobody on this project wrote: ``datasets/real/``.

The models come from the configs of `transformers <https://huggingface.co/docs/transformers>`_
(GPT-2, BERT-base, T5-small, ViT-Base/16, ResNet-50), built with random weights and no download,
and are imported with :func:`gnplace.importers.torch.from_module` on a modest batch (8 sequences
of 128 tokens, or 8 images of 224 x 224), the loss being the model's own (``labels=``). Each is
also exported to ONNX (``torch.onnx.export(..., dynamo=True, optimize=False)``, which keeps
training-mode batch norm) and imported with :func:`gnplace.importers.onnx.from_onnx`, so that the two
importers can be compared on the same network.

Unlike the random families of :mod:`gnplace.families` (``sample(rng, **knobs)``), each real model is
one fixed network with fixed inputs: :func:`build_model` draws its weights under
:func:`gnplace.seed.seeded_torch` ``(0)`` and its inputs from :func:`gnplace.seed.torch_generator` ``(0)``,
so it is not in :data:`gnplace.families.FAMILIES`.

Building needs the optional dependencies ``pip install 'gnplace[models]'`` (transformers; onnxscript
for the ONNX exports); reading the shipped graph files needs neither.

Examples:
    >>> sorted(REAL_MODELS)
    ['bert_base', 'gpt2', 'resnet50', 't5_small', 'vit_base']
    >>> REAL_MODELS["resnet50"].importers
    ('torch', 'onnx')
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch
from torch import nn

from gnplace.families._common import check_choice, seeded_float32
from gnplace.graph import OpGraph
from gnplace.quiet import ignored_warnings, logger_at_error, stdout_discarded
from gnplace.seed import torch_generator

__all__ = ["RealModel", "REAL_MODELS", "build_model", "real_graph", "export_onnx", "write_real_dataset"]

#: Batch of every real model: 8 sequences of :data:`SEQUENCE` tokens, or 8 images.
BATCH = 8
SEQUENCE = 128
IMAGE = 224


@contextmanager
def _quiet_transformers() -> Iterator[Any]:
    """transformers, its library's logger at ERROR while the body runs; its level as the caller had it after.

    Its notes while a model with random weights is built and traced say nothing here. It was set to ERROR for
    the rest of the process: a program that built a real model (``real_graph``, ``gnplace.families``) and then
    used transformers itself saw none of its warnings.
    """
    try:
        import transformers
    except ImportError as err:  # pragma: no cover - depends on the environment
        raise ImportError("building the real models needs transformers: pip install 'gnplace[models]'") from err
    with logger_at_error("transformers"):  # what transformers.logging.set_verbosity sets
        yield transformers


class _Step(nn.Module):
    """A transformers model whose ``forward(*inputs)`` returns its training loss, or its logits.

    Args:
        model (nn.Module): the transformers model.
        keys (tuple[str, ...]): keyword under which each positional input is passed.
        output (str): ``"loss"`` (needs a ``labels`` key) or ``"logits"``.
        extra (dict): further keywords of every call (``use_cache=False``, ...).
    """

    def __init__(self, model: nn.Module, keys: tuple[str, ...], output: str, extra: dict[str, Any]) -> None:
        super().__init__()
        self.model = model
        self.keys = keys
        self.output = output
        self.extra = extra

    def forward(self, *inputs: torch.Tensor) -> torch.Tensor:
        result = self.model(**dict(zip(self.keys, inputs)), **self.extra)
        return getattr(result, self.output)  # type: ignore[no-any-return]


@dataclass(frozen=True)
class RealModel:
    """One real architecture: how to build it and what the shipped graph records.

    Attributes:
        name (str): file stem of its graph, e.g. ``"gpt2"``.
        description (str): one line for the dataset README.
        knobs (dict): the config values and batch that fix its graph (stored in the manifest).
        importers (tuple[str, ...]): ``"torch"`` and/or ``"onnx"``: which importers ship a graph of it.
    """

    name: str
    description: str
    knobs: dict[str, Any]
    importers: tuple[str, ...] = ("torch", "onnx")
    _build: Callable[[Any, str], tuple[nn.Module, tuple[torch.Tensor, ...]]] | None = field(default=None, repr=False)


def _tokens(vocab: int, length: int = SEQUENCE) -> torch.Tensor:
    return torch.randint(0, vocab, (BATCH, length), generator=torch_generator(0))


def _gpt2(layers: int) -> Callable[[Any, str], tuple[nn.Module, tuple[torch.Tensor, ...]]]:
    def build(tf: Any, output: str) -> tuple[nn.Module, tuple[torch.Tensor, ...]]:
        cfg = tf.GPT2Config(n_layer=layers, attn_implementation="eager")
        ids = _tokens(cfg.vocab_size)
        model = tf.GPT2LMHeadModel(cfg)
        if output == "loss":
            return _Step(model, ("input_ids", "labels"), "loss", {"use_cache": False}), (ids, ids)
        return _Step(model, ("input_ids",), "logits", {"use_cache": False}), (ids,)

    return build


def _bert(tf: Any, output: str) -> tuple[nn.Module, tuple[torch.Tensor, ...]]:
    cfg = tf.BertConfig(attn_implementation="eager")
    ids = _tokens(cfg.vocab_size)
    model = tf.BertForMaskedLM(cfg)
    if output == "loss":
        return _Step(model, ("input_ids", "labels"), "loss", {}), (ids, ids)
    return _Step(model, ("input_ids",), "logits", {}), (ids,)


def _t5(tf: Any, output: str) -> tuple[nn.Module, tuple[torch.Tensor, ...]]:
    cfg = tf.T5Config(decoder_start_token_id=0, pad_token_id=0, attn_implementation="eager")  # t5-small
    model = tf.T5ForConditionalGeneration(cfg)
    source, target = _tokens(cfg.vocab_size), _tokens(cfg.vocab_size, SEQUENCE // 4)
    keys = ("input_ids", "labels") if output == "loss" else ("input_ids", "decoder_input_ids")
    return _Step(model, keys, output, {"use_cache": False}), (source, target)


def _images(num_labels: int) -> tuple[torch.Tensor, torch.Tensor]:
    gen = torch_generator(0)
    return torch.randn(BATCH, 3, IMAGE, IMAGE, generator=gen), torch.randint(0, num_labels, (BATCH,), generator=gen)


def _vit(tf: Any, output: str) -> tuple[nn.Module, tuple[torch.Tensor, ...]]:
    cfg = tf.ViTConfig(num_labels=1000, attn_implementation="eager")  # ViT-Base/16
    model = tf.ViTForImageClassification(cfg)
    pixels, labels = _images(cfg.num_labels)
    if output == "loss":
        return _Step(model, ("pixel_values", "labels"), "loss", {}), (pixels, labels)
    return _Step(model, ("pixel_values",), "logits", {}), (pixels,)


def _resnet50(tf: Any, output: str) -> tuple[nn.Module, tuple[torch.Tensor, ...]]:
    cfg = tf.ResNetConfig(layer_type="bottleneck", depths=[3, 4, 6, 3], hidden_sizes=[256, 512, 1024, 2048],
                          embedding_size=64, num_labels=1000)
    model = tf.ResNetForImageClassification(cfg)
    pixels, labels = _images(cfg.num_labels)
    if output == "loss":
        return _Step(model, ("pixel_values", "labels"), "loss", {}), (pixels, labels)
    return _Step(model, ("pixel_values",), "logits", {}), (pixels,)


_TEXT = {"batch": BATCH, "sequence": SEQUENCE}
_VISION = {"batch": BATCH, "image": IMAGE}

#: Every real model by name.
REAL_MODELS: dict[str, RealModel] = {
    m.name: m
    for m in [
        RealModel("gpt2", "GPT-2 (124M): 12 layers, 768 wide, 12 heads, eager attention; causal LM loss",
                  {"config": "GPT2Config(n_layer=12)", "layers": 12, **_TEXT}, _build=_gpt2(12)),
        RealModel("bert_base", "BERT-base (110M): 12 layers, 768 wide; masked-LM loss on every token",
                  {"config": "BertConfig()", "layers": 12, **_TEXT}, _build=_bert),
        RealModel("t5_small", "T5-small (60M): 6 + 6 layers, 512 wide; 128 source and 32 target tokens",
                  {"config": "T5Config()", "layers": 12, **_TEXT, "target_sequence": SEQUENCE // 4}, _build=_t5),
        RealModel("vit_base", "ViT-Base/16 (86M): 12 layers, 768 wide, 196 patches; 1000 classes",
                  {"config": "ViTConfig(num_labels=1000)", "layers": 12, **_VISION}, _build=_vit),
        RealModel("resnet50", "ResNet-50 (25.6M): bottleneck stages 3-4-6-3, training-mode batch norm",
                  {"config": "ResNetConfig(depths=[3, 4, 6, 3])", "layers": 50, **_VISION}, _build=_resnet50),
    ]
}


def _check_model(name: str) -> None:
    """Raise :class:`~gnplace.exceptions.UnknownName` if ``name`` is not in :data:`REAL_MODELS`."""
    from gnplace.exceptions import UnknownName

    if not isinstance(name, str) or name not in REAL_MODELS:  # a list was not hashable: a TypeError's traceback
        raise UnknownName(f"unknown real model {name!r} (choose one of: {', '.join(REAL_MODELS)})")


def build_model(name: str, *, output: str = "loss") -> tuple[nn.Module, tuple[torch.Tensor, ...]]:
    """The module of real model ``name`` (random weights, seeded) and its example inputs.

    The weights are drawn under :func:`gnplace.seed.seeded_torch` ``(0)``, in float32 whatever torch's default
    dtype (:func:`gnplace.families._common.seeded_float32`), so every call builds the same module and the caller's
    torch random state is left as it was.

    Args:
        name (str): a key of :data:`REAL_MODELS`.
        output (str, optional): ``"loss"``: ``forward(*inputs)`` returns the training loss;
            ``"logits"``: it returns the logits, for export (default: ``"loss"``).

    Raises:
        UnknownName: for a name not in :data:`REAL_MODELS`, or an ``output`` other than ``"loss"`` and ``"logits"``.
        ImportError: if transformers is not installed.
    """
    _check_model(name)
    check_choice("output", output, ("loss", "logits"))
    # weights drawn from torch's generator seeded with 0; the caller's state is kept
    with _quiet_transformers() as tf, seeded_float32(0):  # (float32 weights whatever the default dtype)
        module, inputs = REAL_MODELS[name]._build(tf, output)  # type: ignore[misc]
    return module.train(), inputs


def _check_optimizer(optimizer: str) -> None:
    """Raise :class:`~gnplace.exceptions.UnknownName` if ``optimizer`` is not one the importers know."""
    from gnplace.importers import OPTIMIZERS

    check_choice("optimizer", optimizer, tuple(OPTIMIZERS))


def _meta(name: str, importer: str, optimizer: str) -> dict[str, Any]:
    return {"family": "real", "model": name, "importer": importer, "optimizer": optimizer,
            "knobs": {**REAL_MODELS[name].knobs, "importer": importer}}


def real_graph(name: str, *, optimizer: str = "sgd") -> OpGraph:
    """The training graph of real model ``name`` through the PyTorch importer.

    Raises:
        UnknownName: for an unknown name or optimizer (before the model is built).
        ImportError: if transformers is not installed.
    """
    from gnplace.importers.torch import from_module

    _check_optimizer(optimizer)
    with _quiet_transformers():  # the model's notes while it is traced too
        module, inputs = build_model(name)
        return from_module(module, inputs, optimizer=optimizer, name=name, meta=_meta(name, "torch", optimizer))


def export_onnx(name: str, path: str | os.PathLike[str] | None = None) -> Any:
    """Export the forward pass (to the logits) of real model ``name`` to ONNX.

    Uses ``torch.onnx.export(..., dynamo=True, optimize=False)``: the unoptimised export keeps
    training-mode batch norm and one initializer per parameter (the optimiser would fold batch norm
    into the convolutions and merge equal initializers such as freshly initialised norm weights).

    Returns:
        onnx.ModelProto: the model; also written to ``path`` if given.

    Raises:
        ImportError: if transformers or onnxscript is not installed.
    """
    module, inputs = build_model(name, output="logits")
    registry_log = "torch.onnx._internal.exporter._registration"  # "torchvision is not installed"
    with _quiet_transformers(), logger_at_error(registry_log), stdout_discarded(), ignored_warnings():
        program = torch.onnx.export(module, inputs, dynamo=True, optimize=False, verbose=False)
    if program is None:  # pragma: no cover - dynamo export returns a program or raises
        raise RuntimeError(f"torch.onnx.export returned nothing for {type(module).__name__}")
    proto = program.model_proto
    if path is not None:
        import onnx

        onnx.save(proto, str(path))
    return proto


def real_onnx_graph(name: str, *, optimizer: str = "sgd") -> OpGraph:
    """The training graph of real model ``name``, exported to ONNX.

    The ONNX file is read by :func:`~gnplace.importers.onnx.from_onnx`.

    Raises:
        UnknownName: for an unknown name or optimizer (before the model is built).
        ImportError: if transformers or onnxscript is not installed.
    """
    from gnplace.importers.onnx import from_onnx

    _check_model(name)
    _check_optimizer(optimizer)
    return from_onnx(export_onnx(name), optimizer=optimizer, name=f"{name}_onnx", meta=_meta(name, "onnx", optimizer))


def write_real_dataset(
    out: str | os.PathLike[str], *, names: list[str] | None = None, optimizer: str = "sgd",
    progress: Callable[[str, OpGraph, float], None] | None = None,
) -> Path:
    """Write the real-model graphs and their ``manifest.json`` to ``out``; returns the manifest path.

    Each model of :data:`REAL_MODELS` gives ``<name>.gnpg`` (PyTorch importer) and, where its
    ``importers`` include ONNX, ``<name>_onnx.gnpg``. Every entry is in the test split. The files
    depend only on the library versions, not on the run: reruns write the same bytes.

    Args:
        out (str or Path): the folder.
        names (list[str], optional): models to build (default: all of :data:`REAL_MODELS`).
        optimizer (str, optional): optimizer of the update ops (default: ``"sgd"``).
        progress (callable, optional): called with ``(file name, graph, seconds to build it)``.

    Raises:
        UnknownName: for a name not in :data:`REAL_MODELS`, or an unknown optimizer (before ``out`` is made).
        InvalidArgument: for an empty ``names`` (``None`` is all of them; ``[]`` built all five too), or one name
            given as a string instead of a list of them; an ``out`` that is no ``str`` or ``os.PathLike`` (None); or
            an ``out`` holding another dataset (a manifest of another family; nothing there is touched).
    """
    from gnplace.datasets import graph_summary, write_manifest
    from gnplace.graph_io import save_graph

    if names is not None and (not names or isinstance(names, str)):
        from gnplace.exceptions import InvalidArgument

        if isinstance(names, str):  # its letters were taken for names: "unknown real model 'g'"
            raise InvalidArgument(f"write_real_dataset: names must be a list of model names, got {names!r} (give "
                                  f"[{names!r}])")
        raise InvalidArgument("write_real_dataset: names is empty; give model names, or None for all of them")
    names = list(REAL_MODELS) if names is None else names
    for name in names:
        _check_model(name)
    names = list(dict.fromkeys(names))  # a name given twice is built once (it was built and listed twice)
    _check_optimizer(optimizer)  # it was refused by the importer, after ``out`` was made and a model built
    from gnplace.limits import as_path

    out = as_path(out, "dataset folder")  # None was pathlib's TypeError
    if (out / "manifest.json").exists():  # another dataset's manifest was replaced without a word
        from gnplace.datasets import load_manifest
        from gnplace.exceptions import InvalidArgument

        family = load_manifest(out).get("family")
        if family != "real":
            raise InvalidArgument(f"{out}: holds the {family!r} dataset (its manifest.json), which the real models' "
                                  "manifest would replace: write them into another folder")
    out.mkdir(parents=True, exist_ok=True)
    entries = []
    for name in names:
        for importer in REAL_MODELS[name].importers:
            start = time.perf_counter()
            if importer == "torch":
                graph = real_graph(name, optimizer=optimizer)
            else:
                graph = real_onnx_graph(name, optimizer=optimizer)
            seconds = time.perf_counter() - start
            path = save_graph(graph, out / f"{graph.name}.gnpg")
            entries.append({"file": path.name, "family": "real", **graph_summary(graph),
                            "knobs": graph.meta["knobs"], "split": "test"})
            if progress is not None:
                progress(path.name, graph, seconds)
    return write_manifest(out, family="real", seed=0, optimizer=optimizer, entries=entries)
