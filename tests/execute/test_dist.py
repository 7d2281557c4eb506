"""The distributed executor: two ranks of one thread (gloo), started once for the module."""

import os
import signal
import subprocess
import sys
import time
from dataclasses import replace

import numpy as np
import pytest
import torch

from gnplace.cluster import cluster_from_dict
from gnplace.exceptions import ExecutionFailed, InvalidArgument
from gnplace.execute.compiler import compile_step
from gnplace.execute.dist import MAX_TIMEOUT_S, DistTimer
from gnplace.execute.examples import tiny
from gnplace.execute.rank import transfer_tags
from gnplace.graph import BACKWARD
from gnplace.importers.torch import import_step
from tests.execute.models import (
    ConjugatesAcross,
    ReadsItsRunningMean,
    ReadsTheStatisticsAfterTheirUpdate,
    ScalesItsInput,
    ViewsATransposedResult,
    ViewsBeforeWrites,
    WritesIntoAView,
)


def _cluster(memory="64GiB"):
    return cluster_from_dict({"name": "ranks2", "devices": [{"name": "rank", "count": 2, "kind": "cpu",
                                                             "memory": memory}], "links": {"default": "pcie3"}})


@pytest.fixture(scope="module")
def setup():
    module, inputs = tiny()
    step = import_step(module, inputs)
    module.zero_grad()
    loss = module(*inputs)
    loss.backward()
    eager = (loss.detach(), {k: p.grad.clone() for k, p in module.named_parameters()})
    timer = DistTimer(step, repeats=2, timeout_s=30)
    yield step, eager, timer
    timer.close()


@pytest.fixture
def own_ranks(setup):
    """For a test that starts ranks of its own: the module's ranks stopped first (a process holds one process group).

    A test may run between the module's others in any order (pytest-xdist hands them out one by one); the module's
    timer starts its ranks again on its next run.
    """
    setup[2].close()


def test_two_ranks_give_eager_loss_and_gradients(setup, monkeypatch):
    """Each rank returns the eager gradients of its own parameters, from tensors that really crossed over gloo."""
    step, (want_loss, want_grads), timer = setup
    sent, posted = [], []  # what rank 0 (this process) hands to gloo
    isend, irecv = torch.distributed.isend, torch.distributed.irecv

    def spy_isend(tensor, dst, tag=0, **kwargs):
        sent.append((dst, tag))
        return isend(tensor, dst, tag=tag, **kwargs)

    def spy_irecv(tensor, src, tag=0, **kwargs):
        posted.append((src, tag))
        return irecv(tensor, src, tag=tag, **kwargs)

    monkeypatch.setattr(torch.distributed, "isend", spy_isend)
    monkeypatch.setattr(torch.distributed, "irecv", spy_irecv)
    rng = np.random.default_rng(0)
    for devices in [(step.graph.group % 2).astype(np.int64), rng.integers(0, 2, step.graph.num_groups)[step.graph.group]]:
        sent.clear()
        posted.clear()
        per_rank = timer.run(_cluster(), devices, collect=True)
        plan = compile_step(step).plan(devices)
        grads, losses = {}, []
        for rank, (_, _, collected) in enumerate(per_rank):
            # every rank returns the gradients of exactly the parameters that live on it
            assert set(collected["grads"]) == {k for k, d in plan.param_device.items() if d == rank}
            grads.update(collected["grads"])
            losses += [collected["loss"]] if "loss" in collected else []
        assert set(plan.op_device.tolist()) == {0, 1}  # both ranks run ops
        torch.testing.assert_close(losses[0], want_loss)
        assert set(grads) == set(want_grads)
        for name, grad in want_grads.items():
            torch.testing.assert_close(grads[name], grad)
        # rank 0 sent each tensor the plan moves from it, once per step, and posted a receive for each it needs
        tags = transfer_tags(plan)
        moves = [(ref, src, dst) for m in plan.moves.values() for ref, src, dst in m]
        moves += [(ref, src, dst) for _, ref, src, dst in plan.grad_moves]
        steps = timer.warmup + timer.repeats
        want_sent = sorted((dst, tags[(ref, dst)]) for ref, src, dst in moves if src == 0) * steps
        want_posted = sorted({(src, tags[(ref, dst)]) for ref, src, dst in moves if dst == 0}) * steps
        assert sorted(sent) == sorted(want_sent) and any(dst == 1 for dst, _ in sent)
        assert sorted(posted) == sorted(want_posted) and posted


def test_step_time_is_measured_and_cached(setup):
    step, _, timer = setup
    devices = (step.graph.group % 2).astype(np.int64)
    first = timer.time(step.graph, _cluster(), devices)
    assert first.step_time > 0 and not first.is_oom and first.busy_time.shape == (2,)
    measured = timer.measured
    assert timer.time(step.graph, _cluster(), devices) is first and timer.measured == measured


def test_over_capacity_is_out_of_memory_without_running(setup):
    step, _, timer = setup
    result = timer.time(step.graph, _cluster("2KiB"), np.zeros(step.graph.num_ops, dtype=np.int64))
    assert result.is_oom


@pytest.mark.parametrize("optimizer", ["momentum", "adam"])
def test_ranks_update_their_parameters_as_torch_optim_does_over_the_steps(setup, optimizer):
    """Each rank ran SGD's update whatever optimizer the graph names; now its own, its state kept across steps."""
    from tests.execute.test_optim import TORCH_OPTIMIZERS

    _, _, timer = setup
    module, inputs = tiny()
    program = compile_step(import_step(module, inputs, optimizer=optimizer))
    devices = (np.arange(program.num_nodes) % 2).astype(np.int64)
    assert set(program.plan(devices).param_device.values()) == {0, 1}
    with timer.using(program):
        per_rank = timer.run(_cluster(), devices, collect=True)
    params = {name: value for _, _, collected in per_rank for name, value in collected["params"].items()}
    reference = TORCH_OPTIMIZERS[optimizer](module.parameters(), timer.lr)
    for _ in range(timer.warmup + timer.repeats):
        reference.zero_grad()
        module(*inputs).backward()
        reference.step()
    assert set(params) == {name for name, _ in module.named_parameters()}
    for name, p in module.named_parameters():
        assert torch.equal(params[name], p.detach()), name
    plan = program.plan(devices)
    sgd = compile_step(import_step(*tiny()))
    held = program.peak_bytes(plan, 2, ranks=True) - sgd.peak_bytes(sgd.plan(devices), 2, ranks=True)
    state = np.zeros(2)
    for name in program.params:
        state[plan.param_device[name]] += program.state_bytes(name)
    assert state.all() and np.array_equal(held, state)  # what the timer checks capacity by counts the state


