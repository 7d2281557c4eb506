import numpy as np
import pytest

from gnplace.cluster import cluster_from_dict, load_cluster
from gnplace.execute.compiler import compile_step
from gnplace.execute.dist import DistTimer
from gnplace.execute.examples import tiny
from gnplace.execute.local import LocalTimer
from gnplace.execute.profile import (
    calibrate,
    fidelity_placements,
    fit_link,
    fitted_launch_overhead,
    node_seconds,
    simulator_error,
)
from gnplace.graph_io import load_graph
from gnplace.importers.torch import import_step


def test_fit_link_recovers_latency_and_bandwidth():
    sizes = [4, 4096, 65536, 1 << 20]
    bandwidth, latency = fit_link(sizes, [50e-6 + s / 2e9 for s in sizes])
    assert bandwidth == pytest.approx(2e9, rel=1e-6) and latency == pytest.approx(50e-6, rel=1e-6)
    # a noisy probe whose larger messages came back faster: no bandwidth to fit, the link is taken as unlimited
    # (1e12 bytes/s), its latency as fitted
    assert fit_link([0, 1000], [2e-5, 1e-5]) == (1e12, pytest.approx(2e-5))


def test_node_seconds_sum_to_the_ops_and_updates():
    step = import_step(*tiny())
    program = compile_step(step)
    ops = np.full(len(program.ops), 1e-3)
    seconds = node_seconds(program, ops, {name: 2e-3 for name in program.params})
    assert seconds.sum() == pytest.approx(1e-3 * len(program.ops) + 2e-3 * len(program.params))


@pytest.mark.heavy
def test_calibration_on_two_ranks_writes_a_cluster_and_graph_the_simulator_reads(tmp_path):
    step = import_step(*tiny())
    with DistTimer(step, repeats=2) as timer:
        calibration = calibrate(step, timer=timer, repeats=2, probe_widths=(8, 64))
        graph_path, cluster_path = calibration.save(tmp_path)
        placements = fidelity_placements(calibration.graph, calibration.cluster, 5)
        rows = simulator_error(calibration, timer, placements)
    cluster, graph = load_cluster(cluster_path), load_graph(graph_path)
    assert cluster.num_devices == 2 and cluster.kinds == ["cpu-1t", "cpu-1t"]
    assert np.isfinite(graph.cost_s["cpu-1t"]).all() and graph.cost_s["cpu-1t"].sum() > 0
    assert "rank0-rank1" in calibration.links and calibration.links["rank0-rank1"]["latency"] >= 0
    # the step over the sum of its ops timed alone: near 1 on an idle machine; per-op probes of microseconds take
    # the brunt of other processes (0.11 and 0.19 seen with four busy processes on two cores), so orders of magnitude
    assert set(calibration.scale) == {"cpu-1t"} and 0.05 < calibration.scale["cpu-1t"] < 20
    # what a message costs each computing rank: measured, written to the cluster file, read back (0 where other
    # processes' load hides it: the median with messages came out no slower than without, beside three others' runs)
    assert 0 <= calibration.message_cpu < 0.1
    assert [d.message_cpu for d in cluster.devices] == pytest.approx([calibration.message_cpu] * 2)
    for k, device in enumerate(cluster.devices):  # the per-op overhead other models are simulated with
        fitted = fitted_launch_overhead(step.graph, calibration.cluster, k, calibration.node_seconds["cpu-1t"])
        assert device.launch_overhead == pytest.approx(fitted) and fitted >= 0
    assert len(rows) == 5 and all(r["measured_s"] > 0 and r["simulated_s"] > 0 for r in rows)
    assert not any(name.startswith("single") for name in placements)
    assert all(len(np.unique(devices)) == 2 for devices in placements.values())  # each splits the step


