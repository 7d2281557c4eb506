"""Training graphs from PyTorch modules: ``from_module(module, example_inputs) -> OpGraph``.

:func:`import_step` returns the graph together with the recorded step and the map from each
recorded op to its node (:class:`ImportedStep`), for code that must run the step op by op on the
devices a placement gives each node.

The training step (forward, loss, backward) is recorded op by op (:mod:`gnplace.importers.trace`),
then turned into an :class:`~gnplace.graph.OpGraph`:

* view-like ops (views, reshapes, transposes, detach, split outputs) are folded into the op that
  produced the data; ops that nothing of the step needs are dropped;
* an in-place write into a view (``y[:, 0] = 0``, and the backward's zeroing of that slice) is a node
  that every later reader of the tensor, or of a view of it, follows (its edges carry the tensor's bytes);
* FLOP per op come from :func:`~gnplace.importers.flops.op_flops`; an op type with no rule is
  counted at one FLOP per output element and listed once in a warning;
* output bytes from dtype and shape; edges carry the bytes of the tensor they pass;
* each user input becomes an ``input`` op; each trainable parameter gets one ``update`` op (the
  optimizer's update, fed by the parameter's gradient) that holds the parameter and its optimizer
  state (``param_bytes`` = parameter bytes x state factor: SGD 1, momentum 2, Adam 3; FLOP per
  element: 2, 4 and 10, Paleo's and the spec's figures);
* the colocation group of an op is the module call that ran it (gradient ops inherit it from their
  forward op through autograd), the update op joins the group of the parameter's first consumer;
  a parameter used by several groups (shared RNN weights, tied embeddings) is served to the others
  by a ``read`` op in its home group, so that using it elsewhere costs a transfer of its bytes.
"""

from __future__ import annotations

import math
import reprlib
import warnings
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np
import torch
from torch.utils._pytree import tree_flatten

from gnplace.exceptions import InvalidArgument, UnsupportedGraph
from gnplace.graph import BACKWARD, FORWARD, UPDATE, OpGraph
from gnplace.importers import OPTIMIZERS, check_optimizer
from gnplace.importers.flops import VIEW_OPS, op_flops
from gnplace.importers.trace import Ref, TrainingTrace, memory_owners, record_training_step, written_argument

__all__ = ["from_module", "import_step", "ImportedStep", "trace_to_graph", "OPTIMIZERS"]


@dataclass(frozen=True)
class ImportedStep:
    """A training graph with the recorded step it came from, and which node holds which op.

    Attributes:
        graph (OpGraph): the training graph (what :func:`from_module` returns).
        trace (TrainingTrace): the recorded step; :meth:`TrainingTrace.replay` runs it.
        node_of_op (Mapping[int, int]): trace op index -> graph node index: the node of every op
            that became one; a view op folded into its producer maps to the node that holds the
            data it shows (the producing op's, the ``input`` op's, or the update op of the
            parameter it views). Absent: ops the step does not need (nothing of the loss or the
            gradients reads them) and views of buffers or of constants, which have no node (run
            them where their consumer runs).
        update_node (Mapping[str, int]): parameter name -> its update node.
        read_node (Mapping[str, int]): parameter name -> its ``read`` node, for parameters used by
            several colocation groups.
        input_node (Mapping[int, int]): index of an input tensor among ``example_inputs`` flattened
            (``trace.inputs``: a dict or tuple of tensors is one entry a tensor) -> its ``input`` node, for
            the inputs the step reads.
        loss (callable | None): the loss function the step was recorded with (``None``: the module returned its
            loss); the recorded step computes it, whatever loss is given later.
    """

    graph: OpGraph
    trace: TrainingTrace
    node_of_op: Mapping[int, int]
    update_node: Mapping[str, int]
    read_node: Mapping[str, int]
    input_node: Mapping[int, int]
    loss: Callable[[Any], torch.Tensor] | None = field(default=None, compare=False)

    def __repr__(self) -> str:  # the trace's every op and the maps printed: 130,000 characters for a small transformer
        return f"ImportedStep(graph={self.graph!r}, trace={self.trace!r})"


