"""``gnplace.apply``: a module whose training step runs placed, ready to train with.

The step is recorded once (:func:`~gnplace.importers.torch.import_step`); calling the placed module
runs the recorded forward, loss and backward op by op on the devices the placement gives them and
returns the loss; ``loss.backward()`` then hands each parameter the gradient the placed step
computed (the same loss and gradients as eager PyTorch), so any ``torch.optim`` optimizer trains it.
Each parameter lives on the device of its update node, where the optimizer updates it. :func:`apply` moves it
there in place (the same ``Parameter``, so an optimizer made before still holds it), its ``.grad`` with it; it is
not given the optimizer, so the state an optimizer made before (Adam's ``exp_avg`` after a step) stays on the
parameter's old device, as after an eager ``module.to()``: make the optimizer after :func:`apply`, or move its
state with ``optimizer.load_state_dict(optimizer.state_dict())``, which puts each state tensor on its parameter's
device.

A call that computes no gradient (under ``torch.no_grad()`` or ``torch.inference_mode()``, a validation loop, or
with nothing that requires grad) runs the step's forward and loss alone, not its backward: the same loss, buffer
updates and random draws as eager's call, at about a forward's cost, every ``.grad`` left as it was. A call after
``model.eval()`` (or any change of a submodule's train / eval mode) runs the step recorded again in the modes the
module has then, once per set of modes, each op where the op of its name runs (batch norm's kernel for running
statistics, which the training step has not, where most of its module's ops run): eager's loss in eval mode, no
dropout, no update of the running statistics.

Inputs given to :func:`apply` with ``requires_grad`` get their gradients too (the step was recorded
computing them), so layers before the placed module, or an attack on the input, train through it.

The step reads the module's buffers and frozen parameters as they are at each call (a
``load_state_dict`` is seen) and
writes back the ones it updates (batch norm's running statistics and batch count), as an eager
training step does, so the module evaluates as if trained eagerly.

Limits: the recorded step has fixed shapes, so inputs must have the example inputs' shapes and
nesting (tensors in tuples, lists and dicts are inputs too), and what is not a tensor (a number, a
flag) is a constant of the step: a call with another value is refused. So are the module's Python
attributes that ``forward`` reads (``self.scale = 2.0``): one changed after :func:`apply` is warned of
at the next call (once per value), and the step still computes with the recorded value; so is a hook
registered on the module after :func:`apply` (``register_forward_hook``), which the placed step does not run
(once per hook). A tensor ``forward`` reads from a global or a closure, not registered on the module, is a
constant of the step too (and, learnable, gets no gradient): it is warned of at :func:`apply`. The inputs' memory
layout may differ (a transposed or channels-last tensor): such an input is copied into the example input's.
The module's parameters and buffers keep the dtypes and shapes they were recorded with (a
``module.double()`` after the recording is refused: record and place again), and its parameters stay
on their placed devices (a ``module.to(...)`` after :func:`apply` is refused: apply again). The gradients are
computed as the step runs, so a second derivative through them (``create_graph=True``, a gradient penalty) is
refused, and so is a call under a ``torch.func`` transform (``vmap``, ``grad``).
"""

from __future__ import annotations

import os
import reprlib
import warnings
from collections import namedtuple
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
import torch
from torch.utils._pytree import tree_flatten, tree_unflatten

from gnplace.exceptions import InvalidArgument
from gnplace.execute.base import check_device_names, torch_devices
from gnplace.execute.compiler import compile_step
from gnplace.execute.program import Plan, Program
from gnplace.execute.runner import StepOutput, run_step
from gnplace.importers.module_state import held_tensors
from gnplace.importers.torch import hooks_of
from gnplace.importers.trace import autocast_state, input_leaves
from gnplace.units import counted

__all__ = ["apply", "PlacedModule"]


class _PlacedStep(torch.autograd.Function):
    """Runs the whole placed step in ``forward``; ``backward`` hands out the gradients it computed."""

    @staticmethod
    def forward(ctx: Any, placed: PlacedModule, program: Program, plan: Plan,  # type: ignore[override]
                *tensors: torch.Tensor) -> torch.Tensor:
        names = list(program.params)
        inputs = list(tensors[len(names):])
        out = _run(placed, program, plan, tensors[:len(names)], inputs)
        # saved, not kept on ctx: autograd frees them after backward (unless retain_graph), as it frees an eager
        # step's activations, so a loss kept past its backward (total += loss) holds no copy of the gradients
        ctx.save_for_backward(*(out.grads.get(name) for name in names),
                              *(out.input_grads.get(k) for k in range(len(inputs))))
        assert out.loss is not None
        return out.loss.detach().clone()

    @staticmethod
    def backward(ctx: Any, grad_loss: torch.Tensor) -> Any:  # type: ignore[override]
        if torch.is_grad_enabled():  # create_graph=True: the gradients handed out have no graph to differentiate
            raise InvalidArgument(
                "the placed step's gradients were computed when it ran, with no autograd graph of their own: "
                "create_graph=True (a gradient penalty, a second derivative) cannot differentiate them; "
                "compute such a loss on the module itself, not placed"
            )
        grads = [None if g is None else g * grad_loss.to(g.device) for g in ctx.saved_tensors]
        return (None, None, None, *grads)


def _module_devices(graph: Any, node_devices: dict[str, int]) -> dict[str, int]:
    """The device most nodes of each module path run on (ties: the lower index), by ``node_devices`` (by node name)."""
    counts: dict[str, dict[int, int]] = {}
    for name, path in zip(graph.node_names, graph.module):
        device = node_devices[name]
        per = counts.setdefault(path, {})
        per[device] = per.get(device, 0) + 1
    return {path: min(per, key=lambda d: (-per[d], d)) for path, per in counts.items()}


def _run(placed: PlacedModule, program: Program, plan: Plan, params: Sequence[torch.Tensor],
         inputs: list[Any]) -> StepOutput:
    """Run ``program`` (the placed step, or its forward alone) by ``plan``; write back the buffers it updates.

    ``params`` are the module's parameters, in ``program.params`` order; ``inputs`` the inputs, each on its device.
    """
    live = placed.live_state(program)
    detached = {name: t.detach() for name, t in zip(program.params, params)}
    out = run_step(program, plan, placed.devices, params=detached, inputs=inputs,
                   buffers={name: live[name] for name in program.buffers})
    with torch.no_grad():  # the step's running statistics, as an eager training step updates them
        for name, value in out.buffers.items():
            live[name].copy_(value)
    return out


