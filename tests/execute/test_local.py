import numpy as np
import pytest
import torch

from gnplace.cluster import cluster_from_dict
from gnplace.exceptions import ExecutionFailed, InvalidPlacement
from gnplace.execute.local import LocalTimer
from gnplace.importers.torch import import_step
from gnplace.toy import chain_graph


def _cpu_cluster(memory="64GiB"):
    return cluster_from_dict({"name": "cpu2", "devices": [{"name": "cpu", "count": 2, "kind": "cpu", "memory": memory}],
                              "links": {"default": "pcie3"}})


def _step(optimizer="sgd"):
    torch.manual_seed(0)
    net = torch.nn.Sequential(torch.nn.Linear(16, 32), torch.nn.ReLU(), torch.nn.Linear(32, 4))
    return import_step(net, (torch.randn(8, 16),), loss=lambda y: y.square().mean(), optimizer=optimizer)


def test_times_placements_counts_moves_and_caches():
    step = _step()
    cluster = _cpu_cluster()
    timer = LocalTimer(step, repeats=3)
    single = timer.time(step.graph, cluster, np.zeros(step.graph.num_ops, dtype=np.int64))
    assert single.step_time > 0 and not single.is_oom and timer.last_moves == 0
    split = step.graph.group % 2
    timer.time(step.graph, cluster, split)
    assert timer.last_moves > 0 and timer.last_moved_bytes > 0
    timer.time(step.graph, cluster, split)
    assert timer.measured == 2  # the repeat came from the cache


def test_a_device_over_capacity_is_reported_out_of_memory_not_raised():
    step = _step()
    cluster = _cpu_cluster(memory="4KiB")
    result = LocalTimer(step, repeats=1).time(step.graph, cluster, np.zeros(step.graph.num_ops, dtype=np.int64))
    assert result.is_oom and result.oom[0]


def test_a_real_torch_oom_is_caught(monkeypatch):
    step = _step()
    import gnplace.execute.runner as runner

    real = runner.call_op

    def failing(op, fn, resolve, device):
        if op.target == "aten.addmm.default":
            raise torch.OutOfMemoryError("CUDA out of memory. Tried to allocate 2.00 GiB")
        return real(op, fn, resolve, device)

    monkeypatch.setattr(runner, "call_op", failing)
    result = LocalTimer(step, repeats=1).time(step.graph, _cpu_cluster(), np.zeros(step.graph.num_ops, dtype=np.int64))
    assert result.is_oom


def test_the_cpu_allocator_running_out_is_out_of_memory_not_an_error(monkeypatch):
    """A CPU device of a cluster that gives it more memory than this machine has: torch's CPU allocator fails."""
    step = _step()
    import gnplace.execute.runner as runner

    real = runner.call_op

    def huge(op, fn, resolve, device):
        if op.target == "aten.addmm.default":
            torch.empty(1 << 55, dtype=torch.uint8, device=device)  # 32 PiB: the allocator refuses at once
        return real(op, fn, resolve, device)

    monkeypatch.setattr(runner, "call_op", huge)
    result = LocalTimer(step, repeats=1).time(step.graph, _cpu_cluster(), np.zeros(step.graph.num_ops, dtype=np.int64))
    assert result.is_oom and result.oom[0]


