"""What recording a training step does with the user's module's own state, and the state it cannot follow.

A recording (:func:`~gnplace.importers.trace.record_training_step`) swaps the module's parameters and buffers for
fake stand-ins and runs it; this module saves and puts back every tensor attribute it may touch
(:func:`saved_attributes`, :func:`restore_attributes`), names the tied and untrained state
(:func:`state_names`), carries a buffer the forward replaced into the step as an in-place update
(:func:`carry_reassigned_buffers`), and refuses, in one line, a step that read the module's state from outside its
call or gave a tensor other memory by no op (:func:`refuse_state_read_from_outside`,
:func:`refuse_swapped_memory`): the recorded step would silently compute another loss or other gradients.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from typing import TYPE_CHECKING, Any

import torch
from torch.utils._pytree import tree_flatten

from gnplace.exceptions import UnsupportedGraph

if TYPE_CHECKING:
    from gnplace.importers.trace import TracedOp, _Recorder

__all__ = ["ModuleCall", "carry_reassigned_buffers", "held_tensors", "memory_of", "refuse_state_read_from_outside",
           "refuse_swapped_memory", "restore_attributes", "saved_attributes", "state_names"]


def held_tensors(ops: Sequence[TracedOp]) -> Iterator[tuple[TracedOp, torch.Tensor]]:
    """Each real tensor an op holds in its arguments (a constant of the step, not a :class:`Ref`), with the op."""
    for op in ops:
        for x in tree_flatten((op.args, op.kwargs))[0]:
            if isinstance(x, torch.Tensor):
                yield op, x


def refuse_state_read_from_outside(
    module: torch.nn.Module, ops: Sequence[Any], state: dict[str, torch.Tensor]
) -> None:
    """Refuse a step that read a parameter or buffer of the module as the tensor itself, not through the module.

    The recording swaps the module's own tensors for stand-ins it follows; a loss function holding the tensor
    (``w = net.weight; loss=lambda out: ... + w.square().sum()``) reads the real one, which the step would
    keep as a constant: its gradient lost (wrong gradients, silently), its later values unseen.

    Raises:
        UnsupportedGraph: naming the parameter or buffer and the op that read it.
    """
    held = {id(t): name for name, t in state.items()}
    for op, x in held_tensors(ops):
        if id(x) in held:
            kind = "parameter" if isinstance(x, torch.nn.Parameter) else "buffer"
            raise UnsupportedGraph(
                f"cannot trace a training step of {type(module).__name__}: op {op.func} read its {kind} "
                f"{held[id(x)]!r} as a tensor held from outside the module's call (a loss function or closure "
                f"that kept the tensor itself), which the step would keep as a constant, without its gradient; "
                f"read it through the module at each call (module.{held[id(x)]} inside the loss function)"
            )


def memory_of(t: torch.Tensor) -> int | None:
    """The memory (storage) that ``t`` holds its values in, or ``None`` for a tensor without one (a sparse one)."""
    try:
        return int(t.untyped_storage()._cdata)
    except (RuntimeError, NotImplementedError):
        return None


def refuse_swapped_memory(
    module: torch.nn.Module, tensors: Sequence[Any], recorder: _Recorder, buffers: set[str]
) -> None:
    """Refuse a step that gave a tensor other memory by no op (``h.data = new``, ``self.t.weight.data = new``).

    Assigning ``.data`` is no op the recording sees: the tensor keeps its place in the step, with the new
    values in it, so the step's later reads of it were recorded as reads of what the step made there (or
    of the parameter as the step starts with it): another loss and other gradients than eager's, silently
    (an EMA teacher updated so in ``forward``: loss 0.831, eager's 0.710; a straight-through sign
    ``h.data = h.data.sign()``). ``set_`` is an op of the step, which the recording follows.

    Args:
        module (torch.nn.Module): the recorded module (named in the message).
        tensors (Sequence): the recording's parameters, buffers, inputs and the tensors its ops made.
        recorder (_Recorder): the recording (its ops, and the memory of each tensor when made).
        buffers (set): the names of the buffers (a frozen parameter is read as one, but named a parameter).

    Raises:
        UnsupportedGraph: naming the tensor, and the writes that record.
    """
    for t in tensors:
        if not isinstance(t, torch.Tensor) or recorder.memory.get(id(t)) == memory_of(t):
            continue
        ref = recorder.origin.get(id(t))
        if ref is None:
            continue
        if ref.kind == "op":
            op = recorder.ops[ref.index]
            what = f"the output of {op.func} (in {repr(op.call[0]) if op.call[0] else 'the module'})"
        elif ref.kind == "input":
            what = f"input {ref.name}"
        else:
            what = f"{'buffer' if ref.name in buffers else 'parameter'} {ref.name!r}"
        raise UnsupportedGraph(
            f"cannot trace a training step of {type(module).__name__}: it gives {what} new values by assigning "
            "its .data, which a recorded step cannot follow (it would read the old values); compute them out of "
            "place (h = h + (new - h).detach() for a straight-through estimate) or write them in place under "
            "torch.no_grad() (x.copy_(new))"
        )


def carry_reassigned_buffers(module: torch.nn.Module, fakes: dict[str, torch.Tensor]) -> None:
    """Record a buffer that the forward replaced (``self.ema = 0.9 * self.ema + ...``) as an in-place update.

    Assigning a buffer is Python, not an op: the recording would see the new value computed and never
    stored, and ``functional_call`` puts the recorded buffer back afterwards. So the new value is copied
    into the buffer (``aten.copy_``, no gradient), after the backward, which may read the old value as
    eager's does; the step then updates the buffer as batch norm's running statistics are updated.

    Raises:
        UnsupportedGraph: if the new value has another shape or dtype than the buffer.
    """
    for name, fake in fakes.items():
        owner, _, leaf = name.rpartition(".")
        now = module.get_submodule(owner)._buffers.get(leaf)
        if now is None or now is fake:  # unchanged (or removed: eager's next call would fail reading it)
            continue
        if not isinstance(now, torch.Tensor) or now.shape != fake.shape or now.dtype != fake.dtype:
            got = f"shape {list(now.shape)} {now.dtype}" if isinstance(now, torch.Tensor) else type(now).__name__
            raise UnsupportedGraph(
                f"the forward of {type(module).__name__} replaces buffer {name!r} ({list(fake.shape)} {fake.dtype}) "
                f"with {got}; a recorded step updates a buffer in place, so the new value must keep its shape and dtype"
            )
        with torch.no_grad():
            fake.copy_(now)


def state_names(module: torch.nn.Module) -> tuple[dict[str, str], list[str]]:
    """The tied parameter names of ``module`` and the state-dict names no update writes nor travels with.

    Returns:
        tuple: ``{alias: name}`` for each parameter registered under a second name (``named_parameters``
        lists a tensor once, under its first name), and the state-dict names, in state-dict order, of the
        persistent buffers and parameters without ``requires_grad`` (a frozen layer's weight), aliases left
        out, but those of a leaf module that holds a trainable parameter itself (batch norm's running
        statistics), which go with it under its one key.
    """
    first: dict[int, str] = {}
    tied = {}
    for name, p in module.named_parameters(remove_duplicate=False):
        if id(p) in first:
            tied[name] = first[id(p)]
        else:
            first[id(p)] = name
    trained = {name for name, p in module.named_parameters() if p.requires_grad}
    # a leaf module holding a trainable parameter keeps its buffers under its own device_map key (batch norm's
    # running statistics go with its weight); a module with children may be split, so its buffers are listed
    owners = {name.rpartition(".")[0] for name in trained}
    parents = {path for path, sub in module.named_modules() if next(sub.children(), None) is not None}
    try:
        state = list(module.state_dict(keep_vars=True))
    except Exception:  # noqa: BLE001 - a model's own state_dict override: the record is advice, the import goes on
        state = []
    untrained = [name for name in state if name not in trained and name not in tied
                 and (name.rpartition(".")[0] not in owners or name.rpartition(".")[0] in parents)]
    return tied, untrained


class ModuleCall(torch.nn.Module):
    """Holds ``module`` (so that ``functional_call`` swaps its state) and runs ``fn`` as its forward."""

    def __init__(self, module: torch.nn.Module, fn: Callable[..., Any]) -> None:
        super().__init__()
        self.module = module
        self.fn = fn

    def forward(self, *args: Any) -> Any:
        """``fn(*args)``, the step's forward and loss, under the swapped state."""
        return self.fn(*args)


#: What :func:`saved_attributes` saves of a submodule: the submodule, its plain tensor attributes, its parameters, its
#: buffers and its other plain attributes (by name).
_Saved = tuple[torch.nn.Module, dict[str, Any], dict[str, Any], dict[str, Any], dict[str, Any]]


def saved_attributes(module: torch.nn.Module) -> list[_Saved]:
    """Each submodule's plain tensor attributes, parameters and buffers, to put back exactly after recording.

    A forward hook that assigns a plain one (``nn.utils.spectral_norm`` sets ``module.weight`` before each
    call) would otherwise leave a fake tensor of the recording on the user's module; so would
    ``functional_call`` for a module registered under two names (``self.b = self.a``), which it swaps in
    twice and back in the same order, its second restore putting the fakes back; and a buffer the forward
    registers while recording is fake. The other plain attributes are kept too, for those the forward sets to a
    tensor (``self.last_logits = logits`` over an ``__init__``'s ``None``): they get their value back.
    """
    return [(mod, {k: v for k, v in vars(mod).items() if isinstance(v, torch.Tensor)}, dict(mod._parameters),
             dict(mod._buffers), {k: v for k, v in vars(mod).items() if not isinstance(v, torch.Tensor)})
            for mod in module.modules()]


def restore_attributes(attributes: list[_Saved]) -> None:
    """Put back what :func:`saved_attributes` saw; drop tensors, parameters and buffers the recording added.

    An attribute the recording set to a tensor over another value (``None``) gets that value back: it was deleted,
    and the user's ``net.last_logits`` after :func:`~gnplace.apply` an AttributeError.
    """
    for mod, saved, params, buffers, others in attributes:
        for k, v in list(vars(mod).items()):
            if isinstance(v, torch.Tensor) and k not in saved:
                if k in others:
                    object.__setattr__(mod, k, others[k])
                else:
                    delattr(mod, k)
        for k, v in saved.items():
            object.__setattr__(mod, k, v)
        for now, held in ((mod._parameters, params), (mod._buffers, buffers)):
            now.clear()
            now.update(held)