class PlacedModule(torch.nn.Module):
    """A module whose call runs one training step of the wrapped module placed, and returns its loss.

    Build it with :func:`apply`. ``placed(*inputs)`` returns the loss; ``backward()`` on it fills
    ``.grad`` of the wrapped module's parameters (which now live on their placed devices).

    Attributes:
        module (torch.nn.Module): the wrapped module (its parameters are this module's).
        program (Program): the recorded step.
        plan (Plan): where each op runs.
        devices (list[torch.device]): the torch device of each cluster device.
    """

    def __init__(self, module: torch.nn.Module, step: Any, placement: Any, devices: Sequence[torch.device]) -> None:
        super().__init__()
        self.module = module
        if hasattr(placement, "check"):  # a Placement: every op on a device of its cluster, one clear error if not
            placement.check(step.graph)
        self.program = compile_step(step)
        self.plan = self.program.plan(placement)
        self.devices = list(devices)
        self.param_names = list(self.program.params)
        # where each node of the step runs, by name: a call in other train / eval modes records the step again and
        # runs each of its ops where the op of that name runs (_step_in_modes)
        self.node_devices = dict(zip(step.graph.node_names, self.program.node_devices(placement).tolist()))
        self.module_devices = _module_devices(step.graph, self.node_devices)
        self.step_loss = step.loss  # what a recording in other modes computes the loss with
        self.input_spec = step.trace.input_spec or input_leaves(tuple(step.trace.inputs))[1]
        self._refuse_tensors_in_constants(step)
        # train or eval, as when applied, by submodule name (one added later has no recorded mode: it is warned of)
        self.recorded_modes = {name: m.training for name, m in module.named_modules()}
        self.recorded_autocast = step.trace.autocast  # the torch.autocast regions the step was recorded in
        self.recorded_attributes = _plain_attributes(module)  # Python numbers and flags: constants of the step
        self.recorded_layout = _layout(module)  # its submodules' classes, its parameters' and buffers' names
        self.recorded_hooks = set(hooks_of(module))  # one registered later is not in the step: warned of
        self._warned: set[tuple[Any, str]] = set()  # (attribute or hook, what of it) warned of
        # plain tensor attributes the step reads (self.scale = torch.ones(4), no buffer): constants of it too
        self.recorded_tensors = _tensor_constants(module, step)
        self.recorded_state = _recorded_state(self.program)  # dtype and shape of each parameter and buffer, once
        self._check_state(moved=False)
        # state_dict() gives the wrapped module's keys (0.weight, not module.0.weight): a checkpoint of the placed
        # module loads into the model, and the model's into it (_load_from_state_dict), as eager's would
        self._register_state_dict_hook(_state_without_wrapper)
        # and a load_state_dict names the keys it misses or did not expect so (0.bias, not module.0.bias)
        self.register_load_state_dict_post_hook(_keys_without_wrapper)
        self._loading: tuple[str, int, int, list[str], int] | None = None  # set while a state dict loads
        named = dict(module.named_parameters())
        with torch.no_grad():
            for name in self.param_names:
                p = named[name]
                device = self.devices[self.plan.param_device.get(name, 0)]
                grad, p.grad = p.grad, None  # a gradient of an eager step before: it moves with its parameter, as
                # module.to() moves it (left behind, the next backward added a gradient of another device to it)
                p.data = p.data.to(device)
                if grad is not None:
                    p.grad = grad.to(device)

    # the step runs op by op on the devices its placement gives them: torch.compile(placed) runs it so too, as
    # placed, rather than tracing the executor itself (minutes of recompiling, once per op, fused across devices).
    # No reason= keyword: torch took it from 2.8 on, and under the torch 2.4-2.7 gnplace takes it was a TypeError
    # at the import of gnplace.apply
    @torch.compiler.disable
    def forward(self, *inputs: Any, **named: Any) -> torch.Tensor:
        """Run the placed step on ``inputs`` (shaped as the example inputs); returns the loss.

        Under ``torch.compile`` it runs so too, uncompiled (compile the module before :func:`apply` instead). Under
        ``torch.no_grad()`` or ``torch.inference_mode()`` it runs the forward and loss alone (:meth:`forward_only`).
        In other train / eval modes than at :func:`apply` (``model.eval()`` for a validation loop) it runs the step
        recorded again in those modes, at their first call, on the same devices (:meth:`_step_in_modes`).

        An input may be given by its name in the wrapped module's ``forward`` (``placed(x, labels=y)``), where it
        is one of the example inputs (they were given by position). A parameter of ``forward`` after them given its
        default (``weight=None``, by name or by position) is as if left out: the step was recorded with it.

        Raises:
            InvalidArgument: if the inputs differ in number, nesting, shape or dtype from the recorded
                step's, a constant (not a tensor) differs, an input requires a gradient that the step was
                not recorded to compute, a submodule's train or eval mode changed since :func:`apply` and its layers
                too (in other modes alone, it runs the step recorded in them: :meth:`_step_in_modes`), it is called
                under another ``torch.autocast`` than the step was recorded under (or none), under another default
                dtype (``torch.set_default_dtype``) where an op of the step makes a tensor of it, an input is named
                that is not among the example inputs, an input or the module's state is on the meta device, or a
                parameter's or buffer's dtype or shape (``module.double()``) or a parameter's device
                (``module.to(...)``) changed since, or it is called under a ``torch.func`` transform (``vmap``,
                ``grad``).
        """
        transforms_active = getattr(torch._C, "_are_functorch_transforms_active", lambda: False)
        if transforms_active():  # was torch's RuntimeError: an autograd.Function 'must override setup_context'
            raise InvalidArgument(
                "the placed module is called under a torch.func transform (grad, vmap, jacrev, ...), which cannot "
                "follow the placed step (it computes its gradients as it runs): call it as a module and take the "
                "gradients with loss.backward() or torch.autograd.grad"
            )
        if named or len(inputs) > self.input_spec.num_children:
            inputs = self._by_position(inputs, named)
        switched = any(self.recorded_modes.get(name, m.training) != m.training
                       for name, m in self.module.named_modules())
        autocast = autocast_state()
        if autocast != self.recorded_autocast:
            raise InvalidArgument(
                f"the placed module is called {_autocast_text(autocast)}, but its step was recorded "
                f"{_autocast_text(self.recorded_autocast)} and runs the casts it was recorded with, not those eager "
                "would make now: call it as it was recorded, or apply again in the autocast state it is called in"
            )
        _check_default_dtype(self.program)
        self._check_state(moved=True)
        self._warn_changed_attributes()
        leaves, spec = input_leaves(_keyed_as(inputs, self.input_spec))
        if spec.num_children != self.input_spec.num_children:
            raise InvalidArgument(f"the placed step takes {counted(self.input_spec.num_children, 'input')}, "
                                  f"got {len(inputs)}")
        if spec != self.input_spec:
            raise InvalidArgument(f"the placed step takes inputs nested as {_nesting(self.input_spec)} (the example "
                                  f"inputs), got {_nesting(spec)}")
        for k, (x, recorded) in enumerate(zip(leaves, self.program.inputs)):
            if isinstance(x, torch.Tensor) != isinstance(recorded, torch.Tensor) or (
                    not isinstance(x, torch.Tensor) and not _same_constant(x, recorded)):
                raise InvalidArgument(
                    f"{self._input_label(k)} is {_show(x)}; the step was recorded with {_show(recorded)}, a "
                    "constant of the step: apply again with it"
                )
            if isinstance(x, torch.Tensor):
                if x.shape != recorded.shape:
                    last = (x.dim() == recorded.dim() and x.dim() > 0 and x.shape[0] < recorded.shape[0]
                            and x.shape[1:] == recorded.shape[1:])
                    raise InvalidArgument(
                        f"{self._input_label(k)} has shape {tuple(x.shape)}; the step was recorded for "
                        f"{tuple(recorded.shape)} (apply again with it"
                        + ("; a DataLoader's last, smaller batch: DataLoader(..., drop_last=True))" if last else ")")
                    )
                if x.dtype != recorded.dtype:
                    raise InvalidArgument(f"{self._input_label(k)} has dtype {x.dtype}; the step was recorded for "
                                          f"{recorded.dtype} (convert it, or apply again with it)")
                if x.is_meta:  # was a NotImplementedError ('Cannot copy out of meta tensor') from .to() below
                    raise InvalidArgument(f"{self._input_label(k)} is on the meta device (a shape with no data), and "
                                          "the placed step computes on data: give it a tensor with data")
                # (under torch.no_grad no gradient can be asked of the loss: the forward runs alone, as eager's does)
                if x.requires_grad and torch.is_grad_enabled() and k not in self.program.input_grads:
                    raise InvalidArgument(
                        f"{self._input_label(k)} requires grad, but the step was recorded without its gradient: "
                        "give apply example inputs with requires_grad=True where the gradient is wanted"
                    )
        # in other train / eval modes than at apply (model.eval() for validation): the step recorded in them, on
        # inputs checked first (recorded on a refused batch, it was kept for these modes: later calls failed)
        program, plan, forward_only = self._step_in_modes(leaves) if switched else \
            (self.program, self.plan, None)
        if switched:  # an op only these modes have may read the default dtype (y + torch.arange(3) / 3 in eval)
            _check_default_dtype(program)
        moved = [_laid_out_as(x.to(self.devices[plan.input_device.get(k, 0)]), recorded)
                 if isinstance(x, torch.Tensor) else x
                 for k, (x, recorded) in enumerate(zip(leaves, self.program.inputs))]
        named = dict(self.module.named_parameters())
        params = [named[n] for n in program.params]
        if not (torch.is_grad_enabled() and any(isinstance(t, torch.Tensor) and t.requires_grad
                                                for t in (*params, *moved))):
            # no gradient can be asked of the loss (torch.no_grad, inference_mode, nothing requires grad): the
            # forward and loss alone, as eager computes them then, not the backward too (3 times the forward's work)
            forward = self.forward_only() if not switched else forward_only
            if forward is not None:
                out = _run(self, *forward, params, moved)
                assert out.loss is not None
                return out.loss.detach().clone()
        loss: torch.Tensor = _PlacedStep.apply(self, program, plan, *params, *moved)
        return loss

    def _step_in_modes(self, leaves: list[Any]) -> tuple[Program, Plan, tuple[Program, Plan] | None]:
        """The step in the module's train / eval modes now, its plan and its forward alone; recorded once per modes.

        Once per set of frozen parameters too: one frozen at the recording is a constant of that step.

        Recorded on the call's inputs (``leaves``, checked against the example inputs' shapes and constants), each
        input with a gradient where the step at :func:`apply` computes one. Each op runs where the op of the same name
        in the placed step runs; an op only these modes have (batch norm's kernel for running statistics) where
        most ops of its module run, or of the nearest module above it, and each parameter where it is (its update
        node has its name).

        Raises:
            InvalidArgument: if the module's layers changed since :func:`apply` (a layer added, a parameter removed),
                or a parameter would be updated elsewhere than it is (no such step is known).
        """
        from gnplace.importers.torch import import_step

        # and per set of frozen parameters: one frozen at the recording is a constant of that step, without gradient
        key = (tuple((name, m.training) for name, m in self.module.named_modules()),
               tuple(name for name, p in self.module.named_parameters() if not p.requires_grad))
        steps: dict[Any, tuple[Program, Plan, tuple[Program, Plan] | None]] = \
            self.__dict__.setdefault("_mode_steps", {})
        if key not in steps:
            if "node_devices" not in self.__dict__:  # was an AttributeError
                raise InvalidArgument("the module's train / eval modes changed since apply, and this placed module "
                                      "was saved before gnplace ran a step in other modes (2026-12-07): apply again "
                                      "on the module in these modes, or call it in the modes it was applied in")
            change = _layout_change(self.recorded_layout, _layout(self.module))
            if change is not None:  # recorded now, the step would run it, where the step at apply does not
                raise InvalidArgument(f"the module's train / eval modes changed since apply, and its layers too "
                                      f"({change}): apply again on the module as it is now")
            example = [_recordable(x, k in self.program.input_grads) if isinstance(x, torch.Tensor) else x
                       for k, x in enumerate(leaves)]
            # every parameter frozen since apply (a model evaluated after training) and no input with a gradient:
            # no training step to record (UnsupportedGraph, where eager and the step at apply compute the loss); it
            # is recorded with them trainable, and such a call runs its forward alone, which no gradient changes
            frozen = [p for p in self.module.parameters() if not p.requires_grad]
            thaw = frozen if len(frozen) == len(list(self.module.parameters())) and not self.program.input_grads else []
            try:
                for p in thaw:
                    p.requires_grad_(True)
                with warnings.catch_warnings():  # apply warned of the module's hooks, globals and loss already
                    warnings.simplefilter("ignore")
                    step = import_step(self.module, tuple(tree_unflatten(example, self.input_spec)),
                                       loss=self.step_loss)
            finally:
                for p in thaw:
                    p.requires_grad_(False)
            # a plain tensor attribute only these modes read (y / self.temperature in eval): changed later, it is
            # warned of as one the step at apply reads (it was not: the step kept its old values silently)
            for attribute, held in _tensor_constants(self.module, step).items():
                self.recorded_tensors.setdefault(attribute, held)
            graph = step.graph
            devices = np.array([self.node_devices.get(name, -1) for name in graph.node_names], dtype=np.int64)
            for v in np.flatnonzero(devices < 0):
                path = graph.module[v]
                while path not in self.module_devices and path:
                    path = path.rpartition(".")[0]
                devices[v] = self.module_devices.get(path, 0)
            program = compile_step(step)
            plan = program.plan(devices)
            elsewhere = [name for name, d in plan.param_device.items() if d != self.plan.param_device.get(name, d)]
            if elsewhere:
                raise InvalidArgument(
                    f"the module's train / eval modes changed since apply, and in these modes parameter "
                    f"{elsewhere[0]!r} would be updated on another device than it is: apply again on the module "
                    "in these modes"
                )
            steps[key] = (program, plan, program.forward_only(plan))
            self.__dict__.setdefault("_mode_attributes", {})[key] = _plain_attributes(self.module)
        # a number forward reads is a constant of this step too: set again since it was recorded, it is warned of (the
        # warning of a change since apply comes once, and a later change of one only these modes read was silent)
        self._warn_numbers_changed(self.__dict__.get("_mode_attributes", {}).get(key, {}), "value in modes",
                                   "the step in these train / eval modes")
        return steps[key]

    def forward_only(self) -> tuple[Program, Plan] | None:
        """The placed step's forward and loss alone and their plan, which a call that computes no gradient runs.

        :meth:`Program.forward_only <gnplace.execute.program.Program.forward_only>` of :attr:`program`, worked out at
        the first such call and kept (not saved with the module); ``None``: such a call runs the whole step.
        """
        if "_forward_step" not in self.__dict__:
            self.__dict__["_forward_step"] = self.program.forward_only(self.plan)
        made: tuple[Program, Plan] | None = self.__dict__["_forward_step"]
        return made

    def __getstate__(self) -> dict[str, Any]:
        """The module's state for pickling (``torch.save``), less the forward step kept (:meth:`forward_only`)."""
        state: dict[str, Any] = super().__getstate__()
        state.pop("_forward_step", None)
        state.pop("_mode_steps", None)
        state.pop("_mode_attributes", None)
        return state

    def _refuse_tensors_in_constants(self, step: Any) -> None:
        """Refuse an example input that is no tensor nor container apply follows, yet holds a tensor the step reads.

        A dataclass batch (``Batch(x, y)``, ``forward(batch)`` reading ``batch.x``) is one leaf of the inputs,
        a constant of the step, and the tensors it holds were recorded as constants: every later batch was
        refused as another constant, with advice (apply again with it) that could not help.

        Raises:
            InvalidArgument: naming the input, its class and the attribute, and the fix.
        """
        read = {id(x) for _, x in held_tensors(step.trace.ops)}
        for k, leaf in enumerate(self.program.inputs):
            if isinstance(leaf, torch.Tensor):
                continue
            held = next((name for name, value in _attributes(leaf)
                         if any(isinstance(x, torch.Tensor) and id(x) in read for x in tree_flatten(value)[0])), None)
            if held is not None:
                kind = type(leaf).__name__
                raise InvalidArgument(
                    f"{self._input_label(k)} is a {kind} whose tensor {held} the step reads, but apply follows "
                    f"only tensors in tuples, lists, dicts and namedtuples: {held} would stay the example's at "
                    f"every call; register {kind} with torch.utils._pytree (torch.export.register_dataclass({kind}) "
                    "for a dataclass) before recording, or pass its tensors as inputs"
                )

    def _load_from_state_dict(self, state_dict: Any, prefix: str, local_metadata: Any, strict: bool,
                              missing_keys: list[str], unexpected_keys: list[str], error_msgs: list[str]) -> None:
        """Read the wrapped module's state dict (``0.weight``, as :meth:`state_dict` gives) into it.

        One keyed as its attribute (``module.0.weight``) is read too (:func:`_into_wrapper`).
        """
        _into_wrapper(self.module, state_dict, prefix)
        # where the wrapped module's keys begin in the lists it reports into, for _keys_without_wrapper
        self._loading = (prefix, len(missing_keys), len(unexpected_keys), error_msgs, len(error_msgs))
        super()._load_from_state_dict(state_dict, prefix, local_metadata, strict, missing_keys, unexpected_keys,
                                      error_msgs)

    def _by_position(self, inputs: tuple[Any, ...], named: dict[str, Any]) -> tuple[Any, ...]:
        """``inputs`` followed by the ``named`` ones, in the order of the wrapped module's ``forward`` parameters.

        Raises:
            InvalidArgument: if a name is not that of an example input (a parameter the step was recorded with
                its default for, one given by position too, or no parameter at all).
        """
        import inspect

        count = self.input_spec.num_children
        try:
            signature = list(inspect.signature(self.module.forward).parameters.values())
        except (TypeError, ValueError):  # no signature to read
            signature = []
        parameters = [p for p in signature if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
        order = [p.name for p in parameters]
        twice = sorted(set(named) & set(order[:len(inputs)]))  # before the defaults are dropped below: placed(x, y,
        if twice:  # 1.0, scale=1.0) dropped both and ran, where eager raises TypeError ("got multiple values")
            raise InvalidArgument(f"input {twice[0]!r} is given both by position and by name")
        # a parameter after the example inputs given its default (weight=None) is as if left out: the step was
        # recorded with its default, a constant of it, as eager computes when it is left out
        given = list(inputs)
        while count < len(given) <= len(parameters) and _is_default(given[-1], parameters[len(given) - 1]):
            given.pop()
        by_name = {p.name: p for p in signature if p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY)}
        named = {name: value for name, value in named.items()
                 if not (name in by_name and name not in order[:count] and _is_default(value, by_name[name]))}
        for p in parameters[len(given):count]:
            if p.name not in named or p.kind == p.POSITIONAL_ONLY:
                break
            given.append(named.pop(p.name))
        recorded = ", ".join(order[:count]) if len(order) >= count else f"{count} inputs"
        if set(named) & set(order[:count]):
            raise InvalidArgument(f"input {order[len(given)]!r} is not given (the placed step takes {recorded})")
        if named:
            raise InvalidArgument(
                f"input {sorted(named)[0]!r} is not one of the example inputs the placed step was recorded with "
                f"({recorded}, by position; forward's other parameters are constants of the step): name only "
                "those, or apply again with it among the example inputs"
            )
        return tuple(given)

    def live_state(self, program: Program | None = None) -> dict[str, torch.Tensor]:
        """The module's buffers and frozen parameters as they are now: the step reads them at each call.

        Args:
            program (Program, optional): the step whose frozen parameters to give (default: :attr:`program`; a step
                recorded in other modes has those frozen at its recording).

        Raises:
            InvalidArgument: if a parameter frozen when the step was recorded trains now (the step has
                no gradient for it).
        """
        state = dict(self.module.named_buffers())
        params = dict(self.module.named_parameters())
        program = self.program if program is None else program
        unfrozen = sorted(k for k in program.buffers if k in params and params[k].requires_grad)
        if unfrozen:
            raise InvalidArgument(f"parameter {unfrozen[0]} was frozen when the step was recorded and trains now: "
                                  "apply again to get its gradient")
        state.update({k: p for k, p in params.items() if k in program.buffers})
        return state

    def _warn_changed_attributes(self) -> None:
        """Warn, once per attribute, that a Python attribute changed since the step was recorded.

        A number or a flag a submodule's ``forward`` reads (``self.scale = 2.0``) was recorded as a constant of
        the step: set to 3.0 later, the placed step still computes with 2.0. An attribute ``forward`` does not
        read (a counter) changes nothing, hence a warning rather than a refusal. So for a submodule, parameter or
        buffer added since (``net.layers.append(...)``), or a submodule replaced by one of another class (a ``ReLU``
        by a ``GELU``): the recorded step does not have it.

        Once per attribute, not per value: a counter the training loop sets each step (``net.global_step = k``) warned
        at every step, and the set of what was warned of grew by an entry a step.
        """
        modules = dict(self.module.named_modules())
        for (where, name), (recorded_tensor, version) in self.recorded_tensors.items():
            value = getattr(modules.get(where), name, None)
            if not isinstance(value, torch.Tensor) or (value is recorded_tensor and value._version == version):
                continue
            how = "written in place" if value is recorded_tensor else "assigned another tensor"
            if ((where, name), how) not in self._warned:
                self._warned.add(((where, name), how))
                warnings.warn(f"gnplace.apply: tensor attribute {name} of module {where or 'the module'!r} was {how} "
                              "since the step was recorded, and the placed step still computes with its recorded "
                              "values: register it as a buffer (register_buffer) to have it read at each call, or "
                              "apply again", stacklevel=3)
        # a placed module pickled before hooks were recorded has none to compare with: its hooks as they are now
        recorded_hooks = self.__dict__.setdefault("recorded_hooks", set(hooks_of(self.module)))
        for handle, hook in hooks_of(self.module).items():
            if handle not in recorded_hooks and (handle, "hook") not in self._warned:
                self._warned.add((handle, "hook"))
                warnings.warn(f"gnplace.apply: {hook} was registered since the step was recorded, and the placed "
                              "step does not run it: what it would compute into the step (a changed input or "
                              "output) is not computed, and it sees no activation; apply again to record what it "
                              "computes (it then runs once, at the recording)", stacklevel=3)
        change = _layout_change(self.recorded_layout, _layout(self.module))
        if change is not None and (("", "layout"), change) not in self._warned:
            self._warned.add((("", "layout"), change))
            warnings.warn(f"gnplace.apply: {change} since the step was recorded; if forward uses it, the placed step "
                          "still computes as recorded, without it: apply again to use it", stacklevel=3)
        self._warn_numbers_changed(self.recorded_attributes, "value", "the step")

    def _warn_numbers_changed(self, recorded: dict[Any, Any], tag: str, step: str) -> None:
        """Warn once per attribute and ``tag`` of each number or flag of ``recorded`` whose value changed since.

        ``recorded`` is :func:`_plain_attributes` of the module when ``step`` was recorded; the step computes with it.
        """
        now = _plain_attributes(self.module)
        for key, was in recorded.items():
            value = now.get(key, was)
            if value != was and (key, tag) not in self._warned:
                self._warned.add((key, tag))
                where, name = key
                warnings.warn(f"gnplace.apply: attribute {name} of module {where or 'the module'!r} is {value!r} now "
                              f"and was {was!r} when {step} was recorded; if forward reads it, the placed step still "
                              "computes with the recorded value: apply again to use the new one", stacklevel=4)

    def _check_state(self, *, moved: bool) -> None:
        """Refuse a module whose parameters or buffers are no longer those the step was recorded with.

        A ``module.double()``, ``half()`` or a replaced layer after the recording changes a dtype or a
        shape the recorded ops were made for, and they would fail one by one inside the step; a
        ``module.to(device)`` (``moved``: after :func:`apply` put each parameter on its device) takes
        the parameters off the devices the placement gives them.

        Raises:
            InvalidArgument: naming the first parameter or buffer that changed, and the fix.
        """
        redo = "record the step again (import_step), place its graph again and apply again"
        params = dict(self.module.named_parameters())
        state = {**dict(self.module.named_buffers()), **params}
        on_meta = None
        for name, (dtype, shape) in self.recorded_state.items():
            kind = "parameter" if name in params or name in self.program.params else "buffer"
            now = state.get(name)
            if now is None:
                raise InvalidArgument(f"{kind} {name} of the recorded step is no longer in the module: {redo}")
            if now.dtype != dtype or tuple(now.shape) != shape:
                raise InvalidArgument(
                    f"{kind} {name} is {now.dtype} {list(now.shape)} now; the step was recorded with {dtype} "
                    f"{list(shape)} (the module changed since, e.g. by .double() or a new layer): {redo}"
                )
            if now.is_meta and on_meta is None:
                on_meta = f"{kind} {name}"
        if moved:
            for name in self.param_names:
                want = self.devices[self.plan.param_device.get(name, 0)]
                now_on = params[name].device
                if now_on.type != want.type or (want.index is not None and now_on.index != want.index):
                    raise InvalidArgument(
                        f"parameter {name} is on {now_on}, but the placement keeps it on {want} (the module was "
                        "moved since apply, e.g. by .to() or .cuda()): apply again to place it"
                    )
        if on_meta is not None:  # a model built on the meta device to be placed: a NotImplementedError from .to()
            raise InvalidArgument(
                f"{on_meta} is on the meta device (a shape with no data), and the placed step computes on data: "
                "give the module its weights first (module.to_empty(device='cpu'), then load_state_dict)"
            )

    def _input_label(self, leaf: int) -> str:
        """``input k``, or ``input leaf k`` when the inputs nest (leaves counted in order)."""
        return f"input {leaf}" if self.input_spec.num_leaves == self.input_spec.num_children else f"input leaf {leaf}"


