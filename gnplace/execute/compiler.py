"""A recorded training step compiled into a :class:`~gnplace.execute.program.Program` that any executor runs.

:func:`compile_step` keeps the aten ops of an :class:`~gnplace.importers.torch.ImportedStep` that the loss, the
gradients and the buffers' updates need, renumbered, each with the shapes, dtypes, strides and bytes of its outputs,
and rewrites what placement would break: a tensor written through a view of it and read afterwards
(``y[:, 0] = v; f(y)``) is copied as written for its later readers (:func:`_snapshots_after_writes_into_views`),
and a view read after a write into its tensor is made again from the tensor as written
(:func:`_views_remade_after_writes`). :mod:`gnplace.execute.program` holds the program and where each op runs.
"""

from __future__ import annotations

import dataclasses
import functools
import reprlib
from collections.abc import Callable
from typing import Any

import numpy as np
import torch

from gnplace.exceptions import ExecutionFailed, InvalidArgument
from gnplace.execute.optim import optimizer_of
from gnplace.execute.program import Program, ProgramOp, refs_in, storage_in
from gnplace.importers.trace import Ref, memory_owners, written_argument
from gnplace.placement import GraphKey

__all__ = ["compile_step"]


#: Ops that update arguments their schema does not mark as written, by position: batch norm's
#: running mean and variance (``native_batch_norm`` in training updates them in place).
_UNMARKED_WRITES: dict[str, tuple[int, ...]] = {
    "native_batch_norm": (3, 4), "_native_batch_norm_legit": (3, 4), "cudnn_batch_norm": (3, 4),
    "miopen_batch_norm": (3, 4),
}


def _write_positions(op: Any) -> list[int]:
    """Positions of the arguments a recorded op writes in place: its schema's ``a!`` arguments."""
    return [k for k, argument in enumerate(op.func._schema.arguments)
            if argument.alias_info is not None and argument.alias_info.is_write]


def _argument(op: Any, position: int) -> Any:
    """The recorded op's argument at schema ``position``, given by position or by keyword (``out=``)."""
    return op.args[position] if position < len(op.args) else op.kwargs.get(op.func._schema.arguments[position].name)


def _written_buffers(op: Any, aliases: dict[Ref, str] | None = None) -> tuple[str, ...]:
    """Names of the buffers a recorded op updates in place.

    The arguments it writes that are a buffer: ``Ref("buffer")``, or an op result that is one
    (``aliases``, :func:`_buffer_aliases`).
    """
    positions = sorted({*_UNMARKED_WRITES.get(op.name, ()), *_write_positions(op)})
    names = []
    for value in (_argument(op, k) for k in positions):
        if isinstance(value, Ref) and value.kind == "buffer":
            names.append(value.name)
        elif isinstance(value, Ref) and aliases and value in aliases:
            names.append(aliases[value])
    return tuple(names)


#: View ops whose output is the whole of their input: a write into it is a write into the input.
_WHOLE_VIEWS = frozenset({"alias", "detach"})


def _buffer_aliases(ops: list[Any]) -> dict[Ref, str]:
    """The op results that are a buffer itself, ``Ref -> buffer name``.

    A recorded op that writes a buffer in place (``num_batches_tracked.add_(1)``, ``div(..., out=u)``)
    returns the buffer, and the recording names that result as the op's output; so does a whole view
    of a buffer (``alias``, ``detach``; instance norm writes its statistics through one). A second
    batch norm call, or a write through such a view, then writes an op's output: without this map it
    was not seen as updating the buffer, and was dropped or its update lost. The local executor reads
    such a result as the buffer's latest value (:func:`~gnplace.execute.runner.run_step`), which is
    what eager PyTorch reads: the same tensor.
    """
    aliases: dict[Ref, str] = {}

    def buffer_of(x: Any) -> str | None:
        if isinstance(x, Ref):
            return x.name if x.kind == "buffer" else aliases.get(x)
        return None

    for i, op in enumerate(ops):
        written = buffer_of(written_argument(op))
        returns = op.func._schema.returns
        if written is not None and returns and returns[0].alias_info is not None:
            aliases[Ref("op", i, 0)] = written
        elif op.name in _WHOLE_VIEWS and op.args and buffer_of(op.args[0]) is not None:
            aliases[Ref("op", i, 0)] = str(buffer_of(op.args[0]))
    return aliases