def import_step(
    module: torch.nn.Module,
    example_inputs: tuple[Any, ...],
    *,
    loss: Callable[[Any], torch.Tensor] | None = None,
    optimizer: str = "sgd",
    name: str | None = None,
    meta: dict[str, Any] | None = None,
) -> ImportedStep:
    """Record one training step of ``module`` and build its graph, keeping the op-to-node map.

    :func:`from_module` returns ``import_step(...).graph``.

    Args:
        module (torch.nn.Module): the model.
        example_inputs (tuple): positional inputs of its forward (a lone tensor is one input); their
            shapes set the batch. The step also computes the gradient of each one with
            ``requires_grad``, as eager ``backward()`` does, and the graph holds those ops too.
        loss (callable, optional): maps the module's output to a scalar loss (default: the module
            returns its loss).
        optimizer (str, optional): ``"sgd"``, ``"momentum"``, ``"adam"`` or ``"adamw"`` (default: ``"sgd"``).
        name (str, optional): graph name (default: the module's class name).
        meta (dict, optional): facts to store with the graph.

    Raises:
        InvalidArgument: if ``module`` is no ``torch.nn.Module``, or ``example_inputs`` neither a tensor nor a
            tuple of inputs (a dict, None, a number, a string), or ``meta`` neither a dict nor None, or ``loss``
            neither callable nor None.
        UnsupportedGraph: if the step cannot be traced (the message names the failing op), or a parameter gets a
            sparse gradient (``nn.Embedding(sparse=True)``) and ``optimizer`` is ``"adam"`` or ``"adamw"``, whose
            torch classes refuse one.
        UnknownName: for an unknown optimizer (a ``ValueError``).

    Returns:
        ImportedStep: the graph, the recorded step and the maps between their ops and nodes.

    Examples:
        >>> import torch
        >>> step = import_step(torch.nn.Linear(4, 2), (torch.zeros(8, 4),), loss=lambda out: out.sum())
        >>> op = next(i for i, o in enumerate(step.trace.ops) if o.name == "addmm")
        >>> step.graph.node_names[step.node_of_op[op]], step.graph.node_names[step.update_node["weight"]]
        ('root/addmm', 'update/weight')
        >>> step.graph.op_kinds[step.input_node[0]]
        'input'
    """
    return _import(module, example_inputs, loss=loss, optimizer=optimizer, name=name, meta=meta)


def _import(
    module: torch.nn.Module,
    example_inputs: tuple[Any, ...],
    *,
    loss: Callable[[Any], torch.Tensor] | None,
    optimizer: str,
    name: str | None,
    meta: dict[str, Any] | None,
) -> ImportedStep:
    """:func:`import_step`, called by it and by :func:`from_module` (the warning names their caller's line)."""
    check_optimizer(optimizer)
    if not isinstance(module, torch.nn.Module):  # a str or None was an AttributeError ('named_modules')
        raise InvalidArgument(f"a training graph is recorded from a torch.nn.Module, got {reprlib.repr(module)}")
    if meta is not None and not isinstance(meta, Mapping):  # 3 was a TypeError from dict(), after the recording
        raise InvalidArgument("meta must be a dict of facts to store with the graph, or None, "
                              f"got {reprlib.repr(meta)}")
    _warn_of_hooks(module, stacklevel=4)
    trace = record_training_step(module, example_inputs, loss)
    step = _trace_to_step(trace, optimizer=optimizer, name=name or type(module).__name__, meta=meta, stacklevel=4)
    return replace(step, loss=loss)


#: The hooks of a module, by the attribute that holds them and the kind a warning names.
_HOOKS = {"_forward_pre_hooks": "forward pre-hook", "_forward_hooks": "forward hook",
          "_backward_pre_hooks": "backward pre-hook", "_backward_hooks": "backward hook"}