def apply(
    module: torch.nn.Module,
    placement: Any,
    example_inputs: tuple[Any, ...],
    *,
    loss: Callable[[Any], torch.Tensor] | None = None,
    devices: Sequence[str] | None = None,
    step: Any = None,
    cluster: Any = None,
) -> PlacedModule:
    """A module whose training step runs placed (see the module docstring).

    Args:
        module (torch.nn.Module): the model.
        placement (Placement, str or Path): a placement of the training graph of ``module`` on
            ``example_inputs`` (``import_step(module, example_inputs, loss=loss).graph``), on a cluster whose
            devices are torch devices here; or a placement file of it, as ``gnplace place MODULE:FACTORY -o
            FILE``, ``scripts/place.py`` and ``gnplace finetune`` (``OUT/placement.json``) write.
        example_inputs (tuple): inputs shaped as the training batches (a lone tensor is one input);
            those with ``requires_grad`` get gradients when the placed module is called with such inputs.
        loss (callable, optional): maps the module's output to a scalar loss (default: the module returns it).
        devices (Sequence[str], optional): torch device of each cluster device (default: CPUs ``cpu``,
            GPUs ``cuda:0..``).
        step (ImportedStep, optional): the step already recorded (default: recorded here). It computes the loss
            it was recorded with: ``loss=`` given with it must be that same function (or be left out).
        cluster (Cluster, str or Path, optional): with a placement file, the cluster it was made for, or its
            preset name or YAML file (default: the preset the file names).

    Returns:
        PlacedModule: call it with a batch to get the loss; ``backward()`` fills the parameters' gradients. The
        parameters are moved to their placed devices in place, their ``.grad`` with them, but not an optimizer's
        state (``apply`` is given no optimizer): make the optimizer after ``apply``, or move the state of one made
        before with ``optimizer.load_state_dict(optimizer.state_dict())``.

    Raises:
        InvalidArgument: for what is no module, step, device name or loss of the kinds above, a module already
            placed (a :class:`PlacedModule`: give its ``.module``), a ``loss=`` other than the one ``step=`` was
            recorded with, or a module whose parameters or buffers are on the meta device (no
            data to run the step on).
        InvalidPlacement: if the placement is of another graph or cluster, or the file cannot be read as one.
        UnsupportedGraph: if the model's training step cannot be recorded (an op the importer cannot follow).
        ExecutionFailed: if the placed step cannot run on the devices named (a CUDA device torch does not see), or
            cannot run op by op (an ``nn.Embedding(max_norm=...)``, which renormalises its weight in place).

    Examples:
        >>> import torch
        >>> from gnplace.cluster import load_cluster
        >>> from gnplace.importers.torch import import_step
        >>> from gnplace.placement import Placement
        >>> net = torch.nn.Sequential(torch.nn.Linear(4, 8), torch.nn.ReLU(), torch.nn.Linear(8, 1))
        >>> x = torch.randn(16, 4)
        >>> graph = import_step(net, (x,), loss=lambda y: y.square().mean()).graph
        >>> placement = Placement([k % 2 for k in range(graph.num_ops)], load_cluster("k80x2"))
        >>> placed = apply(net, placement, (x,), loss=lambda y: y.square().mean(), devices=["cpu", "cpu"])
        >>> placed(x).backward()
        >>> net[0].weight.grad.shape
        torch.Size([8, 4])
    """
    from gnplace.importers.torch import ImportedStep, import_step
    from gnplace.importers.trace import check_loss

    check_device_names(devices)  # before the step is recorded
    check_loss(loss)  # loss=3 was an UnsupportedGraph from the recording, "'int' object is not callable"
    if not isinstance(module, torch.nn.Module):  # None was an AttributeError inside the recording
        raise InvalidArgument(f"apply needs the model, a torch.nn.Module, got {reprlib.repr(module)}")
    if isinstance(module, PlacedModule):  # was recorded as a model of its own: "placement has 19 entries, graph
        # 'PlacedModule' has 25 ops", no word of what to give instead
        raise InvalidArgument("apply: the module is already placed (a PlacedModule); apply to the model it wraps, "
                              "placed.module, to place it again")
    if step is None:
        step = import_step(module, example_inputs, loss=loss)
    elif not isinstance(step, ImportedStep):  # another object was an AttributeError ('graph')
        raise InvalidArgument(f"step must be the model's ImportedStep (gnplace.importers.torch.import_step), "
                              f"got {reprlib.repr(step)}")
    if loss is not None:
        _check_step_loss(loss, step)
        _warn_captured_tensors(loss, step)
    _warn_forward_globals(module, step)
    if isinstance(placement, (str, os.PathLike)):
        from gnplace.placement import load_placement

        # the command line names a module:factory's graph after the factory, import_step after the module's
        # class: the names differ by design, and every op name must match anyway
        placement = load_placement(placement, step.graph, cluster, warn_other_name=False)
    elif cluster is not None:
        raise InvalidArgument("cluster= goes with a placement file; a Placement holds its own cluster")
    placed_on = getattr(placement, "cluster", None)
    if placed_on is None:
        raise InvalidArgument("apply needs a Placement or a placement file (it names the cluster whose devices "
                              "run the step)")
    return PlacedModule(module, step, placement, torch_devices(placed_on, devices))