#: In-place writes that a PyTorch layer makes into its own parameter, by the op's name: what the layer does, and
#: what to do instead, as :func:`_writes_into_views_read_after` says them (it named only the op, and ``y[:, 0] = 0``).
LAYER_WRITES = {
    "embedding_renorm_": ("nn.Embedding(max_norm=...) renormalises, in place, the rows of its weight that it reads",
                          "leave max_norm unset (or renormalise the weight yourself, out of place) to run it on "
                          "devices"),
}


def _writes_into_views_read_after(ops: list[Any]) -> set[int]:
    """The writes into a view whose tensor is read afterwards (``y[:, 0] = v; f(y)``), by recorded op index.

    The write changes the viewed tensor, but the recording ties the tensor's later readers to the op that made
    it, not to the write; run op by op as recorded, the write would be lost (a wrong loss and wrong gradients),
    so :func:`_snapshots_after_writes_into_views` makes the tensor as written a value of its own after each of
    these. A write whose view is the only thing read afterwards (LSTM cells activate their gate chunks in place,
    ``gates.unsafe_chunk(4)[0].sigmoid_()``) is not one: its readers follow the write's own result.

    Raises:
        ExecutionFailed: for a write into part of a buffer or parameter, which must persist in the module and
            which running the step op by op cannot keep (naming the write and the view), and for a layer's write
            into its own weight (:data:`LAYER_WRITES`).
    """
    from gnplace.importers.flops import VIEW_OPS

    written = [written_argument(op) for op in ops]

    def view_source(i: int) -> Ref | None:
        op = ops[i]
        return op.args[0] if op.name in VIEW_OPS and op.args and isinstance(op.args[0], Ref) else None

    storage = memory_owners(ops, view_source, written)

    reads: dict[Ref, list[tuple[int, Ref, tuple[tuple[int, int], ...]]]] = {}  # tensor -> (reader, ref, pieces)
    for j, op in enumerate(ops):
        for ref in refs_in((op.args, op.kwargs)):
            base, pieces = storage(ref)
            reads.setdefault(base, []).append((j, ref, pieces))
    found: set[int] = set()
    for w, target in enumerate(written):
        if not (isinstance(target, Ref) and target.kind == "op" and ops[target.index].name in VIEW_OPS):
            continue
        base, pieces = storage(target)
        if base.kind in ("buffer", "param") and not ops[w].backward and not _whole_view(ops, target, written):
            kind = "buffer" if base.kind == "buffer" else "parameter"
            raise ExecutionFailed(
                f"the step writes in place into part of {kind} {base.name!r} ({ops[w].func} into its "
                f"{ops[target.index].func}, as self.{base.name.rpartition('.')[2]}[0] = ... does), which running it "
                f"op by op cannot keep; update the whole {kind} (assign a new tensor, or copy_ into all of it) to "
                "run it on devices (the graph still places and simulates)"
            )
        for j, ref, other in reads.get(base, ()):
            n = min(len(pieces), len(other))  # one piece inside the other: they share memory
            # a value made from the write on sees it; one made before it and sharing its memory does not
            if j > w and (ref.kind != "op" or ref.index < w) and pieces[:n] == other[:n]:
                if ops[w].name in LAYER_WRITES:
                    what, instead = LAYER_WRITES[ops[w].name]
                    raise ExecutionFailed(f"{what}, which running the step op by op cannot keep; {instead} (the graph "
                                          "still places and simulates)")
                if base.kind not in ("op", "input"):
                    raise ExecutionFailed(
                        f"the step writes in place into a view ({ops[w].func} into the {ops[target.index].func} of "
                        f"{base.kind} {base.name!r}) and then reads it ({ops[j].func}), which running it op by op "
                        "cannot keep; write it out of place to run it on devices (the graph still places and simulates)"
                    )
                found.add(w)
                break
    return found


