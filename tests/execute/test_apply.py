import copy
import dataclasses
import re
import warnings

import numpy as np
import pytest
import torch

import gnplace
from gnplace.cluster import load_cluster
from gnplace.exceptions import ExecutionFailed, InvalidArgument, InvalidPlacement, UnsupportedGraph
from gnplace.importers.torch import import_step
from gnplace.placement import Placement
from tests.execute.models import CheckpointedDropout


def _assert_same_grads(module, reference):
    """Every parameter's gradient of ``module`` (placed) equals ``reference``'s (eager), parameter by parameter."""
    for a, b in zip(module.parameters(), reference.parameters()):
        torch.testing.assert_close(a.grad, b.grad)


def _loss(y):
    return y.square().mean()


def _placed_at_random_on_two_cpus(net, x):
    """``net`` applied with each op of its step on ``x`` on one of two CPU devices at random (seed 0), and an eager
    copy of it made first."""
    reference = copy.deepcopy(net)
    graph = import_step(net, (x,), loss=_loss).graph
    placement = Placement(np.random.default_rng(0).integers(0, 2, graph.num_ops), load_cluster("k80x2"))
    return gnplace.apply(net, placement, (x,), loss=_loss, devices=["cpu", "cpu"]), reference


def test_placed_module_trains_exactly_like_eager():
    torch.manual_seed(0)
    net = torch.nn.Sequential(torch.nn.Linear(6, 16), torch.nn.Tanh(), torch.nn.Linear(16, 2))
    placed, reference = _placed_at_random_on_two_cpus(net, torch.randn(12, 6))
    ours, theirs = torch.optim.SGD(net.parameters(), lr=0.1), torch.optim.SGD(reference.parameters(), lr=0.1)
    _train_alike(placed, reference, ours, theirs, (12, 6))
    for a, b in zip(net.parameters(), reference.parameters()):
        torch.testing.assert_close(a, b)


def _train_alike(placed, reference, ours, theirs, shape, steps=3):
    """``steps`` steps of ``placed`` with optimizer ``ours`` and of the eager ``reference`` with ``theirs``, one random
    batch of ``shape`` each, the loss :func:`_loss` of the reference's output."""
    for _ in range(steps):
        batch = torch.randn(*shape)
        ours.zero_grad()
        placed(batch).backward()
        ours.step()
        theirs.zero_grad()
        _loss(reference(batch)).backward()
        theirs.step()


def test_inputs_of_another_shape_are_refused():
    net = torch.nn.Linear(4, 1)
    x = torch.randn(8, 4)
    graph = import_step(net, (x,), loss=_loss).graph
    placed = gnplace.apply(net, Placement([0] * graph.num_ops, load_cluster("k80x2")), (x,), loss=_loss,
                           devices=["cpu", "cpu"])
    with pytest.raises(InvalidArgument, match=r"^input 0 has shape \(3, 4\); the step was recorded for \(8, 4\) \(apply "
                                              r"again with it; a DataLoader's last, smaller batch: "
                                              r"DataLoader\(..., drop_last=True\)\)$"):
        placed(torch.randn(3, 4))  # an epoch's last batch
    with pytest.raises(InvalidArgument, match=r"recorded for \(8, 4\) \(apply again with it\)$"):
        placed(torch.randn(8, 5))
    with pytest.raises(InvalidArgument, match="Placement"):
        gnplace.apply(net, [0] * graph.num_ops, (x,), loss=_loss)
    beyond = Placement([0] * (graph.num_ops - 1) + [2], load_cluster("k80x2"))  # k80x2 has devices 0 and 1
    with pytest.raises(InvalidPlacement, match="placed on device 2, but cluster 'k80x2' has devices 0..1"):
        gnplace.apply(net, beyond, (x,), loss=_loss, devices=["cpu", "cpu"])