def _recordable(x: torch.Tensor, grad: bool) -> torch.Tensor:
    """``x`` detached to record a step on, requiring grad where ``grad``; a copy of it where it is an inference tensor.

    A batch made under ``torch.inference_mode()`` (a validation loader's) cannot be saved for the recording's
    backward: the step in eval mode failed to record (UnsupportedGraph), where eager's eval call computes on it.
    """
    with torch.inference_mode(False):
        detached = x.detach()
        if detached.is_inference():
            detached = detached.clone()
        return detached.requires_grad_(grad)


def _check_default_dtype(program: Program) -> None:
    """Refuse a call under another default dtype than ``program`` was recorded under, where an op of it reads it.

    Raises:
        InvalidArgument: naming both dtypes and the fix.
    """
    recorded_default = getattr(program, "default_dtype", None)  # None: no op of the step reads it
    if recorded_default is not None and torch.get_default_dtype() != recorded_default:
        raise InvalidArgument(
            f"torch's default dtype is {torch.get_default_dtype()} now, and the placed step was recorded under "
            f"{recorded_default}: its ops that make floating tensors without a dtype (torch.ones(n), an integer "
            "tensor divided) make the recorded one, not what eager would make now: call it under "
            f"torch.set_default_dtype({recorded_default}), or apply again under the default it is called in"
        )


