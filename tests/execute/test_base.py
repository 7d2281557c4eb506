import numpy as np
import pytest
import torch

from gnplace.cluster import load_cluster
from gnplace.exceptions import ExecutionFailed, InvalidArgument
from gnplace.execute.base import as_program, oom_result, real_timer, torch_devices
from gnplace.execute.examples import tiny
from gnplace.importers.torch import import_step
from gnplace.toy import chain_graph


def test_torch_devices_default_cpu_and_gpus_in_order():
    cluster = load_cluster("cpu_gpu")
    assert [str(d) for d in torch_devices(cluster, ["cpu", "cpu"])] == ["cpu", "cpu"]
    if not torch.cuda.is_available():
        with pytest.raises(ExecutionFailed, match="torch sees 0 CUDA"):
            torch_devices(cluster)
    with pytest.raises(InvalidArgument, match="2 devices"):
        torch_devices(cluster, ["cpu"])


def test_torch_devices_runs_profiled_cpu_ranks_on_cpu():
    # gnplace profile --timer dist names its CPU ranks rank0, rank1 and their kind cpu-1t
    from gnplace.cluster import cluster_from_dict

    rates = {"peak_flops": 1e11, "mem_bandwidth": 5e9, "memory": 1e10}
    cluster = cluster_from_dict({"name": "profiled-dist", "links": {"default": "pcie3"},
                                 "devices": [{"name": f"rank{r}", "kind": "cpu-1t", **rates} for r in range(2)]})
    assert [str(d) for d in torch_devices(cluster)] == ["cpu", "cpu"]


def test_as_program_refuses_a_plain_graph():
    with pytest.raises(InvalidArgument, match="import_step"):
        as_program(chain_graph(3))


def test_oom_result_is_marked_over_capacity_with_a_finite_time():
    graph, cluster = chain_graph(3), load_cluster("k80x2")
    result = oom_result(graph, cluster, [0, 1, 0], device=1, needed=float("inf"))
    assert result.is_oom and result.oom.tolist() == [False, True]
    assert 0 < result.step_time < float("inf")
    assert result.busy_time.tolist() == [0.0, 0.0]  # nothing ran (a mutant gave the simulator's busy seconds)


def test_real_timer_by_name():
    from gnplace.execute.examples import tiny
    from gnplace.execute.local import LocalTimer
    from gnplace.importers.torch import import_step

    step = import_step(*tiny())
    timer = real_timer("local", step, devices=["cpu", "cpu"], repeats=2)
    assert isinstance(timer, LocalTimer) and timer.devices == ["cpu", "cpu"] and timer.repeats == 2
    with pytest.raises(InvalidArgument, match="unknown real timer 'tpu'"):
        real_timer("tpu", step)


def test_time_caches_by_placement_and_measure_runs_afresh():
    from gnplace.exceptions import InvalidPlacement
    from gnplace.execute.base import RealStepTimer
    from gnplace.execute.examples import tiny
    from gnplace.importers.torch import import_step

    class Counting(RealStepTimer):
        runs = 0

        def _measure(self, graph, cluster, placement):
            self.runs += 1
            return _result(cluster, 1e-3 * self.runs)

    def _result(cluster, seconds):
        import numpy as np

        from gnplace.sim.timer import StepResult

        n = cluster.num_devices
        return StepResult(seconds, np.zeros(n), np.zeros(n), cluster.memory, cluster.device_names)

    step = import_step(*tiny())
    graph, cluster = step.graph, load_cluster("k80x2")
    timer = Counting(step)
    single = [0] * graph.num_ops
    assert timer.time(graph, cluster, single).step_time == timer.time(graph, cluster, single).step_time == 1e-3
    assert [timer.measure(graph, cluster, single).step_time for _ in range(2)] == [2e-3, 3e-3]
    assert timer.time(graph, cluster, single).step_time == 1e-3  # the cache keeps the first measurement
    assert timer.runs == timer.measured == 3
    with pytest.raises(InvalidPlacement, match="recorded step"):
        timer.measure(chain_graph(3), cluster, [0, 0, 0])


@pytest.mark.parametrize("kwargs", [dict(repeats=2.5), dict(warmup=True), dict(repeats=0), dict(warmup=-1),
                                    dict(repeats="5")])
def test_warmup_and_repeats_are_whole_numbers(kwargs):
    """2.5 repeats was cut to 2, warmup=True read as one step."""
    from gnplace.execute.examples import tiny
    from gnplace.execute.local import LocalTimer
    from gnplace.importers.torch import import_step

    with pytest.raises(InvalidArgument, match=r"^need whole numbers warmup >= 0 and repeats >= 1"):
        LocalTimer(import_step(*tiny()), devices=["cpu", "cpu"], **kwargs)