def hooks_of(module: torch.nn.Module) -> dict[tuple[str, str, int], str]:
    """The hooks registered on ``module``, its submodules and globally, but PyTorch's own (``weight_norm``'s).

    ``{(submodule, hook attribute, handle id): "a forward hook on '0'"}``: the keys tell one hook from another, the
    values name it in words. PyTorch's own hooks of ``weight_norm`` and ``spectral_norm`` compute into the step
    only, and are left out, as are gnplace's own (those a recording registers while it runs).
    """
    from torch.nn.modules import module as torch_module

    def own(hook: Any) -> bool:  # WeightNorm, SpectralNorm and their kin; the recording's scope hooks
        where = getattr(hook, "__module__", None) or type(hook).__module__
        return isinstance(where, str) and where.startswith(("torch.nn.utils.", "gnplace."))

    found: dict[tuple[str, str, int], str] = {}
    for path, mod in module.named_modules():
        for attribute, kind in _HOOKS.items():
            for key, hook in getattr(mod, attribute, {}).items():
                if not own(hook):
                    found[(path, attribute, key)] = f"a {kind} on {repr(path) if path else 'the module'}"
    for attribute, kind in _HOOKS.items():
        for key in getattr(torch_module, f"_global{attribute}", {}):
            found[("", f"_global{attribute}", key)] = (
                f"a global {kind} (torch.nn.modules.module.register_module_{kind.replace(' ', '_')})")
    return found


def _warn_of_hooks(module: torch.nn.Module, stacklevel: int) -> None:
    """Warn that the hooks registered on ``module`` (or on every module) run once, at the recording, not at each step.

    A hook runs as the step is recorded, on fake tensors: what it computes into the step is recorded as ops
    and runs at every placed step, but the hook itself never runs again, and what it keeps is a fake tensor
    (``acts.append(output.detach())`` left a ``FakeTensor`` in ``acts``, and nothing more after any step).
    PyTorch's own hooks of ``weight_norm`` and ``spectral_norm`` compute into the step only, and are not named.
    """
    found = list(dict.fromkeys(hooks_of(module).values()))  # one name per module and kind, in order
    if found:
        more = f" and {len(found) - 3} more" if len(found) > 3 else ""
        warnings.warn(
            f"hooks ran once, as the step was recorded, on fake tensors ({', '.join(found[:3])}{more}): the placed "
            "step runs what they computed into it, not the hooks themselves, and what a hook kept (an activation "
            "it stored) is a fake tensor", stacklevel=stacklevel)


def from_module(
    module: torch.nn.Module,
    example_inputs: tuple[Any, ...],
    *,
    loss: Callable[[Any], torch.Tensor] | None = None,
    optimizer: str = "sgd",
    name: str | None = None,
    meta: dict[str, Any] | None = None,
) -> OpGraph:
    """The training graph of one step of ``module`` on ``example_inputs``: ``import_step(...).graph``.

    Arguments, defaults and errors are those of :func:`import_step`.

    Examples:
        >>> import torch
        >>> class Net(torch.nn.Module):
        ...     def __init__(self):
        ...         super().__init__()
        ...         self.fc = torch.nn.Linear(4, 2)
        ...     def forward(self, x):
        ...         return self.fc(x).square().mean()
        >>> g = from_module(Net(), (torch.zeros(8, 4),))
        >>> "addmm" in g.op_types, int((g.phase == 2).sum()), g.num_groups
        (True, 2, 2)
    """
    return _import(module, example_inputs, loss=loss, optimizer=optimizer, name=name, meta=meta).graph