def _check_step_loss(loss: Callable[[Any], torch.Tensor], step: Any) -> None:
    """Refuse a ``loss=`` other than the one ``step`` was recorded with: the recorded step computes its own.

    ``apply(net, p, x, loss=L, step=s)`` with ``s`` recorded under another loss ran ``s``'s and ignored ``L``.

    Raises:
        InvalidArgument: saying which loss the step computes.
    """
    recorded = getattr(step, "loss", None)
    if loss is recorded or (recorded is not None and loss == recorded):  # a bound method is made anew on each access
        return

    def named(fn: Any) -> str:
        return str(getattr(fn, "__qualname__", None) or reprlib.repr(fn))

    had = f"another ({named(recorded)})" if recorded is not None else "none (the module returned its loss)"
    raise InvalidArgument(f"apply: loss={named(loss)} is not the loss step= was recorded with, {had}, and the "
                          "recorded step computes its own: give import_step's loss or leave loss= out")


def _attributes(value: Any) -> list[tuple[str, Any]]:
    """``(name, value)`` of an object's instance attributes (``__dict__`` and ``__slots__``); none of a built-in."""
    found = list(getattr(value, "__dict__", {}).items())
    for cls in type(value).__mro__:
        for name in getattr(cls, "__slots__", ()):
            if isinstance(name, str) and hasattr(value, name):
                found.append((name, getattr(value, name)))
    return found