class _Recurrent(torch.nn.Module):
    """Embedding, a two-layer recurrent layer of ``kind`` and a classifier; returns the token loss."""

    def __init__(self, kind: str) -> None:
        super().__init__()
        self.embed = torch.nn.Embedding(30, 8)
        self.rnn = getattr(torch.nn, kind)(8, 12, num_layers=2, batch_first=True, bidirectional=kind == "GRU")
        self.head = torch.nn.Linear(24 if kind == "GRU" else 12, 30)

    def forward(self, tokens: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
        hidden = self.rnn(self.embed(tokens))[0]
        return torch.nn.functional.cross_entropy(self.head(hidden).flatten(0, 1), targets.flatten())


@pytest.mark.parametrize("kind", ["LSTM", "GRU"])
def test_recurrent_layers_run_placed_with_eager_gradients(kind):
    """nn.LSTM and nn.GRU record through their cells (not oneDNN's CPU-only kernel) and run on two devices."""
    torch.manual_seed(0)
    net = _Recurrent(kind)
    reference = copy.deepcopy(net)
    tokens, targets = torch.randint(0, 30, (3, 5)), torch.randint(0, 30, (3, 5))
    step = import_step(net, (tokens, targets))
    assert not any("rnn" in t for t in step.graph.op_types)
    placement = Placement([k % 2 for k in range(step.graph.num_ops)], load_cluster("k80x2"))
    loss = gnplace.apply(net, placement, (tokens, targets), devices=["cpu", "cpu"], step=step)(tokens, targets)
    loss.backward()
    eager = reference(tokens, targets)
    eager.backward()
    torch.testing.assert_close(loss, eager.detach())
    _assert_same_grads(net, reference)


def test_batch_norm_statistics_update_as_in_eager_training():
    """Running mean, variance and batch count follow eager training, and a load_state_dict is seen."""
    torch.manual_seed(0)
    net = torch.nn.Sequential(torch.nn.Linear(5, 6), torch.nn.BatchNorm1d(6), torch.nn.ReLU(), torch.nn.Linear(6, 1))
    reference = copy.deepcopy(net)
    x = torch.randn(10, 5)
    graph = import_step(net, (x,), loss=_loss).graph
    placement = Placement([k % 2 for k in range(graph.num_ops)], load_cluster("k80x2"))
    placed = gnplace.apply(net, placement, (x,), loss=_loss, devices=["cpu", "cpu"])
    for _ in range(3):
        batch = torch.randn(10, 5)
        placed(batch).backward()
        _loss(reference(batch)).backward()
    for name, value in reference.named_buffers():
        torch.testing.assert_close(dict(net.named_buffers())[name], value)
    assert int(net[1].num_batches_tracked) == 3
    net[1].load_state_dict(torch.nn.BatchNorm1d(6).state_dict())  # statistics reset under the placed module
    reference[1].load_state_dict(torch.nn.BatchNorm1d(6).state_dict())
    batch = torch.randn(10, 5)
    placed(batch)
    reference(batch)
    torch.testing.assert_close(net[1].running_mean, reference[1].running_mean)
    assert int(net[1].num_batches_tracked) == 1


def test_a_lone_tensor_is_one_example_input():
    net = torch.nn.Linear(4, 1)
    x = torch.randn(6, 4)
    graph = import_step(net, x, loss=_loss).graph
    placed = gnplace.apply(net, Placement([0] * graph.num_ops, load_cluster("k80x2")), x, loss=_loss,
                           devices=["cpu", "cpu"])
    torch.testing.assert_close(placed(x), _loss(net(x)).detach())


def test_no_model_or_another_step_is_one_clear_error():
    """apply(None, ...) and step= of another object were AttributeErrors inside the recording and the compile."""
    net, x = torch.nn.Linear(4, 1), torch.randn(6, 4)
    graph = import_step(net, x, loss=_loss).graph
    placement = Placement([0] * graph.num_ops, load_cluster("k80x2"))
    with pytest.raises(InvalidArgument, match=r"^apply needs the model, a torch\.nn\.Module, got None$"):
        gnplace.apply(None, placement, x, loss=_loss, devices=["cpu", "cpu"])
    with pytest.raises(InvalidArgument, match=r"^step must be the model's ImportedStep .*, got 'step'$"):
        gnplace.apply(net, placement, x, loss=_loss, devices=["cpu", "cpu"], step="step")


def test_inputs_given_with_requires_grad_get_eager_gradients():
    """A layer before the placed module trains through it; an input the step was not recorded to differentiate is refused."""
    torch.manual_seed(0)
    front, net = torch.nn.Linear(3, 6), torch.nn.Sequential(torch.nn.Linear(6, 8), torch.nn.Tanh(), torch.nn.Linear(8, 1))
    front_ref, net_ref = copy.deepcopy(front), copy.deepcopy(net)
    example = torch.randn(10, 6, requires_grad=True)
    step = import_step(net, (example,), loss=_loss)
    assert list(step.trace.input_grads) == [0]
    placement = Placement([k % 2 for k in range(step.graph.num_ops)], load_cluster("k80x2"))
    placed = gnplace.apply(net, placement, (example,), loss=_loss, devices=["cpu", "cpu"], step=step)
    batch = torch.randn(10, 3)
    placed(front(batch)).backward()
    _loss(net_ref(front_ref(batch))).backward()
    for a, b in zip([*front.parameters(), *net.parameters()], [*front_ref.parameters(), *net_ref.parameters()]):
        torch.testing.assert_close(a.grad, b.grad)
    plain = import_step(net, (example.detach(),), loss=_loss)
    assert plain.graph.num_ops < step.graph.num_ops and not plain.trace.input_grads
    without = gnplace.apply(net, Placement([0] * plain.graph.num_ops, load_cluster("k80x2")), (example.detach(),),
                            loss=_loss, devices=["cpu", "cpu"], step=plain)
    with pytest.raises(InvalidArgument, match="input 0 requires grad"):
        without(front(batch))


class _Nested(torch.nn.Module):
    """Takes a pair of tensors, a dict of one and a number."""

    def __init__(self) -> None:
        super().__init__()
        self.a, self.b = torch.nn.Linear(5, 3), torch.nn.Linear(4, 3)

    def forward(self, pair, named, scale):
        return ((self.a(pair[0]) + self.b(pair[1])) * scale).square().mean() + self.a(named["x"]).sum()


def test_tensors_nested_in_the_inputs_are_inputs_and_constants_are_checked():
    """A tuple or dict of tensors is followed at every call (it was frozen to the example batch)."""
    torch.manual_seed(0)
    net = _Nested()
    reference = copy.deepcopy(net)
    example = ((torch.randn(6, 5), torch.randn(6, 4)), {"x": torch.randn(2, 5)}, 1.0)
    step = import_step(net, example)
    assert len(step.trace.inputs) == 4 and sorted(step.input_node) == [0, 1, 2]
    placement = Placement([k % 2 for k in range(step.graph.num_ops)], load_cluster("k80x2"))
    placed = gnplace.apply(net, placement, example, devices=["cpu", "cpu"], step=step)
    batch = ((10 * torch.randn(6, 5), torch.randn(6, 4)), {"x": torch.randn(2, 5)}, 1.0)
    loss = placed(*batch)
    loss.backward()
    eager = reference(*batch)
    eager.backward()
    torch.testing.assert_close(loss, eager.detach())
    _assert_same_grads(net, reference)
    pair, named, _ = batch
    with pytest.raises(InvalidArgument, match="input leaf 3 is 3.0; the step was recorded with 1.0"):
        placed(pair, named, 3.0)
    with pytest.raises(InvalidArgument, match="nested as"):
        placed(list(pair), named, 1.0)
    with pytest.raises(InvalidArgument, match="takes 3 inputs, got 2"):
        placed(pair, named)


class _Keyed(torch.nn.Module):
    """Takes a dict of two tensors of different widths."""

    def __init__(self) -> None:
        super().__init__()
        self.a, self.b = torch.nn.Linear(5, 3), torch.nn.Linear(4, 3)

    def forward(self, named):
        return (self.a(named["x"]) * self.b(named["y"])).square().mean()


def test_a_dict_input_is_read_by_key_not_by_order():
    """``{"y": ..., "x": ...}`` is the batch ``{"x": ..., "y": ...}`` (it was refused as another nesting)."""
    torch.manual_seed(0)
    net = _Keyed()
    reference = copy.deepcopy(net)
    example = ({"x": torch.randn(6, 5), "y": torch.randn(6, 4)},)
    placement = Placement([k % 2 for k in range(import_step(net, example).graph.num_ops)], load_cluster("k80x2"))
    placed = gnplace.apply(net, placement, example, devices=["cpu", "cpu"])
    batch = {"y": torch.randn(6, 4), "x": torch.randn(6, 5)}
    loss = placed(batch)
    loss.backward()
    eager = reference(batch)
    eager.backward()
    torch.testing.assert_close(loss, eager.detach())
    _assert_same_grads(net, reference)
    with pytest.raises(InvalidArgument, match="nested as"):
        placed({"x": batch["x"], "z": batch["y"]})


def test_frozen_parameters_are_read_at_each_call():
    """A frozen layer's weights are the module's, not the recorded values (a load_state_dict is seen)."""
    torch.manual_seed(0)
    net = torch.nn.Sequential(torch.nn.Linear(5, 5), torch.nn.ReLU(), torch.nn.Linear(5, 2))
    net[0].requires_grad_(False)
    x = torch.randn(6, 5)
    graph = import_step(net, (x,), loss=_loss).graph
    placed = gnplace.apply(net, Placement([k % 2 for k in range(graph.num_ops)], load_cluster("k80x2")), (x,),
                           loss=_loss, devices=["cpu", "cpu"])
    net.load_state_dict({k: torch.randn_like(v) for k, v in net.state_dict().items()})
    loss = placed(x)
    loss.backward()
    reference = copy.deepcopy(net)
    eager = _loss(reference(x))
    eager.backward()
    torch.testing.assert_close(loss, eager.detach())
    torch.testing.assert_close(net[2].weight.grad, reference[2].weight.grad)
    assert net[0].weight.grad is None
    net[0].requires_grad_(True)  # unfrozen after apply: the step has no gradient for it
    with pytest.raises(InvalidArgument, match="parameter 0.bias was frozen when the step was recorded"):
        placed(x)


class _TwiceNormed(torch.nn.Module):
    """One batch norm called twice, an instance norm with running statistics, a spectral-normed layer."""

    def __init__(self) -> None:
        super().__init__()
        self.fc, self.bn = torch.nn.Linear(4, 4), torch.nn.BatchNorm1d(4)
        self.inorm = torch.nn.InstanceNorm1d(4, track_running_stats=True)
        self.spectral = torch.nn.utils.spectral_norm(torch.nn.Linear(4, 3))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = self.bn(self.fc(torch.relu(self.bn(self.fc(x)))))
        return self.spectral(self.inorm(h.reshape(2, 4, 4)).reshape(8, 4)).square().mean()


def test_every_buffer_write_is_kept_wherever_it_runs():
    """A second batch norm call, writes through a view (instance norm) and out= writes (spectral norm) update buffers."""
    torch.manual_seed(0)
    net = _TwiceNormed()
    reference = copy.deepcopy(net)
    x = torch.randn(8, 4)
    step = import_step(net, (x,))
    copy.deepcopy(net)  # recording left no fake tensor on the module (spectral norm sets its weight in a hook)
    for placement in ([0] * step.graph.num_ops, [k % 2 for k in range(step.graph.num_ops)]):
        placed = gnplace.apply(net, Placement(placement, load_cluster("k80x2")), (x,), devices=["cpu", "cpu"],
                               step=step)
        batch = torch.randn(8, 4)
        placed(batch).backward()
        reference(batch).backward()
        for name, value in reference.named_buffers():
            torch.testing.assert_close(dict(net.named_buffers())[name], value, msg=name)
    assert int(net.bn.num_batches_tracked) == 4  # two calls a step, two steps


class _Checkpointed(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.inner = torch.nn.Sequential(torch.nn.Linear(5, 8), torch.nn.GELU(), torch.nn.Linear(8, 5))
        self.out = torch.nn.Linear(5, 2)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.out(torch.utils.checkpoint.checkpoint(self.inner, x, use_reentrant=False))


def test_a_checkpointed_segment_recomputes_with_the_current_weights():
    """The recomputation in the backward reads the parameters given to the step, not those at recording."""
    torch.manual_seed(0)
    net = _Checkpointed()
    reference = copy.deepcopy(net)
    x = torch.randn(4, 5)
    graph = import_step(net, (x,), loss=_loss).graph
    placed = gnplace.apply(net, Placement([k % 2 for k in range(graph.num_ops)], load_cluster("k80x2")), (x,),
                           loss=_loss, devices=["cpu", "cpu"])
    ours, theirs = torch.optim.SGD(net.parameters(), lr=0.5), torch.optim.SGD(reference.parameters(), lr=0.5)
    for _ in range(3):
        ours.zero_grad()
        theirs.zero_grad()
        placed(x).backward()
        _loss(reference(x)).backward()
        _assert_same_grads(net, reference)
        ours.step()
        theirs.step()


class _ReentrantCheckpointed(torch.nn.Module):
    """Two reentrant checkpointed segments (batch norm inside) of a layer also used outside them."""

    def __init__(self) -> None:
        super().__init__()
        self.a, self.bn, self.out = torch.nn.Linear(5, 5), torch.nn.BatchNorm1d(5), torch.nn.Linear(5, 2)

    def segment(self, h: torch.Tensor) -> torch.Tensor:
        return torch.tanh(self.bn(self.a(h)))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = torch.utils.checkpoint.checkpoint(self.segment, self.a(x), use_reentrant=True)
        h = torch.utils.checkpoint.checkpoint(self.segment, h, use_reentrant=True)
        return self.out(self.a(h))


def test_a_reentrant_checkpoint_trains_placed_as_eager():
    """use_reentrant=True refuses torch.autograd.grad: its step was refused; it records as loss.backward() runs."""
    torch.manual_seed(0)
    net = _ReentrantCheckpointed()
    placed, reference = _placed_at_random_on_two_cpus(net, torch.randn(6, 5))
    ours, theirs = torch.optim.SGD(net.parameters(), lr=0.5), torch.optim.SGD(reference.parameters(), lr=0.5)
    for _ in range(3):
        batch = torch.randn(6, 5)
        ours.zero_grad()
        theirs.zero_grad()
        loss, eager = placed(batch), _loss(reference(batch))
        loss.backward()
        eager.backward()
        torch.testing.assert_close(loss, eager.detach())
        _assert_same_grads(net, reference)
        ours.step()
        theirs.step()
    for name, value in reference.named_buffers():  # the recomputations update the statistics too, as eager's do
        torch.testing.assert_close(dict(net.named_buffers())[name], value, msg=name)


def test_another_dtype_than_recorded_is_refused():
    """A float64 batch failed inside an op."""
    net = torch.nn.Sequential(torch.nn.Linear(5, 5), torch.nn.BatchNorm1d(5))
    x = torch.randn(6, 5)
    graph = import_step(net, (x,), loss=_loss).graph
    placed = gnplace.apply(net, Placement([0] * graph.num_ops, load_cluster("k80x2")), (x,), loss=_loss,
                           devices=["cpu", "cpu"])
    with pytest.raises(InvalidArgument, match="input 0 has dtype torch.float64; the step was recorded for torch.float32"):
        placed(x.double())
    placed(x)


def _dropout_mlp_placed(width, rows):
    """A 5-``width``-1 MLP with batch norm and dropout, an eager copy, a batch of ``rows`` and the MLP placed on two
    CPUs, its ops alternating between them: ``(net, reference, x, placed)``."""
    torch.manual_seed(0)
    net = torch.nn.Sequential(torch.nn.Linear(5, width), torch.nn.BatchNorm1d(width), torch.nn.ReLU(),
                              torch.nn.Dropout(0.3), torch.nn.Linear(width, 1))
    reference = copy.deepcopy(net)
    x = torch.randn(rows, 5)
    graph = import_step(net, (x,), loss=_loss).graph
    placed = gnplace.apply(net, Placement([k % 2 for k in range(graph.num_ops)], load_cluster("k80x2")), (x,),
                           loss=_loss, devices=["cpu", "cpu"])
    return net, reference, x, placed


def test_a_validation_loop_in_eval_mode_computes_as_eager_in_eval_mode():
    """``model.eval()`` between training steps (a validation loop) was refused: apply again on the module in eval
    mode, which needed a placement of another graph and, on GPUs, recorded a module holding its state on several
    devices, which failed. Now the step is recorded again in eval mode at its first call, each op where the op of its
    name runs: eager's losses and gradients in both modes, no dropout and no running-statistics update in eval mode,
    the eval step recorded once."""
    net, eager, x, placed = _dropout_mlp_placed(8, 6)
    optimizers = [torch.optim.SGD(m.parameters(), lr=0.1) for m in (net, eager)]
    for step in range(3):
        batch = torch.randn(6, 5)
        for run in (placed, lambda b: _loss(eager(b))):
            torch.manual_seed(step)  # the same dropout draws
            run(batch).backward()
        for opt in optimizers:
            opt.step()
            opt.zero_grad()
        placed.eval()
        eager.eval()
        statistics = net[1].running_mean.clone()
        with torch.no_grad():
            torch.testing.assert_close(placed(batch), _loss(eager(batch)))
        placed(batch).backward()  # with gradients too (a loss on held-out data to differentiate)
        _loss(eager(batch)).backward()
        for (name, p), q in zip(net.named_parameters(), eager.parameters()):
            torch.testing.assert_close(p.grad, q.grad, msg=name)
        assert torch.equal(net[1].running_mean, statistics)  # eval mode: read, not updated
        for opt in optimizers:
            opt.zero_grad()
        placed.train()
        eager.train()
    for (name, p), q in zip(net.state_dict().items(), eager.state_dict().values()):
        torch.testing.assert_close(p, q, msg=name)
    assert len(placed.__dict__["_mode_steps"]) == 1  # one set of modes other than at apply: recorded once
    assert "_mode_steps" not in placed.__getstate__()
    old = copy.copy(placed)  # as saved before the step in other modes was kept: it was an AttributeError
    for name in ("node_devices", "module_devices", "step_loss", "_mode_steps"):
        old.__dict__.pop(name, None)
    net.eval()
    with pytest.raises(InvalidArgument, match=r"^the module's train / eval modes changed since apply, and this placed "
                                              r"module was saved before"):
        old(x)


def test_a_batch_refused_in_eval_mode_leaves_no_step_recorded_for_its_shape():
    """The step in eval mode was recorded on the call's batch before its shape was checked: a refused smaller batch
    (4 rows, recorded for 6) left a step of 4 rows kept for eval mode, and every later eval call with the right batch
    failed (ExecutionFailed: size 4 must match 6). The batch is checked first now: the next call computes as eager."""
    net, eager, x, placed = _dropout_mlp_placed(8, 6)
    net.eval()
    eager.eval()
    with pytest.raises(InvalidArgument, match=r"^input 0 has shape \(4, 5\); the step was recorded for \(6, 5\)"):
        placed(torch.randn(4, 5))
    assert not placed.__dict__.get("_mode_steps")
    torch.testing.assert_close(placed(x), _loss(eager(x)))


def test_a_parameter_frozen_before_an_eval_call_gets_no_gradient_and_one_unfrozen_again_gets_eagers():
    """A parameter frozen after apply (fine-tuning the head alone), then a call in eval mode with gradients, was a
    KeyError ('0.weight') from inside the placed step: the eval step, recorded with it frozen, reads it as a constant,
    and its value was looked up among the constants of the step at apply. It computes eager's gradients now, and after the
    parameter is unfrozen again, the step is recorded again (the one kept has no gradient for it)."""
    net, eager, x, placed = _dropout_mlp_placed(8, 6)
    for trainable in (False, True):
        for model in (net, eager):
            model.eval()
            model[0].weight.requires_grad_(trainable)
            model.zero_grad()
        placed(x).backward()
        _loss(eager(x)).backward()
        assert (net[0].weight.grad is None) is not trainable
        for (name, p), q in zip(net.named_parameters(), eager.parameters()):
            torch.testing.assert_close(p.grad, q.grad, msg=name)
    assert len(placed.__dict__["_mode_steps"]) == 2


def test_a_model_frozen_whole_after_apply_is_evaluated_in_eval_mode_as_eager():
    """Every parameter frozen after training, then the model evaluated in eval mode: the eval step could not be
    recorded (UnsupportedGraph: 'no trainable parameter ... a training step has no gradient to compute'), where
    eager and the placed step in train mode compute the loss. It is recorded with them trainable now and its forward
    runs alone: eager's loss, with or without grad enabled, the parameters left frozen."""
    net, eager, x, placed = _dropout_mlp_placed(8, 6)
    for model in (net, eager):
        model.requires_grad_(False)
        model.eval()
    for grad in (True, False):
        with torch.set_grad_enabled(grad):
            torch.testing.assert_close(placed(x), _loss(eager(x)))
    assert not any(p.requires_grad for p in net.parameters())


def test_a_batch_made_under_inference_mode_is_evaluated_in_eval_mode_as_eager():
    """A validation batch made under torch.inference_mode(), given to the first call in eval mode, was refused: the
    eval step was recorded on it and an inference tensor cannot be saved for backward (UnsupportedGraph), where eager
    and the placed step in train mode compute on it. The eval step is recorded on a copy of it now."""
    net, eager, _, placed = _dropout_mlp_placed(8, 6)
    with torch.inference_mode():
        batch = torch.randn(6, 5)
    net.eval()
    eager.eval()
    with torch.no_grad():
        torch.testing.assert_close(placed(batch), _loss(eager(batch)))
    with torch.inference_mode():
        torch.testing.assert_close(placed(batch), _loss(eager(batch)))


@pytest.mark.parametrize("mode", ["train", "eval"])
def test_an_input_that_requires_grad_is_refused_only_where_a_gradient_can_be_asked(mode):
    """A batch that requires grad (an adversarial example), called under torch.no_grad, was refused as one the step
    computes no gradient for, where no gradient can be asked and eager computes the loss. Under no_grad it runs the
    forward alone now, as eager; with gradients on, it is still refused."""
    net, eager, _, placed = _dropout_mlp_placed(8, 6)
    net.train(mode == "train")
    eager.train(mode == "train")
    batch = torch.randn(6, 5, requires_grad=True)
    with torch.no_grad():
        torch.manual_seed(0)
        loss = placed(batch)
        torch.manual_seed(0)
        torch.testing.assert_close(loss, _loss(eager(batch)))
    with pytest.raises(InvalidArgument, match=r"^input 0 requires grad, but the step was recorded without its "
                                              r"gradient"):
        placed(batch)


class _ScaledInEval(torch.nn.Module):
    """A linear layer whose output eval mode scales by a Python number, ``self.scale``."""

    def __init__(self):
        super().__init__()
        self.linear, self.scale = torch.nn.Linear(5, 3), 1.5

    def forward(self, x):
        y = self.linear(x)
        return y if self.training else y * self.scale


def test_a_number_only_eval_mode_reads_set_again_after_its_step_is_recorded_is_warned_of():
    """A number only the eval step reads, set after apply (1.5 -> 3, warned of once) and again after the eval step
    was recorded with 3 (-> 4), kept 3 silently: a loss of 1.04 where eager's is 1.85, the one warning given before.
    A change since the eval step's recording is warned of now."""
    torch.manual_seed(0)
    net = _ScaledInEval()
    placed, _ = _placed_at_random_on_two_cpus(net, torch.randn(6, 5))
    net.eval()
    net.scale = 3.0
    with pytest.warns(UserWarning, match=r"is 3.0 now and was 1.5 when the step was recorded"):
        placed(torch.randn(6, 5))
    net.scale = 4.0
    with pytest.warns(UserWarning, match=r"^gnplace.apply: attribute scale of module 'the module' is 4.0 now and was "
                                         r"3.0 when the step in these train / eval modes was recorded"):
        placed(torch.randn(6, 5))
    assert "_mode_attributes" not in placed.__getstate__()


class _RampInEval(torch.nn.Module):
    """A linear layer whose output eval mode shifts by ``torch.arange(3) / 3``: a tensor of torch's default dtype."""

    def __init__(self):
        super().__init__()
        self.linear = torch.nn.Linear(5, 3)

    def forward(self, x):
        y = self.linear(x)
        return y if self.training else y + torch.arange(3) / 3


def test_an_eval_call_under_another_default_dtype_than_its_step_was_recorded_under_is_refused():
    """The default dtype was checked against the step at apply alone, which reads none: the eval step, recorded
    under float32, ran under float64 too, with float32 where eager computes in float64 (silently). It is refused now,
    as the step at apply is."""
    torch.manual_seed(0)
    net, x = _RampInEval(), torch.randn(6, 5)
    placed, _ = _placed_at_random_on_two_cpus(net, x)
    net.eval()
    placed(x)
    default = torch.get_default_dtype()
    torch.set_default_dtype(torch.float64)
    try:
        with pytest.raises(InvalidArgument, match=r"^torch's default dtype is torch.float64 now, and the placed step "
                                                  r"was recorded under torch.float32"):
            placed(x)
    finally:
        torch.set_default_dtype(default)


class _TemperedInEval(torch.nn.Module):
    """A linear layer whose output eval mode divides by a plain tensor attribute (no buffer) the train step never reads."""

    def __init__(self):
        super().__init__()
        self.linear, self.temperature = torch.nn.Linear(5, 3), torch.tensor(2.0)

    def forward(self, x):
        y = self.linear(x)
        return y if self.training else y / self.temperature


def test_a_tensor_attribute_only_eval_mode_reads_is_warned_of_when_assigned_after_its_step_is_recorded():
    """A plain tensor attribute that only the eval step reads, assigned another tensor after that step was recorded
    (temperature 2 -> 5), kept the recorded 2 silently: a loss of 0.094 where eager's is 0.015, with no warning, where
    one the step at apply reads is warned of. It is warned of so now."""
    torch.manual_seed(0)
    net = _TemperedInEval()
    placed, _ = _placed_at_random_on_two_cpus(net, torch.randn(6, 5))
    net.eval()
    placed(torch.randn(6, 5))
    net.temperature = torch.tensor(5.0)
    with pytest.warns(UserWarning, match=r"^gnplace.apply: tensor attribute temperature of module 'the module' was "
                                         r"assigned another tensor since the step was recorded"):
        placed(torch.randn(6, 5))


class _HeadInFloat32(torch.nn.Module):
    """A body under the caller's autocast and a head it turns off for (``enabled=False``): float32 products."""

    def __init__(self):
        super().__init__()
        self.body, self.head = torch.nn.Linear(6, 8), torch.nn.Linear(8, 2)

    def forward(self, x):
        h = torch.relu(self.body(x))
        with torch.autocast("cpu", enabled=False):
            return self.head(h.float()).square().mean()


def test_a_step_recorded_under_autocast_runs_its_recorded_casts_and_another_autocast_state_is_refused():
    """The recording's backward ran under the caller's autocast (the head's float32 gradient products recorded in
    bfloat16, where eager's loss.backward() outside it runs them in float32), a placed step run under it was cast
    again, and a step recorded without autocast ran half in bfloat16: other gradients than eager's, silently."""
    torch.manual_seed(0)
    net, x = _HeadInFloat32(), torch.randn(5, 6)
    reference = copy.deepcopy(net)
    with torch.autocast("cpu", dtype=torch.bfloat16):
        step = import_step(net, (x,))
        placed = gnplace.apply(net, Placement([k % 2 for k in range(step.graph.num_ops)], load_cluster("k80x2")),
                               (x,), devices=["cpu", "cpu"], step=step)
        loss, eager = placed(x), reference(x)
    loss.backward()
    eager.backward()
    assert torch.equal(loss, eager.detach())
    assert all(torch.equal(a.grad, b.grad) for a, b in zip(net.parameters(), reference.parameters()))
    with pytest.raises(InvalidArgument, match=r'^the placed module is called without torch.autocast, but its step '
                                              r'was recorded under torch.autocast\("cpu", dtype=torch.bfloat16\)'):
        placed(x)
    plain = import_step(net, (x,))
    again = gnplace.apply(net, Placement([0] * plain.graph.num_ops, load_cluster("k80x2")), (x,),
                          devices=["cpu", "cpu"], step=plain)
    with torch.autocast("cpu", dtype=torch.bfloat16), pytest.raises(InvalidArgument, match="recorded without"):
        again(x)


def test_a_placement_file_written_by_the_cli_applies(tmp_path):
    # what a user does: place a module:factory from the command line, then train the module with the file
    from gnplace.cli import main
    from gnplace.execute.examples import branchy

    path = tmp_path / "p.json"
    assert main(["place", "gnplace.execute.examples:branchy", "-c", "k80x2", "-p", "round_robin", "-o", str(path)]) == 0
    module, inputs = branchy()
    reference = copy.deepcopy(module)
    placed = gnplace.apply(module, path, inputs, devices=["cpu", "cpu"])  # the file names k80x2, a preset
    again = gnplace.apply(copy.deepcopy(reference), str(path), inputs, devices=["cpu", "cpu"], cluster="k80x2")
    loss = placed(*inputs)
    loss.backward()
    torch.testing.assert_close(loss, again(*inputs))
    eager = reference(*inputs)
    eager.backward()
    torch.testing.assert_close(loss, eager)
    _assert_same_grads(module, reference)
    with pytest.raises(InvalidArgument, match="cluster= goes with a placement file"):
        gnplace.apply(module, Placement([0] * import_step(module, inputs).graph.num_ops, load_cluster("k80x2")),
                      inputs, devices=["cpu", "cpu"], cluster="k80x2")


def test_a_transformers_gpt2_with_tied_embeddings_trains_placed_like_eager():
    """A real model: GPT-2 from transformers (its ``lm_head`` tied to the token embedding), inside the loss
    wrapper a factory returns, split op by op over two CPU devices."""
    transformers = pytest.importorskip("transformers")

    class WithLoss(torch.nn.Module):
        def __init__(self):
            super().__init__()
            config = transformers.GPT2Config(n_layer=2, n_embd=64, n_head=2, vocab_size=300, n_positions=32,
                                             resid_pdrop=0.0, embd_pdrop=0.0, attn_pdrop=0.0)
            self.model = transformers.GPT2LMHeadModel(config)

        def forward(self, ids):
            return self.model(ids, labels=ids).loss

    torch.manual_seed(0)
    net = WithLoss()
    eager = copy.deepcopy(net)
    ids = torch.randint(0, 300, (2, 16))
    want = eager(ids)
    want.backward()
    step = import_step(net, (ids,))
    placement = gnplace.get_placer("round_robin").place(step.graph, load_cluster("k80x2"))
    assert len(set(placement.devices.tolist())) == 2
    got = gnplace.apply(net, placement, (ids,), devices=["cpu", "cpu"], step=step)(ids)
    got.backward()
    torch.testing.assert_close(got, want)
    assert net.model.lm_head.weight is net.model.transformer.wte.weight  # still tied, one gradient
    for (name, theirs), (_, ours) in zip(eager.named_parameters(), net.named_parameters()):
        torch.testing.assert_close(ours.grad, theirs.grad, msg=name)


def test_a_scaled_loss_scales_the_gradients():
    torch.manual_seed(0)
    net = torch.nn.Sequential(torch.nn.Linear(6, 4), torch.nn.Tanh(), torch.nn.Linear(4, 1))
    x = torch.randn(8, 6)
    graph = import_step(net, (x,), loss=_loss).graph
    placed = gnplace.apply(net, Placement(np.zeros(graph.num_ops, dtype=np.int64), load_cluster("k80x2")), (x,),
                           loss=_loss, devices=["cpu", "cpu"])
    placed(x).backward()
    once = [p.grad.clone() for p in net.parameters()]
    net.zero_grad()
    (placed(x) * 3.0).backward()  # not 1: each gradient is scaled, as autograd would
    for g, p in zip(once, net.parameters()):
        torch.testing.assert_close(p.grad, 3.0 * g)



class _Flatten(torch.nn.Module):
    """A convolution and the input itself flattened by ``reshape`` (recorded as a view) into classifiers."""

    def __init__(self) -> None:
        super().__init__()
        self.conv = torch.nn.Conv2d(3, 4, 3)
        self.direct = torch.nn.Linear(3 * 6 * 6, 2)
        self.fc = torch.nn.Linear(4 * 4 * 4, 2)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.direct(x.reshape(x.shape[0], -1)).square().mean() + self.fc(self.conv(x).flatten(1)).mean()


@pytest.mark.parametrize("recorded_layout", ["contiguous", "channels_last"])
def test_inputs_laid_out_otherwise_than_recorded_give_eager_gradients(recorded_layout):
    """A transposed or channels-last input of the recorded shape runs as eager does (a view failed on it)."""
    torch.manual_seed(0)
    net = _Flatten()
    x = torch.randn(2, 3, 6, 6)
    if recorded_layout == "channels_last":
        x = x.contiguous(memory_format=torch.channels_last)
    step = import_step(net, (x.requires_grad_(True),))
    placement = Placement(np.arange(step.graph.num_ops) % 2, load_cluster("k80x2"))
    placed = gnplace.apply(net, placement, (x,), devices=["cpu", "cpu"], step=step)
    reference = copy.deepcopy(net)
    for given in (torch.randn(6, 6, 3, 2).permute(3, 2, 1, 0),
                  torch.randn(2, 3, 6, 6).contiguous(memory_format=torch.channels_last), torch.randn(2, 3, 6, 6)):
        ours, theirs = given.clone().requires_grad_(True), given.clone().requires_grad_(True)  # strides kept
        assert ours.stride() == given.stride()
        net.zero_grad()
        reference.zero_grad()
        loss, expected = placed(ours), reference(theirs)
        loss.backward()
        expected.backward()
        torch.testing.assert_close(loss, expected)
        torch.testing.assert_close(ours.grad, theirs.grad)
        _assert_same_grads(net, reference)


class _Ema(torch.nn.Module):
    """A buffer updated by assignment, the common running-average idiom (``self.ema = 0.9 * self.ema + ...``)."""

    def __init__(self, grow: bool = False) -> None:
        super().__init__()
        self.a = torch.nn.Linear(6, 3)
        self.register_buffer("ema", torch.zeros(3))
        self.grow = grow

    def forward(self, x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        h = self.a(x)
        loss = torch.nn.functional.mse_loss(h * self.ema.exp(), y)  # mul saves the old ema for its backward
        self.ema = 0.9 * self.ema + 0.1 * h.mean(0).detach()
        if self.grow:
            self.ema = torch.cat([self.ema, self.ema])
        return loss


def test_a_buffer_replaced_by_assignment_is_updated_as_eager_updates_it():
    torch.manual_seed(0)
    net = _Ema()
    reference = copy.deepcopy(net)
    x, y = torch.randn(8, 6), torch.randn(8, 3)
    graph = import_step(net, (x, y)).graph
    placement = Placement([k % 2 for k in range(graph.num_ops)], load_cluster("k80x2"))
    placed = gnplace.apply(net, placement, (x, y), devices=["cpu", "cpu"])
    for _ in range(3):  # the recording alone lost the update: the loss stayed the first call's
        ours, theirs = placed(x, y), reference(x, y)
        torch.testing.assert_close(ours, theirs)
        ours.backward()
        theirs.backward()
    torch.testing.assert_close(net.ema, reference.ema)
    torch.testing.assert_close(net.a.weight.grad, reference.a.weight.grad)
    assert not torch.equal(reference.ema, torch.zeros(3))
    with pytest.raises(UnsupportedGraph, match=r"replaces buffer 'ema' \(\[3\] torch.float32\) with shape \[6\]"):
        import_step(_Ema(grow=True), (x, y))


class _Bank(torch.nn.Module):
    """A memory bank whose first row is overwritten each step, in place or by assigning a new bank."""

    def __init__(self, in_place: bool) -> None:
        super().__init__()
        self.a = torch.nn.Linear(6, 3)
        self.register_buffer("bank", torch.zeros(4, 3))
        self.in_place = in_place

    def forward(self, x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        h = self.a(x)
        loss = torch.nn.functional.mse_loss(h, y) + (h @ self.bank.clone().t()).square().mean()
        with torch.no_grad():
            if self.in_place:
                self.bank[0] = h.mean(0)
            else:
                self.bank = torch.cat([h.mean(0, keepdim=True), self.bank[1:]])
        return loss


def test_a_write_into_part_of_a_buffer_is_refused_and_assigning_the_whole_works():
    torch.manual_seed(0)
    x, y = torch.randn(8, 6), torch.randn(8, 3)
    net = _Bank(in_place=True)
    graph = import_step(net, (x, y)).graph
    with pytest.raises(ExecutionFailed, match=r"writes in place into part of buffer 'bank' .* self.bank\[0\] = "):
        gnplace.apply(net, Placement([0] * graph.num_ops, load_cluster("k80x2")), (x, y), devices=["cpu", "cpu"])
    net = _Bank(in_place=False)
    reference = copy.deepcopy(net)
    graph = import_step(net, (x, y)).graph
    placed = gnplace.apply(net, Placement([k % 2 for k in range(graph.num_ops)], load_cluster("k80x2")), (x, y),
                           devices=["cpu", "cpu"])
    for _ in range(3):
        torch.testing.assert_close(placed(x, y), reference(x, y))
    torch.testing.assert_close(net.bank, reference.bank)


@pytest.mark.filterwarnings("ignore:.*LeafSpec.*:FutureWarning")  # torch.save's own, on the input's pytree spec
def test_a_placed_module_saves_whole_with_torch_save_and_runs_after_loading():
    import io

    from gnplace.execute.examples import tiny

    net, inputs = tiny()  # its step holds ones_like(..., memory_format=torch.preserve_format)
    graph = import_step(net, inputs).graph
    placed = gnplace.apply(net, Placement([k % 2 for k in range(graph.num_ops)], load_cluster("k80x2")), inputs,
                           devices=["cpu", "cpu"])
    buffer = io.BytesIO()
    torch.save(placed, buffer)  # TypeError: cannot pickle 'module' object, before
    buffer.seek(0)
    loaded = torch.load(buffer, weights_only=False)
    torch.testing.assert_close(loaded(*inputs), placed(*inputs))


def test_a_module_changed_since_the_recording_is_refused_with_one_line():
    """A module.double() after apply failed inside the first op (mat1 and mat2 must have the same dtype)."""
    net = torch.nn.Sequential(torch.nn.Linear(5, 5), torch.nn.BatchNorm1d(5))
    x = torch.randn(6, 5)
    step = import_step(net, (x,), loss=_loss)
    placement = Placement([k % 2 for k in range(step.graph.num_ops)], load_cluster("k80x2"))
    placed = gnplace.apply(net, placement, (x,), loss=_loss, devices=["cpu", "cpu"], step=step)
    net.double()
    with pytest.raises(InvalidArgument, match=r"^parameter 0.weight is torch.float64 \[5, 5\] now; the step was "
                                              r"recorded with torch.float32 \[5, 5\] .*place its graph again"):
        placed(x)
    with pytest.raises(InvalidArgument, match=r"^parameter 0.weight is torch.float64"):  # the float32 step given
        gnplace.apply(net, placement, (x,), loss=_loss, devices=["cpu", "cpu"], step=step)
    net.float()
    net[1].running_mean = torch.zeros(3)  # a buffer of another shape
    with pytest.raises(InvalidArgument, match=r"^buffer 1.running_mean is torch.float32 \[3\] now"):
        placed(x)
    net[1].running_mean = torch.zeros(5)
    placed(x).backward()
    net[0] = torch.nn.Linear(5, 5, bias=False)
    with pytest.raises(InvalidArgument, match=r"^parameter 0.bias of the recorded step is no longer in the module"):
        placed(x)


def test_a_module_moved_off_its_placed_devices_is_refused():
    net = torch.nn.Linear(4, 2)
    x = torch.randn(3, 4)
    graph = import_step(net, (x,), loss=_loss).graph
    placed = gnplace.apply(net, Placement([0] * graph.num_ops, load_cluster("k80x2")), (x,), loss=_loss,
                           devices=["cpu", "cpu"])
    placed.to("meta")  # what placed.cuda() does on a machine with GPUs
    with pytest.raises(InvalidArgument, match=r"^parameter weight is on meta, but the placement keeps it on cpu"):
        placed(x)


def test_a_placement_of_another_graph_of_as_many_ops_is_refused():
    """A placement of a tanh network ran the relu network with as many ops: only the count was checked."""
    x = torch.randn(4, 6)
    tanh = torch.nn.Sequential(torch.nn.Linear(6, 8), torch.nn.Tanh(), torch.nn.Linear(8, 2))
    relu = torch.nn.Sequential(torch.nn.Linear(6, 8), torch.nn.ReLU(), torch.nn.Linear(8, 2))
    graph = import_step(tanh, (x,), loss=_loss).graph
    placement = Placement.from_groups(graph, load_cluster("k80x2"), np.arange(graph.num_groups) % 2)
    assert import_step(relu, (x,), loss=_loss).graph.num_ops == graph.num_ops
    with pytest.raises(InvalidPlacement, match=r"^placement was made for another graph of that name, not graph "
                                               r"'Sequential' \(their op names or edges differ"):
        gnplace.apply(relu, placement, (x,), loss=_loss, devices=["cpu", "cpu"])
    gnplace.apply(tanh, placement, (x,), loss=_loss, devices=["cpu", "cpu"])(x).backward()  # its own graph, again


@pytest.mark.parametrize("devices", ["cpu", "cpu,cpu", b"cpu", {"cpu"}])
def test_devices_given_as_one_string_or_without_an_order_are_refused_naming_what_is_wanted(devices):
    """``"cpu"`` was read as three devices: "3 torch devices given for the 2 devices of 'k80x2'"."""
    net = torch.nn.Linear(4, 2)
    x = torch.randn(3, 4)
    graph = import_step(net, (x,), loss=_loss).graph
    placement = Placement([0] * graph.num_ops, load_cluster("k80x2"))
    with pytest.raises(InvalidArgument, match=r"^devices must be a list of torch device names, one per cluster "
                                              r"device \(e.g. \['cuda:0', 'cpu'\]\), got "):
        gnplace.apply(net, placement, (x,), loss=_loss, devices=devices)
    placed = gnplace.apply(net, placement, (x,), loss=_loss, devices=np.array(["cpu", "cpu"]))
    placed(x).backward()
    assert net.weight.grad is not None


class _WritesAfterAView(torch.nn.Module):
    """Takes a view of a tensor, writes the tensor in place and reads only the view (of an activation, or of
    the input): the view shows the write in eager PyTorch."""

    def __init__(self, of_input: bool) -> None:
        super().__init__()
        self.linear = torch.nn.Linear(4, 4)
        self.of_input = of_input

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if self.of_input:
            view = x.t()
            x.add_(1.0)
            return self.linear(view.t()).square().sum()
        h = self.linear(x).clone()
        flat = h.view(-1)
        h.mul_(3.0)
        return flat.square().sum()


@pytest.mark.parametrize("of_input", [False, True])
def test_a_view_read_after_its_tensor_is_written_in_place_sees_the_write(of_input):
    """The write, whose result nothing reads, was left out of the step: a third of the loss, silently."""
    torch.manual_seed(0)
    net = _WritesAfterAView(of_input)
    reference = copy.deepcopy(net)
    x = torch.randn(5, 4)
    step = import_step(net, (x,))
    for placement in ([0] * step.graph.num_ops, [k % 2 for k in range(step.graph.num_ops)]):
        for p in [*net.parameters(), *reference.parameters()]:
            p.grad = None
        placed = gnplace.apply(net, Placement(placement, load_cluster("k80x2")), (x,), devices=["cpu", "cpu"],
                               step=step)
        loss = placed(x.clone())
        loss.backward()
        eager = reference(x.clone())
        eager.backward()
        torch.testing.assert_close(loss, eager.detach())
        _assert_same_grads(net, reference)


class _ShrinksItsWeightAfterAView(torch.nn.Module):
    """Takes a view of a parameter, then scales the parameter in place without grad: the view shows the write."""

    def __init__(self) -> None:
        super().__init__()
        self.linear = torch.nn.Linear(4, 4)
        self.scale = torch.nn.Parameter(torch.randn(4))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        square = self.scale.view(2, 2)
        with torch.no_grad():
            self.scale.mul_(0.5)
        return (self.linear(x) * square.reshape(4)).square().sum()


def test_a_view_of_a_parameter_read_after_an_in_place_write_to_it_sees_the_write():
    """The write, whose result nothing reads, was left out: twice the scale in the loss, and the parameter kept."""
    torch.manual_seed(0)
    net = _ShrinksItsWeightAfterAView()
    reference = copy.deepcopy(net)
    x = torch.randn(5, 4)
    step = import_step(net, (x,))
    placed = gnplace.apply(net, Placement([k % 2 for k in range(step.graph.num_ops)], load_cluster("k80x2")), (x,),
                           devices=["cpu", "cpu"], step=step)
    loss = placed(x)
    loss.backward()
    eager = reference(x)
    eager.backward()
    torch.testing.assert_close(loss, eager.detach())
    for a, b in zip(net.parameters(), reference.parameters()):
        torch.testing.assert_close(a, b)
        torch.testing.assert_close(a.grad, b.grad)


def test_a_gradient_penalty_through_the_placed_step_is_refused_not_dropped():
    """create_graph=True got gradients with no graph: a penalty on them added nothing to the gradients, silently."""
    torch.manual_seed(0)
    net = torch.nn.Sequential(torch.nn.Linear(4, 8), torch.nn.Tanh(), torch.nn.Linear(8, 1))
    x = torch.randn(6, 4)
    graph = import_step(net, (x,), loss=_loss).graph
    placed = gnplace.apply(net, Placement([k % 2 for k in range(graph.num_ops)], load_cluster("k80x2")), (x,),
                           loss=_loss, devices=["cpu", "cpu"])
    loss = placed(x)
    with pytest.raises(InvalidArgument, match="create_graph=True .* cannot differentiate them"):
        torch.autograd.grad(loss, list(net.parameters()), create_graph=True)
    placed(x).backward()  # a plain backward still hands out the gradients
    assert net[0].weight.grad is not None


def test_a_call_under_a_torch_func_transform_is_refused_in_one_line():
    """torch.func.grad or torch.vmap of the placed module was torch's RuntimeError that an autograd.Function must
    override setup_context, a function the user never wrote."""
    net, x = torch.nn.Sequential(torch.nn.Linear(4, 3), torch.nn.Linear(3, 1)), torch.randn(5, 4)
    graph = import_step(net, (x,), loss=_loss).graph
    placed = gnplace.apply(net, Placement([k % 2 for k in range(graph.num_ops)], load_cluster("k80x2")), (x,),
                           loss=_loss, devices=["cpu", "cpu"])
    params = {name: p.detach() for name, p in placed.named_parameters()}
    refused = r"^the placed module is called under a torch.func transform \(grad, vmap, jacrev, ...\), .* loss.backward\(\)"
    with pytest.raises(InvalidArgument, match=refused):
        torch.func.grad(lambda p: torch.func.functional_call(placed, p, (x,)))(params)
    with pytest.raises(InvalidArgument, match=refused):
        torch.vmap(placed)(torch.randn(2, 5, 4))
    torch.testing.assert_close(torch.func.functional_call(placed, params, (x,)), _loss(net(x)))  # no transform: runs


def test_a_loss_reading_targets_from_outside_its_argument_is_warned_of():
    """loss=lambda out: cross_entropy(out, targets): the step keeps the recorded targets; the next batch's, which
    the name holds by then, were not seen, and the placed loss differed from eager's without a word."""
    import functools

    torch.manual_seed(0)
    net, x = torch.nn.Linear(4, 3), torch.randn(6, 4)
    targets = torch.randint(0, 3, (6,))
    for loss in (lambda out: torch.nn.functional.cross_entropy(out, targets),
                 functools.partial(torch.nn.functional.cross_entropy, target=targets)):
        placement = Placement([0] * import_step(net, (x,), loss=loss).graph.num_ops, load_cluster("k80x2"))
        with pytest.warns(UserWarning, match=r"the loss reads tensor '(targets|target)' \(torch.int64 \[6\]\) from "
                                             "outside its argument .* make it an input of the module"):
            gnplace.apply(net, placement, (x,), loss=loss, devices=["cpu", "cpu"])
    temperature = torch.nn.Parameter(torch.tensor(2.0))  # trained by eager's backward, by the placed step not

    def tempered(out):
        return (out / temperature).square().mean()

    placement = Placement([0] * import_step(net, (x,), loss=tempered).graph.num_ops, load_cluster("k80x2"))
    with pytest.warns(UserWarning, match=r"the loss reads tensor 'temperature' \(torch.float32 \[\]\), which requires "
                                         r"grad, .* gives it no gradient, where eager's backward trains it; make it a "
                                         "parameter of the module"):
        gnplace.apply(net, placement, (x,), loss=tempered, devices=["cpu", "cpu"])
    placement = Placement([0] * import_step(net, (x,), loss=_loss).graph.num_ops, load_cluster("k80x2"))
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # a loss of its argument alone: nothing to warn of
        gnplace.apply(net, placement, (x,), loss=_loss, devices=["cpu", "cpu"])


_GLOBAL_MASK = torch.ones(3)
_GLOBAL_GAIN = torch.nn.Parameter(torch.tensor(2.0))


class _ReadsGlobals(torch.nn.Module):
    """Multiplies by a global mask and a global learnable gain, neither registered on the module."""

    def __init__(self) -> None:
        super().__init__()
        self.fc = torch.nn.Linear(4, 3)

    def forward(self, x):
        return (self.fc(x) * _GLOBAL_MASK * _GLOBAL_GAIN).square().mean()


def test_a_tensor_that_forward_reads_from_a_global_is_warned_of_at_apply():
    """A global mask written after apply changed eager's loss and not the placed step's, and a global parameter got
    eager's gradient and none placed: both silently."""
    net, x = _ReadsGlobals(), torch.randn(5, 4)
    placement = Placement([k % 2 for k in range(import_step(net, (x,)).graph.num_ops)], load_cluster("k80x2"))
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        gnplace.apply(net, placement, (x,), devices=["cpu", "cpu"])
    messages = [str(w.message) for w in caught if str(w.message).startswith("gnplace.apply: _ReadsGlobals.forward")]
    assert len(messages) == 2
    assert re.match(r"gnplace.apply: _ReadsGlobals.forward reads tensor '_GLOBAL_MASK' \(torch.float32 \[3\]\) from "
                    r"outside the module .* register it on the module \(register_buffer\)", messages[0])
    assert re.match(r"gnplace.apply: _ReadsGlobals.forward reads tensor '_GLOBAL_GAIN' \(torch.float32 \[\]\), which "
                    r"requires grad, .* gives it no gradient, where eager's backward trains it", messages[1])
    net = torch.nn.Sequential(torch.nn.Linear(4, 3), torch.nn.Linear(3, 1))  # PyTorch's own modules: nothing
    placement = Placement([0] * import_step(net, (x,), loss=_loss).graph.num_ops, load_cluster("k80x2"))
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        gnplace.apply(net, placement, (x,), loss=_loss, devices=["cpu", "cpu"])


class _PlainTensorScale(torch.nn.Module):
    """Scales by a plain tensor attribute, no buffer: a constant of the recorded step."""

    def __init__(self) -> None:
        super().__init__()
        self.linear = torch.nn.Linear(4, 4)
        self.scale = torch.ones(4)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return (self.linear(x) * self.scale).square().sum()


def test_a_plain_tensor_attribute_changed_since_the_recording_is_warned_of():
    """Assigned or written in place after apply, the placed step still used the recorded values without a word."""
    net, x = _PlainTensorScale(), torch.randn(5, 4)
    step = import_step(net, (x,))
    placed = gnplace.apply(net, Placement([k % 2 for k in range(step.graph.num_ops)], load_cluster("k80x2")), (x,),
                           devices=["cpu", "cpu"], step=step)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        placed(x)  # unchanged: nothing to warn of
    net.scale.mul_(2.0)
    with pytest.warns(UserWarning, match="tensor attribute scale of module 'the module' was written in place since"):
        placed(x)
    net.scale = torch.full((4,), 3.0)
    with pytest.warns(UserWarning, match="was assigned another tensor since the step was recorded.*register_buffer"):
        placed(x)


def test_a_checkpointed_dropout_is_refused_naming_the_random_op():
    """The recorded recomputation drew a new mask: gradients of another mask than the loss's, silently."""
    torch.manual_seed(0)
    net, x = CheckpointedDropout(), torch.randn(5, 4)
    step = import_step(net, (x,))
    placement = Placement([k % 2 for k in range(step.graph.num_ops)], load_cluster("k80x2"))
    with pytest.raises(ExecutionFailed, match=r"backward draws random numbers \(aten\.bernoulli_\.float\): a "
                                              r"checkpointed segment"):
        gnplace.apply(net, placement, (x,), devices=["cpu", "cpu"], step=step)


class _Scales(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = torch.nn.Linear(4, 2)
        self.scale = 2.0
        self.calls = 0  # read by no forward

    def forward(self, x):
        return self.lin(x) * self.scale


def test_a_python_attribute_changed_since_the_recording_is_warned_of_once_and_the_recorded_value_kept():
    """``self.scale`` was frozen at the recording with no word: the placed step kept computing with 2.0."""
    torch.manual_seed(0)
    net, x = _Scales(), torch.randn(3, 4)
    graph = import_step(net, (x,), loss=_loss).graph
    placed = gnplace.apply(net, Placement([0] * graph.num_ops, load_cluster("k80x2")), (x,), loss=_loss,
                           devices=["cpu", "cpu"])
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        before = placed(x).item()  # nothing changed: no warning
    net.scale = 3.0
    with pytest.warns(UserWarning, match=r"^gnplace.apply: attribute scale of module 'the module' is 3.0 now and "
                                         r"was 2.0 when the step was recorded; .* apply again"):
        assert placed(x).item() == before  # the recorded 2.0
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        placed(x)  # once per attribute
        net.scale = 4.0
        placed(x)
        net.calls = 1  # a counter the loop sets: one warning, not one a step, and no entry kept a step
    with pytest.warns(UserWarning, match="attribute calls of module 'the module' is 1 now and was 0"):
        placed(x)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        for k in range(2, 50):
            net.calls = k
            placed(x)
    assert len(placed._warned) == 2
    net.lin.out_features = 7
    with pytest.warns(UserWarning, match="attribute out_features of module 'lin' is 7 now and was 2"):
        placed(x)


def test_a_call_under_another_default_dtype_is_refused_where_the_step_makes_tensors_of_it():
    """Applied under float32 and called under float64, torch.ones(4, 4) made float32 where eager's made float64:
    another loss than eager's, silently. A step that makes no tensor of the default dtype runs under any."""
    from tests.execute.models import MakesItsOwnConstants

    torch.manual_seed(0)
    x = torch.randn(5, 6)
    placed = []
    for net, loss in ((MakesItsOwnConstants(), None), (torch.nn.Linear(6, 2), _loss)):
        ops = import_step(net, (x,), loss=loss).graph.num_ops
        placed.append(gnplace.apply(net, Placement([0] * ops, load_cluster("k80x2")), (x,), loss=loss,
                                    devices=["cpu", "cpu"]))
    was = torch.get_default_dtype()
    torch.set_default_dtype(torch.float64)
    try:
        with pytest.raises(InvalidArgument, match=r"default dtype is torch.float64 now, and the placed step was "
                                                  r"recorded under torch.float32.*torch.set_default_dtype"):
            placed[0](x)
        placed[1](x)
    finally:
        torch.set_default_dtype(was)
    placed[0](x)


class _TakesLabels(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = torch.nn.Linear(6, 3)

    def forward(self, x, labels, scale=1.0):
        return torch.nn.functional.cross_entropy(self.fc(x) * scale, labels)


def test_inputs_named_as_in_forward_are_the_example_inputs_and_other_names_are_refused_in_one_line():
    """placed(x, labels=y) was Python's TypeError 'got an unexpected keyword argument', though forward takes it."""
    torch.manual_seed(0)
    net = _TakesLabels()
    reference = copy.deepcopy(net)
    x, y = torch.randn(8, 6), torch.randint(0, 3, (8,))
    ops = import_step(net, (x, y)).graph.num_ops
    placed = gnplace.apply(net, Placement([k % 2 for k in range(ops)], load_cluster("k80x2")), (x, y),
                           devices=["cpu", "cpu"])
    placed(labels=y, x=x).backward()
    reference(x, labels=y).backward()
    _assert_same_grads(net, reference)
    torch.testing.assert_close(placed(x, labels=y), placed(x, y))
    with pytest.raises(InvalidArgument, match=r"input 'scale' is not one of the example inputs .* \(x, labels, by "
                                              r"position; forward's other parameters are constants of the step\)"):
        placed(x, labels=y, scale=2.0)  # recorded with its default, 1.0
    with pytest.raises(InvalidArgument, match="input 'x' is given both by position and by name"):
        placed(x, y, x=x)
    with pytest.raises(InvalidArgument, match=r"input 'x' is not given \(the placed step takes x, labels\)"):
        placed(labels=y)
    with pytest.raises(InvalidArgument, match="takes 2 inputs, got 1"):
        placed(x)


def test_a_parameter_after_the_example_inputs_given_its_default_is_as_if_left_out():
    """placed(x, y, scale=1.0), or placed(x, y, 1.0), with forward's own default (as a batch dict passes one) ran in
    eager as placed(x, y) does; placed it was refused (not an example input, or 3 inputs for 2)."""
    torch.manual_seed(0)
    net = _TakesLabels()
    x, y = torch.randn(8, 6), torch.randint(0, 3, (8,))
    ops = import_step(net, (x, y)).graph.num_ops
    placed = gnplace.apply(net, Placement([k % 2 for k in range(ops)], load_cluster("k80x2")), (x, y),
                           devices=["cpu", "cpu"])
    want = net(x, y)
    torch.testing.assert_close(placed(x, labels=y, scale=1.0), want)
    torch.testing.assert_close(placed(x, y, 1.0), want)
    with pytest.raises(InvalidArgument, match=r"input 'scale' is not one of the example inputs"):
        placed(x, y, scale=2.0)  # another value than the recorded default: still refused
    with pytest.raises(InvalidArgument, match="takes 2 inputs, got 3"):
        placed(x, y, 2.0)
    with pytest.raises(InvalidArgument, match="takes 2 inputs, got 3"):
        placed(x, y, torch.tensor(1.0))  # a tensor is no constant of the step
    with pytest.raises(InvalidArgument, match=r"^input 'scale' is given both by position and by name$"):
        placed(x, y, 1.0, scale=1.0)  # eager's TypeError: both defaults were dropped and it ran


def test_a_loss_kept_after_its_backward_holds_no_gradients_and_backs_up_as_eager_does():
    """The step's gradients were kept on the autograd node: a loss kept past its backward (total += loss, a list of
    losses to log) held a copy of every gradient, so memory grew by the model's size each step, and a second
    backward without retain_graph=True added the gradients again where eager raises."""
    torch.manual_seed(0)
    net = torch.nn.Sequential(torch.nn.Linear(4, 8), torch.nn.Tanh(), torch.nn.Linear(8, 1))
    reference = copy.deepcopy(net)
    x = torch.randn(6, 4)
    graph = import_step(net, (x,), loss=_loss).graph
    placed = gnplace.apply(net, Placement([k % 2 for k in range(graph.num_ops)], load_cluster("k80x2")), (x,),
                           loss=_loss, devices=["cpu", "cpu"])
    loss, eager = placed(x), _loss(reference(x))
    loss.backward()
    eager.backward()
    assert not any(isinstance(v, (torch.Tensor, list)) for v in vars(loss.grad_fn).values())  # nothing kept on it
    for kept in (loss, eager):
        with pytest.raises(RuntimeError, match="backward through the graph a second time"):
            kept.backward()
    loss, eager = placed(x), _loss(reference(x))
    loss.backward(retain_graph=True)
    loss.backward()
    eager.backward(retain_graph=True)
    eager.backward()
    _assert_same_grads(net, reference)


class _Stack(torch.nn.Module):
    """Linear layers applied in turn: a layer appended after apply is one forward would run."""

    def __init__(self) -> None:
        super().__init__()
        self.layers = torch.nn.ModuleList([torch.nn.Linear(4, 4), torch.nn.ReLU()])

    def forward(self, x):
        for layer in self.layers:
            x = layer(x)
        return x


def _warned_once(placed, x, match):
    """``placed(x)`` warns (a UserWarning matching ``match``), and a second call does not."""
    with pytest.warns(UserWarning, match=match):
        placed(x)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        placed(x)  # once


def test_a_layer_added_or_replaced_since_the_recording_is_warned_of_once():
    """A layer appended to a ModuleList after apply (or a ReLU swapped for a GELU) ran in eager; the placed step
    computed without it, silently: another loss and no gradient for the new layer's parameters."""
    torch.manual_seed(0)
    net, x = _Stack(), torch.randn(3, 4)
    graph = import_step(net, (x,), loss=_loss).graph
    placed = gnplace.apply(net, Placement([k % 2 for k in range(graph.num_ops)], load_cluster("k80x2")), (x,),
                           loss=_loss, devices=["cpu", "cpu"])
    net.layers[0] = torch.nn.Linear(4, 4)  # a fresh layer of the same class: the step reads its parameters
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        torch.testing.assert_close(placed(x), _loss(net(x)))
    net.layers.append(torch.nn.Linear(4, 4))
    _warned_once(placed, x, r"^gnplace.apply: submodule 'layers.2' \(Linear\) was added since the step was recorded; "
                            r".* apply again to use it")
    del net.layers[2]
    net.layers[1] = torch.nn.GELU()
    with pytest.warns(UserWarning, match=r"submodule 'layers.1' is a GELU now, and was a ReLU since"):
        placed(x)
    net.layers[1] = torch.nn.ReLU()
    net.layers[0].register_parameter("gain", torch.nn.Parameter(torch.ones(4)))
    with pytest.warns(UserWarning, match=r"parameter layers.0.gain was added since"):
        placed(x)
    net.layers[1].eval()  # a mode changed with the layers: the step in these modes would run the added parameter
    with pytest.raises(InvalidArgument, match=r"^the module's train / eval modes changed since apply, and its layers "
                                              r"too \(parameter layers.0.gain was added\): apply again on the module as "
                                              r"it is now$"):
        placed(x)


def test_a_hook_registered_since_the_recording_is_warned_of_once_per_hook():
    """A forward pre-hook zeroing a layer's input after apply changed eager's loss; the placed step, which does not
    run it, computed the recorded one, silently."""
    torch.manual_seed(0)
    net, x = torch.nn.Sequential(torch.nn.Linear(4, 3), torch.nn.Linear(3, 1)), torch.randn(5, 4)
    graph = import_step(net, (x,), loss=_loss).graph
    placed = gnplace.apply(net, Placement([k % 2 for k in range(graph.num_ops)], load_cluster("k80x2")), (x,),
                           loss=_loss, devices=["cpu", "cpu"])
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        import_step(placed, (x,))  # the hooks a recording registers while it runs the placed module: not warned of
    placed.register_forward_hook(lambda module, inputs, output: None)  # on the placed module itself: it runs
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        placed(x)
    net[1].register_forward_pre_hook(lambda module, inputs: (inputs[0] * 0,))
    _warned_once(placed, x, r"^gnplace.apply: a forward pre-hook on '1' was registered since the step was recorded, "
                            r"and the placed step does not run it: .* apply again")
    net.register_forward_hook(lambda module, inputs, output: None)
    with pytest.warns(UserWarning, match=r"a forward hook on the module was registered since"):
        placed(x)


def test_torch_compile_of_a_placed_module_runs_the_placed_step_uncompiled():
    """torch.compile(placed) traced the executor itself: a recompilation per op (minutes for a small conv net, then
    torch's recompile limit), and inductor's fused kernels in place of the placed ops (another loss in the 7th
    digit). It runs the placed step as it is now, and gives the loss and gradients of the uncompiled one."""
    torch.manual_seed(0)
    net = torch.nn.Sequential(torch.nn.Linear(4, 8), torch.nn.Tanh(), torch.nn.Linear(8, 1))
    reference = copy.deepcopy(net)
    x = torch.randn(6, 4)
    graph = import_step(net, (x,), loss=_loss).graph
    placed = gnplace.apply(net, Placement([k % 2 for k in range(graph.num_ops)], load_cluster("k80x2")), (x,),
                           loss=_loss, devices=["cpu", "cpu"])
    graphs = []

    def backend(gm, example_inputs):  # counts what dynamo hands a compiler
        graphs.append(gm)
        return gm.forward

    torch._dynamo.reset()
    try:
        loss = torch.compile(placed, backend=backend)(x)
    finally:
        torch._dynamo.reset()
    assert graphs == []
    loss.backward()
    eager = _loss(reference(x))
    eager.backward()
    torch.testing.assert_close(loss, eager)
    _assert_same_grads(net, reference)


class _LossAndLogits(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.fc = torch.nn.Linear(4, 3)

    def forward(self, x):
        logits = self.fc(x)
        return logits.square().mean(), logits


def test_a_module_returning_loss_and_logits_is_placed_returning_the_loss_alone():
    """As the README says: the first element of a returned tuple is the loss, and the placed module returns it."""
    torch.manual_seed(0)
    net, x = _LossAndLogits(), torch.randn(5, 4)
    reference = copy.deepcopy(net)
    graph = import_step(net, (x,)).graph
    placed = gnplace.apply(net, Placement([k % 2 for k in range(graph.num_ops)], load_cluster("k80x2")), (x,),
                           devices=["cpu", "cpu"])
    loss = placed(x)
    assert isinstance(loss, torch.Tensor) and loss.shape == ()
    loss.backward()
    reference(x)[0].backward()
    torch.testing.assert_close(loss, reference(x)[0])
    _assert_same_grads(net, reference)


def test_gnplace_apply_imports_under_a_torch_whose_compiler_disable_takes_no_reason():
    """torch 2.4-2.7 (pyproject takes torch>=2.4) have ``torch.compiler.disable(fn=None, recursive=True)``: the
    ``reason=`` keyword, passed at the class's definition, made ``import gnplace.execute.apply`` a TypeError."""
    import os
    import subprocess
    import sys
    from pathlib import Path

    code = (
        "import torch\n"
        "real = torch.compiler.disable\n"
        "def disable(fn=None, recursive=True):\n"  # torch 2.4-2.7's signature
        "    return real(fn, recursive=recursive)\n"
        "torch.compiler.disable = disable\n"
        "from gnplace.execute.apply import PlacedModule\n"
        "print(PlacedModule.forward is not None)\n"
    )
    root = str(Path(gnplace.__file__).resolve().parents[1])
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300,
                          env={**os.environ, "PYTHONPATH": root})
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.strip() == "True"


class _WrapsAModule(torch.nn.Module):
    """A loss wrapper whose model is its attribute ``module``: its own keys begin with ``module.``."""

    def __init__(self) -> None:
        super().__init__()
        self.module = torch.nn.Sequential(torch.nn.Linear(5, 6), torch.nn.BatchNorm1d(6), torch.nn.Linear(6, 1))

    def forward(self, x):
        return self.module(x).square().mean()


def _placed_beside_a_copy(make):
    """``make()``'s model, an eager copy, a batch ``[8, 5]``, its loss (None: it returns one) and it placed on two
    CPUs."""
    torch.manual_seed(0)
    net = make()
    reference = copy.deepcopy(net)
    x = torch.randn(8, 5)
    loss = None if isinstance(net, _WrapsAModule) else _loss
    graph = import_step(net, (x,), loss=loss).graph
    placed = gnplace.apply(net, Placement([k % 2 for k in range(graph.num_ops)], load_cluster("k80x2")), (x,),
                           loss=loss, devices=["cpu", "cpu"])
    return net, reference, x, loss, placed


@pytest.mark.parametrize("make", [
    lambda: torch.nn.Sequential(torch.nn.Linear(5, 6), torch.nn.BatchNorm1d(6), torch.nn.ReLU(), torch.nn.Linear(6, 1)),
    _WrapsAModule,
])
def test_the_state_dict_of_a_placed_module_is_the_models_and_a_models_loads_into_it(make):
    """After three AdamW steps placed and eager, the placed module's state dict has the model's keys and eager's
    values (the model loads it); the model's loads into the placed module, which then computes with it."""
    net, reference, x, loss, placed = _placed_beside_a_copy(make)
    ours = torch.optim.AdamW(placed.parameters(), lr=0.01)
    theirs = torch.optim.AdamW(reference.parameters(), lr=0.01)
    for _ in range(3):
        batch = torch.randn(8, 5)
        ours.zero_grad()
        placed(batch).backward()
        ours.step()
        theirs.zero_grad()
        out = reference(batch)
        (out if loss is None else loss(out)).backward()
        theirs.step()
    state, want = placed.state_dict(), reference.state_dict()
    assert list(state) == list(want)  # was module.0.weight, ...: the model refused it (missing keys)
    for key, value in want.items():
        torch.testing.assert_close(state[key], value, msg=key)
    fresh = make()
    fresh.load_state_dict(state)
    again = make()
    placed.load_state_dict(again.state_dict())  # the model's keys; was: missing keys module.0.weight, ...
    for key, value in again.state_dict().items():
        torch.testing.assert_close(net.state_dict()[key], value, msg=key)
    torch.testing.assert_close(placed(x), _loss(again(x)) if loss else again(x))
    if not isinstance(net, _WrapsAModule):  # keyed as the attribute, as before, where that is not ambiguous
        placed.load_state_dict({"module." + k: v for k, v in want.items()})
        torch.testing.assert_close(net.state_dict()[next(iter(want))], next(iter(want.values())))
    outer = torch.nn.ModuleDict({"placed": placed})  # a submodule: its keys follow its own prefix
    assert list(outer.state_dict()) == ["placed." + k for k in want]
    outer.load_state_dict(outer.state_dict())


@pytest.mark.parametrize("make", [
    lambda: torch.nn.Sequential(torch.nn.Linear(5, 6), torch.nn.BatchNorm1d(6), torch.nn.ReLU(), torch.nn.Linear(6, 1)),
    _WrapsAModule,
])
def test_load_state_dict_names_missing_and_unexpected_keys_as_the_model_does(make):
    """A partial or mismatched state dict loaded into the placed module named its keys as its attribute's
    (module.0.bias missing), where its state_dict() and the model have 0.bias: now as the model names them."""
    net, reference, x, loss, placed = _placed_beside_a_copy(make)
    state = reference.state_dict()
    first = next(iter(state))
    partial = {first: state[first], "extra.weight": torch.zeros(1)}
    assert placed.load_state_dict(partial, strict=False) == reference.load_state_dict(partial, strict=False)
    with pytest.raises(RuntimeError) as eager:
        reference.load_state_dict(partial)
    with pytest.raises(RuntimeError) as ours:
        placed.load_state_dict(partial)
    assert str(ours.value) == str(eager.value).replace(type(reference).__name__, "PlacedModule", 1)
    misshapen = {**state, first: torch.zeros(2, 2)}
    with pytest.raises(RuntimeError, match=f"size mismatch for {first}: ") as eager:
        reference.load_state_dict(misshapen)
    with pytest.raises(RuntimeError) as ours:
        placed.load_state_dict(misshapen)
    assert str(ours.value) == str(eager.value).replace(type(reference).__name__, "PlacedModule", 1)
    outer = torch.nn.ModuleDict({"placed": placed})  # a submodule: its keys follow its own prefix
    eager_outer = torch.nn.ModuleDict({"placed": reference})
    assert (outer.load_state_dict({"placed." + first: state[first]}, strict=False)
            == eager_outer.load_state_dict({"placed." + first: state[first]}, strict=False))


class _Dropouts(torch.nn.Module):
    """Dropout between layers, one inside the forward (``F.dropout``) and a noise draw: three random ops."""

    def __init__(self) -> None:
        super().__init__()
        self.a, self.b = torch.nn.Linear(6, 16), torch.nn.Linear(16, 1)
        self.drop = torch.nn.Dropout(0.5)

    def forward(self, x):
        h = self.drop(torch.relu(self.a(x)))
        h = torch.nn.functional.dropout(h, 0.3, self.training) + 0.1 * torch.randn_like(h)
        return self.b(h).square().mean()


def test_dropout_on_two_cpu_devices_draws_eagers_masks_under_the_same_seed():
    """Random ops draw, in the recorded order, from the generator of the device each runs on: on CPUs the masks
    eager draws under the same seed, so three AdamW steps end on eager's weights (and apply leaves the seed)."""
    torch.manual_seed(0)
    net = _Dropouts()
    reference = copy.deepcopy(net)
    x = torch.randn(8, 6)
    graph = import_step(net, (x,)).graph
    placement = gnplace.get_placer("round_robin").place(graph, load_cluster("k80x2"))
    assert len(set(placement.devices.tolist())) == 2
    torch.manual_seed(1)
    placed = gnplace.apply(net, placement, (x,), devices=["cpu", "cpu"])
    seeded = torch.get_rng_state()
    torch.manual_seed(1)
    assert torch.equal(seeded, torch.get_rng_state())  # the recording drew nothing from the generator
    ours, theirs = torch.optim.AdamW(net.parameters(), lr=0.01), torch.optim.AdamW(reference.parameters(), lr=0.01)
    for step in range(3):
        batch = torch.randn(8, 6)
        torch.manual_seed(10 + step)
        ours.zero_grad()
        loss = placed(batch)
        loss.backward()
        ours.step()
        torch.manual_seed(10 + step)
        theirs.zero_grad()
        want = reference(batch)
        want.backward()
        theirs.step()
        torch.testing.assert_close(loss, want.detach())
    for a, b in zip(net.parameters(), reference.parameters()):
        torch.testing.assert_close(a, b)


@dataclasses.dataclass
class _Batch:
    x: torch.Tensor
    y: torch.Tensor


@dataclasses.dataclass
class _RegisteredBatch:
    x: torch.Tensor
    y: torch.Tensor


torch.export.register_dataclass(_RegisteredBatch)  # a pytree node: its tensors are inputs


class _ReadsABatch(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.fc = torch.nn.Linear(4, 3)

    def forward(self, batch):
        return torch.nn.functional.cross_entropy(self.fc(batch.x), batch.y)


@pytest.mark.parametrize("kind", [_Batch, _RegisteredBatch])
def test_a_batch_object_apply_cannot_follow_is_refused_at_apply_and_a_registered_one_is_followed(kind):
    """A dataclass batch is one constant leaf of the inputs: its tensors were recorded as constants, and each next
    batch was refused at the call with advice (apply again with it) that could not help."""
    torch.manual_seed(0)
    net = _ReadsABatch()
    reference = copy.deepcopy(net)
    example = kind(torch.randn(5, 4), torch.randint(0, 3, (5,)))
    graph = import_step(net, (example,)).graph
    placement = Placement([k % 2 for k in range(graph.num_ops)], load_cluster("k80x2"))
    if kind is _Batch:
        with pytest.raises(InvalidArgument, match=r"^input 0 is a _Batch whose tensor x the step reads, .*"
                                                  r"torch.export.register_dataclass\(_Batch\)[^\n]*$"):
            gnplace.apply(net, placement, (example,), devices=["cpu", "cpu"])
        return
    placed = gnplace.apply(net, placement, (example,), devices=["cpu", "cpu"])
    batch = kind(torch.randn(5, 4), torch.randint(0, 3, (5,)))
    loss = placed(batch)
    loss.backward()
    want = reference(batch)
    want.backward()
    torch.testing.assert_close(loss, want.detach())
    _assert_same_grads(net, reference)


class _WritesIntoViews(torch.nn.Module):
    """Writes into views of tensors read afterwards, as real models do: a column set (``y[:, 0] = v``), a
    ``narrow(...).copy_``, ``buf[..., :d] += z``, a cache filled step by step and read at each, and a mask."""

    def __init__(self, how: str) -> None:
        super().__init__()
        self.a = torch.nn.Linear(5, 6)
        self.b = torch.nn.Linear(5, 2)
        self.w = torch.nn.Parameter(torch.randn(6))
        self.how = how

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if self.how == "column":
            y = torch.zeros(x.shape[0], 6)
            y[:, 0] = self.b(x)[:, 0]
            return (y * self.w).sum() + self.a(x).square().mean()
        if self.how == "narrow":
            out = torch.ones(x.shape[0], 6)
            out.narrow(1, 0, 2).copy_(self.b(x))
            return (self.a(x) * out * self.w).square().mean()
        if self.how == "slice add":
            buf = self.a(x)
            buf[..., :2] += self.b(x)
            return (buf.tanh() * self.w).sum()
        if self.how == "cache":
            cache = x.new_zeros(x.shape[0], 3, 2)
            total = x.new_zeros(())
            for t in range(3):
                cache[:, t] = self.b(x * (t + 1))
                keys = cache[:, : t + 1].clone()
                total = total + (keys.softmax(1) * keys).sum()
            return total + (self.a(x) * self.w).sum()
        h = self.a(x)
        h[x[:, :1].expand(-1, 6) > 0] = 0.0
        return (h * self.w).square().sum()


@pytest.mark.parametrize("how", ["column", "narrow", "slice add", "cache", "mask"])
def test_writes_into_views_of_tensors_read_afterwards_train_as_eager_across_devices(how):
    """They were refused at apply (``ExecutionFailed``: the write would be lost op by op). Each write runs on one
    device and every reader of the written tensor on the other: three AdamW steps end on eager's weights."""
    torch.manual_seed(0)
    net = _WritesIntoViews(how)
    reference = copy.deepcopy(net)
    x = torch.randn(4, 5)
    step = import_step(net, (x,))
    graph = step.graph
    writes = [v for v in range(graph.num_ops) if graph.op_types[v] in ("copy_", "add_", "index_put_")
              and graph.phase[v] == 0]
    assert writes
    devices = np.zeros(graph.num_ops, dtype=np.int64)
    devices[writes] = 1
    readers = {int(v) for u, v in zip(graph.edge_src, graph.edge_dst) if u in writes}
    assert readers and all(devices[v] == 0 for v in readers - set(writes))  # the write and its readers apart
    placed = gnplace.apply(net, Placement(devices, load_cluster("k80x2")), (x,), devices=["cpu", "cpu"], step=step)
    ours = torch.optim.AdamW(net.parameters(), lr=0.01)
    theirs = torch.optim.AdamW(reference.parameters(), lr=0.01)
    for k in range(3):
        batch = torch.randn(4, 5)
        ours.zero_grad()
        loss = placed(batch)
        loss.backward()
        theirs.zero_grad()
        eager = reference(batch)
        eager.backward()
        torch.testing.assert_close(loss, eager.detach())
        if k == 0:
            _assert_same_grads(net, reference)


class _Speech(torch.nn.Module):
    """A GRU over frames, classes by frame and CTC's loss (``nn.CTCLoss`` of ``reduction``) of its lengths given as
    tuples: ``forward(frames [T, N, 8], targets [N, S], input_lengths, target_lengths)``."""

    def __init__(self, reduction: str) -> None:
        super().__init__()
        self.rnn = torch.nn.GRU(8, 16)
        self.head = torch.nn.Linear(16, 6)
        self.ctc = torch.nn.CTCLoss(reduction=reduction, zero_infinity=True)

    def forward(self, frames, targets, input_lengths, target_lengths):
        log_probs = self.head(self.rnn(frames)[0]).log_softmax(-1)
        return self.ctc(log_probs, targets, input_lengths, target_lengths)


@pytest.mark.parametrize("reduction", ["mean", "sum"])
def test_ctc_loss_of_lengths_in_tuples_trains_split_over_two_cpu_devices_as_eager(reduction):
    """F.ctc_loss was refused as "output shape depends on the data" (fake tensors refuse aten._ctc_loss, whose
    forward variables are [N, T, 2 max(target_lengths) + 1]: static given the lengths as ints), and its mean failed
    on a target-length tensor made in C++. Split over two CPU devices, the placed step gives eager's loss and
    gradients on new batches, and three AdamW steps end on eager's weights."""
    torch.manual_seed(0)
    net = _Speech(reduction)
    reference = copy.deepcopy(net)
    lengths = ((12, 10, 12), (4, 3, 5))

    def batch():
        return torch.randn(12, 3, 8), torch.randint(1, 6, (3, 5))

    graph = import_step(net, (*batch(), *lengths)).graph
    placement = gnplace.get_placer("round_robin").place(graph, load_cluster("k80x2"))
    assert len(set(placement.devices.tolist())) == 2
    placed = gnplace.apply(net, placement, (*batch(), *lengths), devices=["cpu", "cpu"])
    ours, theirs = torch.optim.AdamW(net.parameters(), lr=0.01), torch.optim.AdamW(reference.parameters(), lr=0.01)
    for _ in range(3):
        frames, targets = batch()
        ours.zero_grad()
        loss = placed(frames, targets, *lengths)
        loss.backward()
        theirs.zero_grad()
        want = reference(frames, targets, *lengths)
        want.backward()
        torch.testing.assert_close(loss, want.detach())
        _assert_same_grads(net, reference)
        ours.step()
        theirs.step()
    for a, b in zip(net.parameters(), reference.parameters()):
        torch.testing.assert_close(a, b)


def test_an_input_laid_out_otherwise_reaches_the_step_in_the_recorded_layout(monkeypatch):
    """The module docstring's copy into the example input's layout: a mutant handing the step the transposed input
    as given passed, the executor's retry of a failing view as a reshape hiding it."""
    import gnplace.execute.apply as apply_module

    torch.manual_seed(0)
    net = _Flatten()
    x = torch.randn(2, 3, 6, 6)
    step = import_step(net, (x,))
    placed = gnplace.apply(net, Placement(np.zeros(step.graph.num_ops, dtype=np.int64), load_cluster("k80x2")), (x,),
                           devices=["cpu", "cpu"], step=step)
    seen = []
    run_step = apply_module.run_step

    def spy(program, plan, devices, *, inputs, **kwargs):
        seen.extend(inputs)
        return run_step(program, plan, devices, inputs=inputs, **kwargs)

    monkeypatch.setattr(apply_module, "run_step", spy)
    given = torch.randn(6, 6, 3, 2).permute(3, 2, 1, 0)
    placed(given)
    assert seen[0].stride() == x.stride() and torch.equal(seen[0], given)


def test_meta_device_module_or_input_is_one_clear_error():
    """A model built on the meta device (imported to be placed) or a meta batch was a NotImplementedError from
    ``.to()`` ('Cannot copy out of meta tensor'); now one line each, and the module given weights applies."""
    def loss(out):
        return out.square().mean()

    net = torch.nn.Linear(4, 2, device="meta")
    step = import_step(net, (torch.empty(8, 4, device="meta"),), loss=loss)
    placement = Placement([0] * step.graph.num_ops, load_cluster("k80x2"))
    with pytest.raises(InvalidArgument, match=r"^parameter weight is on the meta device \(a shape with no data\)"):
        gnplace.apply(net, placement, (torch.zeros(8, 4),), loss=loss, devices=["cpu", "cpu"], step=step)
    net.to_empty(device="cpu")
    torch.nn.init.ones_(net.weight)
    torch.nn.init.zeros_(net.bias)
    placed = gnplace.apply(net, placement, (torch.zeros(8, 4),), loss=loss, devices=["cpu", "cpu"])
    assert placed(torch.ones(8, 4)).item() == pytest.approx(16.0)
    with pytest.raises(InvalidArgument, match=r"^input 0 is on the meta device \(a shape with no data\)"):
        placed(torch.empty(8, 4, device="meta"))


def _other_loss(y):
    return y.abs().mean()


class _ReturnsItsLoss(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = torch.nn.Linear(4, 2)

    def forward(self, x):
        return self.lin(x).square().mean()


def test_a_loss_other_than_the_recorded_steps_is_refused():
    """apply(loss=L, step=s) with s recorded under another loss ran s's loss and ignored L, silently."""
    net = torch.nn.Linear(4, 2)
    x = torch.randn(8, 4)
    step = import_step(net, (x,), loss=_loss)
    placement = Placement([k % 2 for k in range(step.graph.num_ops)], load_cluster("k80x2"))
    with pytest.raises(InvalidArgument) as err:
        gnplace.apply(net, placement, (x,), loss=_other_loss, devices=["cpu", "cpu"], step=step)
    assert str(err.value) == ("apply: loss=_other_loss is not the loss step= was recorded with, another (_loss), "
                              "and the recorded step computes its own: give import_step's loss or leave loss= out")
    for loss in (_loss, None):  # the recorded loss again, or none: the step's own
        placed = gnplace.apply(net, placement, (x,), loss=loss, devices=["cpu", "cpu"], step=step)
        torch.testing.assert_close(placed(x), _loss(net(x)))
    own = _ReturnsItsLoss()
    step = import_step(own, (x,))
    placement = Placement([0] * step.graph.num_ops, load_cluster("k80x2"))
    with pytest.raises(InvalidArgument, match=r"^apply: loss=_other_loss is not the loss step= was recorded with, "
                                              r"none \(the module returned its loss\), and"):
        gnplace.apply(own, placement, (x,), loss=_other_loss, devices=["cpu", "cpu"], step=step)


def test_a_loss_that_is_no_function_is_an_invalid_argument():
    """loss=3 was an UnsupportedGraph from the recording ("'int' object is not callable"), as the docstring has not."""
    net = torch.nn.Linear(4, 2)
    x = torch.randn(8, 4)
    step = import_step(net, (x,), loss=_loss)
    placement = Placement([k % 2 for k in range(step.graph.num_ops)], load_cluster("k80x2"))
    says = (r"^loss must be a function of the module's output returning a scalar loss, or None \(the module returns "
            r"its loss\), got 3$")
    for given in (None, step):
        with pytest.raises(InvalidArgument, match=says):
            gnplace.apply(net, placement, (x,), loss=3, devices=["cpu", "cpu"], step=given)
    with pytest.raises(InvalidArgument, match=says):
        import_step(net, (x,), loss=3)


def test_applying_to_a_placed_module_is_refused_naming_the_model_to_give():
    """apply(placed, ...) recorded the placed module as a model: "placement has 19 entries, graph 'PlacedModule' has
    25 ops", naming nothing to give instead."""
    net = torch.nn.Sequential(torch.nn.Linear(4, 8), torch.nn.ReLU(), torch.nn.Linear(8, 1))
    x = torch.randn(6, 4)
    ops = import_step(net, (x,), loss=_loss).graph.num_ops
    placement = Placement([k % 2 for k in range(ops)], load_cluster("k80x2"))
    placed = gnplace.apply(net, placement, (x,), loss=_loss, devices=["cpu", "cpu"])
    with pytest.raises(InvalidArgument, match=r"^apply: the module is already placed \(a PlacedModule\); apply to "
                                              r"the model it wraps, placed.module, to place it again$"):
        gnplace.apply(placed, placement, (x,), loss=_loss, devices=["cpu", "cpu"])
    again = gnplace.apply(placed.module, placement, (x,), loss=_loss, devices=["cpu", "cpu"])
    torch.testing.assert_close(again(x), placed(x))


@pytest.mark.skipif(not torch.cuda.is_available(), reason="moves a parameter to cuda:0: needs a GPU")
def test_a_gradient_left_by_an_eager_step_moves_with_its_parameter():
    """A .grad of an eager step before apply stayed on the CPU while its parameter moved to cuda:0; the placed
    step's backward then added a cuda gradient to it."""
    torch.manual_seed(0)
    net = torch.nn.Sequential(torch.nn.Linear(4, 3), torch.nn.Linear(3, 1))
    reference = copy.deepcopy(net)
    x = torch.randn(5, 4)
    _loss(net(x)).backward()
    _loss(reference(x)).backward()
    graph = import_step(net, (x,), loss=_loss).graph
    placed = gnplace.apply(net, Placement([1] * graph.num_ops, load_cluster("cpu_gpu")), (x,), loss=_loss)
    assert all(p.grad is not None and p.grad.device == p.device for p in net.parameters())
    placed(x).backward()
    _loss(reference(x)).backward()  # accumulated over the two steps, as eager accumulates
    for ours, theirs in zip(net.parameters(), reference.parameters()):
        torch.testing.assert_close(ours.grad.cpu(), theirs.grad)


def test_a_call_that_computes_no_gradient_runs_the_forward_alone_as_eager_computes_it(monkeypatch):
    """A call under torch.no_grad or inference_mode (a validation loop) ran the whole step, backward included: 39
    ops where its forward and loss are 16. It runs those alone now, with eager's loss, batch norm statistics and
    dropout draws, leaves every .grad as it was, and the training calls around it stay eager's."""
    import io

    import gnplace.execute.runner as runner

    net, reference, x, placed = _dropout_mlp_placed(6, 10)
    ran = []
    call_op = runner.call_op
    monkeypatch.setattr(runner, "call_op", lambda op, *args: ran.append(op.target) or call_op(op, *args))
    ours, theirs = torch.optim.SGD(net.parameters(), lr=0.1), torch.optim.SGD(reference.parameters(), lr=0.1)
    forward = sum(not op.backward for op in placed.program.ops)
    for k, mode in enumerate(["no_grad", "train", "no_grad", "inference", "train", "no_grad", "train"]):
        batch = torch.randn(10, 5)
        grads = [p.grad for p in net.parameters()]
        ran.clear()
        with torch.no_grad() if mode == "no_grad" else torch.inference_mode(mode == "inference"):
            torch.manual_seed(100 + k)  # the dropout draws the same masks
            loss = placed(batch)
            torch.manual_seed(100 + k)
            want = _loss(reference(batch))
        torch.testing.assert_close(loss.detach(), want.detach())
        for (name, value), expected in zip(net.named_buffers(), reference.buffers()):
            torch.testing.assert_close(value, expected, msg=name)
        if mode == "train":
            assert len(ran) == len(placed.program.ops) > forward
            ours.zero_grad()
            loss.backward()
            ours.step()
            theirs.zero_grad()
            want.backward()
            theirs.step()
            _assert_same_grads(net, reference)
        else:
            assert not loss.requires_grad and len(ran) == forward == 16
            assert all(p.grad is g for p, g in zip(net.parameters(), grads))  # None, then the last step's, untouched
    for a, b in zip(net.parameters(), reference.parameters()):
        torch.testing.assert_close(a, b)
    buffer = io.BytesIO()
    torch.save(placed, buffer)  # the forward program is not saved: it is made again at the first such call
    assert "_forward_step" in placed.__dict__
    buffer.seek(0)
    loaded = torch.load(buffer, weights_only=False)
    assert "_forward_step" not in loaded.__dict__
    with torch.no_grad():
        torch.manual_seed(0)
        again = loaded(x)
        torch.manual_seed(0)
        torch.testing.assert_close(again, placed(x))


@pytest.mark.parametrize("cluster", ["k80x2", "cpu_gpu"])
def test_an_optimizer_made_before_apply_moves_its_state_by_loading_its_state_dict_again(cluster):
    """apply moves the parameters, not an optimizer's state (it is given none): Adam's exp_avg of an eager step before
    stays on the old device, as after module.to(); load_state_dict(state_dict()) moves it, as the docs say, and the
    training goes on as eager's."""
    if cluster == "cpu_gpu" and not torch.cuda.is_available():
        pytest.skip("moves the parameters to cuda:0: needs a GPU")
    torch.manual_seed(0)
    net = torch.nn.Sequential(torch.nn.Linear(4, 3), torch.nn.Tanh(), torch.nn.Linear(3, 1))
    reference = copy.deepcopy(net)
    x = torch.randn(5, 4)
    ours, theirs = torch.optim.Adam(net.parameters(), lr=0.01), torch.optim.Adam(reference.parameters(), lr=0.01)
    for model, optimizer in ((net, ours), (reference, theirs)):  # an eager step: the state is made on the CPU
        _loss(model(x)).backward()
        optimizer.step()
    graph = import_step(net, (x,), loss=_loss).graph
    devices = ["cpu", "cpu"] if cluster == "k80x2" else None
    placed = gnplace.apply(net, Placement([1] * graph.num_ops, load_cluster(cluster)), (x,), loss=_loss,
                           devices=devices)
    assert ours.state[net[0].weight]["exp_avg"].device.type == "cpu"  # left behind on cpu_gpu
    ours.load_state_dict(ours.state_dict())
    for p in net.parameters():
        assert all(v.device == p.device for k, v in ours.state[p].items() if k != "step")
    _train_alike(placed, reference, ours, theirs, (5, 4))
    for a, b in zip(net.parameters(), reference.parameters()):
        torch.testing.assert_close(a.detach().cpu(), b.detach())
