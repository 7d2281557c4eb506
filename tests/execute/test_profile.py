import numpy as np
import pytest

from gnplace.cluster import load_cluster
from gnplace.execute.dist import DistTimer
from gnplace.execute.examples import tiny
from gnplace.execute.local import LocalTimer
from gnplace.execute.profile import calibrate, fidelity_placements, fit_link, node_seconds, simulator_error
from gnplace.execute.program import compile_step
from gnplace.graph_io import load_graph
from gnplace.importers.torch import import_step


def test_fit_link_recovers_latency_and_bandwidth():
    sizes = [4, 4096, 65536, 1 << 20]
    bandwidth, latency = fit_link(sizes, [50e-6 + s / 2e9 for s in sizes])
    assert bandwidth == pytest.approx(2e9, rel=1e-6) and latency == pytest.approx(50e-6, rel=1e-6)


def test_node_seconds_sum_to_the_ops_and_updates():
    step = import_step(*tiny())
    program = compile_step(step)
    ops = np.full(len(program.ops), 1e-3)
    seconds = node_seconds(program, ops, {name: 2e-3 for name in program.params})
    assert seconds.sum() == pytest.approx(1e-3 * len(program.ops) + 2e-3 * len(program.params))


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
    assert len(rows) == 5 and all(r["measured_s"] > 0 and r["simulated_s"] > 0 for r in rows)
    assert list(placements)[:2] == ["single:rank0", "single:rank1"]


def test_calibration_of_this_process_devices():
    step = import_step(*tiny())
    calibration = calibrate(step, timer=LocalTimer(step), devices=["cpu"], repeats=2)
    assert calibration.cluster.device_names == ["cpu0"]
    assert calibration.graph.cost_s["cpu-1t"].shape == (step.graph.num_ops,)


def test_a_cuda_device_torch_does_not_see_is_one_error():
    import torch

    from gnplace.exceptions import ExecutionFailed, InvalidArgument
    from gnplace.execute.profile import parse_torch_devices

    count = torch.cuda.device_count() if torch.cuda.is_available() else 0
    with pytest.raises(ExecutionFailed, match=f"cuda:{count} was asked for, but torch sees {count} CUDA device"):
        parse_torch_devices(["cpu", f"cuda:{count}"])
    with pytest.raises(InvalidArgument, match="'bogus' is not a torch device"):
        parse_torch_devices(["bogus"])