def _state_without_wrapper(placed: torch.nn.Module, state: Any, prefix: str, local_metadata: Any) -> None:
    """A :class:`PlacedModule`'s state dict hook: its wrapped module's entries under the wrapped module's own keys.

    ``module.0.weight`` becomes ``0.weight`` (after ``prefix``, where the placed module is itself a submodule),
    and so for the version metadata, so that the state dict is the wrapped module's: the model loads it.
    """
    inner = prefix + "module."
    for key in [k for k in state if k.startswith(inner)]:  # the placed module's own entries come last: order kept
        state[prefix + key[len(inner):]] = state.pop(key)
    metadata = getattr(state, "_metadata", None)
    if metadata is not None:
        for key in [k for k in metadata if k == inner[:-1] or k.startswith(inner)]:
            metadata[prefix[:-1] if key == inner[:-1] else prefix + key[len(inner):]] = metadata.pop(key)


def _keys_without_wrapper(placed: PlacedModule, incompatible: Any) -> None:
    """A :class:`PlacedModule`'s load state dict post hook: the keys it reports under the wrapped module's own keys.

    ``load_state_dict`` named the keys missing from a state dict (or not expected in it), and those of a size
    mismatch, as the placed module's attribute (``module.0.bias``), where :meth:`~torch.nn.Module.state_dict` gives
    and the model takes ``0.bias``: they are renamed so, in place, after ``prefix``.
    """
    loading = placed.__dict__.get("_loading")  # none in a placed module pickled before it was kept
    if loading is None:
        return
    placed._loading = None
    prefix, missing_from, unexpected_from, error_msgs, errors_from = loading
    inner = prefix + "module."
    for keys, start in ((incompatible.missing_keys, missing_from), (incompatible.unexpected_keys, unexpected_from)):
        for k in range(start, len(keys)):
            if keys[k].startswith(inner):
                keys[k] = prefix + keys[k][len(inner):]
    for k in range(errors_from, len(error_msgs)):
        error_msgs[k] = error_msgs[k].replace(f"for {inner}", f"for {prefix}", 1)