def test_another_graph_or_a_failing_op_is_one_clear_error(monkeypatch):
    step = _step()
    timer = LocalTimer(step, repeats=1)
    with pytest.raises(InvalidPlacement, match="recorded step"):
        timer.time(chain_graph(3), _cpu_cluster(), [0, 0, 0])
    import gnplace.execute.runner as runner

    def broken(op, fn, resolve, device):
        raise RuntimeError("mat1 and mat2 shapes cannot be multiplied\nlong trace")

    monkeypatch.setattr(runner, "call_op", broken)
    with pytest.raises(ExecutionFailed, match="shapes cannot be multiplied$"):
        timer.time(step.graph, _cpu_cluster(), np.ones(step.graph.num_ops, dtype=np.int64))


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
def test_cuda_and_cpu_really_move_tensors():
    from gnplace.cluster import load_cluster
    from gnplace.execute.compiler import compile_step
    from gnplace.execute.runner import run_step

    step = _step()
    program = compile_step(step)
    devices = (step.graph.group % 2).astype(np.int64)
    plan = program.plan(devices)
    torch_devices = [torch.device("cpu"), torch.device("cuda:0")]
    out = run_step(program, plan, torch_devices)
    assert out.moves > 0 and set(plan.op_device.tolist()) == {0, 1}
    for name, grad in out.grads.items():  # each gradient ends where its parameter's update runs
        assert grad.device.type == torch_devices[plan.param_device.get(name, 0)].type
    torch.manual_seed(0)  # the model and batch of _step(), run eagerly
    net = torch.nn.Sequential(torch.nn.Linear(16, 32), torch.nn.ReLU(), torch.nn.Linear(32, 4))
    net(torch.randn(8, 16)).square().mean().backward()
    for name, p in net.named_parameters():
        torch.testing.assert_close(out.grads[name].cpu(), p.grad, rtol=1e-4, atol=1e-6)
    result = LocalTimer(step, repeats=3).time(step.graph, load_cluster("cpu_gpu"), devices)
    assert result.step_time > 0 and not result.is_oom


def test_a_real_oom_while_a_tensor_crosses_to_another_device_is_out_of_memory(monkeypatch):
    """The copy onto the receiving device allocates there: running out then is the step's OOM, not an error."""
    import sys

    step = _step()
    real = torch.Tensor.to

    def to(self, *args, **kwargs):
        if sys._getframe(1).f_code.co_name == "_cross":  # a crossing, not a parameter's setup
            raise torch.OutOfMemoryError("CUDA out of memory. Tried to allocate 2.00 GiB")
        return real(self, *args, **kwargs)

    monkeypatch.setattr(torch.Tensor, "to", to)
    result = LocalTimer(step, repeats=1).time(step.graph, _cpu_cluster(), step.graph.group % 2)
    assert result.is_oom


def test_a_real_oom_while_the_parameters_are_copied_to_their_devices_is_out_of_memory(monkeypatch):
    """Copying a parameter onto its device allocates there: running out then is that device's OOM, not an error."""
    step = _step()
    timer = LocalTimer(step, repeats=1)
    last = timer.program.params["2.bias"]
    real = torch.Tensor.to

    def to(self, *args, **kwargs):
        if self is last:
            raise torch.OutOfMemoryError("CUDA out of memory. Tried to allocate 2.00 GiB")
        return real(self, *args, **kwargs)

    monkeypatch.setattr(torch.Tensor, "to", to)
    placement = np.zeros(step.graph.num_ops, dtype=np.int64)
    placement[step.update_node["2.bias"]] = 1
    result = timer.time(step.graph, _cpu_cluster(), placement)
    assert result.is_oom and result.oom.tolist() == [False, True]


def test_a_real_oom_in_the_optimizers_update_is_out_of_memory(monkeypatch):
    """Adam's update allocates temporaries no count holds: running out there ended the timer (ExecutionFailed)."""
    from gnplace.execute import optim

    step = _step(optimizer="adam")
    timer = LocalTimer(step, repeats=1)

    def out_of_memory(self, *args, **kwargs):
        raise torch.OutOfMemoryError("CUDA out of memory. Tried to allocate 2.00 MiB")

    monkeypatch.setattr(optim.OptimizerState, "update", out_of_memory)
    placement = np.zeros(step.graph.num_ops, dtype=np.int64)
    assert timer.time(step.graph, _cpu_cluster(), placement).is_oom


def test_a_graph_of_as_many_nodes_but_other_ops_is_refused():
    """Only the number of nodes was checked: the timer ran its own step for another graph's placement."""
    step = _step()
    timer = LocalTimer(step, repeats=1)
    n = step.graph.num_ops
    renamed = step.graph.replace(node_names=[f"op{k}" for k in range(n)], name="other")
    with pytest.raises(InvalidPlacement, match=r"^this timer runs the recorded step of 'Sequential'; graph 'other' "
                                               r"has as many nodes but other op names or edges"):
        timer.time(renamed, _cpu_cluster(), np.zeros(n, dtype=np.int64))
    costed = step.graph.replace(flops=np.full(n, 1e6), name="with costs")  # the same graph, other costs and name
    assert not timer.time(costed, _cpu_cluster(), np.zeros(n, dtype=np.int64)).is_oom