@pytest.mark.parametrize("lr", ["x", None, True, float("nan"), float("inf"), -0.1])
def test_lr_is_a_finite_number_at_least_zero(lr):
    """lr="x" was a ValueError from float() and None a TypeError; NaN was taken, and turned the parameters NaN."""
    from gnplace.execute.examples import tiny
    from gnplace.execute.local import LocalTimer
    from gnplace.importers.torch import import_step

    with pytest.raises(InvalidArgument, match=r"^lr must be a finite number >= 0 \(the learning rate"):
        LocalTimer(import_step(*tiny()), devices=["cpu", "cpu"], lr=lr)
    assert LocalTimer(import_step(*tiny()), devices=["cpu", "cpu"], lr=np.float32(0.0)).lr == 0.0


@pytest.mark.parametrize("kwargs, message", [
    (dict(repeats=10**12), r"^need warmup and repeats <= 10,000 steps"),  # numpy was asked for 189 TiB
    (dict(warmup=10_001), r"^need warmup and repeats <= 10,000 steps"),
    (dict(threads=2**32), r"^threads must be a whole number from 1 to \d+"),  # torch's "Overflow when unpacking long"
    (dict(threads=0), r"^threads must be a whole number from 1"),
    (dict(threads=1.5), r"^threads must be a whole number from 1"),
])
def test_steps_and_threads_past_what_a_measurement_can_run_are_refused(kwargs, message):
    from gnplace.execute.examples import tiny
    from gnplace.execute.local import LocalTimer
    from gnplace.importers.torch import import_step

    with pytest.raises(InvalidArgument, match=message):
        LocalTimer(import_step(*tiny()), devices=["cpu", "cpu"], **kwargs)


@pytest.mark.parametrize("name, message", [
    ("mps", "gnplace times cpu and cuda devices, not mps"),  # a traceback mid-run on a build without it
    ("meta", "gnplace times cpu and cuda devices, not meta"),  # a calibration of ops that do no work
    ("cpu:7", "torch has one cpu device"),  # read as cpu, silently
    ("bogus", "is not a torch device"),
])
def test_a_device_gnplace_cannot_time_is_refused(name, message):
    from gnplace.execute.base import torch_device

    with pytest.raises(InvalidArgument, match=message):
        torch_device(name)
    with pytest.raises(InvalidArgument, match=message):
        torch_devices(load_cluster("k80x2"), ["cpu", name])
    assert torch_device("cpu:0").type == "cpu"


def test_a_new_fastest_placement_is_measured_again_and_the_median_kept_others_once():
    """``confirm``: a lucky first draw no longer makes a placement the fastest; a slower or OOM one is not repeated."""
    import numpy as np

    from gnplace.execute.base import RealStepTimer
    from gnplace.execute.examples import tiny
    from gnplace.importers.torch import import_step
    from gnplace.sim.timer import StepResult

    class Scripted(RealStepTimer):  # each placement's draws in turn, in milliseconds (over capacity: a negative one)
        draws: dict[int, list[float]] = {}

        def _measure(self, graph, cluster, placement):
            ms = self.draws[int(placement.devices[0])].pop(0)
            n = cluster.num_devices
            peak = np.full(n, 2.0 * cluster.memory.max() if ms < 0 else 0.0)
            return StepResult(abs(ms) * 1e-3, np.zeros(n), peak, cluster.memory, cluster.device_names)

    step = import_step(*tiny())
    graph, cluster = step.graph, load_cluster("k80x4")
    timer = Scripted(step)
    timer.confirm = 2
    assert timer.settings()["confirm"] == 2
    # device 0: the first, so the fastest yet (10, 12, 11: median 11); device 1: a lucky 5 then 9 and 13 (median 9);
    # device 2: 10, slower than 9, kept as drawn; device 3: 1 but out of memory, kept as drawn
    timer.draws = {0: [10, 12, 11], 1: [5, 9, 13], 2: [10], 3: [-1]}
    steps = [timer.time(graph, cluster, [d] * graph.num_ops) for d in range(4)]
    assert [round(s.step_time * 1e3, 6) for s in steps] == [11, 9, 10, 1] and steps[3].is_oom
    assert timer.measured == 8 and not any(timer.draws.values())
    assert timer.time(graph, cluster, [1] * graph.num_ops) is steps[1]  # the cache holds the median
    timer.confirm = 0
    assert "confirm" not in timer.settings()  # a run saved before confirm existed resumes under confirm 0


def test_torch_devices_refuse_one_string_of_names():
    """The local timer read ``"cpu"`` as the three devices c, p, u."""
    from gnplace.execute.local import LocalTimer

    cluster = load_cluster("k80x2")
    with pytest.raises(InvalidArgument, match=r"^devices must be a list of torch device names.*got 'cpu'$"):
        torch_devices(cluster, "cpu")
    assert [str(d) for d in torch_devices(cluster, ("cpu", "cpu"))] == ["cpu", "cpu"]
    step = import_step(*tiny())
    with pytest.raises(InvalidArgument, match="^devices must be a list"):
        LocalTimer(step, devices="cpu,cpu")