def _into_wrapper(module: torch.nn.Module, state: Any, prefix: str) -> None:
    """Key ``state``'s entries after ``prefix`` as the wrapped ``module``'s attribute of a :class:`PlacedModule`.

    ``0.weight`` becomes ``module.0.weight``, in place; a state dict already keyed so (every key begins with
    ``module.``, which none of ``module``'s own does) is left as it is.
    """
    inner = prefix + "module."
    keys = [k for k in state if k.startswith(prefix)]
    if all(k.startswith(inner) for k in keys) and not any(k.startswith("module.") for k in module.state_dict()):
        return
    for key in keys:
        state[inner + key[len(prefix):]] = state.pop(key)


def _warn_captured_tensors(loss: Callable[[Any], torch.Tensor], step: Any) -> None:
    """Warn of each tensor the loss function reads from outside its argument that the recorded step holds.

    ``loss=lambda out: F.cross_entropy(out, y)`` reads ``y`` from a closure or a global: the step recorded
    the tensor ``y`` named then as a constant, and the placed step computes with it at every call, though
    ``y`` names the next batch's targets by then (eager reads the new one): a wrong loss, silently. One that
    requires grad (a learnable temperature) gets no gradient from the placed step, where eager's backward gives it
    one, and is warned of so.
    """
    constants = {id(x) for _, x in held_tensors(step.trace.ops)}
    warned: set[int] = set()
    for name, value in _reads_from_outside(loss):
        if isinstance(value, torch.Tensor) and id(value) in constants and id(value) not in warned:
            warned.add(id(value))
            if value.requires_grad:  # a learnable temperature: eager's backward trains it, the placed step cannot
                warnings.warn(f"gnplace.apply: the loss reads tensor {name!r} ({value.dtype} {list(value.shape)}), "
                              "which requires grad, from outside its argument (a closure, a global or a bound "
                              "argument): the placed step keeps the values it had at the recording and gives it no "
                              "gradient, where eager's backward trains it; make it a parameter of the module (its "
                              "forward returning the loss) to train it", stacklevel=3)
                continue
            warnings.warn(f"gnplace.apply: the loss reads tensor {name!r} ({value.dtype} {list(value.shape)}) from "
                          "outside its argument (a closure, a global or a bound argument): the placed step keeps "
                          f"the values {name!r} had at the recording at every call, not those it names later (the "
                          "next batch's targets); make it an input of the module (forward(x, targets) returning "
                          "the loss) to follow it", stacklevel=3)


def _warn_forward_globals(module: torch.nn.Module, step: Any) -> None:
    """Warn of each tensor a submodule's ``forward`` reads from a global or a closure that the recorded step holds.

    ``MASK = torch.ones(3)`` read in ``forward`` was recorded as a constant: a later ``MASK[0] = 0`` changed
    eager's loss and not the placed step's, and a global ``nn.Parameter`` got no gradient from the placed step
    where eager's backward gives it one, both silently. PyTorch's own modules are not looked into.
    """
    constants = {id(x) for _, x in held_tensors(step.trace.ops)}
    warned: set[int] = set()
    for cls in dict.fromkeys(type(sub) for sub in module.modules()):
        if cls.__module__.startswith("torch."):
            continue
        for name, value in _reads_from_outside(getattr(cls, "forward", None)):
            if not (isinstance(value, torch.Tensor) and id(value) in constants and id(value) not in warned):
                continue
            warned.add(id(value))
            what = f"gnplace.apply: {cls.__name__}.forward reads tensor {name!r} ({value.dtype} {list(value.shape)})"
            if value.requires_grad:
                warnings.warn(f"{what}, which requires grad, from outside the module (a global or a closure): the "
                              "placed step keeps the values it had at the recording and gives it no gradient, where "
                              "eager's backward trains it; register it on the module (a parameter) to train it",
                              stacklevel=3)
            else:
                warnings.warn(f"{what} from outside the module (a global or a closure): the placed step keeps the "
                              "values it had at the recording at every call, not those it holds later; register it on "
                              "the module (register_buffer) to have it read at each call", stacklevel=3)


def _reads_from_outside(fn: Any, depth: int = 0) -> list[tuple[str, Any]]:
    """``(name, value)`` of what ``fn`` reads besides its arguments.

    Its closure cells, the globals its code names, a ``functools.partial``'s bound arguments, and so for the
    functions among them (a few levels deep).
    """
    import functools

    if depth > 3:
        return []
    found: list[tuple[str, Any]] = []
    if isinstance(fn, functools.partial):
        found += [(f"argument {k}", v) for k, v in enumerate(fn.args)] + list(fn.keywords.items())
        found += _reads_from_outside(fn.func, depth + 1)
        return found
    code, closure = getattr(fn, "__code__", None), getattr(fn, "__closure__", None) or ()
    if code is None:
        return found
    for name, cell in zip(code.co_freevars, closure):
        try:
            found.append((name, cell.cell_contents))
        except ValueError:  # an empty cell
            continue
    scope = getattr(fn, "__globals__", {})
    found += [(name, scope[name]) for name in code.co_names if name in scope]
    for _, value in list(found):
        if callable(value) and getattr(value, "__code__", None) is not None and value is not fn:
            found += _reads_from_outside(value, depth + 1)
    return found


def _laid_out_as(x: torch.Tensor, recorded: torch.Tensor) -> torch.Tensor:
    """``x`` with ``recorded``'s strides, so that the step's views see the memory layout it was recorded with.

    A ``reshape`` of a contiguous tensor is recorded as a ``view``, which fails on a transposed or
    channels-last input of the same shape. The copy is differentiable, so an input's gradient still
    reaches it. Where the recorded strides overlap or leave gaps (an expanded or sliced example
    input), ``x`` is made contiguous instead.
    """
    if x.stride() == recorded.stride():
        return x
    if not _dense(tuple(recorded.shape), recorded.stride()):
        return x.contiguous()
    laid_out = torch.empty_strided(tuple(recorded.shape), recorded.stride(), dtype=x.dtype, device=x.device)
    return laid_out.copy_(x)


def _dense(shape: tuple[int, ...], stride: tuple[int, ...]) -> bool:
    """Whether ``stride`` lays ``shape`` out over exactly its elements, each once (a permuted contiguous layout)."""
    expected = 1
    for step, size in sorted((step, size) for size, step in zip(shape, stride) if size > 1):
        if step != expected:
            return False
        expected *= size
    return True