@pytest.mark.parametrize("optimizer", ["sgd", "momentum", "adam"])
@pytest.mark.parametrize("groups", [(0, 0, 0, 0), (0, 0, 1, 1), (1, 0, 0, 1), (0, 1, 1, 0), (1, 1, 0, 0)])
def test_measured_peak_memory_is_the_simulators_where_both_count_the_same(groups, optimizer):
    """On this three-layer model each device's peak is the simulator's: parameters, the input, activations kept
    for backward, gradients (returned as views of what made them) and the copies each receives, the gradient
    copies included. (Where gradients wait for one another or an op has several outputs the two count
    differently: the simulator's module docstring says how.)

    Once more the loss's bytes on its device: the executor holds the loss it returns to the end, where the
    simulator frees it after the backward's seed read it. It measured ``[3076, 2704]`` against the
    simulator's ``[4112, 4880]`` (updates on device 1), and here ``[5780, 0]`` against ``[6816, 0]`` on one
    device, ``[3220, 5248]`` against ``[3216, 5760]`` for ``(1, 1, 0, 0)``: it left out the gradient copies,
    the input and the storages that views keep (gradients are returned as ``t(t(mm))``). With momentum or
    Adam it left out the optimizer's state, which the simulator counts on each update node (``[6820, 0]``
    against ``[12228, 0]`` for Adam on one device).

    Less, where a device sends a tensor and runs its next op while the simulator's transfer is in flight: the
    simulator holds the sender's copy until the transfer ends, the executor drops it once copied (its copy is done
    before the sender's next op). Split at the layers, the device of layer 2 sends ``grad/2/mm`` (1,024 bytes) and
    makes ``grad/2/mm_1`` (512 bytes): 512 bytes fewer at its peak.
    """
    from gnplace.sim.simulator import Simulator

    step = _step(optimizer)
    graph, cluster = step.graph, _cpu_cluster()
    devices = np.array([groups[k] for k in graph.group], dtype=np.int64)
    timer = LocalTimer(step, devices=["cpu", "cpu"], warmup=0, repeats=1)
    measured = timer.time(graph, cluster, devices).peak_memory
    simulated = Simulator().time(graph, cluster, devices).peak_memory
    program = timer.program
    loss_held = np.zeros(2)
    loss_held[program.plan(devices).value_device[program.loss]] = program.value_bytes(program.loss)
    in_flight = np.zeros(2)
    if groups[0] == groups[1] != groups[2] == groups[3]:  # split at the layers: layer 2's device sends
        in_flight[groups[2]] = 512
    np.testing.assert_array_equal(measured, simulated + loss_held - in_flight)


def test_each_measured_step_runs_the_graphs_optimizer_with_its_state_kept_across_the_steps(monkeypatch):
    """An Adam graph's steps ran SGD's update (``sub_``), with no state."""
    from gnplace.execute.optim import OptimizerState

    updates = []
    update = OptimizerState.update

    def spy(self, name, param, grad, lr):
        updates.append((id(self), name, self.steps[name] + 1, lr))
        update(self, name, param, grad, lr)

    monkeypatch.setattr(OptimizerState, "update", spy)
    step = _step("adam")
    timer = LocalTimer(step, devices=["cpu", "cpu"], warmup=1, repeats=2, lr=0.01)
    timer.time(step.graph, _cpu_cluster(), step.graph.group % 2)
    names = list(timer.program.params)
    assert [(name, t, lr) for _, name, t, lr in updates] == [(n, t, 0.01) for t in (1, 2, 3) for n in names]
    assert len({state for state, *_ in updates}) == 1  # one state, on the parameters' devices, for all steps
    updates.clear()
    LocalTimer(_step(), devices=["cpu", "cpu"], repeats=1).time(step.graph, _cpu_cluster(), step.graph.group % 2)
    assert updates == []  # SGD runs as it always has


