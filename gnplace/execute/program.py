"""A recorded training step as a picklable program, and where each of its ops runs under a placement.

:func:`~gnplace.execute.compiler.compile_step` turns an :class:`~gnplace.importers.torch.ImportedStep` into a
:class:`Program`: the aten ops the loss and the gradients need, in recorded (topological) order, each naming the
graph node that holds it, its arguments with tensors replaced by :class:`~gnplace.importers.trace.Ref`,
and the shape, dtype and bytes of its outputs. Ops are named by their qualified aten name, so a
program crosses process boundaries (``torch.distributed`` ranks receive it pickled).

:meth:`Program.plan` maps a placement of the graph to a :class:`Plan`: the device of every op and of
every parameter and input, and every tensor that crosses devices (from which device, to which, and
after which op). The rules:

* an op that became a graph node runs on its node's device; a view (folded into its producer in the
  graph) runs where its first consumer runs, so that only the data it shows crosses devices, once,
  as the simulator charges it;
* an in-place op runs where the tensor it writes lives, so that aliasing is kept; a tensor written through a
  view of it and read afterwards (``y[:, 0] = v; f(y)``) is copied as written, on the write's device, for its
  later readers (:mod:`gnplace.execute.compiler` makes that copy);
* an op with no node (a view of a buffer or of a constant) runs where its first consumer runs;
* a parameter lives on the device of its update node (it is updated there); an input on the device
  of its input node; buffers and constants are copied to whichever device uses them;
* a tensor crosses to another device once per consuming device, right after the op that makes it
  (parameters and inputs before the first op); each gradient crosses to its parameter's device.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import Any, TypeVar, cast

import numpy as np
import torch
from torch.utils._pytree import tree_flatten

from gnplace.exceptions import ExecutionFailed, InvalidPlacement
from gnplace.execute.memory import Ledger
from gnplace.execute.optim import state_bytes
from gnplace.importers.trace import Ref, recorded_default_dtype
from gnplace.placement import check_whole_devices
from gnplace.units import counted

__all__ = [
    "ProgramOp", "Program", "Plan", "resolve_aten", "refs_in", "shared_source", "storage_of", "storage_in",
    "under_recorded_default_dtype", "REDUCED_IN_STORAGE", "READY_WINDOW", "in_recorded_order", "next_ready",
]

#: Where a value is made before the first op (parameters and inputs): its "op index" in a plan.
BEFORE = -1

#: How many of its next ops a rank of the distributed executor looks through for one that is ready.
READY_WINDOW = 64

#: Losses whose 0-d result (reduction mean or sum) torch leaves in the storage of the elementwise losses it reduced,
#: of the broadcast input's size (:meth:`Program.made_bytes`).
REDUCED_IN_STORAGE = frozenset({
    "aten.mse_loss.default", "aten.smooth_l1_loss.default", "aten.soft_margin_loss.default",
    "aten.binary_cross_entropy.default",
})


@dataclass(frozen=True)
class ProgramOp:
    """One op of a :class:`Program`.

    Attributes:
        target (str): qualified aten overload, e.g. ``"aten.convolution.default"``.
        args (Any): positional arguments, tensors of the step replaced by :class:`Ref`.
        kwargs (dict): keyword arguments, likewise.
        node (int): the graph node that holds the op, -1 for none.
        mutates (Ref | None): the argument an in-place op writes, else ``None``.
        out_shapes (list): shape of each flattened output (``None`` for a non-tensor output).
        out_dtypes (list): dtype of each flattened output (``None`` for a non-tensor output).
        out_bytes (int): bytes of the op's tensor outputs (0 for a view, which shares its source's storage).
        is_view (bool): whether the op only re-describes its input's memory (a view, a reshape, detach).
        writes_buffers (tuple[str, ...]): the buffers the op updates in place (batch norm's running
            statistics and batch count, in training).
        out_lazy (tuple): per flattened output, ``(conjugate bit, negative bit)`` as recorded (``conj()``
            and ``_neg_view`` only mark a tensor): a tensor crossing ranks arrives marked so again.
        out_strides (tuple): per flattened output, its strides as recorded (``None`` for a non-tensor output): a
            tensor crossing ranks arrives laid out so (a transposed one transposed), where the strides are a
            permutation of a contiguous tensor's; empty for a program compiled before they were kept.
        backward (bool): whether the op ran in the recorded backward pass (a gradient's op, a checkpointed segment's
            recomputation); the others are the forward and the loss, which a call that computes no gradient runs
            alone (:meth:`Program.forward_only`). :obj:`False` in a program compiled before it was kept.
        reads (tuple[Ref, ...]): every :class:`Ref` in ``args`` and ``kwargs``, in order (worked out once).
    """

    target: str
    args: Any
    kwargs: dict[str, Any]
    node: int
    mutates: Ref | None
    out_shapes: list[tuple[int, ...] | None]
    out_dtypes: list[torch.dtype | None]
    out_bytes: int
    is_view: bool = False
    writes_buffers: tuple[str, ...] = ()
    out_lazy: tuple[tuple[bool, bool], ...] = ()
    out_strides: tuple[tuple[int, ...] | None, ...] = ()
    backward: bool = False
    reads: tuple[Ref, ...] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "reads", tuple(refs_in((self.args, self.kwargs))))

    def __getstate__(self) -> dict[str, Any]:
        """The fields, without what an executor keeps on the op for itself (its argument makers).

        A ``torch.memory_format`` argument (``ones_like``'s ``preserve_format``) goes by name:
        ``torch.save``'s pickle protocol cannot hold one, so a placed module could not be saved whole.
        """
        state = {k: v for k, v in self.__dict__.items() if not k.startswith("_")}
        state["args"], state["kwargs"] = _swap_formats((state["args"], state["kwargs"]), to_names=True)
        return state

    def __setstate__(self, state: dict[str, Any]) -> None:
        """Restore the fields :meth:`__getstate__` kept, memory formats by name back to themselves."""
        state = dict(state)
        state["args"], state["kwargs"] = _swap_formats((state["args"], state["kwargs"]), to_names=False)
        self.__dict__.update(state)


@dataclass(frozen=True)
class _FormatName:
    """A ``torch.memory_format`` by its name (``"preserve_format"``), as pickled."""

    name: str


def _swap_formats(value: Any, *, to_names: bool) -> Any:
    """``value`` with each ``torch.memory_format`` as a :class:`_FormatName`, or each back (``to_names=False``)."""
    from torch.utils._pytree import tree_map

    def one(x: Any) -> Any:
        if to_names and isinstance(x, torch.memory_format):
            return _FormatName(str(x).rpartition(".")[2])
        if not to_names and isinstance(x, _FormatName):
            return getattr(torch, x.name)
        return x

    return tree_map(one, value)


@functools.cache
def resolve_aten(target: str) -> Any:
    """The aten overload a qualified name names, e.g. ``resolve_aten("aten.mm.default")``.

    Raises:
        ExecutionFailed: if this torch has no such op.

    Examples:
        >>> resolve_aten("aten.mm.default") is torch.ops.aten.mm.default
        True
    """
    try:
        namespace, name, overload = target.split(".")
        return getattr(getattr(getattr(torch.ops, namespace), name), overload)
    except (ValueError, AttributeError, RuntimeError) as err:
        raise ExecutionFailed(f"this torch has no op {target!r}: record the step with the torch that runs it") from err


def refs_in(value: Any) -> list[Ref]:
    """Every :class:`Ref` inside ``value`` (nested lists, tuples and dicts), in order."""
    return [x for x in tree_flatten(value)[0] if isinstance(x, Ref)]


@dataclass
class Plan:
    """Where every op, parameter and input of a :class:`Program` runs under one placement.

    Attributes:
        op_device (np.ndarray): device index of every op, ``[num_ops]``.
        param_device (dict[str, int]): device of each parameter (its update node's).
        input_device (dict[int, int]): device of each example input (its input node's).
        moves (dict[int, list[tuple[Ref, int, int]]]): after op ``i`` (or :data:`BEFORE` the first
            op), the tensors that cross devices: ``(ref, source device, destination device)``.
        grad_moves (list[tuple[str, Ref, int, int]]): gradients that cross to their parameter's
            device after the last op: ``(parameter, ref, source device, destination device)``.
        last_use (dict[Ref, int]): index of the last op that reads each value (``num_ops`` for
            values read after the step: the loss and the gradients).
        value_device (dict[Ref, int]): the device each op output, parameter and input is made on.
        frees (dict[int, list[tuple[Ref, int]]]): after op ``i`` (or :data:`BEFORE` the first op, once its
            moves are made), the copies the local executor drops: ``(ref, device)``, each copy after the last
            op on its own device that reads it, the one on the value's own device not before the value's
            sends (so a value made for another device alone leaves its maker's right after it is sent); the
            loss and the gradients are held to the end.
    """

    op_device: np.ndarray
    param_device: dict[str, int]
    input_device: dict[int, int]
    moves: dict[int, list[tuple[Ref, int, int]]] = field(default_factory=dict)
    grad_moves: list[tuple[str, Ref, int, int]] = field(default_factory=list)
    last_use: dict[Ref, int] = field(default_factory=dict)
    value_device: dict[Ref, int] = field(default_factory=dict)
    frees: dict[int, list[tuple[Ref, int]]] = field(default_factory=dict)

    def __repr__(self) -> str:  # every op's device and every value's last use ran to 41,000 characters
        used = sorted({int(d) for d in self.op_device.tolist()})
        return f"Plan(ops={len(self.op_device)}, devices={used}, moves={self.num_moves})"

    def __setstate__(self, state: dict[str, Any]) -> None:
        """Restore a pickled plan (a saved placed module's); one pickled before :attr:`frees` frees as it then did.

        That is each copy of a value at the value's last use anywhere, so that a module saved before still runs.
        """
        self.__dict__.update(state)
        if "frees" in state:
            return
        copies: dict[Ref, set[int]] = {}
        for moves in self.moves.values():
            for ref, _, dst in moves:
                copies.setdefault(ref, set()).add(dst)
        self.frees = {}
        for ref, i in self.last_use.items():
            if i < len(self.op_device):  # the loss and the gradients (last used after the step) are held
                for d in sorted({self.value_device.get(ref, -1), *copies.get(ref, ())} - {-1}):
                    self.frees.setdefault(i, []).append((ref, d))

    @property
    def num_moves(self) -> int:
        """Tensors that cross devices in one step (gradients included)."""
        return sum(len(v) for v in self.moves.values()) + len(self.grad_moves)


@dataclass
class Program:
    """One training step as a list of aten ops with the nodes of a graph that hold them (see the module docstring).

    Attributes:
        ops (list[ProgramOp]): the ops, in recorded order (a topological order).
        params (dict[str, torch.Tensor]): initial value of each trainable parameter.
        buffers (dict[str, torch.Tensor]): buffers (running statistics ...).
        inputs (list[torch.Tensor]): the example inputs.
        loss (Ref): the loss.
        grads (dict[str, Ref | None]): each parameter's gradient.
        param_node (dict[str, int]): each parameter's update node.
        input_node (dict[int, int]): each read input's node.
        num_nodes (int): nodes of the graph the program belongs to.
        graph_name (str): that graph's name.
        input_grads (dict[int, Ref | None]): the gradient of each input recorded with ``requires_grad``.
        buffer_alias (dict[Ref, str]): op results that are a buffer itself (an in-place write's result,
            a whole view of it), by buffer name: the local executor reads them as the buffer.
        graph_digest (str): the graph's :attr:`~gnplace.placement.GraphKey.digest` (its op names and
            edges), so that a timer refuses another graph of as many nodes; ``""``: not known.
        optimizer (str): the optimizer the graph's update nodes name (``"sgd"``, ``"momentum"``, ``"adam"``,
            ``"adamw"``): the update the executors run on each parameter, whose state they keep and count
            on its device (:mod:`gnplace.execute.optim`).
        default_dtype (torch.dtype | None): torch's default dtype when the step was recorded, where one of its ops
            makes a floating tensor of it (``torch.ones(n)``, an integer tensor divided); the executors run the
            step under it. ``None``: no op reads it.
    """

    ops: list[ProgramOp]
    params: dict[str, torch.Tensor]
    buffers: dict[str, torch.Tensor]
    inputs: list[torch.Tensor]
    loss: Ref
    grads: dict[str, Ref | None]
    param_node: dict[str, int]
    input_node: dict[int, int]
    num_nodes: int
    graph_name: str = "graph"
    input_grads: dict[int, Ref | None] = field(default_factory=dict)
    buffer_alias: dict[Ref, str] = field(default_factory=dict)
    graph_digest: str = ""
    optimizer: str = "sgd"
    default_dtype: torch.dtype | None = None

    def __len__(self) -> int:
        return len(self.ops)

    def __repr__(self) -> str:  # every op and tensor printed: 130,000 characters for a small transformer
        return (f"Program(graph={self.graph_name!r}, ops={len(self.ops)}, params={len(self.params)}, "
                f"buffers={len(self.buffers)}, inputs={len(self.inputs)}, optimizer={self.optimizer!r})")

    def results(self) -> list[Ref]:
        """What the step hands back: the loss, then every parameter's and input's gradient that exists."""
        return [self.loss, *[g for g in (*self.grads.values(), *self.input_grads.values()) if g is not None]]

    def forward_only(self, plan: Plan) -> tuple[Program, Plan] | None:
        """The step's forward and loss alone, with their plan: what a call that computes no gradient runs.

        The ops that did not run in the recorded backward (:attr:`ProgramOp.backward`), renumbered, on the devices
        ``plan`` gives them (so each computes as in the whole step: the same loss, the same buffer updates, the same
        random draws in the same order), the loss its only result (no gradient); what crosses devices and when each
        copy is freed are worked out for these ops alone (:meth:`plan_on`).

        Args:
            plan (Plan): the whole step's plan (:meth:`plan`).

        Returns:
            The forward program and its plan; ``None`` where the ops left would read what only the backward makes
            (no such step is known) or there is no backward to leave out, as in a program compiled before
            :attr:`ProgramOp.backward` was kept: then the whole step runs.
        """
        kept = [i for i, op in enumerate(self.ops) if not op.backward]
        if len(kept) == len(self.ops):
            return None
        index = {old: new for new, old in enumerate(kept)}

        def one(ref: Ref) -> Ref:
            return Ref("op", index[ref.index], ref.output) if ref.kind == "op" else ref

        wanted = [self.loss, *(ref for i in kept for ref in self.ops[i].reads)]
        wanted += [op.mutates for op in (self.ops[i] for i in kept) if op.mutates is not None]
        if any(ref.kind == "op" and ref.index not in index for ref in wanted):
            return None
        from torch.utils._pytree import tree_map

        def renumbered(value: Any) -> Any:
            return tree_map(lambda x: one(x) if isinstance(x, Ref) else x, value)

        ops = [replace(op, args=renumbered(op.args), kwargs=renumbered(op.kwargs),
                                   mutates=one(op.mutates) if op.mutates is not None else None)
               for op in (self.ops[i] for i in kept)]
        forward = replace(
            self, ops=ops, loss=one(self.loss), grads={}, input_grads={},
            buffer_alias={one(ref): name for ref, name in self.buffer_alias.items()
                          if ref.kind != "op" or ref.index in index},
        )
        return forward, forward.plan_on(plan.op_device[kept].copy(), dict(plan.param_device), dict(plan.input_device))

    def node_devices(self, placement: Any) -> np.ndarray:
        """``placement`` (a Placement or device index per node) as an int array ``[num_nodes]``.

        Raises:
            InvalidPlacement: if it does not give one whole device index to every node of the program's graph.
        """
        given = np.asarray(getattr(placement, "devices", placement))
        check_whole_devices(given)  # a cast would cut 0.7 to device 0
        if given.ndim != 1 or given.shape[0] != self.num_nodes:
            got = counted(given.shape[0], "device") if given.ndim == 1 else f"shape {given.shape}"
            raise InvalidPlacement(f"placement has {got}, the graph {self.graph_name!r} has "
                                   f"{counted(self.num_nodes, 'node')}")
        devices = given.astype(np.int64)  # whole numbers (check_whole_devices refused names, None, booleans)
        if devices.size and devices.min() < 0:
            raise InvalidPlacement("placement names a negative device index")
        return devices

    def plan(self, placement: Any) -> Plan:
        """Where each op runs and which tensors cross devices under ``placement`` (see the module docstring)."""
        devices = self.node_devices(placement)
        n = len(self.ops)
        param_device = {k: int(devices[v]) for k, v in self.param_node.items()}
        input_device = {k: int(devices[v]) for k, v in self.input_node.items()}
        op_device = np.full(n, -1, dtype=np.int64)
        for i, op in enumerate(self.ops):
            if op.node >= 0:
                op_device[i] = devices[op.node]

        def home(ref: Ref) -> int:
            if ref.kind == "op":
                return int(op_device[ref.index])
            if ref.kind == "param":
                return param_device.get(ref.name, -1)
            if ref.kind == "input":
                return input_device.get(int(ref.name), -1)
            return -1  # a buffer: copied wherever it is used

        consumers: list[list[int]] = [[] for _ in range(n)]
        for i, op in enumerate(self.ops):
            for ref in op.reads:
                if ref.kind == "op":
                    consumers[ref.index].append(i)
        for i, op in enumerate(self.ops):  # a view is free: it runs where it is used, so only its source crosses
            if op.is_view and consumers[i]:
                op_device[i] = -1
        for _ in range(2):  # in-place ops follow what they write; views and ops with no node, their first consumer
            for i, op in enumerate(self.ops):
                if op.mutates is not None and home(op.mutates) >= 0:
                    op_device[i] = home(op.mutates)
            for i in range(n - 1, -1, -1):
                if op_device[i] < 0:
                    placed = [int(op_device[j]) for j in consumers[i] if op_device[j] >= 0]
                    if placed:
                        op_device[i] = placed[0]
        fallback = int(devices[0]) if devices.size else 0
        op_device[op_device < 0] = fallback
        return self.plan_on(op_device, param_device, input_device)

    def plan_on(self, op_device: np.ndarray, param_device: dict[str, int], input_device: dict[int, int]) -> Plan:
        """The :class:`Plan` of ops, parameters and inputs already given their devices: what crosses, what is freed.

        :meth:`plan` gives them their devices by the rules of the module docstring, then calls this.

        Args:
            op_device (np.ndarray): device index of every op, ``[num_ops]``.
            param_device (dict[str, int]): device of each parameter.
            input_device (dict[int, int]): device of each input read.
        """
        n = len(self.ops)
        plan = Plan(op_device, param_device, input_device)
        for name, d in param_device.items():
            plan.value_device[Ref("param", name=name)] = d
        for k, d in input_device.items():
            plan.value_device[Ref("input", name=str(k))] = d
        for i, op in enumerate(self.ops):
            for k, shape in enumerate(op.out_shapes):
                if shape is not None:
                    plan.value_device[Ref("op", i, k)] = int(op_device[i])
        seen: set[tuple[Ref, int]] = set()
        last_here: dict[tuple[Ref, int], int] = {}  # (value, device) -> the last op there that reads or sends it
        for i, op in enumerate(self.ops):
            d = int(op_device[i])
            for ref in op.reads:
                plan.last_use[ref] = i
                last_here[(ref, d)] = i
                src = plan.value_device.get(ref, -1)
                if src < 0 or src == d or (ref, d) in seen:
                    continue
                seen.add((ref, d))
                after = ref.index if ref.kind == "op" else BEFORE
                plan.moves.setdefault(after, []).append((ref, src, d))
                # sent right after it is made: its maker's copy is needed no later than that, and its own reads
                last_here[(ref, src)] = max(last_here.get((ref, src), BEFORE), after)
        for ref in self.results():
            plan.last_use[ref] = n
        held = set(self.results())
        for (ref, d), i in last_here.items():
            if ref not in held:
                plan.frees.setdefault(i, []).append((ref, d))
        for name, grad_ref in self.grads.items():
            if grad_ref is None or name not in param_device:
                continue
            src = plan.value_device.get(grad_ref, param_device[name])
            # a gradient an op on its parameter's device reads, or one two parameters there share, crosses once
            if src != param_device[name] and (grad_ref, param_device[name]) not in seen:
                seen.add((grad_ref, param_device[name]))
                plan.grad_moves.append((name, grad_ref, src, param_device[name]))
        return plan

    def value_bytes(self, ref: Ref) -> int:
        """Bytes of the tensor ``ref`` names (an op output, a parameter or an input)."""
        if ref.kind == "op":
            op = self.ops[ref.index]
            shape, dtype = op.out_shapes[ref.output], op.out_dtypes[ref.output]
            if shape is None or dtype is None:
                return 0
            return int(np.prod(shape, dtype=np.int64)) * torch.empty(0, dtype=dtype).element_size()
        if ref.kind == "param":
            p = self.params[ref.name]
            return int(p.numel()) * int(p.element_size())
        if ref.kind == "input":
            x = self.inputs[int(ref.name)]
            return int(x.numel()) * int(x.element_size()) if isinstance(x, torch.Tensor) else 0
        return 0

    def made_bytes(self, ref: Ref) -> int:
        """Bytes of the storage torch makes op output ``ref`` in (one that is no view or in-place result).

        Its own bytes (:meth:`value_bytes`), but the span its recorded strides cover where they leave gaps or
        overlap, and for a loss whose 0-d result torch leaves in the storage of the elementwise losses it reduced
        (:data:`REDUCED_IN_STORAGE`): ``mse_loss`` of a ``[32, 64, 16]`` batch holds 131,072 bytes for its
        4-byte mean (torch 2.4-2.13, CPU).
        """
        op = self.ops[ref.index]
        shape, dtype = op.out_shapes[ref.output], op.out_dtypes[ref.output]
        if shape is None or dtype is None:
            return 0
        size = torch.empty(0, dtype=dtype).element_size()
        stride = op.out_strides[ref.output] if ref.output < len(op.out_strides) else None
        made = self.value_bytes(ref)
        if stride is not None and made:
            made = (1 + sum((n - 1) * abs(s) for n, s in zip(shape, stride))) * size
        if op.target in REDUCED_IN_STORAGE and shape == ():
            schema = resolve_aten(op.target)._schema
            position = next(k for k, a in enumerate(schema.arguments) if a.name == "reduction")
            reduction = op.args[position] if position < len(op.args) else op.kwargs.get("reduction", 1)
            shapes = [self.value_shape(x) for x in op.args[:2] if isinstance(x, Ref)]
            if reduction and len(shapes) == 2 and None not in shapes:
                made = max(made, int(np.prod(torch.broadcast_shapes(*shapes), dtype=np.int64)) * size)
        return int(made)

    def value_shape(self, ref: Ref) -> tuple[int, ...] | None:
        """Shape of the tensor ``ref`` names (an op output, a parameter, an input), ``None`` for anything else."""
        if ref.kind == "op":
            return self.ops[ref.index].out_shapes[ref.output]
        if ref.kind == "param":
            return tuple(self.params[ref.name].shape)
        if ref.kind == "input":
            x = self.inputs[int(ref.name)]
            return tuple(x.shape) if isinstance(x, torch.Tensor) else None
        if ref.kind == "buffer":
            return tuple(self.buffers[ref.name].shape)
        return None

    def sent_as_copy(self, ref: Ref) -> bool:
        """Whether the distributed executor (:func:`~gnplace.execute.rank.run_rank`) sends ``ref`` as a copy.

        A tensor whose storage an op of the step writes in place (the message would read the write), and one whose
        memory has gaps or overlaps (a slice, an ``expand``: its recorded strides are no permutation of a contiguous
        tensor's), which gloo and NCCL send only contiguous.
        """
        if storage_of(self, ref) in self.written_storages:
            return True
        if ref.kind == "op":
            op = self.ops[ref.index]
            shape = op.out_shapes[ref.output]
            stride = op.out_strides[ref.output] if ref.output < len(op.out_strides) else None
        elif ref.kind in ("param", "input"):
            tensor = self.params[ref.name] if ref.kind == "param" else self.inputs[int(ref.name)]
            shape, stride = tuple(tensor.shape), tuple(tensor.stride())
        else:
            return False
        if shape is None or stride is None:
            return False
        order = sorted(range(len(shape)), key=lambda d: (-stride[d], d))
        return not torch.empty_strided(shape, stride, device="meta").permute(order).is_contiguous()

    def state_bytes(self, name: str) -> int:
        """Bytes of the optimizer state parameter ``name`` has on its device (0 for SGD), beside the parameter."""
        return state_bytes(self.optimizer, self.value_bytes(Ref("param", name=name)))

    @functools.cached_property
    def written_storages(self) -> frozenset[Ref]:
        """The tensors whose memory an op of the step writes in place (through its views and in-place results too)."""
        return frozenset(storage_of(self, op.mutates) for op in self.ops if op.mutates is not None)

    def input_copy(self, k: int, device: torch.device) -> Any:
        """Input ``k`` on ``device`` for one run of the step: a copy where an op of the step writes it in place.

        ``.to`` hands back the tensor itself on its own device, and the write then changed the recorded input, run
        after run.
        """
        x = self.inputs[k]
        if not isinstance(x, torch.Tensor):
            return x
        return x.to(device, copy=Ref("input", name=str(k)) in self.written_storages)

    def buffers_read(self, index: int, *, aliases: bool = True) -> list[str]:
        """Names of the buffers op ``index`` reads, each once.

        ``Ref("buffer")`` arguments, and (``aliases``) op results that are a buffer (:attr:`buffer_alias`),
        which the local executor reads as the buffer.
        """
        names = []
        for ref in self.ops[index].reads:
            name = ref.name if ref.kind == "buffer" else (self.buffer_alias.get(ref) if aliases else None)
            if name is not None and name not in names:
                names.append(name)
        return names

    def buffer_bytes(self, name: str) -> int:
        """Bytes of buffer ``name``."""
        b = self.buffers[name]
        return int(b.numel()) * int(b.element_size())

    def buffer_moves(self, plan: Plan) -> list[tuple[str, int, int, int, int]]:
        """The buffer updates that cross ranks in the distributed executor, in recorded order.

        Each entry is ``(buffer, after op, source, destination, first reader)``. Each rank keeps its own
        copy of a buffer, so an op reading a buffer that an op on another device updated since (batch
        norm's running statistics, read after the update) needs that value: it crosses after the last
        update, once per device that reads it before the next one. The local executor brings it at the
        read instead (:func:`~gnplace.execute.runner.run_step`).
        """
        moves: list[tuple[str, int, int, int, int]] = []
        fresh: dict[str, set[int]] = {}  # buffer -> devices whose copy holds the latest update
        last: dict[str, tuple[int, int]] = {}  # buffer -> (op, device) of its latest update
        for i, op in enumerate(self.ops):
            d = int(plan.op_device[i])
            for name in self.buffers_read(i, aliases=False):
                if name in last and d not in fresh[name]:
                    writer, src = last[name]
                    moves.append((name, writer, src, d, i))
                    fresh[name].add(d)
            for name in op.writes_buffers:
                last[name], fresh[name] = (i, d), {d}
        return moves

    def deliveries(self, plan: Plan) -> list[tuple[Ref, int, int]]:
        """The copies the local executor makes after the last op, in order: ``(ref, source, destination)``.

        Each parameter's gradient goes to the parameter's device, then each input's gradient to the
        input's device; a gradient already there (crossed for an op, or for another parameter) is not
        copied again.
        """
        there = {(ref, dst) for moves in plan.moves.values() for ref, _, dst in moves}
        targets = [(ref, plan.param_device.get(name)) for name, ref in self.grads.items()]
        targets += [(ref, plan.input_device.get(k, 0)) for k, ref in self.input_grads.items()]
        out = []
        for ref, target in targets:
            if ref is None or target is None:
                continue
            src = plan.value_device.get(ref, 0)
            if src != target and (ref, target) not in there:
                there.add((ref, target))
                out.append((ref, src, target))
        return out

    def rank_order(self, plan: Plan, rank: int, *, window: int = READY_WINDOW) -> list[int]:
        """The order in which a gloo rank of the distributed executor runs its ops under ``plan`` (op indices).

        Its ready queue (:func:`next_ready`): the first of its next ``window`` ops whose inputs are there, else its
        earliest op not yet run, for which it waits. Gloo's receives are seen to arrive only when waited for
        (:func:`~gnplace.execute.rank.run_rank`), so an op reading a tensor from another rank is ready only once an
        op run before it has read that tensor (or a buffer's update, its own reader): the order depends on the plan
        alone, not on the other ranks' pace. Over NCCL a receive can be seen arriving earlier, and a rank may then
        run such an op sooner than this order says.
        """
        ops = self.ops
        mine = [i for i in range(len(ops)) if int(plan.op_device[i]) == rank]
        arriving = {ref for moves in plan.moves.values() for ref, _, dst in moves if dst == rank}
        arriving |= {ref for _, ref, _, dst in plan.grad_moves if dst == rank}
        there = set(arriving)  # op outputs on this rank: received (their buffers posted at the start) or made
        updates = {(reader, name) for name, _, _, dst, reader in self.buffer_moves(plan) if dst == rank}

        def ready(i: int) -> bool:
            for ref in ops[i].reads:
                if ref in arriving or (ref.kind == "op" and ref not in there):
                    return False
                if ref.kind == "buffer" and (i, ref.name) in updates:
                    return False
            return True

        order: list[int] = []
        done = [False] * len(mine)
        first = 0
        while first < len(mine):
            pick = next_ready(ops, mine, done, first, ready, window)
            i = mine[pick]
            for ref in ops[i].reads:  # waited for as the op reads them
                arriving.discard(ref)
                updates.discard((i, ref.name))
            there.update(Ref("op", i, k) for k in range(len(ops[i].out_shapes)))
            order.append(i)
            done[pick] = True
            while first < len(mine) and done[first]:
                first += 1
        return order

    def peak_bytes(self, plan: Plan, num_devices: int, *, ranks: bool = False) -> np.ndarray:
        """Most bytes resident on each device during a step under ``plan``, ``[num_devices]``, without running it.

        The count the local executor keeps as it runs (:func:`~gnplace.execute.runner.run_step`), by
        storage (:class:`~gnplace.execute.memory.Ledger`): the parameters and their optimizer state
        (:meth:`state_bytes`) on their devices and each
        buffer's copy on each device that reads it, for the whole step; the inputs the step reads, on
        their devices; each op's new outputs, by the storage torch makes each in (:meth:`made_bytes`; a view or an
        in-place result shares the storage of what it shows or writes, so that storage stays while either is
        held); each copy on another device, made after the op that makes its value; each of these freed after
        the last op on its device that reads it (the value's own copy not before it is sent: :attr:`Plan.frees`),
        but the loss and the gradients, held to the end, where each gradient is copied to its parameter's device
        (:meth:`deliveries`).

        Args:
            plan (Plan): where everything runs (:meth:`plan`).
            num_devices (int): devices of the cluster.
            ranks (bool, optional): the count of the distributed executor instead
                (:func:`~gnplace.execute.rank.run_rank`, each rank running its ops in the order of its ready queue
                over gloo, :meth:`rank_order`, which may run a later op while an earlier one waits for a tensor):
                a rank holds the inputs it reads all step, has the buffer of every tensor it receives
                from the step's start, and frees an op's output after its own last use of it, or right after
                sending it where it has none; what the rank sends as a copy (:meth:`sent_as_copy`: where a later
                in-place op writes its storage, or its memory has gaps) is held as long as the output, and to the
                step's end for a parameter, an input, the loss or a gradient; a buffer's update from another rank
                has its receive buffer from the step's start (then the rank's copy of it), and the clone its rank
                sends is held to the step's end (default: :obj:`False`).

        Returns:
            np.ndarray: peak bytes per device, ``[num_devices]``.
        """
        ledger = Ledger(num_devices)
        for name, d in plan.param_device.items():
            ledger.hold(d, self.value_bytes(Ref("param", name=name)) + self.state_bytes(name))
        if ranks:
            self._walk_ranks(plan, ledger)
        else:
            self._walk_local(plan, ledger)
        return ledger.peak

    def _outputs(self, plan: Plan, ledger: Ledger, i: int) -> None:
        """Count op ``i``'s outputs on its device: new storages, or shares of what it views or writes."""
        op, d = self.ops[i], int(plan.op_device[i])
        source = shared_source(op)
        for k, shape in enumerate(op.out_shapes):
            if shape is None:
                continue
            ref = Ref("op", i, k)
            if op.out_bytes:
                ledger.make((ref, d), d, self.made_bytes(ref))
            elif source is not None:
                ledger.share((ref, d), (source, d))

    def _walk_local(self, plan: Plan, ledger: Ledger) -> None:
        """:meth:`peak_bytes` of the local executor: one walk over every op in recorded order."""
        copied: set[tuple[str, int]] = set()

        def cross(after: int) -> None:
            for ref, _, dst in plan.moves.get(after, ()):
                ledger.make((ref, dst), dst, self.value_bytes(ref))
            for ref, device in plan.frees.get(after, ()):  # (a parameter's copy on its device was never made)
                ledger.release((ref, device))

        for k, d in plan.input_device.items():
            ref = Ref("input", name=str(k))
            ledger.make((ref, d), d, self.value_bytes(ref))
        cross(BEFORE)
        for i in range(len(self.ops)):
            d = int(plan.op_device[i])
            for name in self.buffers_read(i):
                if (name, d) not in copied:
                    copied.add((name, d))
                    ledger.hold(d, self.buffer_bytes(name))
            self._outputs(plan, ledger, i)
            cross(i)
        for ref, _, dst in self.deliveries(plan):
            ledger.make((ref, dst), dst, self.value_bytes(ref))

    def _walk_ranks(self, plan: Plan, ledger: Ledger) -> None:
        """:meth:`peak_bytes` of the distributed executor: each rank's ops as it runs them (:meth:`rank_order`).

        The ranks' counts are apart (a device's bytes depend on its own ops alone), so the walk takes each rank's
        ops in turn.
        """
        keep = set(self.results())
        for k, d in plan.input_device.items():  # a rank holds the inputs it reads all step
            ledger.hold(d, self.value_bytes(Ref("input", name=str(k))))
        crossing = [(ref, src, dst) for moves in plan.moves.values() for ref, src, dst in moves]
        crossing += [(ref, src, dst) for _, ref, src, dst in plan.grad_moves]
        for ref, dst in dict.fromkeys((ref, dst) for ref, _, dst in crossing):  # posted when the step starts
            ledger.make((ref, dst), dst, self.value_bytes(ref))
        uses: dict[tuple[Ref, int], int] = {}
        for i, op in enumerate(self.ops):
            for ref in set(op.reads):
                key = (ref, int(plan.op_device[i]))
                uses[key] = uses.get(key, 0) + 1
        wires: dict[tuple[Ref, int], list[Any]] = {}  # an op output's copies on the wire, by the output's copy

        def send(moves: Any) -> None:  # a tensor written later, or with gaps, goes as a copy, one per destination
            for ref, src, dst in moves:
                if not self.sent_as_copy(ref):
                    continue
                if ref.kind == "op" and ref not in keep:  # let go with the output
                    ledger.make(("wire", ref, dst), src, self.value_bytes(ref))
                    wires.setdefault((ref, src), []).append(("wire", ref, dst))
                else:  # a parameter's, an input's, the loss's or a gradient's: waited for when the step ends
                    ledger.hold(src, self.value_bytes(ref))

        def release(key: tuple[Ref, int]) -> None:  # an op output's copy and what its sends hold of it
            ledger.release(key)
            for wire in wires.pop(key, ()):
                ledger.release(wire)

        # a buffer's copy on a rank, by (Ref("buffer"), rank): the results of in-place updates share it. Every update
        # from another rank has its receive buffer from the step's start, which becomes the rank's copy at its reader
        # (the copy before it let go); the rank that updates sends a clone, held to the step's end
        arriving: dict[tuple[int, str], Any] = {}
        clones: dict[int, list[tuple[str, int]]] = {}  # writer -> [(buffer, rank)]
        for k, (name, writer, src, dst, reader) in enumerate(self.buffer_moves(plan)):
            ledger.make(("buffer in", k), dst, self.buffer_bytes(name))
            arriving[(reader, name)] = ("buffer in", k)
            clones.setdefault(writer, []).append((name, src))
        send(plan.moves.get(BEFORE, ()))
        copied: set[tuple[str, int]] = set()
        ranks = sorted({int(d) for d in plan.op_device.tolist()})
        for i in [i for rank in ranks for i in self.rank_order(plan, rank)]:
            op = self.ops[i]
            d = int(plan.op_device[i])
            for name in self.buffers_read(i, aliases=False):
                key = (Ref("buffer", name=name), d)
                update = arriving.pop((i, name), None)
                if update is not None:
                    ledger.release(key)
                    ledger.share(key, update)
                    ledger.release(update)
                    copied.add((name, d))
                elif (name, d) not in copied:
                    copied.add((name, d))
                    ledger.make(key, d, self.buffer_bytes(name))
            self._outputs(plan, ledger, i)
            moves = plan.moves.get(i, ())
            send(moves)
            for name, src in clones.get(i, ()):
                ledger.hold(src, self.buffer_bytes(name))
            for ref in dict.fromkeys(ref for ref, _, _ in moves):  # made for other ranks alone: leaves once sent
                if (ref, d) not in uses and ref not in keep:
                    release((ref, d))
            for ref in set(op.reads):
                uses[(ref, d)] -= 1
                if uses[(ref, d)] == 0 and ref.kind == "op" and ref not in keep:
                    release((ref, d))
        send([(ref, src, dst) for _, ref, src, dst in plan.grad_moves])


def in_recorded_order(op: ProgramOp) -> bool:
    """Whether ``op`` runs in the recorded order on its rank, no later op passing it (see :func:`next_ready`).

    An in-place op, and one that reads or updates a buffer: batch norm's update of its running statistics is
    no marked in-place write, and a reader run before it read the statistic of before (a wrong loss); an update
    from another rank goes to the first reader in the recorded order.
    """
    return op.mutates is not None or bool(op.writes_buffers) or any(ref.kind == "buffer" for ref in op.reads)


def next_ready(
    ops: list[ProgramOp], mine: list[int], done: list[bool], first: int, ready: Callable[[int], bool],
    window: int = READY_WINDOW,
) -> int:
    """The position in ``mine`` of the op a rank of the distributed executor runs next (its ready queue).

    The first of its ops not yet run, from the earliest (``first``) and looking ``window`` ops ahead, that is
    ``ready`` (its inputs there), else the earliest itself (the rank then waits for its inputs); no op passes
    one that runs in the recorded order (:func:`in_recorded_order`).

    Args:
        ops (list[ProgramOp]): the program's ops.
        mine (list[int]): the rank's ops (indices into ``ops``), in recorded order.
        done (list[bool]): per position in ``mine``, whether the op has run.
        first (int): the position of the earliest op not yet run.
        ready (Callable[[int], bool]): whether the op of that index has every input there.
        window (int, optional): ops looked through (default: :data:`READY_WINDOW`).
    """
    if in_recorded_order(ops[mine[first]]):
        return first
    for k in range(first, min(len(mine), first + window)):
        if done[k]:
            continue
        if in_recorded_order(ops[mine[k]]):
            break  # nothing passes an in-place op or one that reads or updates a buffer
        if ready(mine[k]):
            return k
    return first


def shared_source(op: ProgramOp) -> Ref | None:
    """The value whose storage ``op``'s outputs share: what an in-place op writes, what a view shows; else ``None``."""
    if op.mutates is not None:
        return op.mutates
    if op.is_view and op.args and isinstance(op.args[0], Ref):
        return op.args[0]
    return None


def storage_of(program: Program, ref: Ref) -> Ref:
    """The tensor whose memory ``ref`` shares, followed back through views and in-place results to its maker."""
    return storage_in(program.ops, ref)


def storage_in(ops: list[ProgramOp], ref: Ref) -> Ref:
    """:func:`storage_of` in a list of ops (a program's, before it is one)."""
    while ref.kind == "op":
        source = shared_source(ops[ref.index])
        if source is None:
            break
        ref = source
    return ref


_Run = TypeVar("_Run", bound=Callable[..., Any])


def under_recorded_default_dtype(run: _Run) -> _Run:
    """Decorate an executor whose first argument is a :class:`Program`: it runs under the program's default dtype.

    A step recorded under ``torch.set_default_dtype(torch.float64)`` runs so in a process of float32 (a rank, a
    later call), and the caller's default dtype is put back after (:func:`recorded_default_dtype
    <gnplace.importers.trace.recorded_default_dtype>`).
    """

    @functools.wraps(run)
    def under(program: Program, *args: Any, **kwargs: Any) -> Any:
        with recorded_default_dtype(getattr(program, "default_dtype", None)):
            return run(program, *args, **kwargs)

    return cast(_Run, under)