def _autocast_text(state: tuple[tuple[str, str], ...]) -> str:
    """``state`` (:func:`~gnplace.importers.trace.autocast_state`) in words: ``under torch.autocast("cpu", ...)``."""
    if not state:
        return "without torch.autocast"
    return "under " + " and ".join(f'torch.autocast("{device}", dtype={dtype})' for device, dtype in state)


def _plain_attributes(module: torch.nn.Module) -> dict[tuple[str, str], Any]:
    """Each submodule's public attributes that are Python numbers, flags or strings: ``{(submodule, name): value}``."""
    plain = (bool, int, float, complex, str)
    found = {}
    for where, sub in module.named_modules():
        for name, value in vars(sub).items():
            if not name.startswith("_") and name != "training" and isinstance(value, plain):
                found[(where, name)] = value
    return found


#: A module's layout: ``(submodule name, class)`` of each submodule, names of its parameters, names of its buffers.
_Layout = tuple[tuple[tuple[str, type], ...], tuple[str, ...], tuple[str, ...]]


def _layout(module: torch.nn.Module) -> _Layout:
    """The submodules (name and class) and the names of the parameters and buffers of ``module``, in order."""
    return (tuple((name, type(sub)) for name, sub in module.named_modules()),
            tuple(name for name, _ in module.named_parameters()), tuple(name for name, _ in module.named_buffers()))


def _layout_change(recorded: _Layout, now: _Layout) -> str | None:
    """The first difference of ``now`` from ``recorded`` (:func:`_layout`) in words, or ``None`` where they agree.

    Examples:
        >>> net = torch.nn.Sequential(torch.nn.Linear(2, 2))
        >>> before = _layout(net)
        >>> net.append(torch.nn.ReLU())
        Sequential(...)
        >>> _layout_change(before, _layout(net))
        "submodule '1' (ReLU) was added"
    """
    if recorded == now:
        return None
    was, is_now = dict(recorded[0]), dict(now[0])
    for name, kind in is_now.items():
        if name not in was:
            return f"submodule {name!r} ({kind.__name__}) was added"
        if was[name] is not kind:
            return f"submodule {name!r} is a {kind.__name__} now, and was a {was[name].__name__}"
    gone = [name for name in was if name not in is_now]
    if gone:
        return f"submodule {gone[0]!r} ({was[gone[0]].__name__}) was removed"
    for what, old, new in (("parameter", recorded[1], now[1]), ("buffer", recorded[2], now[2])):
        added = [name for name in new if name not in set(old)]
        if added:
            return f"{what} {added[0]} was added"
    return None


def _tensor_constants(module: torch.nn.Module, step: Any) -> dict[tuple[str, str], tuple[torch.Tensor, int]]:
    """Each submodule's plain tensor attribute (no parameter, no buffer) that the recorded step reads, a constant.

    ``{(submodule, name): (the tensor, its version counter)}``, to tell a later change of it.
    """
    read = {id(x) for _, x in held_tensors(step.trace.ops)}
    return {(where, name): (value, value._version) for where, sub in module.named_modules()
            for name, value in vars(sub).items()
            if isinstance(value, torch.Tensor) and not isinstance(value, torch.nn.Parameter) and id(value) in read}


def _recorded_state(program: Program) -> dict[str, tuple[torch.dtype, tuple[int, ...]]]:
    """The dtype and shape each parameter and buffer of ``program`` had when its step was recorded.

    A parameter's are its gradient's (autograd gives a gradient its parameter's dtype and shape): the
    program's copy of the parameters is taken when it is compiled, which may be after the module
    changed (``import_step`` keeps the module's own parameter tensors, and ``module.double()`` converts
    them in place). A parameter the loss does not use, and a buffer, go by the program's copy.
    """
    recorded = {name: (t.dtype, tuple(t.shape)) for name, t in (*program.params.items(), *program.buffers.items())}
    for name, ref in program.grads.items():
        if ref is not None and ref.kind == "op":
            op = program.ops[ref.index]
            dtype, shape = op.out_dtypes[ref.output], op.out_shapes[ref.output]
            if dtype is not None and shape is not None:
                recorded[name] = (dtype, tuple(shape))
    return recorded


def _same_constant(value: Any, recorded: Any) -> bool:
    """Whether a non-tensor input equals the one the step was recorded with (and is of its type)."""
    if value is recorded:
        return True
    if type(value) is not type(recorded):
        return False
    if isinstance(value, np.ndarray):
        return value.shape == recorded.shape and value.dtype == recorded.dtype and bool(np.array_equal(value, recorded))
    try:
        return bool(value == recorded)
    except Exception:  # noqa: BLE001 - a comparison that is not a plain truth value: not the same constant
        return False


def _is_default(value: Any, parameter: Any) -> bool:
    """Whether ``value`` is the default of ``parameter`` (an :class:`inspect.Parameter`), a constant, not a tensor."""
    default = parameter.default
    if default is parameter.empty or isinstance(value, torch.Tensor) or isinstance(default, torch.Tensor):
        return False
    return _same_constant(value, default)


def _show(value: Any) -> str:
    """A short description of an input: a tensor's shape, or a constant's repr."""
    if isinstance(value, torch.Tensor):
        return f"a tensor of shape {tuple(value.shape)}"
    text = repr(value)
    return text if len(text) <= 40 else text[:37] + "..."


def _keyed_as(value: Any, spec: Any) -> Any:
    """``value`` with each dict's keys in the order of the same dict in ``spec`` (a pytree spec), where the keys agree.

    A dict's keys are names, not positions: ``{"b": y, "a": x}`` is the batch ``{"a": x, "b": y}``. An
    ``OrderedDict`` keeps its order (its order is part of its meaning); tuples, lists and namedtuples are
    followed into.

    Examples:
        >>> from torch.utils._pytree import tree_flatten
        >>> _, spec = tree_flatten(({"a": 1, "b": [2, {"c": 3, "d": 4}]},))
        >>> _keyed_as(({"b": [2, {"d": 4, "c": 3}], "a": 1},), spec)
        ({'a': 1, 'b': [2, {'c': 3, 'd': 4}]},)
        >>> from collections import namedtuple
        >>> Pair = namedtuple("Pair", "named n")
        >>> _, spec = tree_flatten((Pair({"a": 1, "b": 2}, 3),))
        >>> _keyed_as((Pair({"b": 2, "a": 1}, 3),), spec)
        (Pair(named={'a': 1, 'b': 2}, n=3),)
    """
    children = spec.children()
    if spec.type is dict and type(value) is dict and set(value) == set(spec.context):
        return {key: _keyed_as(value[key], child) for key, child in zip(spec.context, children)}
    if spec.type in (tuple, list) and type(value) is spec.type and len(value) == len(children):
        return spec.type(_keyed_as(item, child) for item, child in zip(value, children))
    if spec.type is namedtuple and type(value) is spec.context:  # torch's pytree: the class is the context
        return spec.context(*(_keyed_as(item, child) for item, child in zip(value, children)))
    return value


def _nesting(spec: Any) -> str:
    """A pytree spec on one line, shortened."""
    text = " ".join(str(spec).split())
    return text if len(text) <= 120 else text[:117] + "..."