def test_timing_a_model_with_dropout_leaves_the_callers_generator_where_it_was():
    """The timed steps' dropout drew from the caller's generator: the steps timed moved its random stream."""
    from tests.execute.models import DropsOut

    step = import_step(DropsOut(), (torch.randn(4, 8),))
    torch.manual_seed(5)
    state = torch.random.get_rng_state()
    LocalTimer(step, repeats=2).time(step.graph, _cpu_cluster(), step.graph.group % 2)
    assert torch.equal(torch.random.get_rng_state(), state)


def test_the_step_is_the_median_of_the_timed_steps_after_the_warmup(monkeypatch):
    """The warm-up steps are not timed and the timed ones give their median, per device too: mutants taking the
    mean, or counting the warm-up, passed (every test read a real, unpredictable clock)."""
    import gnplace.execute.local as local
    from gnplace.execute.runner import StepOutput

    step = _step()
    drawn = iter([(100.0, [50.0, 50.0]), (1.0, [1.0, 4.0]), (2.0, [2.0, 5.0]), (9.0, [9.0, 6.0])])

    def scripted(program, plan, devices, **kwargs):
        seconds, busy = next(drawn)
        return StepOutput(None, {}, seconds, np.array(busy), np.zeros(2), 0.0, 0)

    monkeypatch.setattr(local, "run_step", scripted)
    result = LocalTimer(step, warmup=1, repeats=3).time(step.graph, _cpu_cluster(), step.graph.group % 2)
    assert result.step_time == 2.0  # not the mean 4, nor 5.5 with the warm-up's 100
    assert result.busy_time.tolist() == [2.0, 5.0]  # each device's median


def test_the_steps_run_with_the_timers_threads_and_leave_the_callers_count(monkeypatch):
    """``threads`` is the CPU threads the steps run with, the caller's count put back after: a mutant that never set
    it passed."""
    import gnplace.execute.local as local
    from gnplace.execute.runner import StepOutput

    seen = []

    def scripted(program, plan, devices, **kwargs):
        seen.append(torch.get_num_threads())
        return StepOutput(None, {}, 1.0, np.zeros(2), np.zeros(2), 0.0, 0)

    monkeypatch.setattr(local, "run_step", scripted)
    step = _step()
    before = torch.get_num_threads()
    torch.set_num_threads(2)
    try:
        LocalTimer(step, repeats=2, threads=1).time(step.graph, _cpu_cluster(), step.graph.group % 2)
        assert seen == [1, 1, 1] and torch.get_num_threads() == 2
    finally:
        torch.set_num_threads(before)


def test_timing_trains_a_copy_and_leaves_the_recorded_parameters_as_they_were():
    """Each measurement updates copies of the parameters: with ``copy=False`` a CPU device's steps trained the
    program's own tensors, so each measurement started from where the last one left them (a mutant passed)."""
    step = _step()
    timer = LocalTimer(step, repeats=2, lr=0.5)
    before = {name: p.clone() for name, p in timer.program.params.items()}
    timer.time(step.graph, _cpu_cluster(), np.zeros(step.graph.num_ops, dtype=np.int64))
    for name, p in timer.program.params.items():
        assert torch.equal(p, before[name]), name


@pytest.mark.parametrize("warmup, repeats", [(0, 2), (2, 1)])
def test_a_measurement_runs_exactly_warmup_and_repeats_steps(monkeypatch, warmup, repeats):
    """``warmup`` untimed steps, then ``repeats`` timed: a mutant running ``repeats + 1`` passed with the default
    warm-up of 1. No warm-up, two steps of 1 s and 3 s: their median 2 s (the lower middle one of two is not
    taken: ``np.median``, the mean of the two); two warm-ups of 100 s, then 1 s: 1 s."""
    import gnplace.execute.local as local
    from gnplace.execute.runner import StepOutput

    drawn = iter([1.0, 3.0] if warmup == 0 else [100.0, 100.0, 1.0])
    calls = []

    def scripted(program, plan, devices, **kwargs):
        calls.append(1)
        return StepOutput(None, {}, next(drawn), np.zeros(2), np.zeros(2), 0.0, 0)

    monkeypatch.setattr(local, "run_step", scripted)
    step = _step()
    result = LocalTimer(step, warmup=warmup, repeats=repeats).time(step.graph, _cpu_cluster(), step.graph.group % 2)
    assert len(calls) == warmup + repeats
    assert result.step_time == (2.0 if warmup == 0 else 1.0)