def test_calibration_keeps_the_medians_of_its_link_and_message_probe_rounds(monkeypatch):
    import gnplace.execute.profile as profile

    step = import_step(*tiny())
    latencies = iter([[1e-3, 9e-3], [2e-3, 3e-3], [8e-3, 4e-3]])  # per round, seconds at two widths
    messages = iter([5e-4, 1e-4, 2e-4])
    monkeypatch.setattr(profile, "probe_link", lambda *a, **k: ([8, 64], next(latencies)))
    with DistTimer(step, repeats=2) as timer:
        monkeypatch.setattr(timer, "message_costs", lambda ranks: {1: next(messages)})
        calibration = calibrate(step, timer=timer, repeats=2, anchor_rounds=1, probe_rounds=3)
    assert calibration.links["rank0-rank1"]["latency"] == pytest.approx(3.5e-3)  # the median of all six
    assert calibration.message_cpu == pytest.approx(2e-4)
    assert next(latencies, None) is None and next(messages, None) is None  # three rounds of each, no more


def test_calibration_of_this_process_devices():
    from gnplace.exceptions import InvalidArgument

    step = import_step(*tiny())
    calibration = calibrate(step, timer=LocalTimer(step), devices=["cpu"], repeats=2, anchor_rounds=2)
    assert calibration.cluster.device_names == ["cpu0"]
    assert calibration.graph.cost_s["cpu-1t"].shape == (step.graph.num_ops,)
    for rounds in ({"anchor_rounds": 0}, {"probe_rounds": 0}):
        with pytest.raises(InvalidArgument, match="anchor_rounds and probe_rounds must be at least 1"):
            calibrate(step, timer=LocalTimer(step), devices=["cpu"], **rounds)


def test_a_cuda_device_torch_does_not_see_is_one_error():
    import torch

    from gnplace.exceptions import ExecutionFailed, InvalidArgument
    from gnplace.execute.profile import parse_torch_devices

    count = torch.cuda.device_count() if torch.cuda.is_available() else 0
    with pytest.raises(ExecutionFailed, match=f"cuda:{count} was asked for, but torch sees {count} CUDA device"):
        parse_torch_devices(["cpu", f"cuda:{count}"])
    with pytest.raises(InvalidArgument, match="'bogus' is not a torch device"):
        parse_torch_devices(["bogus"])


class _FixedTimer:
    """A timer whose steps take ``seconds`` in turn, the last one from then on (what calibration reads of a real one)."""

    def __init__(self, *seconds: float) -> None:
        self.seconds = list(seconds)
        self.calls: list[bytes] = []  # every placement measured, in order

    def measure(self, graph, cluster, placement):
        from gnplace.sim.timer import StepResult

        self.calls.append(np.asarray(placement, dtype=np.int64).tobytes())
        step = self.seconds.pop(0) if len(self.seconds) > 1 else self.seconds[0]
        n = cluster.num_devices
        return StepResult(step, np.zeros(n), np.zeros(n), cluster.memory, cluster.device_names)


def test_anchoring_scales_each_kind_to_the_timers_one_device_step():
    from gnplace.execute.profile import _anchor_to_one_device_steps
    from gnplace.sim.simulator import Simulator

    step = import_step(*tiny())
    graph = step.graph.replace(cost_s={"k80": np.full(step.graph.num_ops, 1e-4), "v100": np.full(step.graph.num_ops, 3e-4)})
    cluster = cluster_from_dict({"name": "ab", "devices": [{"name": "x", "kind": "k80"}, {"name": "y", "kind": "v100"}],
                                 "links": {"default": "pcie3"}})
    scale = _anchor_to_one_device_steps(graph, cluster, _FixedTimer(2e-3), ["k80", "v100"], rounds=3)
    for k, kind in enumerate(["k80", "v100"]):
        anchored = graph.replace(cost_s={**graph.cost_s, kind: graph.cost_s[kind] * scale[kind]})
        single = np.full(graph.num_ops, k)
        assert Simulator().time(anchored, cluster, single).step_time == pytest.approx(2e-3, rel=1e-9)
    assert scale["k80"] == pytest.approx(3 * scale["v100"], rel=1e-6)