def _whole_view(ops: list[Any], ref: Ref, written: list[Any]) -> bool:
    """Whether ``ref`` is the whole of the tensor it views: only whole views and in-place results lead to it."""
    from gnplace.importers.flops import VIEW_OPS

    while ref.kind == "op":
        op = ops[ref.index]
        if op.name in VIEW_OPS and op.args and isinstance(op.args[0], Ref):
            if op.name not in _WHOLE_VIEWS:
                return False
            ref = op.args[0]
        elif isinstance(written[ref.index], Ref):
            ref = written[ref.index]
        else:
            return True
    return True


def _views_remade_after_writes(ops: list[ProgramOp]) -> tuple[list[ProgramOp], list[int]]:
    """``ops`` with each view read after an in-place write to its tensor made again after that write.

    ``v = h.view(6, 3); h.mul_(2); f(v)``: eager ``f`` sees the write through ``v``. Run op by op on
    several devices, ``v`` was made where ``f`` runs from a copy of ``h`` sent when ``h`` was made,
    before the write, and ``f`` read the old values (a wrong loss and wrong gradients). So ``f`` reads
    a copy of the view chain made from the write's result, right after the write: on one device the
    same memory, on another from ``h`` as written. Returns the ops and each old op's new index.
    """
    def whole(ref: Ref) -> bool:  # the tensor itself, or an in-place result of it: not a view of part of it
        written: Ref | None = ref
        while written is not None and written.kind == "op" and ops[written.index].mutates is not None:
            written = ops[written.index].mutates
        return written is None or written.kind != "op" or not ops[written.index].is_view

    writes: dict[Ref, list[int]] = {}
    for i, op in enumerate(ops):
        if op.mutates is not None and whole(op.mutates):
            writes.setdefault(storage_in(ops, op.mutates), []).append(i)
    if not writes:
        return ops, list(range(len(ops)))
    added: dict[int, list[tuple[int, Any, int]]] = {}  # write -> (view op, first argument, placeholder) after it
    remade: dict[tuple[Ref, int], Ref] = {}  # (view, write) -> its copy, a placeholder Ref of index -(k + 1)
    count = 0

    def view_of(ref: Any) -> Ref | None:  # what the view ``ref`` shows, if ``ref`` is a view
        if isinstance(ref, Ref) and ref.kind == "op" and ops[ref.index].is_view and ops[ref.index].args:
            source = ops[ref.index].args[0]
            return source if isinstance(source, Ref) else None
        return None

    def chain_base(ref: Ref) -> Ref:  # the tensor under a chain of views
        source = view_of(ref)
        return ref if source is None else chain_base(source)

    def again(ref: Ref, write: int) -> Ref:
        nonlocal count
        if (ref, write) not in remade:
            source = view_of(ref)
            base = again(source, write) if source is not None and view_of(source) is not None else Ref("op", write, 0)
            count += 1
            added.setdefault(write, []).append((ref.index, base, -count))
            remade[(ref, write)] = Ref("op", -count, ref.output)
        return remade[(ref, write)]

    swaps: dict[int, dict[Ref, Ref]] = {}
    for r, op in enumerate(ops):
        for ref in op.reads:
            base = chain_base(ref)
            if view_of(ref) is None or not whole(base):  # a view of a whole tensor, not of a part's write
                continue
            # the views show the base as sent to another device: as it was when it was made
            made = base.index if base.kind == "op" else -1
            later = [w for w in writes.get(storage_in(ops, ref), ()) if made < w < r]
            if later:
                swaps.setdefault(r, {})[ref] = again(ref, later[-1])
    if not swaps:
        return ops, list(range(len(ops)))
    order: list[tuple[int, int, Any]] = []  # (old op, or the view remade; its placeholder number or 0; its source)
    for i in range(len(ops)):
        order.append((i, 0, None))
        order += [(view, number, base) for view, base, number in added.get(i, ())]
    new_of = {old: k for k, (old, number, _) in enumerate(order) if not number}
    new_of |= {number: k for k, (_, number, _) in enumerate(order) if number}

    def renumber(value: Any, swap: dict[Ref, Ref] | None = None) -> Any:
        from torch.utils._pytree import tree_map

        def one(x: Any) -> Any:
            if isinstance(x, Ref) and x.kind == "op":
                x = (swap or {}).get(x, x)
                return Ref("op", new_of[x.index], x.output)
            return x

        return tree_map(one, value)

    out = []
    for old, number, base in order:
        op = ops[old]
        if number:  # a view made again: the same op, from the write's result (or the chain's copy before it)
            op = dataclasses.replace(op, args=(base, *op.args[1:]))
        swap = None if number else swaps.get(old)
        out.append(dataclasses.replace(
            op, args=renumber(op.args, swap), kwargs=renumber(op.kwargs, swap),
            mutates=renumber(op.mutates) if op.mutates is not None else None,
        ))
    return out, [new_of[i] for i in range(len(ops))]