def test_a_gradient_an_op_on_its_parameters_rank_also_reads_arrives_once(setup):
    """The gradient crosses for the op and is the update's: sent twice under one tag, the step timed out."""
    class SharedGrad(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.w = torch.nn.Linear(8, 8)
            self.p = torch.nn.Parameter(torch.randn(16, 8))

        def forward(self, x):
            return torch.tanh(self.w(x) + self.p).square().mean()

    torch.manual_seed(0)
    module, x = SharedGrad(), torch.randn(16, 8)
    step = import_step(module, (x,))
    module(x).backward()
    names = step.graph.node_names
    devices = np.array([1 if n in ("update/p", "grad/w/sum") else 0 for n in names], dtype=np.int64)
    timer = setup[2]
    with timer.using(compile_step(step)):
        start = time.perf_counter()
        per_rank = timer.run(_cluster(), devices, collect=True)
        assert time.perf_counter() - start < 10
    grads = {k: v for _, _, collected in per_rank for k, v in collected["grads"].items()}
    for name, p in module.named_parameters():
        torch.testing.assert_close(grads[name], p.grad)


class _WrittenAfterSent(torch.nn.Module):
    """``h`` is read by a sum (on the other rank), then written in place: the sum must see it unwritten."""

    def __init__(self):
        super().__init__()
        self.l1, self.l2 = torch.nn.Linear(64, 256), torch.nn.Linear(256, 8)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = self.l1(x)
        a = h.sum(1, keepdim=True)
        h.mul_(-3.0)
        return (a + self.l2(h)).square().mean()


def test_a_tensor_written_in_place_after_it_is_sent_arrives_as_it_was(setup, monkeypatch):
    """isend reads the tensor until the message leaves; the in-place write that followed made the loss wrong."""
    torch.manual_seed(0)
    module, x = _WrittenAfterSent(), torch.randn(256, 64)
    step = import_step(module, (x,))
    want = module(x).detach()
    sent = []
    isend = torch.distributed.isend

    def spy_isend(tensor, dst, tag=0, **kwargs):
        sent.append((tensor, tensor.clone()))
        return isend(tensor, dst, tag=tag, **kwargs)

    monkeypatch.setattr(torch.distributed, "isend", spy_isend)
    devices = np.array([1 if name == "root/sum" else 0 for name in step.graph.node_names], dtype=np.int64)
    timer = setup[2]
    with timer.using(compile_step(step)):
        for _ in range(5):
            losses = [c["loss"] for _, _, c in timer.run(_cluster(), devices, collect=True) if "loss" in c]
            torch.testing.assert_close(losses[0], want)
    assert sent and all(torch.equal(tensor, as_sent) for tensor, as_sent in sent)  # nothing sent was written after


def test_an_input_the_step_writes_in_place_is_as_recorded_in_every_run(setup):
    """A rank's input was the program's own tensor: an in-place write to it compounded, run after run."""
    torch.manual_seed(0)
    module, x = ScalesItsInput(), torch.randn(3, 4)
    want = module(x.clone()).detach()
    step = import_step(module, (x.clone(),))
    devices = np.arange(step.graph.num_ops, dtype=np.int64) % 2
    with setup[2].using(compile_step(step)):
        for _ in range(3):
            losses = [c["loss"] for _, _, c in setup[2].run(_cluster(), devices, collect=True) if "loss" in c]
            torch.testing.assert_close(losses[0], want)


def test_a_buffer_updated_on_one_rank_and_read_on_another_arrives_updated(setup):
    """Each rank kept its own copy of a buffer and never heard of another rank's update: 0.99996 for eager's 0.87693."""
    import copy

    torch.manual_seed(0)
    module, x = ReadsItsRunningMean(), torch.randn(8, 4) + 3
    want = copy.deepcopy(module)(x).detach()
    step = import_step(module, (x,))
    names = list(step.graph.node_names)
    program = compile_step(step)
    placements = [np.array([int(n == "root/mul") for n in names]), np.arange(len(names)) % 2]
    assert all(program.buffer_moves(program.plan(devices)) for devices in placements)
    with setup[2].using(program):
        for devices in placements:
            losses = [c["loss"] for _, _, c in setup[2].run(_cluster(), devices, collect=True) if "loss" in c]
            torch.testing.assert_close(losses[0], want)


def test_a_rank_runs_no_reader_of_a_buffer_before_its_update(setup):
    """The update waited for the other rank's tensor, and a reader of the statistic ran before it: eager's loss
    0.00836, the ranks' 0.00650 (the same with the update on the first rank and both readers on the second)."""
    import copy

    torch.manual_seed(0)
    module, x = ReadsTheStatisticsAfterTheirUpdate(), torch.randn(8, 4)
    want = copy.deepcopy(module)(x).detach()
    step = import_step(module, (x,))
    placements = [np.array([0 if m.startswith("a") else 1 for m in step.graph.module]),  # its input crosses
                  np.array([0 if m.startswith(("a", "bn")) else 1 for m in step.graph.module])]  # the update does
    with setup[2].using(compile_step(step)):
        for devices in placements:
            losses = [c["loss"] for _, _, c in setup[2].run(_cluster(), devices, collect=True) if "loss" in c]
            torch.testing.assert_close(losses[0], want)


def test_a_view_of_a_tensor_that_crossed_ranks_in_another_layout_runs(setup):
    """The crossing made the tensor contiguous, and the view recorded against its transposed layout failed: the
    rank died ("view size is not compatible with input tensor's size and stride") where the local executor ran."""
    import copy

    torch.manual_seed(0)
    module, x = ViewsATransposedResult(), torch.randn(2, 3, 4)
    want = copy.deepcopy(module)(x).detach()
    step = import_step(module, (x,))
    devices = np.array([1 if m.startswith("out") else 0 for m in step.graph.module])
    with setup[2].using(compile_step(step)):
        losses = [c["loss"] for _, _, c in setup[2].run(_cluster(), devices, collect=True) if "loss" in c]
    torch.testing.assert_close(losses[0], want)


def test_a_transposed_tensor_crosses_ranks_transposed_and_the_gradients_equal_eagers_bit_for_bit(setup):
    """The transposed weight the backward's ``mm`` reads arrived contiguous: another kernel path, 1 ulp off eager."""
    import copy

    torch.manual_seed(0)
    module = torch.nn.Sequential(torch.nn.Linear(8, 8), torch.nn.Tanh(), torch.nn.Linear(8, 20))
    x = torch.randn(16, 8)
    eager = copy.deepcopy(module)
    loss = eager(x).square().mean()
    loss.backward()
    step = import_step(module, (x,), loss=lambda y: y.square().mean())
    devices = (step.graph.phase == BACKWARD).astype(np.int64)  # the forward's views cross to the backward's rank
    with setup[2].using(compile_step(step)):
        per_rank = setup[2].run(_cluster(), devices, collect=True)
    grads = {k: g for _, _, c in per_rank for k, g in c["grads"].items()}
    assert [name for name, p in eager.named_parameters() if not torch.equal(grads[name], p.grad)] == []


def _runs_as_eager(timer, module, x, placements, step=None):
    """Each placement of ``module``'s step on ``x`` gives eager's loss and gradients on the two ranks."""
    import copy

    eager = copy.deepcopy(module)
    loss = eager(x)
    loss.backward()
    step = step or import_step(module, (x,))
    with timer.using(compile_step(step)):
        for devices in placements(step):
            per_rank = timer.run(_cluster(), devices, collect=True)
            torch.testing.assert_close([c["loss"] for _, _, c in per_rank if "loss" in c][0], loss.detach())
            grads = {k: g for _, _, c in per_rank for k, g in c["grads"].items()}
            for name, p in eager.named_parameters():
                torch.testing.assert_close(grads[name], p.grad)


def test_a_lazily_conjugated_tensor_crosses_ranks_as_eager_reads_it_wherever_the_cut(setup):
    """It arrives marked as recorded: resolved on the wire and not marked again, ``_conj`` of it read it unmarked."""
    torch.manual_seed(0)
    module, x = ConjugatesAcross(), torch.randn(3, 4)
    with pytest.warns(UserWarning, match="FLOP rules do not know"):
        step = import_step(module, (x,))
    assert any(conj for op in compile_step(step).ops for conj, _ in op.out_lazy)
    n = step.graph.num_ops  # every op from the cut on rank 1
    _runs_as_eager(setup[2], module, x, lambda s: [(np.arange(n) >= cut).astype(np.int64) for cut in range(1, n)],
                   step)


def test_a_view_made_before_an_in_place_write_and_read_after_it_reads_the_written_values(setup):
    """The view was made on the reader's rank from the copy of ``h`` sent before the writes: 6 of 7 cuts wrong."""
    torch.manual_seed(0)
    rng = np.random.default_rng(0)
    _runs_as_eager(setup[2], ViewsBeforeWrites(), torch.randn(3, 4), lambda step: [
        *(rng.integers(0, 2, step.graph.num_ops) for _ in range(6)),
        np.array([int(name == "l3/addmm") for name in step.graph.node_names])])


def test_a_tensor_written_through_a_view_and_read_after_gives_eagers_loss_on_two_ranks(setup):
    """``y[:, 0] = v`` and ``h[..., :2] += z``, then ``y`` and ``h`` read: refused before (the readers had the copy
    sent before the write); the tensor is now copied as written on the write's rank."""
    torch.manual_seed(0)
    rng = np.random.default_rng(0)
    _runs_as_eager(setup[2], WritesIntoAView(), torch.randn(3, 4),
                   lambda step: [rng.integers(0, 2, step.graph.num_ops) for _ in range(4)])


def test_a_parameter_sent_is_updated_only_after_its_message_has_left(setup, monkeypatch):
    """isend reads the parameter until the message leaves: the step's SGD update waited for it (it ran before)."""
    step, _, timer = setup
    changed = []  # whether a tensor handed to isend had changed by the time its send was waited on
    isend = torch.distributed.isend

    class Watched:
        def __init__(self, work, tensor):
            self.work, self.tensor, self.as_sent = work, tensor, tensor.clone()

        def wait(self, *args, **kwargs):
            changed.append(not torch.equal(self.tensor, self.as_sent))
            return self.work.wait(*args, **kwargs)

    monkeypatch.setattr(torch.distributed, "isend", lambda tensor, dst, tag=0, **kw: Watched(
        isend(tensor, dst, tag=tag, **kw), tensor))
    program = compile_step(step)
    devices = np.zeros(step.graph.num_ops, dtype=np.int64)
    reader = next(op.node for op in program.ops for r in op.reads
                  if op.node >= 0 and r.kind == "param" and op.node != program.param_node[r.name])
    devices[reader] = 1  # an op reading a parameter of rank 0 on rank 1
    assert any(ref.kind == "param" for ref, _, _ in program.plan(devices).moves.get(-1, []))
    timer.run(_cluster(), devices)  # lr 1e-3: each step updates the parameters
    assert changed and not any(changed)


def test_a_dead_rank_ends_the_timer_with_one_error(setup):  # it kills the module's ranks: the next run starts others
    step, _, timer = setup
    devices = (step.graph.group % 2).astype(np.int64)
    timer.time(step.graph, _cluster(), devices)
    os.kill(timer.worker_pids[0], signal.SIGKILL)
    time.sleep(0.5)
    with pytest.raises(ExecutionFailed, match="rank 1 .* died"):
        timer.time(step.graph, _cluster(), 1 - devices)
    assert timer.world == 0  # closed


def test_a_rank_that_fails_in_a_step_is_named_with_its_last_line(own_ranks):
    """Rank 1 cannot run its op and exits; rank 0's receive fails first, which was reported as rank 0's op failing."""
    import dataclasses

    step = import_step(*tiny())
    program = compile_step(step)
    k = next(i for i, op in enumerate(program.ops) if op.target == "aten.mse_loss.default")
    program.ops[k] = dataclasses.replace(program.ops[k], target="aten.no_such_op.default")
    devices = np.zeros(step.graph.num_ops, dtype=np.int64)
    devices[program.ops[k].node] = 1
    timer = DistTimer(program, repeats=1, timeout_s=30)
    try:
        with pytest.raises(ExecutionFailed, match=r"^rank 1 of the distributed timer died \(exit code 1: rank 1: "
                                                  r"this torch has no op 'aten.no_such_op.default'"):
            timer.run(_cluster(), devices)
        assert timer.world == 0 and not timer.worker_pids  # closed
    finally:
        timer.close()


def test_a_ctrl_c_in_the_middle_of_a_step_closes_the_timer_at_once(own_ranks, monkeypatch):
    """Interrupted while its ranks run a step, closing does not wait ``timeout_s`` for them to hear a "stop".

    Leaving :meth:`DistTimer.using` that way (calibration's probes) does not send them the saved program either.
    """
    import gnplace.execute.dist as dist_module

    step = import_step(*tiny())
    devices = (step.graph.group % 2).astype(np.int64)  # rank 1 waits on what rank 0 sends
    timer = DistTimer(step, repeats=1, timeout_s=60)
    try:
        timer.run(_cluster(), devices)  # ranks up
        ranks = list(timer._procs)

        def interrupted(*args, **kwargs):
            raise KeyboardInterrupt

        monkeypatch.setattr(dist_module, "run_command", interrupted)
        start = time.perf_counter()
        with pytest.raises(KeyboardInterrupt), timer.using(compile_step(step)):
            timer.run(_cluster(), devices)
        timer.close()
        assert time.perf_counter() - start < 30  # not the 60 s a collective waits
        assert timer.world == 0 and ranks and all(p.poll() is not None for p in ranks)  # stopped
    finally:
        timer.close(force=True)


@pytest.mark.heavy
def test_a_rank_that_runs_out_of_memory_for_real_is_an_oom_step_and_the_timer_goes_on(own_ranks):
    """A real allocation failure on a rank (the counted peak fits) is that device's OOM, not ExecutionFailed.

    The loss op becomes a 1 PiB allocation, which fails on any machine (past the address space).
    """
    import dataclasses

    step = import_step(*tiny())
    program = compile_step(step)
    k = next(i for i, op in enumerate(program.ops) if op.target == "aten.mse_loss.default")
    program.ops[k] = dataclasses.replace(program.ops[k], target="aten.empty.memory_format", args=([2**48],),
                                         kwargs={"dtype": torch.float32})
    node = program.ops[k].node
    on_rank1 = np.zeros(step.graph.num_ops, dtype=np.int64)
    on_rank1[node] = 1
    timer = DistTimer(program, repeats=1, timeout_s=30)
    try:
        result = timer.time(step.graph, _cluster(), on_rank1)
        assert result.is_oom and result.oom.tolist() == [False, True]
        assert timer.world == 0 and not timer.worker_pids  # its ranks stopped
        result = timer.time(step.graph, _cluster(), 1 - on_rank1)  # rank 0's own: ranks started afresh
        assert result.is_oom and result.oom.tolist() == [True, False]
        with timer.using(compile_step(step)):  # the step as recorded runs on the ranks started next
            fine = timer.time(step.graph, _cluster(), on_rank1)
        assert not fine.is_oom and fine.step_time > 0 and timer.world == 2
    finally:
        timer.close()


def test_a_rank_that_dies_while_starting_is_reported_at_once(own_ranks, monkeypatch):
    """A rank that fails before joining (a failed import) ends the timer in seconds, naming what it said."""
    import gnplace.execute.dist as dist_module

    monkeypatch.setattr(dist_module, "_WORKER_CODE", "import sys; print('cannot import mymodel', file=sys.stderr); sys.exit(3)")
    step = import_step(*tiny())
    timer = DistTimer(step, timeout_s=60)
    start = time.perf_counter()
    with pytest.raises(ExecutionFailed, match=r"rank 1 .* died while starting \(exit code 3: cannot import mymodel\)"):
        timer.time(step.graph, _cluster(), np.zeros(step.graph.num_ops, dtype=np.int64))
    assert time.perf_counter() - start < 30  # not the 60 s timeout
    assert timer.world == 0 and not timer.worker_pids
    assert not torch.distributed.is_initialized()


def test_a_timer_whose_ranks_did_not_join_leaves_the_next_timer_of_the_process_able_to_start(own_ranks, monkeypatch):
    """A rank that reported itself up and never joined failed the first timer's join; torch had numbered the group it
    never made, and every later timer of the process waited for its fresh ranks under another number until its
    timeout ("rank 1 ... died (... wait timeout after 30000ms, keys: /0//cpu//0/0)")."""
    import gnplace.execute.dist as dist_module

    monkeypatch.setattr(dist_module, "_WORKER_CODE", (
        "import sys, time, torch.distributed as dist; r, w, h, p = sys.argv[1:5]; "
        "dist.TCPStore(h, int(p), int(w), is_master=False).set(f'gnplace/up/{r}', '1'); time.sleep(60)"))
    step = import_step(*tiny())
    on_one = np.zeros(step.graph.num_ops, dtype=np.int64)
    stuck = DistTimer(step, repeats=1, timeout_s=8)  # time to come up under load (2 s: "did not start"), not to join
    try:
        with pytest.raises(ExecutionFailed, match="wait timeout"):
            stuck.time(step.graph, _cluster(), on_one)
    finally:
        stuck.close(force=True)
    monkeypatch.undo()  # real ranks from here
    timer = DistTimer(step, repeats=1, timeout_s=30)
    try:
        assert not timer.time(step.graph, _cluster(), on_one).is_oom and timer.world == 2
    finally:
        timer.close()


@pytest.mark.heavy
def test_ranks_end_quietly_when_the_driver_is_killed(tmp_path):
    """kill -9 of the process that started the ranks: they exit on their own, printing no traceback."""
    script = tmp_path / "driver.py"  # no __main__ guard: the ranks do not re-run the caller's script
    script.write_text(
        "import time, numpy as np\n"
        "from gnplace.cluster import cluster_from_dict\n"
        "from gnplace.execute.dist import DistTimer\n"
        "from gnplace.execute.examples import tiny\n"
        "from gnplace.importers.torch import import_step\n"
        "step = import_step(*tiny())\n"
        "c = cluster_from_dict({'name': 'r2', 'devices': [{'name': 'rank', 'count': 2, 'kind': 'cpu', "
        "'memory': '64GiB'}], 'links': {'default': 'pcie3'}})\n"
        "timer = DistTimer(step, timeout_s=60)\n"
        "timer.time(step.graph, c, (step.graph.group % 2).astype(np.int64))\n"
        "print(*timer.worker_pids, flush=True)\n"
        "time.sleep(120)\n"
    )
    driver = subprocess.Popen([sys.executable, str(script)], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        pids = [int(p) for p in driver.stdout.readline().split()]
        assert pids
        driver.kill()
        driver.wait()
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline and any(_alive(p) for p in pids):
            time.sleep(0.2)
        assert not any(_alive(p) for p in pids)
        assert "Traceback" not in driver.stderr.read()
    finally:
        driver.kill()


def test_a_torchrun_rank_whose_rank_0_is_gone_ends_in_one_line(monkeypatch):
    """``torchrun --nnodes 2``: node 1's rank, serving, printed gloo's traceback when node 0's driver was killed."""
    import torch.distributed as dist

    from gnplace.execute.dist import serve

    def closed(box, src):
        raise RuntimeError("[../gloo/transport/tcp/pair.cc:553] Connection closed by peer [127.0.0.1]:688. This is "
                           "typically caused by a remote worker crashing.\nmore")

    ended = []
    monkeypatch.setattr(dist, "is_initialized", lambda: True)
    monkeypatch.setattr(dist, "get_backend", lambda *a: "gloo")
    monkeypatch.setattr(dist, "get_rank", lambda *a: 1)
    monkeypatch.setattr(dist, "broadcast_object_list", closed)
    monkeypatch.setattr(dist, "destroy_process_group", lambda *a: ended.append(True))
    with pytest.raises(ExecutionFailed, match=r"^rank 1: rank 0, which runs the timing, is gone: .*Connection closed "
                                              r"by peer \[127.0.0.1\]:688. This is typically caused by a remote "
                                              r"worker crashing.$"):
        serve()
    assert ended == [True]


def test_a_torchrun_rank_whose_rank_0_never_comes_ends_in_one_line_after_the_timeout(own_ranks, monkeypatch):
    """Rank 0 stopped on a refused setting before starting its timer (``finetune --timer dist -c k80x2``): the rank on
    another host, serving, printed the rendezvous's DistNetworkError traceback after GNPLACE_DIST_TIMEOUT."""
    import socket

    from gnplace.execute.dist import serve

    with socket.socket() as free:  # a port no rank 0 listens on
        free.bind(("127.0.0.1", 0))
        port = free.getsockname()[1]
    for name, value in {"MASTER_ADDR": "127.0.0.1", "MASTER_PORT": str(port), "RANK": "1", "WORLD_SIZE": "2",
                        "GNPLACE_DIST_TIMEOUT": "1"}.items():
        monkeypatch.setenv(name, value)
    start = time.perf_counter()
    with pytest.raises(ExecutionFailed, match=r"^rank 1: could not join the process group of rank 0, which runs the "
                                              r"timing, waiting up to 1 s \(GNPLACE_DIST_TIMEOUT\): [^\n]+$"):
        serve()
    assert time.perf_counter() - start < 30 and not torch.distributed.is_initialized()


def test_rank_0_that_stops_before_timing_tells_the_serving_ranks_at_once(own_ranks, monkeypatch, tmp_path):
    """Under torchrun the ranks > 0 serve before rank 0 has read the cluster or the output folder; rank 0 refusing
    one left them waiting GNPLACE_DIST_TIMEOUT (300 s) before each stopped. Rank 0 now joins them and says why."""
    import socket

    import gnplace.execute.dist as dist_module

    with socket.socket() as free:
        free.bind(("127.0.0.1", 0))
        port = free.getsockname()[1]
    env = {"MASTER_ADDR": "127.0.0.1", "MASTER_PORT": str(port), "WORLD_SIZE": "2", "GNPLACE_DIST_TIMEOUT": "120"}
    code = ("import sys\nfrom gnplace.exceptions import ExecutionFailed\nfrom gnplace.execute.dist import "
            "serve_unless_rank_zero\ntry:\n    serve_unless_rank_zero()\nexcept ExecutionFailed as err:\n"
            "    print(err, file=sys.stderr); sys.exit(2)\n")
    rank1 = subprocess.Popen([sys.executable, "-c", code], env={**os.environ, **env, "RANK": "1"},
                             stderr=subprocess.PIPE, text=True)
    try:
        for name, value in {**env, "RANK": "0"}.items():
            monkeypatch.setenv(name, value)
        start = time.perf_counter()
        assert dist_module.serve_unless_rank_zero() is False  # rank 0 goes on; the other serves
        dist_module.release_waiting_ranks("k80x2: a GPU cluster, and gloo ranks are CPUs")
        _, err = rank1.communicate(timeout=90)
        assert rank1.returncode == 2 and time.perf_counter() - start < 60  # not the 120 s timeout
        assert err.strip() == "rank 1: rank 0 stopped before timing anything: k80x2: a GPU cluster, and gloo ranks " \
                              "are CPUs"
        assert not torch.distributed.is_initialized()
        dist_module.release_waiting_ranks("again")  # once only: nothing to join now
        assert not torch.distributed.is_initialized()
    finally:
        rank1.kill()
        rank1.wait()


def test_rank_0_whose_torchrun_ranks_never_come_ends_in_one_line_after_the_timeout(own_ranks, monkeypatch):
    """Under torchrun, rank 0's timer waited for ranks that never joined (a host down) and raised torch's
    DistStoreError, which the command line printed as a traceback: now one ExecutionFailed line."""
    import socket

    with socket.socket() as free:  # a port for rank 0's store
        free.bind(("127.0.0.1", 0))
        port = free.getsockname()[1]
    for name, value in {"MASTER_ADDR": "127.0.0.1", "MASTER_PORT": str(port), "RANK": "0", "WORLD_SIZE": "2"}.items():
        monkeypatch.setenv(name, value)
    step = import_step(*tiny())
    timer = DistTimer(step, timeout_s=1)
    start = time.perf_counter()
    try:
        with pytest.raises(ExecutionFailed, match=r"^rank 0 could not join the process group of the 2 processes "
                                                  r"torchrun started, waiting up to 1 s for them: [^\n]+$"):
            timer.time(step.graph, _cluster(), np.zeros(step.graph.num_ops, dtype=np.int64))
        assert time.perf_counter() - start < 30
        assert not torch.distributed.is_initialized()
    finally:
        timer.close()


@pytest.mark.parametrize(("name", "value", "message"), [
    ("GNPLACE_DIST_TIMEOUT", "abc", r"^GNPLACE_DIST_TIMEOUT must be seconds above 0 and at most 86,400, got 'abc'$"),
    ("GNPLACE_DIST_TIMEOUT", "0", r"^GNPLACE_DIST_TIMEOUT must be seconds above 0 .* got '0'$"),
    ("GNPLACE_DIST_TIMEOUT", "nan", r"^GNPLACE_DIST_TIMEOUT must be seconds above 0 .* got 'nan'$"),
    ("GNPLACE_DIST_BACKEND", "mpi", r"^GNPLACE_DIST_BACKEND must be 'gloo' or 'nccl', got 'mpi'$"),
])
def test_a_serving_ranks_settings_out_of_range_are_refused_in_one_line(monkeypatch, name, value, message):
    """A torchrun rank serving rank 0 read GNPLACE_DIST_TIMEOUT with float(): 'abc' was a ValueError traceback."""
    import torch.distributed as dist

    from gnplace.execute.dist import serve

    monkeypatch.setenv(name, value)
    monkeypatch.setattr(dist, "is_initialized", lambda: False)
    monkeypatch.setattr(dist, "init_process_group", lambda *a, **k: pytest.fail("joined a process group"))
    with pytest.raises(InvalidArgument, match=message):
        serve()


def _alive(pid):
    """Whether ``pid`` runs (a zombie left for a parent that does not reap counts as ended)."""
    try:
        with open(f"/proc/{pid}/stat") as stat:
            return stat.read().rsplit(")", 1)[1].split()[0] != "Z"
    except FileNotFoundError:
        return False


class _RunningMean(torch.nn.Module):
    """A buffer updated in place in two steps, then read by the forward (as running-mean normalisers do)."""

    def __init__(self) -> None:
        super().__init__()
        self.first, self.second = torch.nn.Linear(4, 4), torch.nn.Linear(4, 4)
        self.register_buffer("mean", torch.full((4,), 5.0))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = self.first(x)
        with torch.no_grad():
            self.mean.mul_(0.5).add_(h.mean(0) * 0.5)
        return self.second(h - self.mean).square().mean()


def test_a_buffer_updated_in_place_then_read_gives_the_eager_loss_wherever_the_cut(own_ranks):
    """The update's second op writes the first's result: run on another rank, it must get that value."""
    from gnplace.execute.runner import run_step

    torch.manual_seed(0)
    module = _RunningMean()
    x = torch.randn(8, 4)
    step = import_step(module, (x,))
    eager = _RunningMean()
    eager.load_state_dict(module.state_dict())
    want = eager(x).detach()
    program = compile_step(step)
    cuts = [np.array([0 if v < cut else 1 for v in range(step.graph.num_ops)]) for cut in range(step.graph.num_ops)]
    for devices in cuts:
        out = run_step(program, program.plan(devices), [torch.device("cpu")] * 2)
        torch.testing.assert_close(out.loss, want)
    timer = DistTimer(step, repeats=1, timeout_s=30)
    try:
        for devices in cuts[1::2]:
            losses = [c["loss"] for _, _, c in timer.run(_cluster(), devices, collect=True) if "loss" in c]
            torch.testing.assert_close(losses[0], want)
    finally:
        timer.close()


def test_ranks_this_machine_cannot_give_a_core_each_are_refused_before_any_starts(setup, monkeypatch):
    from gnplace.exceptions import InvalidArgument
    from gnplace.execute.dist import check_cores

    monkeypatch.setattr(os, "sched_getaffinity", lambda pid: {0, 1})
    check_cores(2, 1)
    with pytest.raises(InvalidArgument, match=r"^3 ranks of 1 thread\(s\) need 3 cores on this machine, which gives "
                                              r"this process 2: use fewer devices"):
        check_cores(3, 1)
    with pytest.raises(InvalidArgument, match="2 ranks of 2 thread"):
        check_cores(2, 2)
    step = setup[0]
    timer = DistTimer(step, repeats=1, timeout_s=30)
    four = cluster_from_dict({"name": "ranks4", "devices": [{"name": "rank", "count": 4, "kind": "cpu"}],
                              "links": {"default": "pcie3"}})
    with pytest.raises(InvalidArgument, match="4 ranks of 1 thread"):
        timer.time(step.graph, four, np.zeros(step.graph.num_ops, dtype=np.int64))
    assert timer.world == 0 and not timer.worker_pids  # nothing was started


def test_a_ranks_count_holds_its_receive_buffers_from_the_start_and_what_it_sends_until_sent():
    """The bytes a rank holds in :func:`run_rank`, which the timer checks capacity by before running.

    The first layer on rank 1: its receive buffer for the ReLU's gradient is posted when the step starts,
    and the layer's output, sent to rank 0 and read by nothing on rank 1, leaves once its send is waited for
    (right after it is made). The count the timer used was the local executor's, which has no receive buffer;
    then it held every tensor a rank sends until the step ended (6,912 bytes, the output's 1,024 held beside
    the gradients).
    """
    torch.manual_seed(0)
    net = torch.nn.Sequential(torch.nn.Linear(16, 32), torch.nn.ReLU(), torch.nn.Linear(32, 4))
    step = import_step(net, (torch.randn(8, 16),), loss=lambda y: y.square().mean())
    program = compile_step(step)
    plan = program.plan(np.array([1 if k == 0 else 0 for k in step.graph.group], dtype=np.int64))
    f32 = 4
    params, batch = (32 * 16 + 32) * f32, 8 * 16 * f32
    received = 8 * 32 * f32  # the ReLU's gradient in
    grads = (32 * 16 + 32) * f32  # made on rank 1, kept to the update
    assert program.peak_bytes(plan, 2, ranks=True)[1] == params + batch + received + grads == 5888
    assert program.peak_bytes(plan, 2)[1] == 5760  # the local executor has no receive buffer before the gradient


def test_a_tensor_a_rank_sends_and_no_longer_reads_is_let_go_once_sent(setup, monkeypatch):
    """The first layer on rank 0 (this process), the rest on rank 1: the layer's output, made for rank 1 alone, was
    held (by its send, by the rank's last outputs) until the step ended; now it is gone before rank 0's next op.
    The loss and the gradients are eager's."""
    import weakref

    import gnplace.execute.rank as rank_module

    torch.manual_seed(0)
    net = torch.nn.Sequential(torch.nn.Linear(16, 32), torch.nn.ReLU(), torch.nn.Linear(32, 4))
    x = torch.randn(8, 16)
    step = import_step(net, (x,), loss=lambda y: y.square().mean())
    program = compile_step(step)
    devices = np.array([0 if k == 0 else 1 for k in step.graph.group], dtype=np.int64)
    plan = program.plan(devices)
    [(made, (sent, _, _))] = [(i, m[0]) for i, m in plan.moves.items() if i >= 0 and m[0][1] == 0]
    assert not any(sent in op.reads for i, op in enumerate(program.ops) if plan.op_device[i] == 0)
    outputs, alive = {}, []  # rank 0's op outputs, and whether the sent one lives as each later op starts
    call_op = rank_module.call_op

    def spy(op, fn, resolve, device):
        index = program.ops.index(op)
        if index > made and made in outputs:
            alive.append(outputs.pop(made)() is not None)
        flat = call_op(op, fn, resolve, device)
        if index == made:
            outputs[made] = weakref.ref(flat[0])
        return flat

    monkeypatch.setattr(rank_module, "call_op", spy)
    with setup[2].using(program):
        per_rank = setup[2].run(_cluster(), devices, collect=True)
    assert alive and not any(alive)
    assert program.peak_bytes(plan, 2, ranks=True)[0] == 5888  # the count the timer checks lets it go too (6,912)
    net.zero_grad()
    loss = net(x).square().mean()
    loss.backward()
    grads = {k: v for _, _, collected in per_rank for k, v in collected["grads"].items()}
    torch.testing.assert_close(per_rank[1][2]["loss"], loss.detach())
    for name, p in net.named_parameters():
        torch.testing.assert_close(grads[name], p.grad)


def test_a_tensor_sent_and_then_written_in_place_is_held_as_a_copy():
    """Rank 0 makes ``h`` and writes it in place, the rest on rank 1: it sends a copy of ``h`` as made (the sum's),
    held until the write has read ``h``, and one as written (the second layer's), let go once sent; both at once."""
    torch.manual_seed(0)
    module, x = _WrittenAfterSent(), torch.randn(4, 64)
    step = import_step(module, (x,))
    program = compile_step(step)
    devices = np.array([int(name not in ("l1/addmm", "root/mul_")) for name in step.graph.node_names], dtype=np.int64)
    plan = program.plan(devices)
    sent = [ref for i, moves in plan.moves.items() if i >= 0 for ref, src, _ in moves if src == 0]
    assert len(sent) == 2 and {program.value_bytes(ref) for ref in sent} == {4 * 256 * 4}
    h = 4 * 256 * 4
    received = (256 * 64 + 256 + 4 * 64) * 4  # the first layer's parameters and the batch, from rank 1
    held = program.peak_bytes(plan, 2, ranks=True)[0]
    assert held == received + h + 2 * h
    # the same step but for the write: h goes itself, no copy
    ref = sent[0]
    unwritten = replace(program, ops=[replace(op, mutates=None) if op.mutates == ref else op for op in program.ops])
    assert sum(op.mutates == ref for op in program.ops) == 1
    assert held == unwritten.peak_bytes(unwritten.plan(devices), 2, ranks=True)[0] + 2 * h


@pytest.mark.parametrize("kwargs, message", [
    ({"threads": 1.5}, "threads must be a whole number from 1"),  # was cut to 1
    ({"threads": 0}, "threads must be a whole number from 1"),  # killed every rank as it started
    ({"threads": True}, "threads must be a whole number from 1"),
    ({"timeout_s": 0}, "timeout_s must be a number of seconds above 0"),  # gloo's raw DistNetworkError
    ({"timeout_s": -5}, "timeout_s must be a number of seconds above 0"),
    ({"timeout_s": float("nan")}, "timeout_s must be"),
    ({"timeout_s": MAX_TIMEOUT_S + 1}, f"at most {MAX_TIMEOUT_S:,}"),  # overflowed timedelta
    ({"timeout_s": "60"}, "timeout_s must be"),
])
def test_threads_and_timeout_out_of_range_are_refused_before_any_rank_starts(kwargs, message):
    with pytest.raises(InvalidArgument, match=message):
        DistTimer(compile_step(import_step(*tiny())), **kwargs)


def test_a_gpu_cluster_is_refused_by_gloo_ranks_which_are_cpus(setup):
    """gloo ranks compute on this machine's CPUs: timing k80x2 on them would report CPU times under K80 names."""
    step, _, timer = setup
    gpus = cluster_from_dict({"name": "gpus2", "devices": [{"name": "gpu", "count": 2, "kind": "k80"}],
                              "links": {"default": "pcie3"}})
    devices = np.zeros(step.graph.num_ops, dtype=np.int64)
    for call in (lambda: timer.time(step.graph, gpus, devices), lambda: timer.run(gpus, devices)):
        with pytest.raises(InvalidArgument, match=r"runs CPU ranks \(gloo\), but device 'gpu0' of cluster 'gpus2' "
                                                  r"is a GPU \(k80\): time the cluster of its ranks"):
            call()
    nccl = DistTimer(step, backend="nccl")
    with pytest.raises(InvalidArgument, match=r"runs GPU ranks \(NCCL\), but device 'rank0' .* is a CPU"):
        nccl.check_cluster(_cluster())


def test_a_closed_timer_gives_back_the_callers_excepthook(own_ranks, monkeypatch):
    """torch.distributed wraps ``sys.excepthook`` (``[rank0]:`` before each line) and leaves the wrapper when destroyed."""
    def mine(*args):  # the caller's own hook
        return None

    monkeypatch.setattr(sys, "excepthook", mine)
    step = import_step(*tiny())
    devices = (step.graph.group % 2).astype(np.int64)
    timer = DistTimer(step, repeats=1, timeout_s=30)
    for _ in range(2):  # each start wrapped the wrapper again
        with timer:
            timer.time(step.graph, _cluster(), devices)
        assert sys.excepthook is mine


def test_a_closed_timer_is_not_held_until_the_process_exits(own_ranks):
    """Each start registered ``close`` with atexit, which held the timer (its program's tensors) for the process's life."""
    import gc
    import weakref

    step = import_step(*tiny())
    timer = DistTimer(step, repeats=1, timeout_s=30)
    timer.time(step.graph, _cluster(), (step.graph.group % 2).astype(np.int64))
    timer.close()
    gone = weakref.ref(timer)
    del timer
    gc.collect()
    assert gone() is None


def test_rank_0_timing_a_model_with_dropout_leaves_the_callers_generator_where_it_was(own_ranks):
    from tests.execute.models import DropsOut

    step = import_step(DropsOut(), (torch.randn(4, 8),))
    with DistTimer(step, repeats=1, timeout_s=30) as timer:
        torch.manual_seed(5)
        state = torch.random.get_rng_state()
        timer.time(step.graph, _cluster(), np.zeros(step.graph.num_ops, dtype=np.int64))  # the dropout on rank 0
        assert torch.equal(torch.random.get_rng_state(), state)


def test_a_timer_given_no_backend_takes_the_one_the_serving_ranks_join_with(setup, monkeypatch):
    """Under torchrun, ``GNPLACE_DIST_BACKEND=nccl`` had the serving ranks on NCCL and the CLI's rank 0 on gloo."""
    step = setup[0]
    monkeypatch.setenv("GNPLACE_DIST_BACKEND", "nccl")
    assert DistTimer(step).backend == "nccl"
    assert DistTimer(step, backend="gloo").backend == "gloo"  # named: the caller's
    monkeypatch.delenv("GNPLACE_DIST_BACKEND")
    assert DistTimer(step).backend == "gloo"
    monkeypatch.setenv("GNPLACE_DIST_BACKEND", "mpi")
    with pytest.raises(InvalidArgument, match=r"^GNPLACE_DIST_BACKEND must be 'gloo' or 'nccl', got 'mpi'$"):
        DistTimer(step)


class _SlicesAcross(torch.nn.Module):
    """A slice of ``a``'s output read on both ranks: its memory has gaps, so it crosses as a contiguous copy."""

    def __init__(self):
        super().__init__()
        self.a, self.b, self.c = torch.nn.Linear(16, 64), torch.nn.Linear(32, 4), torch.nn.Linear(32, 4)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        v = self.a(x)[:, ::2]
        return self.b(v).square().mean() + self.c(v).square().mean()


def _sent_on_rank_0(monkeypatch):
    """What rank 0 (this process) hands to gloo's isend: ``(tag, bytes of the tensor's storage)``."""
    sent, isend = [], torch.distributed.isend

    def spy(tensor, dst, tag=0, **kwargs):
        sent.append((tag, tensor.untyped_storage().nbytes()))
        return isend(tensor, dst, tag=tag, **kwargs)

    monkeypatch.setattr(torch.distributed, "isend", spy)
    return sent


def test_a_ranks_count_holds_the_copy_it_sends_of_a_tensor_with_gaps(setup, monkeypatch):
    """A slice goes as a contiguous copy (32,768 bytes on rank 0 while the slice is held there), which the count
    the timer checks capacity by left out: rank 0 counted 156,948 bytes, now 189,716. Loss and gradients are eager's.
    """
    import copy

    torch.manual_seed(0)
    module, x = _SlicesAcross(), torch.randn(256, 16)
    eager = copy.deepcopy(module)
    loss = eager(x)
    loss.backward()
    step = import_step(module, (x,))
    program = compile_step(step)
    devices = np.array([1 if m.startswith("c") else 0 for m in step.graph.module], dtype=np.int64)
    plan = program.plan(devices)
    [(slice_ref, tag)] = [(ref, t) for (ref, dst), t in transfer_tags(plan).items()
                          if ref.kind == "op" and program.ops[ref.index].target == "aten.slice.Tensor"]
    copy_bytes = 256 * 32 * 4
    assert program.sent_as_copy(slice_ref) and program.value_bytes(slice_ref) == copy_bytes
    # the same step with the slice recorded contiguous: it would go itself
    op = program.ops[slice_ref.index]
    dense = replace(program, ops=[replace(o, out_strides=((32, 1),)) if o is op else o for o in program.ops])
    assert not dense.sent_as_copy(slice_ref)
    held = program.peak_bytes(plan, 2, ranks=True)
    assert held[0] == dense.peak_bytes(plan, 2, ranks=True)[0] + copy_bytes == 189716
    sent = _sent_on_rank_0(monkeypatch)
    with setup[2].using(program):
        per_rank = setup[2].run(_cluster(), devices, collect=True)
    assert (tag, copy_bytes) in sent  # a copy of its own (the slice lies in a storage of 65,536 bytes)
    torch.testing.assert_close(per_rank[0][2]["loss"], loss.detach())
    grads = {k: v for _, _, collected in per_rank for k, v in collected["grads"].items()}
    for name, p in eager.named_parameters():
        torch.testing.assert_close(grads[name], p.grad)


def test_a_ranks_count_holds_the_buffer_update_it_sends_and_the_one_it_receives(setup, monkeypatch):
    """Batch norm's running mean, updated on rank 0 and read on rank 1: rank 0 sends a clone of it (16 bytes), held
    until the step ends, which the count left out (728 bytes, now 744); rank 1's receive buffer is its copy."""
    import copy

    torch.manual_seed(0)
    module, x = ReadsTheStatisticsAfterTheirUpdate(), torch.randn(8, 4)
    want = copy.deepcopy(module)(x).detach()
    step = import_step(module, (x,))
    program = compile_step(step)
    devices = np.array([0 if m.startswith(("a", "bn")) else 1 for m in step.graph.module], dtype=np.int64)
    plan = program.plan(devices)
    [(name, _, src, dst, _)] = program.buffer_moves(plan)
    assert (name, src, dst, program.buffer_bytes(name)) == ("bn.running_mean", 0, 1, 16)
    assert program.peak_bytes(plan, 2, ranks=True).tolist() == [744, 488]
    sent = _sent_on_rank_0(monkeypatch)
    with setup[2].using(program):
        per_rank = setup[2].run(_cluster(), devices, collect=True)
    assert (len(transfer_tags(plan)), 16) in sent  # the clone, under the first tag after the tensors'
    torch.testing.assert_close([c["loss"] for _, _, c in per_rank if "loss" in c][0], want)


def test_a_ranks_count_follows_the_order_its_ready_queue_runs_its_ops(setup, monkeypatch):
    """Over gloo a rank runs a later op while an earlier one waits for another rank's tensor: rank 0 of this split of
    ``examples:branchy`` runs its 52 ops in an order of its own, which the count the timer checks capacity by did
    not follow (it walked them in recorded order): rank 0 peaked at 4,334,592 bytes there, 4,529,664 in the order
    the rank runs (:meth:`Program.rank_order`, seen on the rank itself here)."""
    import gnplace.execute.rank as rank_module
    from gnplace.execute.examples import branchy

    step = import_step(*branchy())
    program = compile_step(step)
    groups = int(step.graph.group.max()) + 1
    devices = np.random.default_rng(0).integers(0, 2, groups)[step.graph.group].astype(np.int64)
    plan = program.plan(devices)
    recorded = [i for i in range(len(program.ops)) if plan.op_device[i] == 0]
    order = program.rank_order(plan, 0)
    assert sorted(order) == recorded and order != recorded
    assert program.peak_bytes(plan, 2, ranks=True).tolist() == [4529664, 11070528]
    ran, call_op = [], rank_module.call_op

    def spy(op, fn, resolve, device):
        ran.append(program.ops.index(op))
        return call_op(op, fn, resolve, device)

    monkeypatch.setattr(rank_module, "call_op", spy)
    with setup[2].using(program):
        setup[2].run(_cluster(), devices)
    steps = setup[2].warmup + setup[2].repeats
    assert ran == order * steps


def _first_layer_on_rank_0():
    """A 16-32-4 MLP's step compiled, with its first layer's groups on rank 0 and the rest on rank 1, and its plan."""
    torch.manual_seed(0)
    net = torch.nn.Sequential(torch.nn.Linear(16, 32), torch.nn.ReLU(), torch.nn.Linear(32, 4))
    step = import_step(net, (torch.randn(8, 16),), loss=lambda y: y.square().mean())
    program = compile_step(step)
    devices = np.array([0 if k == 0 else 1 for k in step.graph.group], dtype=np.int64)
    return program, devices, program.plan(devices)


def test_a_tensor_a_rank_receives_is_let_go_after_its_last_use_there(setup, monkeypatch):
    """The first layer on rank 0 (this process), the rest on rank 1: the ReLU's gradient that rank 0 receives is
    read by two of its ops and no more. Its receive buffer, the last one rank 0 posts, stayed until the step ended
    (a name of the loop posting the receives held it): rank 0 held 196,608 bytes more than its count on 2 of 6
    random 2-rank splits of ``examples:branchy``. Now it is gone before the rank's next op, as the count has it."""
    import weakref

    import gnplace.execute.rank as rank_module

    program, devices, plan = _first_layer_on_rank_0()
    [received] = [ref for moves in plan.moves.values() for ref, _, dst in moves if dst == 0]
    order = program.rank_order(plan, 0)
    readers = [i for i in order if received in program.ops[i].reads]
    after = order[order.index(readers[-1]) + 1:]
    assert len(readers) == 2 and after and not plan.grad_moves
    held, alive = [], []  # the received tensor, and whether it lives as each later op of rank 0 starts
    call_op = rank_module.call_op

    def spy(op, fn, resolve, device):
        index = program.ops.index(op)
        if index == readers[0]:
            held.append(weakref.ref(resolve(received)))
        elif index in after:
            alive.append(held[-1]() is not None)
        return call_op(op, fn, resolve, device)

    monkeypatch.setattr(rank_module, "call_op", spy)
    with setup[2].using(program):
        setup[2].run(_cluster(), devices)
    assert len(alive) == len(after) * (setup[2].warmup + setup[2].repeats) and not any(alive)


def test_a_ranks_count_moves_as_torchs_allocator_does_op_by_op(setup, monkeypatch):
    """Rank 0 (this process) of the split above, under torch's profiler (``profile_memory=True``): before each of its
    ops, the bytes torch's CPU allocator holds and the count differ by one amount all step (what the count leaves
    out: the program's own tensors, the rank's copies made before the step). The received gradient's buffer made
    them 1,024 bytes apart on the rank's last two ops, as on ``examples:branchy``'s splits (196,608)."""
    import bisect

    from torch.profiler import ProfilerActivity, profile, record_function

    import gnplace.execute.rank as rank_module
    from gnplace.execute.program import Program

    program, devices, plan = _first_layer_on_rank_0()
    counted: dict[int, float] = {}  # the count's bytes on rank 0 as each of its ops starts
    outputs = Program._outputs

    def counting(self, plan, ledger, i):
        if plan.op_device[i] == 0:
            counted[i] = float(ledger.live[0])
        outputs(self, plan, ledger, i)

    monkeypatch.setattr(Program, "_outputs", counting)
    program.peak_bytes(plan, 2, ranks=True)
    call_op = rank_module.call_op

    def named(op, fn, resolve, device):
        with record_function(f"gnplace op {program.ops.index(op)}"):
            return call_op(op, fn, resolve, device)

    monkeypatch.setattr(rank_module, "call_op", named)
    with setup[2].using(program), profile(activities=[ProfilerActivity.CPU], profile_memory=True) as prof:
        setup[2].run(_cluster(), devices)
    events = list(prof.profiler.kineto_results.events())
    allocations = sorted((e.start_ns(), e.nbytes()) for e in events if e.name() == "[memory]")
    times, live = [t for t, _ in allocations], np.cumsum([0, *(n for _, n in allocations)])  # live[k]: after k
    starts = sorted((e.start_ns(), int(e.name().rpartition(" ")[2])) for e in events
                    if e.name().startswith("gnplace op "))
    order = program.rank_order(plan, 0)
    assert [i for _, i in starts] == order * (setup[2].warmup + setup[2].repeats)
    for first in range(0, len(starts), len(order)):  # each step
        apart = {int(live[bisect.bisect_left(times, t)]) - counted[i] for t, i in starts[first:first + len(order)]}
        assert len(apart) == 1, sorted(apart)


def test_the_step_is_the_median_over_the_steps_of_the_slowest_rank_and_each_ranks_busy_its_median(monkeypatch):
    """Scripted ranks: a step's time is its slowest rank's, and the median of those is the measurement. Mutants taking
    the fastest rank's, or the slowest of each rank's own median, passed (the ranks' real steps are all alike)."""
    step = import_step(*tiny())
    timer = DistTimer(step, repeats=3)
    per_rank = [([1.0, 5.0, 3.0], [0.1, 0.5, 0.3], {}), ([4.0, 2.0, 6.0], [0.4, 0.2, 0.6], {})]
    monkeypatch.setattr(timer, "run", lambda cluster, placement: per_rank)
    result = timer.time(step.graph, _cluster(), step.graph.group % 2)
    assert result.step_time == 5.0  # the slowest rank's 4, 5 and 6 (not 2 of the fastest's, nor 4 of medians)
    assert result.busy_time.tolist() == [0.3, 0.4]


def test_a_placement_over_a_ranks_memory_is_out_of_memory_without_running(monkeypatch):
    """A rank holding more bytes than its device (by the ranks' count, not twice it: a mutant passed) is OOM, unrun."""
    step = import_step(*tiny())
    timer = DistTimer(step)
    placement = step.graph.group % 2
    peak = timer.program.peak_bytes(timer.program.plan(placement), 2, ranks=True)
    monkeypatch.setattr(timer, "run", lambda cluster, placement: pytest.fail("ran"))
    result = timer.time(step.graph, _cluster(memory=f"{int(peak.max() * 0.75)}B"), placement)
    assert result.is_oom and timer.world == 0