def test_anchoring_takes_the_median_of_its_rounds_with_the_kinds_in_turn():
    from gnplace.execute.profile import _anchor_to_one_device_steps
    from gnplace.sim.simulator import Simulator

    step = import_step(*tiny())
    graph = step.graph.replace(cost_s={"k80": np.full(step.graph.num_ops, 1e-4), "v100": np.full(step.graph.num_ops, 3e-4)})
    cluster = cluster_from_dict({"name": "ab", "devices": [{"name": "x", "kind": "k80"}, {"name": "y", "kind": "v100"}],
                                 "links": {"default": "pcie3"}})
    # rounds alternate the kinds: k80 measures 9, 1, 2 ms (median 2), v100 4, 8, 3 ms (median 4)
    timer = _FixedTimer(9e-3, 4e-3, 1e-3, 8e-3, 2e-3, 3e-3)
    scale = _anchor_to_one_device_steps(graph, cluster, timer, ["k80", "v100"], rounds=3)
    for k, (kind, median) in enumerate([("k80", 2e-3), ("v100", 4e-3)]):
        single = np.full(graph.num_ops, k)
        assert scale[kind] * Simulator().time(graph, cluster, single).step_time == pytest.approx(median, rel=1e-9)
    firsts = [np.full(graph.num_ops, k, dtype=np.int64).tobytes() for k in (0, 1)]
    assert timer.calls == firsts * 3


def _calibration_and_two_placements() -> tuple[object, np.ndarray, np.ndarray]:
    """A calibration of the tiny model on k80x2 (0.1 ms an op), its one-device placement and one split across both."""
    step = import_step(*tiny())
    graph = step.graph.replace(cost_s={"k80": np.full(step.graph.num_ops, 1e-4)})
    calibration = type("C", (), {"graph": graph, "cluster": load_cluster("k80x2")})()
    return calibration, np.zeros(graph.num_ops, dtype=np.int64), np.arange(graph.num_ops, dtype=np.int64) % 2


def test_simulator_error_measures_the_placements_in_turn_and_reports_the_median():
    from gnplace.exceptions import InvalidArgument

    calibration, a, b = _calibration_and_two_placements()
    timer = _FixedTimer(5e-3, 1e-3, 9e-3, 2e-3, 4e-3, 3e-3)  # a: 5, 9, 4 ms; b: 1, 2, 3 ms
    rows = simulator_error(calibration, timer, {"a": a, "b": b}, rounds=3)
    assert timer.calls == [a.tobytes(), b.tobytes()] * 3
    assert [r["rounds_s"] for r in rows] == [[5e-3, 9e-3, 4e-3], [1e-3, 2e-3, 3e-3]]
    assert [r["measured_s"] for r in rows] == [5e-3, 2e-3]
    for r in rows:
        assert r["error"] == pytest.approx(abs(r["simulated_s"] - r["measured_s"]) / r["measured_s"])
    with pytest.raises(InvalidArgument, match="rounds must be at least 1"):
        simulator_error(calibration, timer, {"a": a}, rounds=0)


def test_a_placement_out_of_memory_in_a_round_is_not_measured():
    """The OOM round's step is the simulator's estimate (oom_result): it read as measured, an error of 0."""
    from gnplace.execute.base import oom_result
    from gnplace.sim.timer import StepResult

    calibration, a, b = _calibration_and_two_placements()

    class HalfOom:  # a is out of memory in the second round; b fits and takes 2 ms
        rounds = 0

        def measure(self, graph, cluster, placement):
            if placement is a:
                self.rounds += 1
                if self.rounds == 2:
                    return oom_result(graph, cluster, placement, 0, 1e12)
            n = cluster.num_devices
            return StepResult(2e-3, np.zeros(n), np.zeros(n), cluster.memory, cluster.device_names)

    rows = simulator_error(calibration, HalfOom(), {"a": a, "b": b}, rounds=2)
    assert [(r["oom"], r["measured_s"], r["rounds_s"], r["error"] is None) for r in rows] == [
        (True, None, [2e-3, None], True), (False, 2e-3, [2e-3, 2e-3], False)]


@pytest.mark.skipif(not __import__("torch").cuda.is_available(), reason="needs a CUDA device")
def test_a_one_gpu_step_is_simulated_as_measured_after_calibration():
    # each CUDA op is timed to its completion: unanchored, the simulator put a one-GPU convnet step
    # 50% above the one LocalTimer measured (H200, 2026-11-27); a second timer measures afresh
    from gnplace.execute.examples import convnet

    step = import_step(*convnet())
    calibration = calibrate(step, timer=LocalTimer(step, devices=["cuda:0", "cpu"], repeats=9),
                            devices=["cuda:0", "cpu"], repeats=9)
    check = LocalTimer(step, devices=["cuda:0", "cpu"], repeats=9)
    [row] = simulator_error(calibration, check, {"single:cuda0": np.zeros(step.graph.num_ops, dtype=np.int64)})
    assert row["error"] < 0.3, row