def _snapshots_after_writes_into_views(
    ops: list[ProgramOp], writes: set[int], inputs: list[Any], results: list[Ref],
) -> tuple[list[ProgramOp], list[int], dict[Ref, Ref]]:
    """``ops`` with the tensor a write into a view of it leaves made a value of its own after the write.

    ``y = torch.zeros(b, n); y[:, 0] = v; f(y)``: ``f`` reads ``y`` as the write left it, but the recording ties
    it to ``zeros``; run op by op on several devices, ``y`` crossed to ``f``'s device when it was made, before the
    write, and the write went into the copy its view was made from (a wrong loss and wrong gradients). So after
    each write in ``writes`` (:func:`_writes_into_views_read_after`), a ``clone`` of the tensor as written runs on
    the write's device (the write's node), as functionalization's scatter would make it, and every later read of
    that tensor's memory reads the snapshot: the tensor itself, or a view of it (made again from the snapshot,
    right before its reader; an in-place result is the tensor it writes). The write itself goes into a view made
    afresh from the tensor's latest value, so that it lands, on its own device, in the memory the snapshot copies;
    a write into the whole tensor makes its result the latest value (as :func:`_views_remade_after_writes` does).
    Views left unread are dropped.

    Args:
        ops (list[ProgramOp]): the program's ops, in recorded order.
        writes (set[int]): indices (into ``ops``) of the writes into views whose tensor is read afterwards.
        inputs (list): the example inputs, for the shape of an input so written.
        results (list[Ref]): the loss and gradients, read after the last op.

    Returns:
        The ops, each old op's new index (``-1``: dropped), and each of ``results`` as it reads now.
    """
    if not writes:
        return ops, list(range(len(ops))), {r: r for r in results}
    out: list[ProgramOp] = []
    new_of: dict[int, int] = {}
    latest: dict[Ref, tuple[Ref, float]] = {}  # tensor (its storage) -> its latest value, and from when (old index)

    def renumbered(ref: Ref) -> Ref:
        return Ref("op", new_of[ref.index], ref.output) if ref.kind == "op" else ref

    def views_down_to(ref: Ref) -> list[Ref]:  # the views from ref's tensor down to ref, outermost first
        chain: list[Ref] = []
        while ref.kind == "op":
            op = ops[ref.index]
            if op.mutates is not None:  # an in-place result is the tensor it writes
                ref = op.mutates
            elif op.is_view and op.args and isinstance(op.args[0], Ref):
                chain.append(ref)
                ref = op.args[0]
            else:
                break
        return chain[::-1]

    remade: dict[tuple[int, Ref], int] = {}  # (old view op, the value it is made from) -> its new index

    def made_from(chain: list[Ref], base: Ref, *, fresh: bool) -> Ref:
        at = base
        for view in chain:
            key = (view.index, at)
            if fresh or key not in remade:
                op = ops[view.index]
                out.append(dataclasses.replace(op, args=(at, *_renumbered(op.args[1:], renumbered)),
                                               kwargs=_renumbered(op.kwargs, renumbered)))
                remade[key] = len(out) - 1
            at = Ref("op", remade[key], view.output)
        return at

    def current(storage: Ref) -> Ref:
        return latest[storage][0] if storage in latest else renumbered(storage)

    def read(ref: Ref) -> Ref:  # a read of ref now: made again from its tensor's latest value if that is newer
        storage = storage_in(ops, ref)
        made = ref.index if ref.kind == "op" else -1
        if storage in latest and latest[storage][1] > made:
            return made_from(views_down_to(ref), latest[storage][0], fresh=False)
        return renumbered(ref)

    def whole(ref: Ref) -> bool:  # the tensor itself, or an in-place result of it: not a view of part of it
        return not views_down_to(ref)

    for i, op in enumerate(ops):
        target = op.mutates
        swap: dict[Ref, Ref] = {}
        if i in writes and target is not None:
            swap[target] = made_from(views_down_to(target), current(storage_in(ops, target)), fresh=True)
        args, kwargs = _renumbered((op.args, op.kwargs), functools.partial(_swapped, swap, read))
        mutates = None if target is None else _swapped(swap, read, target)
        out.append(dataclasses.replace(op, args=args, kwargs=kwargs, mutates=mutates))
        new_of[i] = len(out) - 1
        if target is None:
            continue
        storage = storage_in(ops, target)
        if storage.kind not in ("op", "input"):
            continue
        if i in writes:
            base = current(storage)
            shape, dtype, stride, lazy = _described(ops, inputs, storage)
            out.append(ProgramOp(
                target="aten.clone.default", args=(base,), kwargs={}, node=op.node, mutates=None,
                out_shapes=[shape], out_dtypes=[dtype], out_bytes=int(np.prod(shape, dtype=np.int64)) * (
                    torch.empty(0, dtype=dtype).element_size()),
                out_lazy=(lazy,), out_strides=(stride,), backward=op.backward,
            ))
            latest[storage] = (Ref("op", len(out) - 1, 0), i + 0.5)
        elif whole(target):
            latest[storage] = (Ref("op", new_of[i], 0), float(i))
    at_end = {r: read(r) for r in results}
    return _without_unread_views(out, new_of, len(ops), at_end)