def test_the_peak_is_each_devices_most_over_every_step_run(monkeypatch):
    """Peaks of [5, 1], [1, 7] and [2, 2] bytes (the first a warm-up): each device's most, [5, 7], not the last step's."""
    import gnplace.execute.local as local
    from gnplace.execute.runner import StepOutput

    peaks = iter([[5.0, 1.0], [1.0, 7.0], [2.0, 2.0]])

    def scripted(program, plan, devices, **kwargs):
        return StepOutput(None, {}, 1.0, np.zeros(2), np.array(next(peaks)), 0.0, 0)

    monkeypatch.setattr(local, "run_step", scripted)
    step = _step()
    result = LocalTimer(step, warmup=1, repeats=2).time(step.graph, _cpu_cluster(), step.graph.group % 2)
    assert result.peak_memory.tolist() == [5.0, 7.0]


def test_a_failing_op_is_reported_in_the_executors_own_words_once(monkeypatch):
    """``call_op`` names the op and the device already: it was wrapped again as "the placed step of ... failed"."""
    import gnplace.execute.runner as runner

    def broken(op, fn, resolve, device):
        raise ExecutionFailed(f"op {op.target} failed on {device}: boom")

    monkeypatch.setattr(runner, "call_op", broken)
    step = _step()
    with pytest.raises(ExecutionFailed, match=r"^op aten\.\S+ failed on cpu: boom$"):
        LocalTimer(step, repeats=1).time(step.graph, _cpu_cluster(), np.zeros(step.graph.num_ops, dtype=np.int64))


def test_bad_devices_or_threads_are_refused_when_the_timer_is_made():
    """``"cpu,cpu"`` was seven devices, one a letter; ``threads=0`` reached torch.set_num_threads mid-measurement."""
    from gnplace.exceptions import InvalidArgument

    step = _step()
    with pytest.raises(InvalidArgument, match=r"^devices must be a list of torch device names"):
        LocalTimer(step, devices="cpu,cpu")
    with pytest.raises(InvalidArgument, match=r"threads must be a whole number from 1 to"):
        LocalTimer(step, threads=0)


def test_the_settings_name_the_devices_and_threads():
    """A run resumed on other devices or threads mixes two kinds of measurement: the journal's settings say which."""
    step = _step()
    timer = LocalTimer(step, devices=["cpu", "cpu"], repeats=3, threads=1)
    assert timer.settings() == {"warmup": 1, "repeats": 3, "lr": 1e-3, "devices": ["cpu", "cpu"], "threads": 1}
    assert LocalTimer(step).settings() == {"warmup": 1, "repeats": 5, "lr": 1e-3, "devices": None, "threads": None}


def test_a_step_over_a_devices_capacity_ends_at_once_with_the_simulators_estimate(monkeypatch):
    """The count raises when device 0's 4 KiB are exceeded: the first (warm-up) step ends there, and the result is
    ``oom_result``'s, the simulator's step time with device 0's peak at least twice its capacity (8,192 bytes),
    not a measured step that ran to the end over capacity."""
    import gnplace.execute.local as local
    from gnplace.sim.simulator import Simulator

    calls = []
    run_step = local.run_step

    def counted(*args, **kwargs):
        calls.append(1)
        return run_step(*args, **kwargs)

    monkeypatch.setattr(local, "run_step", counted)
    step = _step()
    cluster = _cpu_cluster(memory="4KiB")
    placement = np.zeros(step.graph.num_ops, dtype=np.int64)
    result = LocalTimer(step, repeats=3).time(step.graph, cluster, placement)
    assert result.is_oom and len(calls) == 1
    assert result.step_time == Simulator().time(step.graph, cluster, placement).step_time
    assert result.peak_memory[0] >= 8192