def test_another_model_on_a_calibrated_cluster_gets_the_fitted_per_op_overhead():
    # the profiled graph's seconds: the rates' model plus 40 us an op (a launch-bound GPU's shape)
    from gnplace.sim.costmodel import op_times
    from gnplace.sim.simulator import Simulator

    step = import_step(*tiny())
    graph = step.graph
    spec = {"name": "m", "devices": [{"name": "g", "kind": "gpu-x", "peak_flops": 1e13, "mem_bandwidth": 1e12,
                                      "memory": 1e10, "flops_efficiency": 1.0, "mem_efficiency": 1.0,
                                      "launch_overhead": 0.0}], "links": {"default": "pcie3"}}
    cluster = cluster_from_dict(spec)
    seconds = op_times(graph, cluster, launch_overhead=False)[:, 0] + 40e-6
    overhead = fitted_launch_overhead(graph, cluster, 0, seconds)
    assert overhead == pytest.approx(40e-6)
    spec["devices"][0]["launch_overhead"] = overhead
    single = np.zeros(graph.num_ops, dtype=np.int64)
    assert Simulator().time(graph, cluster_from_dict(spec), single).step_time == pytest.approx(seconds.sum())
    assert fitted_launch_overhead(graph, cluster, 0, seconds * 0) == 0.0  # never negative


def test_devices_on_one_gpu_share_its_memory_as_cpu_devices_share_the_hosts(monkeypatch: pytest.MonkeyPatch) -> None:
    """Two cluster devices on GPU 0 (``cuda:0`` and ``cuda``, the current one) got 80 GiB each; now 40 GiB each.

    No GPU needed: torch's CUDA queries are mocked, the rates are measured on the CPU and nothing is timed.
    """
    import os
    from types import SimpleNamespace

    import torch

    import gnplace.execute.profile as profile

    gib = 2**30
    step = import_step(*tiny())  # recorded before torch is mocked
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 2)
    monkeypatch.setattr(torch.cuda, "current_device", lambda: 0)
    monkeypatch.setattr(torch.cuda, "get_device_name", lambda device=None: "Mock GPU")
    monkeypatch.setattr(torch.cuda, "get_device_properties", lambda device: SimpleNamespace(total_memory=80 * gib))
    monkeypatch.setattr(torch.cuda, "synchronize", lambda device=None: None)
    for name in ("randn", "empty"):  # the rate probes' tensors: on the CPU
        real = getattr(torch, name)
        monkeypatch.setattr(torch, name, lambda *a, device=None, _real=real, **k: _real(*a, **k))
    monkeypatch.setattr(profile, "measure_op_seconds", lambda program, device, **k: np.full(len(program.ops), 1e-4))
    monkeypatch.setattr(profile, "_update_seconds", lambda *a: {})
    monkeypatch.setattr(profile, "_copy_seconds", lambda num_bytes, src, dst: 1e-5 + num_bytes / 1e10)
    monkeypatch.setattr(profile, "_anchor_to_one_device_steps", lambda g, c, t, kinds, rounds=1: dict.fromkeys(kinds, 1.0))
    devices = ["cuda:0", "cuda", "cuda:1", "cpu", "cpu"]
    calibration = calibrate(step, timer=LocalTimer(step, devices=devices), devices=devices)
    memory = {d["name"]: d["memory"] for d in calibration.cluster_spec["devices"]}
    host = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    assert memory == {"cuda0": 40 * gib, "cuda1": 40 * gib, "cuda2": 80 * gib, "cpu3": host / 2, "cpu4": host / 2}
    assert calibration.cluster.kinds == ["mock-gpu"] * 3 + ["cpu-1t"] * 2