def _swapped(swap: dict[Ref, Ref], read: Callable[[Ref], Ref], ref: Ref) -> Ref:
    """``swap[ref]`` where ``swap`` has it, else ``read(ref)``."""
    return swap[ref] if ref in swap else read(ref)


def _renumbered(value: Any, one: Callable[[Ref], Ref]) -> Any:
    """``value`` with every :class:`Ref` in it replaced by ``one(ref)``."""
    from torch.utils._pytree import tree_map

    return tree_map(lambda x: one(x) if isinstance(x, Ref) else x, value)


def _described(
    ops: list[ProgramOp], inputs: list[Any], ref: Ref,
) -> tuple[tuple[int, ...], torch.dtype, tuple[int, ...] | None, tuple[bool, bool]]:
    """Shape, dtype, strides and lazy bits (conjugate, negative) of an op output or an input."""
    if ref.kind == "op":
        op = ops[ref.index]
        shape, dtype = op.out_shapes[ref.output], op.out_dtypes[ref.output]
        assert shape is not None and dtype is not None
        stride = op.out_strides[ref.output] if op.out_strides else None
        lazy = op.out_lazy[ref.output] if op.out_lazy else (False, False)
        return shape, dtype, stride, lazy
    x = inputs[int(ref.name)]
    return tuple(int(s) for s in x.shape), x.dtype, tuple(int(s) for s in x.stride()), (False, False)


