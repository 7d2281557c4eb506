import pytest
import torch

from gnplace.cluster import load_cluster
from gnplace.exceptions import ExecutionFailed, InvalidArgument
from gnplace.execute.base import as_program, oom_result, real_timer, torch_devices
from gnplace.toy import chain_graph


def test_torch_devices_default_cpu_and_gpus_in_order():
    cluster = load_cluster("cpu_gpu")
    assert [str(d) for d in torch_devices(cluster, ["cpu", "cpu"])] == ["cpu", "cpu"]
    if not torch.cuda.is_available():
        with pytest.raises(ExecutionFailed, match="torch sees 0 CUDA"):
            torch_devices(cluster)
    with pytest.raises(InvalidArgument, match="2 devices"):
        torch_devices(cluster, ["cpu"])


def test_as_program_refuses_a_plain_graph():
    with pytest.raises(InvalidArgument, match="import_step"):
        as_program(chain_graph(3))


def test_oom_result_is_marked_over_capacity_with_a_finite_time():
    graph, cluster = chain_graph(3), load_cluster("k80x2")
    result = oom_result(graph, cluster, [0, 1, 0], device=1, needed=float("inf"))
    assert result.is_oom and result.oom.tolist() == [False, True]
    assert 0 < result.step_time < float("inf")


def test_real_timer_by_name():
    from gnplace.execute.examples import tiny
    from gnplace.execute.local import LocalTimer
    from gnplace.importers.torch import import_step

    step = import_step(*tiny())
    timer = real_timer("local", step, devices=["cpu", "cpu"], repeats=2)
    assert isinstance(timer, LocalTimer) and timer.devices == ["cpu", "cpu"] and timer.repeats == 2
    with pytest.raises(InvalidArgument, match="unknown real timer 'tpu'"):
        real_timer("tpu", step)