def test_each_update_node_is_timed_running_the_graphs_optimizer(monkeypatch):
    """Calibration timed SGD's sub_ for every update node, so an Adam graph's update nodes got SGD's seconds."""
    import torch

    from gnplace.execute import profile
    from gnplace.execute.optim import OptimizerState

    updates = []
    update = OptimizerState.update

    def spy(self, name, param, grad, lr):
        updates.append((self.optimizer, name, self.steps[name] + 1))
        update(self, name, param, grad, lr)

    monkeypatch.setattr(OptimizerState, "update", spy)
    adam = compile_step(import_step(*tiny(), optimizer="adam"))
    seconds = profile._update_seconds(adam, torch.device("cpu"), repeats=2, threads=1)
    assert set(seconds) == set(adam.params) and all(s > 0 for s in seconds.values())
    assert updates == [("adam", name, t) for name in adam.params for t in (1, 2, 3)]  # one state per parameter
    updates.clear()
    profile._update_seconds(compile_step(import_step(*tiny())), torch.device("cpu"), repeats=2, threads=1)
    assert updates == []  # SGD's update timed as it always was


def test_fidelity_placements_are_distinct_and_bounded():
    """Random placements repeated (20 asked of 3 groups on 2 devices: 6 distinct), each measured again and counted
    twice in the error; 10**12 drew placements until memory ran out."""
    from gnplace.exceptions import InvalidArgument
    from gnplace.execute.profile import MAX_FIDELITY_PLACEMENTS
    from gnplace.toy import chain_graph, toy_cluster

    g, c = chain_graph(3), toy_cluster(2)
    placements = fidelity_placements(g, c, 20)
    assert len(placements) == len({v.tobytes() for v in placements.values()}) == 2**3 - 2  # every split, once
    assert all(len(np.unique(v)) > 1 for v in placements.values())
    with pytest.raises(InvalidArgument, match="need a number of placements from 0 to 10,000"):
        fidelity_placements(g, c, MAX_FIDELITY_PLACEMENTS + 1)


def test_probe_link_takes_no_option_it_ignores():
    """``probe_link`` took a ``repeats`` that nothing read (the timer's own ``warmup`` and ``repeats`` time each probe
    step), and ``calibrate`` passed its ``repeats`` there, as if it set the probe's measurements; every parameter
    is documented."""
    import inspect

    from gnplace.execute.profile import probe_link

    parameters = list(inspect.signature(probe_link).parameters)
    assert parameters == ["timer", "peer", "ranks", "widths", "layers", "batch"]
    assert all(f"    {name} (" in (probe_link.__doc__ or "") for name in parameters)


def test_simulator_error_is_typed_as_the_timer_it_documents():
    """``timer`` was ``Any`` where the docstring says a RealStepTimer (it calls ``measure``, which only they have)."""
    import inspect

    from gnplace.execute.profile import simulator_error

    assert inspect.signature(simulator_error).parameters["timer"].annotation == "RealStepTimer"


def test_a_cluster_file_that_cannot_be_renamed_into_place_leaves_no_tmp(tmp_path, disk_full_at):
    from gnplace.execute.profile import Calibration
    from gnplace.toy import mlp_training_graph, toy_cluster

    calibration = Calibration(mlp_training_graph(layers=2, width=8, batch=4), toy_cluster(2), {},
                              cluster_spec={"name": "measured"})
    disk_full_at("cluster.yaml")
    with pytest.raises(OSError, match="No space left"):
        calibration.save(tmp_path)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["graph.gnpg"]  # a cluster.yaml.tmp was left behind


def test_a_save_stopped_between_its_two_files_leaves_the_earlier_pair(tmp_path, monkeypatch):
    """Stopped (Ctrl-C) as it wrote cluster.yaml, a save had replaced graph.gnpg: a new graph beside an old cluster."""
    import pathlib

    from gnplace.execute.profile import Calibration
    from gnplace.toy import mlp_training_graph, toy_cluster

    old = Calibration(mlp_training_graph(layers=2, width=8, batch=4), toy_cluster(2), {}, cluster_spec={"name": "old"})
    old.save(tmp_path)
    before = {p.name: p.read_bytes() for p in tmp_path.iterdir()}
    new = Calibration(mlp_training_graph(layers=3, width=8, batch=4), toy_cluster(2), {}, cluster_spec={"name": "new"})
    write_bytes = pathlib.Path.write_bytes

    def stopped_at_the_cluster(self, data):
        if self.name.startswith("cluster.yaml."):
            raise KeyboardInterrupt
        return write_bytes(self, data)

    monkeypatch.setattr(pathlib.Path, "write_bytes", stopped_at_the_cluster)
    with pytest.raises(KeyboardInterrupt):
        new.save(tmp_path)
    assert {p.name: p.read_bytes() for p in tmp_path.iterdir()} == before  # both old, and no .tmp left
    monkeypatch.undo()
    graph_path, cluster_path = new.save(tmp_path)
    assert load_graph(graph_path) == new.graph and cluster_path.read_text() == "name: new\n"