def _without_unread_views(
    ops: list[ProgramOp], new_of: dict[int, int], num_old: int, at_end: dict[Ref, Ref],
) -> tuple[list[ProgramOp], list[int], dict[Ref, Ref]]:
    """``ops`` less the views nothing reads (a write's view made afresh leaves the recorded one unread)."""
    read = [False] * len(ops)
    for ref in at_end.values():
        if ref.kind == "op":
            read[ref.index] = True
    keep = [True] * len(ops)
    for i in range(len(ops) - 1, -1, -1):
        keep[i] = read[i] or not ops[i].is_view
        if keep[i]:
            for ref in ops[i].reads:
                if ref.kind == "op":
                    read[ref.index] = True
            written = ops[i].mutates
            if written is not None and written.kind == "op":
                read[written.index] = True
    index = {old: new for new, old in enumerate(k for k in range(len(ops)) if keep[k])}

    def one(ref: Ref) -> Ref:
        return Ref("op", index[ref.index], ref.output) if ref.kind == "op" else ref

    kept = [dataclasses.replace(op, args=_renumbered(op.args, one), kwargs=_renumbered(op.kwargs, one),
                                mutates=one(op.mutates) if op.mutates is not None else None)
            for k, op in enumerate(ops) if keep[k]]
    moved = [index.get(new_of[i], -1) for i in range(num_old)]
    return kept, moved, {r: one(v) for r, v in at_end.items()}