class _Scripted:
    """A real timer whose measurements are scripted: each placement's draws in turn (milliseconds, a negative one out
    of memory), by its first node's device."""

    @staticmethod
    def make(step, draws):
        import numpy as np

        from gnplace.execute.base import RealStepTimer
        from gnplace.sim.timer import StepResult

        class Scripted(RealStepTimer):
            def _measure(self, graph, cluster, placement):
                ms = draws[int(placement.devices[0])].pop(0)
                n = cluster.num_devices
                peak = np.full(n, 2.0 * cluster.memory.max() if ms < 0 else 0.0)
                return StepResult(abs(ms) * 1e-3, np.zeros(n), peak, cluster.memory, cluster.device_names)

        return Scripted(step)


def test_a_placement_as_fast_as_the_fastest_is_not_measured_again():
    """``confirm`` re-measures a placement faster than all before it, not one as fast (a mutant with <= passed)."""
    step = import_step(*tiny())
    graph, cluster = step.graph, load_cluster("k80x2")
    draws = {0: [10, 12, 11], 1: [11]}
    timer = _Scripted.make(step, draws)
    timer.confirm = 2
    assert timer.time(graph, cluster, [0] * graph.num_ops).step_time == 0.011
    assert timer.time(graph, cluster, [1] * graph.num_ops).step_time == 0.011  # as fast: measured once
    assert timer.measured == 4 and not any(draws.values())


def test_the_cache_tells_clusters_apart():
    """A placement measured on one cluster is measured again on another: a cache keyed by the placement alone (a
    mutant) answered the second cluster with the first one's step."""
    step = import_step(*tiny())
    graph = step.graph
    draws = {0: [10, 20]}
    timer = _Scripted.make(step, draws)
    placement = [0] * graph.num_ops
    assert timer.time(graph, load_cluster("k80x2"), placement).step_time == 0.010
    assert timer.time(graph, load_cluster("cpu_gpu"), placement).step_time == 0.020
    assert timer.time(graph, load_cluster("k80x2"), placement).step_time == 0.010  # from the cache
    assert timer.measured == 2


def test_a_placement_out_of_memory_is_no_fastest_to_beat():
    """The first placement that fits is the fastest yet, however fast a placement over memory was measured: a mutant
    comparing with the OOM step left the fitting one measured once."""
    step = import_step(*tiny())
    graph, cluster = step.graph, load_cluster("k80x2")
    draws = {0: [-1], 1: [10, 12, 11]}
    timer = _Scripted.make(step, draws)
    timer.confirm = 2
    assert timer.time(graph, cluster, [0] * graph.num_ops).is_oom
    assert timer.time(graph, cluster, [1] * graph.num_ops).step_time == 0.011
    assert timer.measured == 4 and not any(draws.values())


def test_the_fastest_to_beat_is_the_fastest_on_the_same_cluster():
    """A placement is re-measured when faster than all before it on its own cluster: a mutant comparing with every
    cluster's steps left the first placement of a slower cluster measured once."""
    step = import_step(*tiny())
    graph = step.graph
    draws = {0: [1, 1, 1, 10, 12, 11]}
    timer = _Scripted.make(step, draws)
    timer.confirm = 2
    assert timer.time(graph, load_cluster("k80x2"), [0] * graph.num_ops).step_time == 0.001
    assert timer.time(graph, load_cluster("cpu_gpu"), [0] * graph.num_ops).step_time == 0.011
    assert timer.measured == 6 and not any(draws.values())


def test_without_names_the_gpus_are_cuda_devices_in_cluster_order(monkeypatch):
    """Each GPU of the cluster is the next CUDA device (a mutant ran every GPU on ``cuda:0``; the tests here, on
    CPUs, never got past the missing CUDA)."""
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 4)
    assert [str(d) for d in torch_devices(load_cluster("k80x4"))] == ["cuda:0", "cuda:1", "cuda:2", "cuda:3"]
    assert [str(d) for d in torch_devices(load_cluster("cpu_gpu"))] == ["cpu", "cuda:0"]


def test_settings_name_the_optimizer_only_where_it_is_not_sgd():
    """A run saved before the executors ran other optimizers (its settings name none) resumes under SGD: a mutant
    naming ``sgd`` too passed."""
    from gnplace.execute.local import LocalTimer

    net = torch.nn.Linear(4, 2)
    x = (torch.randn(3, 4),)
    sgd = LocalTimer(import_step(net, x, loss=lambda y: y.sum()), repeats=2)
    adam = LocalTimer(import_step(net, x, loss=lambda y: y.sum(), optimizer="adam"), repeats=2)
    assert sgd.settings() == {"warmup": 1, "repeats": 2, "lr": 1e-3, "devices": None, "threads": None}
    assert adam.settings()["optimizer"] == "adam"