def test_a_calibration_draws_nothing_from_the_callers_global_generator():
    """The matmul that measures a device's FLOP/s was drawn from torch's global generator, moving the caller's stream."""
    import torch

    step = import_step(*tiny())
    torch.manual_seed(1234)
    state = torch.random.get_rng_state()
    calibrate(step, timer=LocalTimer(step), devices=["cpu"], repeats=1, anchor_rounds=1)
    assert torch.equal(torch.random.get_rng_state(), state)


def test_timing_the_ops_of_a_model_with_dropout_leaves_the_callers_generator_where_it_was():
    import torch

    from gnplace.execute.profile import measure_op_seconds
    from tests.execute.models import DropsOut

    program = compile_step(import_step(DropsOut(), (torch.randn(4, 8),)))
    torch.manual_seed(5)
    state = torch.random.get_rng_state()
    assert measure_op_seconds(program, torch.device("cpu"), repeats=1).shape == (len(program.ops),)
    assert torch.equal(torch.random.get_rng_state(), state)


def test_an_op_with_no_node_is_charged_to_the_next_op_that_has_one():
    """An op of no node (a view of a buffer) adds its seconds to the next op's node: a mutant dropping them passed,
    ``tiny``'s ops all having a node."""
    import dataclasses

    program = compile_step(import_step(*tiny()))
    nodes = [op.node for op in program.ops]
    k = next(i for i in range(len(nodes) - 1) if nodes[i] != nodes[i + 1] and nodes[i + 1] >= 0)
    program.ops[k] = dataclasses.replace(program.ops[k], node=-1)
    ops = np.full(len(program.ops), 1.0)
    ops[k] = 100.0
    seconds = node_seconds(program, ops, {})
    expected = np.zeros(program.num_nodes)
    for i, node in enumerate(nodes):
        if i != k:
            expected[node] += 1.0
    expected[nodes[k + 1]] += 100.0
    np.testing.assert_array_equal(seconds, expected)


def test_each_ops_seconds_are_the_median_of_the_steps_after_the_warmup(monkeypatch):
    """Mutants taking the mean of the timed steps, or timing the warm-up step, passed (every test read a real clock)."""
    import torch

    import gnplace.execute.rank as rank
    from gnplace.execute.profile import measure_op_seconds

    program = compile_step(import_step(*tiny()))
    rows = iter([0.5, 1.0, 2.0, 9.0])  # the warm-up's 0.5 taken in: 1; the mean: 4

    def scripted(program, plan, rank, device, params, *, lr, op_seconds):
        op_seconds[:] = next(rows)
        return 0.0, 0.0, {}

    monkeypatch.setattr(rank, "run_rank", scripted)
    seconds = measure_op_seconds(program, torch.device("cpu"), repeats=3)
    assert seconds.tolist() == [2.0] * len(program.ops)


class _Stopwatch:
    """``time`` whose clock reads each timed span in turn from ``spans``: a start, then the start plus a span."""

    def __init__(self, spans):
        self.spans, self.now, self.started = list(spans), 0.0, False

    def perf_counter(self):
        if self.started:
            self.now += self.spans.pop(0)
        self.started = not self.started
        return self.now


def test_each_update_and_copy_is_the_median_of_its_timed_runs_after_the_first(monkeypatch):
    """The first run of an update or a copy is a warm-up, the median of the rest its seconds: mutants timing the
    first too passed."""
    import torch

    from gnplace.execute import profile

    program = compile_step(import_step(*tiny()))
    clock = _Stopwatch([100.0, 1.0, 2.0, 9.0] * len(program.params))
    monkeypatch.setattr(profile, "time", clock)
    seconds = profile._update_seconds(program, torch.device("cpu"), repeats=3, threads=1)
    assert seconds == dict.fromkeys(program.params, 2.0) and not clock.spans
    clock = _Stopwatch([100.0] + [1.0] * 5 + [2.0] * 5)
    monkeypatch.setattr(profile, "time", clock)
    assert profile._copy_seconds(64, torch.device("cpu"), torch.device("cpu"), repeats=10) == 1.5