def compile_step(step: Any) -> Program:
    """The :class:`Program` of an imported step (:func:`~gnplace.importers.torch.import_step`).

    Only the ops the loss and the gradients need, and those that update buffers (batch norm's running
    statistics), are kept; their indices are renumbered.

    Examples:
        >>> import torch
        >>> from gnplace.importers.torch import import_step
        >>> step = import_step(torch.nn.Linear(4, 2), (torch.zeros(8, 4),), loss=lambda out: out.sum())
        >>> program = compile_step(step)
        >>> [op.target for op in program.ops][:2], program.num_nodes == step.graph.num_ops
        (['aten.t.default', 'aten.addmm.default'], True)

    Raises:
        InvalidArgument: if ``step`` is no :class:`~gnplace.importers.torch.ImportedStep` (a graph, None).
    """
    if not (hasattr(step, "trace") and hasattr(step, "node_of_op")):  # an OpGraph or None: AttributeError ('trace')
        raise InvalidArgument(f"compile_step needs an imported step (gnplace.importers.torch.import_step), got "
                              f"{type(step).__name__} {reprlib.repr(step)}")
    trace = step.trace
    ops = trace.ops
    into_views = _writes_into_views_read_after(ops)
    trace.check_replayable()  # a checkpointed dropout's recomputation: gradients of another mask
    aliases = _buffer_aliases(ops)
    needed = np.zeros(len(ops), dtype=bool)
    stack = [r.index for r in trace.results() if r.kind == "op"]
    buffer_writes = [_written_buffers(op, aliases) for op in ops]
    stack += [i for i, names in enumerate(buffer_writes) if names]
    # and every op the graph holds: a write into a tensor whose earlier view a needed op reads is one, though no
    # op reads the write's own result (``v = h.view(-1); h.mul_(2); f(v)``): left out, f read h unwritten
    from gnplace.importers.flops import VIEW_OPS

    stack += [i for i in step.node_of_op if ops[i].name not in VIEW_OPS]
    while stack:
        i = stack.pop()
        if needed[i]:
            continue
        needed[i] = True
        stack.extend(r.index for r in refs_in((ops[i].args, ops[i].kwargs)) if r.kind == "op" and not needed[r.index])
    keep = [i for i in range(len(ops)) if needed[i]]
    new_index = {old: new for new, old in enumerate(keep)}

    def renumber(value: Any) -> Any:
        from torch.utils._pytree import tree_map

        def one(x: Any) -> Any:
            if isinstance(x, Ref) and x.kind == "op":
                return Ref("op", new_index[x.index], x.output)
            if isinstance(x, torch.Tensor):  # a constant made outside the step: a real tensor, kept by value
                return x.detach().clone()
            if isinstance(x, torch.device):
                return torch.device("cpu")  # re-targeted to the op's device when it runs
            return x

        return tree_map(one, value)

    program_ops: list[ProgramOp] = []
    for i in keep:
        op = ops[i]
        written = written_argument(op)
        mutates = renumber(written) if isinstance(written, Ref) else None
        shapes: list[tuple[int, ...] | None] = []
        dtypes: list[torch.dtype | None] = []
        for out in op.outputs:
            if isinstance(out, torch.Tensor):
                shapes.append(tuple(int(s) for s in out.shape))
                dtypes.append(out.dtype)
            else:
                shapes.append(None)
                dtypes.append(None)
        size = 0 if op.name in VIEW_OPS or mutates is not None else sum(
            int(o.numel()) * int(o.element_size()) for o in op.outputs if isinstance(o, torch.Tensor))
        program_ops.append(ProgramOp(
            target=str(op.func), args=renumber(op.args), kwargs=renumber(op.kwargs),
            node=int(step.node_of_op.get(i, -1)), mutates=mutates, out_shapes=shapes, out_dtypes=dtypes,
            out_bytes=size, is_view=op.name in VIEW_OPS and mutates is None, writes_buffers=buffer_writes[i],
            out_lazy=tuple((bool(o.is_conj()), bool(o.is_neg())) if isinstance(o, torch.Tensor) else (False, False)
                           for o in op.outputs),
            out_strides=tuple(tuple(int(k) for k in o.stride()) if isinstance(o, torch.Tensor) else None
                              for o in op.outputs),
            backward=bool(op.backward),
        ))

    kept_results = {Ref("op", new_index[r.index], r.output) for r in trace.results()
                    if r.kind == "op" and r.index in new_index}
    program_ops, snapped, at_end = _snapshots_after_writes_into_views(
        program_ops, {new_index[w] for w in into_views if w in new_index}, trace.inputs, list(kept_results))
    program_ops, remade = _views_remade_after_writes(program_ops)
    moved = [remade[k] if k >= 0 else -1 for k in snapped]

    def renumbered(ref: Ref) -> Ref:
        if ref.kind != "op":
            return ref
        if ref.index not in new_index:
            raise ExecutionFailed("the recorded step's loss or gradients come from an op it does not keep")
        now = at_end[Ref("op", new_index[ref.index], ref.output)]
        return Ref("op", remade[now.index], now.output)

    return Program(
        ops=program_ops,
        params={k: v.detach().clone() for k, v in trace.params.items()},
        buffers={k: v.detach().clone() for k, v in trace.buffers.items()},
        inputs=[x.detach().clone() if isinstance(x, torch.Tensor) else x for x in trace.inputs],
        loss=renumbered(trace.loss),
        grads={k: (renumbered(r) if r is not None else None) for k, r in trace.grads.items()},
        param_node=dict(step.update_node),
        input_node=dict(step.input_node),
        num_nodes=step.graph.num_ops,
        graph_name=step.graph.name,
        input_grads={k: (renumbered(r) if r is not None else None) for k, r in trace.input_grads.items()},
        buffer_alias={Ref("op", moved[new_index[r.index]], r.output): name for r, name in aliases.items()
                      if r.index in new_index and moved[new_index[r.index]] >= 0},
        graph_digest=GraphKey.of(step.graph).digest,
        optimizer=optimizer_of(step.graph.op_types[node] for node in step.update_node.values()) or "sgd",
        default_dtype=trace.default_dtype if any(ops[i].reads_default_dtype for i in keep) else None,
    )