def _tensor_bytes(t: Any) -> int:
    """Bytes that ``t`` holds: its elements', or a sparse COO tensor's indices and values.

    A sparse COO tensor of ``nnz`` entries holds an int64 index per sparse dim of each entry and its values
    (``nnz`` times the dense dims): ``nn.Embedding(sparse=True)``'s gradient of a 50,000 x 64 table over a batch of
    4 x 8 tokens is 32 x (8 + 256) = 8,448 bytes, not the table's 12.8 MB. Its ``nnz`` is in the recorded shapes:
    aten's sparse embedding backward makes one entry per looked-up index, repeats included (uncoalesced), so it is
    the batch's token count whatever the tokens are, an upper bound on the rows the gradient touches.
    """
    if not isinstance(t, torch.Tensor):
        return 0
    if t.layout == torch.sparse_coo:
        entry = t.sparse_dim() * 8 + math.prod(t.shape[t.sparse_dim():]) * int(t.element_size())
        return int(t._nnz()) * int(entry)
    return int(t.numel()) * int(t.element_size())


def _written_bytes(name: str, args: tuple[Any, ...], whole: int) -> int:
    """Bytes an op writes: its outputs' (``whole``), or, of an op that writes rows of the tensor it returns, the rows.

    ``embedding_renorm_(weight, indices, ...)`` (``nn.Embedding(max_norm=...)``) returns its whole ``weight`` but
    rescales in place only the rows ``indices`` look up: at most one row per index, as its FLOP rule counts them
    (:mod:`gnplace.importers.flops`), and at most the table.
    """
    if name == "embedding_renorm_" and len(args) > 1 and isinstance(args[0], torch.Tensor) and args[0].dim() > 0:
        table, indices = args[0], args[1]
        rows = min(int(indices.numel()) if isinstance(indices, torch.Tensor) else 0, int(table.shape[0]))
        return min(whole, rows * _tensor_bytes(table) // max(int(table.shape[0]), 1))
    return whole


def _updated_numel(optimizer: str, param: torch.Tensor, grad: Any) -> int:
    """Elements of ``param`` that one step of ``optimizer`` updates: all of them, or those a sparse gradient holds.

    Plain SGD adds a sparse COO gradient (``nn.Embedding(sparse=True)``'s) into the parameter entry by entry
    (``param.add_(grad, alpha=-lr)``): its ``nnz`` entries times the dense dims, repeats included (aten's sparse
    embedding backward leaves them uncoalesced), at most the parameter. Optimizers with state update all of it
    (momentum decays its whole buffer; Adam takes no sparse gradient).
    """
    if optimizer == "sgd" and isinstance(grad, torch.Tensor) and grad.layout == torch.sparse_coo:
        entries = int(grad._nnz()) * math.prod(grad.shape[grad.sparse_dim():])
        return min(entries, int(param.numel()))
    return int(param.numel())


#: Optimizers of :data:`OPTIMIZERS` whose torch class refuses a sparse gradient: ``torch.optim.Adam`` and ``AdamW``
#: raise "Adam does not support sparse gradients" at their first step. ``SGD`` takes one, with momentum too (its
#: buffer then is a sparse tensor); checked by stepping each on ``nn.Embedding(sparse=True)``'s gradient (torch 2.x).
_DENSE_GRADIENTS_ONLY = frozenset({"adam", "adamw"})


def _check_sparse_gradient(optimizer: str, pname: str, grad: Any) -> None:
    """Refuse a sparse gradient (``nn.Embedding(sparse=True)``'s) for an optimizer whose torch class refuses one.

    Raises:
        UnsupportedGraph: if ``grad`` is a sparse COO tensor and ``optimizer`` is in :data:`_DENSE_GRADIENTS_ONLY`.
    """
    if optimizer in _DENSE_GRADIENTS_ONLY and isinstance(grad, torch.Tensor) and grad.layout == torch.sparse_coo:
        raise UnsupportedGraph(
            f"parameter {pname!r} gets a sparse gradient (an nn.Embedding or nn.EmbeddingBag with sparse=True), "
            f"which torch.optim's {'AdamW' if optimizer == 'adamw' else 'Adam'} refuses: train with optimizer 'sgd' "
            "or 'momentum', or build the module with sparse=False")


def trace_to_graph(
    trace: TrainingTrace, *, optimizer: str = "sgd", name: str = "graph", meta: dict[str, Any] | None = None
) -> OpGraph:
    """Turn a recorded training step into an :class:`OpGraph` (see the module docstring)."""
    return _trace_to_step(trace, optimizer=optimizer, name=name, meta=meta, stacklevel=3).graph


def _state_meta(
    trace: TrainingTrace, meta: dict[str, Any] | None, untrained_readers: dict[str, list[str]] | None = None
) -> dict[str, Any]:
    """``meta`` with what a ``device_map`` of the graph must also place or check (:mod:`gnplace.execute.device_map`).

    ``tied_parameters`` maps each tied parameter name to the parameter it shares (no update node of its
    own), ``untrained_state`` lists the persistent buffers and frozen parameters a ``device_map`` must
    place (:attr:`TrainingTrace.untrained_state`), ``untrained_readers`` names the forward nodes that read
    each buffer or frozen parameter (:func:`_untrained_readers`; the graph has no edge from such state);
    each is left out when empty, so a model without any keeps the meta it was given.
    """
    out = dict(meta or {})
    if trace.tied:
        out["tied_parameters"] = dict(trace.tied)
    if trace.untrained_state:
        out["untrained_state"] = list(trace.untrained_state)
    if untrained_readers:
        out["untrained_readers"] = dict(untrained_readers)
    return out


def _untrained_readers(
    trace: TrainingTrace, keep: list[int], inputs_of: list[list[Ref]], node_of_op: dict[int, int], names: list[str]
) -> dict[str, list[str]]:
    """The forward nodes reading each buffer or frozen parameter, by its name: ``{name: [node names]}``.

    An op reads it itself or through a view (views are folded, ``inputs_of`` is resolved). Left out: ops of a
    module every ``device_map`` hooks (:func:`_always_hooked`: a batch norm's reads of its running statistics),
    which read it on their own device; ops reading no tensor but such state (BERT's embeddings gather their
    token type ids by their position ids, two buffers of one module), which read one device where the module's
    state is kept together; and a ``copy_`` into it (a buffer the forward reassigned), which copies across
    devices. Empty for a model whose other ops read no such state (none of the shipped real models' do), so its
    meta stays as it was.
    """
    hooked = _always_hooked(trace)
    found: dict[str, list[str]] = {}
    for i in keep:
        op = trace.ops[i]
        if op.backward or op.call[0] in hooked or all(r.kind == "buffer" for r in inputs_of[i]):
            continue
        written = written_argument(op) if op.name == "copy_" else None
        for r in inputs_of[i]:
            if r.kind == "buffer" and r != written:
                readers = found.setdefault(r.name, [])
                if names[node_of_op[i]] not in readers:
                    readers.append(names[node_of_op[i]])
    return found


def _always_hooked(trace: TrainingTrace) -> set[str]:
    """Modules that every ``device_map`` hooks: those holding a trainable parameter and no state below them.

    All the state-dict entries under such a module (a ``Linear``, an ``Embedding``, a batch norm) are its own,
    on one device (:mod:`gnplace.execute.device_map` keeps a module's own state together), so a map names it
    or a module above it, and accelerate's hook moves its arguments and its buffers to its device.
    """
    owners = {name.rpartition(".")[0] for name in trace.params}
    above: set[str] = set()  # modules with state below them: "" and every proper prefix of a holder's path
    for name in [*trace.params, *trace.buffers, *trace.tied]:
        holder = name.rpartition(".")[0]
        if holder:
            above.add("")
            above.update(holder[:j] for j, char in enumerate(holder) if char == ".")
    return owners - above


def _trace_to_step(
    trace: TrainingTrace, *, optimizer: str = "sgd", name: str = "graph", meta: dict[str, Any] | None = None,
    stacklevel: int = 2,
) -> ImportedStep:
    """:func:`trace_to_graph`, keeping which node holds each trace op, parameter and input.

    ``stacklevel`` is that of the FLOP-rule warning (:func:`warnings.warn`): 2 names this
    function's caller.
    """
    state_factor, update_flops = OPTIMIZERS[optimizer]
    ops = trace.ops
    # ---- fold views: each op output resolves to the Ref of the data it shows
    resolved: dict[tuple[int, int], Ref] = {}

    def resolve(ref: Ref) -> Ref:
        if ref.kind != "op":
            return ref
        return resolved.get((ref.index, ref.output), ref)

    is_view = [op.name in VIEW_OPS for op in ops]
    for i, op in enumerate(ops):
        if is_view[i]:
            sources = [r for r in tree_flatten((op.args, op.kwargs))[0] if isinstance(r, Ref)]
            src = resolve(sources[0]) if sources else Ref("op", i, 0)
            for k in range(len(op.outputs)):
                resolved[(i, k)] = src
    # ---- keep the ops the loss and the gradients need
    needed = np.zeros(len(ops), dtype=bool)
    roots = [resolve(r) for r in trace.results()]
    stack = [r.index for r in roots if r.kind == "op"]
    inputs_of: list[list[Ref]] = []
    for op in ops:
        inputs_of.append([resolve(r) for r in tree_flatten((op.args, op.kwargs))[0] if isinstance(r, Ref)])
    after_writes = _writes_into_views(ops, is_view, resolve)
    while stack:
        i = stack.pop()
        if needed[i]:
            continue
        needed[i] = True
        stack.extend(r.index for r in inputs_of[i] if r.kind == "op" and not needed[r.index])
        stack.extend(w for w, _ in after_writes.get(i, ()) if not needed[w])
    keep = [i for i in range(len(ops)) if needed[i] and not is_view[i]]
    # ---- nodes
    names: list[str] = []
    op_types: list[str] = []
    phase: list[int] = []
    flops: list[float] = []
    out_bytes: list[int] = []
    param_bytes: list[int] = []
    modules: list[str] = []
    calls: list[tuple[str, int]] = []
    node_of_op: dict[int, int] = {}
    unknown: set[str] = set()
    counters: dict[str, int] = {}

    def add_node(
        label: str, kind: str, ph: int, fl: float, ob: int, pb: int, module: str, call: tuple[str, int]
    ) -> int:
        count = counters.get(label, 0)
        counters[label] = count + 1
        names.append(label if count == 0 else f"{label}_{count}")
        op_types.append(kind)
        phase.append(ph)
        flops.append(float(fl))
        out_bytes.append(int(ob))
        param_bytes.append(int(pb))
        modules.append(module)
        calls.append(call)
        return len(names) - 1

    input_nodes: dict[str, int] = {}
    partial_writes: set[int] = set()  # nodes that write part of the tensor they return (their out_bytes)
    for i in keep:
        op = ops[i]
        args, kwargs = _concrete_args(op, trace)
        fl = op_flops(op.name, args, kwargs, op.outputs)
        if fl is None:
            unknown.add(op.name)
            fl = float(sum(int(o.numel()) for o in op.outputs if isinstance(o, torch.Tensor)))
        path, _ = op.call
        prefix = ("grad/" if op.backward else "") + (path or "root")
        whole = sum(_tensor_bytes(o) for o in op.outputs)
        written = _written_bytes(op.name, args, whole)
        node_of_op[i] = add_node(f"{prefix}/{op.name}", op.name, BACKWARD if op.backward else FORWARD, fl,
                                 written, 0, path, op.call)
        if written < whole:
            partial_writes.add(node_of_op[i])
    for r in [r for i in keep for r in inputs_of[i]]:
        if r.kind == "input" and r.name not in input_nodes:
            x = trace.inputs[int(r.name)]
            input_nodes[r.name] = add_node(f"input/{r.name}", "input", FORWARD, 0.0, _tensor_bytes(x), 0, "", ("", 0))
    # ---- edges (merged per producer/consumer pair, bytes of the largest tensor passed)
    edge_bytes: dict[tuple[int, int], int] = {}
    param_users: dict[str, list[int]] = {}
    for i in keep:
        v = node_of_op[i]
        for r in inputs_of[i]:
            if r.kind == "op":
                if r.index not in node_of_op:
                    continue
                u = node_of_op[r.index]
                b = _tensor_bytes(ops[r.index].outputs[r.output])
                b = min(b, out_bytes[u]) if u in partial_writes else b
            elif r.kind == "input":
                u = input_nodes[r.name]
                b = out_bytes[u]
            elif r.kind == "param":
                param_users.setdefault(r.name, [])
                if v not in param_users[r.name]:
                    param_users[r.name].append(v)
                continue
            else:
                continue
            if u != v:
                edge_bytes[(u, v)] = max(edge_bytes.get((u, v), 0), b)
        for w, r in after_writes.get(i, ()):  # the tensor it reads, as the write into a view of it left it
            u = node_of_op[w]
            b = _tensor_bytes(_value(r, trace))
            if u in partial_writes:  # what it wrote in place (rows of a parameter, which its holder keeps)
                b = min(b, out_bytes[u])
            if u != v:
                out_bytes[u] = max(out_bytes[u], b)  # the write's node passes on the whole tensor, not its view
                edge_bytes[(u, v)] = max(edge_bytes.get((u, v), 0), b)
    # input ops belong to the call of their first consumer
    for u in input_nodes.values():
        consumers = sorted(v for (a, v) in edge_bytes if a == u)
        if consumers:
            calls[u] = calls[consumers[0]]
    # ---- update ops, and read ops for parameters shared across groups
    update_node: dict[str, int] = {}
    read_node: dict[str, int] = {}
    for pname, p in trace.params.items():
        pbytes = int(p.numel()) * int(p.element_size())
        users = param_users.get(pname, [])
        forward_users = [v for v in users if phase[v] == FORWARD] or users
        home = calls[min(forward_users)] if forward_users else ("", 0)
        module_path = pname.rsplit(".", 1)[0] if "." in pname else ""
        grad = trace.grads.get(pname)
        g = resolve(grad) if grad is not None else None
        grad_value = _value(g, trace) if g is not None and g.kind == "op" else None
        _check_sparse_gradient(optimizer, pname, grad_value)
        up = add_node(f"update/{pname}", f"{optimizer}_update", UPDATE,
                      update_flops * _updated_numel(optimizer, p, grad_value), 0, pbytes * state_factor, module_path,
                      home)
        update_node[pname] = up
        if g is not None and g.kind == "op" and g.index in node_of_op:
            u = node_of_op[g.index]
            edge_bytes[(u, up)] = max(edge_bytes.get((u, up), 0), min(pbytes, out_bytes[u]))
        away = [v for v in users if calls[v] != home]
        if away:
            rd = add_node(f"read/{pname}", "read", FORWARD, 0.0, pbytes, 0, module_path, home)
            read_node[pname] = rd
            for v in away:
                edge_bytes[(rd, v)] = pbytes
    if unknown:
        warnings.warn(
            f"FLOP rules do not know {len(unknown)} op types, counted at 1 FLOP per output element: "
            f"{', '.join(sorted(unknown))}",
            stacklevel=stacklevel,
        )
    call_ids: dict[tuple[str, int], int] = {}
    group = [call_ids.setdefault(c, len(call_ids)) for c in calls]
    pairs = sorted(edge_bytes)
    graph = OpGraph(
        names, pairs, flops=flops, out_bytes=out_bytes, param_bytes=param_bytes,
        edge_bytes=[edge_bytes[p] for p in pairs], op_types=op_types, phase=phase, group=group, module=modules,
        name=name, meta=_state_meta(trace, meta, _untrained_readers(trace, keep, inputs_of, node_of_op, names)),
    )
    # ---- views: the node that holds the data each one shows
    for i in range(len(ops)):
        if not is_view[i] or (i, 0) not in resolved:
            continue
        src = resolved[(i, 0)]
        if src.kind == "op" and src.index in node_of_op and src.index != i:
            node_of_op[i] = node_of_op[src.index]
        elif src.kind == "input" and src.name in input_nodes:
            node_of_op[i] = input_nodes[src.name]
        elif src.kind == "param" and src.name in update_node:
            node_of_op[i] = update_node[src.name]
    return ImportedStep(
        graph=graph,
        trace=trace,
        node_of_op=dict(sorted(node_of_op.items())),
        update_node=update_node,
        read_node=read_node,
        input_node={int(k): v for k, v in sorted(input_nodes.items(), key=lambda kv: int(kv[0]))},
    )


def _writes_into_views(
    ops: list[Any], is_view: list[bool], resolve: Callable[[Ref], Ref]
) -> dict[int, list[tuple[int, Ref]]]:
    """The writes into views that each op must follow: reader op -> ``[(write op, the tensor it reads)]``.

    An op that writes in place into a view (``y[:, 0] = 0`` is ``select`` then ``fill_``; backward formulas
    zero a slice so) changes the viewed tensor, but the recording ties the tensor's later readers to the op
    that made it: the write's result is the view alone. So each later op that reads the tensor, or a view of
    it, follows the write (the read tensor is given resolved, as the op's other inputs are). Split outputs
    are disjoint pieces: a write into one (LSTM cells activate their gate chunks in place,
    ``gates.unsafe_chunk(4)[0].sigmoid_()``) leaves the readers of the others alone, and readers of the
    write's own result, or of a later in-place result, follow it already. A write into a whole tensor is one
    too for a view of the tensor made before it (``v = h.view(-1); h.mul_(2); f(v)``: ``f`` reads ``h`` as
    written, though nothing reads the write's result), and so is a write into a parameter without grad for a
    view of it made before (the write is a node, the view's reader follows it). Writes into buffers are left
    out: no edge leaves a buffer.
    """
    written = [written_argument(op) for op in ops]

    def view_source(i: int) -> Ref | None:
        if not is_view[i]:
            return None
        return next((r for r in tree_flatten((ops[i].args, ops[i].kwargs))[0] if isinstance(r, Ref)), None)

    storage = memory_owners(ops, view_source, written)

    reads: dict[Ref, list[tuple[int, Ref, tuple[tuple[int, int], ...]]]] = {}  # tensor -> (reader, ref, pieces)
    for j, op in enumerate(ops):
        if is_view[j]:
            continue
        for ref in tree_flatten((op.args, op.kwargs))[0]:
            if isinstance(ref, Ref):
                base, pieces = storage(ref)
                if base.kind in ("op", "input", "param"):
                    reads.setdefault(base, []).append((j, ref, pieces))
    after: dict[int, list[tuple[int, Ref]]] = {}
    for w, target in enumerate(written):
        if not isinstance(target, Ref) or target.kind not in ("op", "input", "param"):
            continue
        base, pieces = storage(target)
        for j, ref, other in reads.get(base, ()):
            n = min(len(pieces), len(other))  # one piece inside the other: they share memory
            read = resolve(ref)
            if j > w and pieces[:n] == other[:n] and not (read.kind == "op" and read.index >= w):
                after.setdefault(j, []).append((w, read))
    return after


def _value(x: Any, trace: TrainingTrace) -> Any:
    """The (fake or real) tensor a :class:`Ref` names; anything else as it is."""
    if not isinstance(x, Ref):
        return x
    if x.kind == "op":
        return trace.ops[x.index].outputs[x.output]
    if x.kind == "param":
        return trace.params[x.name]
    if x.kind == "buffer":
        return trace.buffers[x.name]
    return trace.inputs[int(x.name)]


def _concrete_args(op: Any, trace: TrainingTrace) -> tuple[tuple[Any, ...], dict[str, Any]]:
    """The op's arguments with every :class:`Ref` replaced by the (fake or real) tensor it names."""
    from torch.utils._pytree import tree_map

    return tree_map(lambda x: _value(x, trace), op.args), tree_map(lambda x: _value(x, trace), op.kwargs)