def test_the_calibrated_costs_simulate_the_one_device_step_the_timer_measured(monkeypatch):
    """The per-op seconds are scaled so that the simulated one-device step is the measured one, and written as the
    kind's ``cost_s``; the per-op overhead is fitted to them. Mutants leaving the seconds unscaled, writing other
    costs or leaving the overhead at 0 passed (the timers' real steps allowed any scale from 0.05 to 20)."""
    from gnplace.execute import profile
    from gnplace.sim.simulator import Simulator

    step = import_step(*tiny())
    program = compile_step(step)
    ops, updates = np.linspace(1e-4, 3e-4, len(program.ops)), dict.fromkeys(program.params, 2e-4)
    monkeypatch.setattr(profile, "measure_op_seconds", lambda program, device, **kwargs: ops)
    monkeypatch.setattr(profile, "_update_seconds", lambda program, device, repeats, threads: updates)
    monkeypatch.setattr(profile, "_device_rates", lambda device, threads: (1e13, 1e12, 8e9))
    timer = LocalTimer(step)
    monkeypatch.setattr(timer, "measure", _FixedTimer(5e-2).measure)
    calibration = calibrate(step, timer=timer, devices=["cpu"], anchor_rounds=1)
    graph, cluster = calibration.graph, calibration.cluster
    scale = calibration.scale["cpu-1t"]
    np.testing.assert_allclose(calibration.node_seconds["cpu-1t"], node_seconds(program, ops, updates) * scale)
    np.testing.assert_array_equal(graph.cost_s["cpu-1t"], calibration.node_seconds["cpu-1t"])
    single = np.zeros(graph.num_ops, dtype=np.int64)
    assert Simulator().time(graph, cluster, single).step_time == pytest.approx(5e-2, rel=1e-9)
    overhead = cluster.devices[0].launch_overhead
    assert overhead > 0 and overhead == pytest.approx(
        fitted_launch_overhead(step.graph, cluster, 0, calibration.node_seconds["cpu-1t"]))


def test_the_wire_bandwidth_is_fitted_past_the_smallest_ping(monkeypatch):
    """The idle ping-pong's bandwidth is fitted to its sizes past the first (4 bytes, all latency), and each rank's
    link is its own: a mutant fitting every size passed. No rank starts: the probes and the steps are scripted."""
    from gnplace.execute import profile

    step = import_step(*tiny())
    program = compile_step(step)
    monkeypatch.setattr(profile, "measure_op_seconds", lambda program, device, **kwargs: np.full(len(program.ops), 1e-4))
    monkeypatch.setattr(profile, "_update_seconds", lambda program, device, repeats, threads: {})
    monkeypatch.setattr(profile, "_device_rates", lambda device, threads: (1e11, 1e10, 8e9))
    monkeypatch.setattr(profile, "probe_link", lambda timer, peer, ranks, **kwargs: ([8, 64], [1e-3 * peer] * 2))
    wire = {peer: [1.0] + [20e-6 + size / (peer * 1e9) for size in profile.LINK_SIZES[1:]] for peer in (1, 2)}
    timer = DistTimer(program)
    monkeypatch.setattr(timer, "link_times", lambda ranks, sizes: wire)
    monkeypatch.setattr(timer, "message_costs", lambda ranks: {1: 1e-5, 2: 1e-5})
    monkeypatch.setattr(timer, "measure", _FixedTimer(5e-2).measure)
    calibration = calibrate(step, timer=timer, ranks=3, anchor_rounds=1, probe_rounds=1)
    links = calibration.links
    assert links["rank0-rank1"]["bandwidth"] == pytest.approx(1e9) and links["rank0-rank2"]["bandwidth"] == pytest.approx(2e9)
    assert links["rank0-rank1"]["latency"] == pytest.approx(1e-3) and links["rank0-rank2"]["latency"] == pytest.approx(2e-3)
    assert timer.world == 0  # nothing started
