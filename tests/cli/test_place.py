"""Tests of the ``gnplace place`` command, run in-process."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from gnplace.cli import main
from gnplace.cluster import load_cluster
from gnplace.graph_io import load_graph, save_graph
from gnplace.placement import load_placement
from gnplace.toy import chain_graph

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = ROOT / "datasets" / "examples"


def test_place_writes_a_placement_the_simulator_reads(tmp_path, capsys, documented_keys):
    graph_path = EXAMPLES / "mlp1x8w6144b256.gnpg"
    target = tmp_path / "p.json"
    assert main(["place", str(graph_path), "-c", "tight4", "-p", "round_robin", "-o", str(target), "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    data = json.loads(target.read_text())
    assert data["placer"] == "round_robin" and data["predicted"]["step_time_s"] == report["step_time_s"]
    graph = load_graph(graph_path)
    assert (report["ops"], report["groups"]) == (graph.num_ops, graph.num_groups)  # as simulate, inspect name them
    assert report["output"] == str(target)
    documented_keys("place-json", report)
    documented_keys("placement-file", data)
    placement = load_placement(target, graph, load_cluster("tight4"))
    assert len(placement.devices) == graph.num_ops
    assert main(["simulate", str(graph_path), "-c", "tight4", "-p", str(target), "--json"]) == 0
    simulated = json.loads(capsys.readouterr().out)
    documented_keys("simulate-json", simulated)
    assert simulated["step_time_s"] == pytest.approx(report["step_time_s"])


def test_a_budget_or_checkpoint_the_placer_would_ignore_is_refused(tmp_path, capsys):
    graph_path = str(EXAMPLES / "mlp2x8w2048b512.gnpg")
    assert main(["place", graph_path, "-c", "k80x2", "-p", "annealing", "--budget", "10", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["placer"] == "annealing"
    for placer in ("m_etf", "policy"):  # were ignored: policy timed about 76 placements under --budget 5
        assert main(["place", graph_path, "-c", "k80x2", "-p", placer, "--budget", "5"]) == 2
        err = capsys.readouterr().err
        assert f"--budget: {placer} spends no evaluation budget (these do: " in err and "annealing" in err
    assert main(["place", graph_path, "-p", "heft", "--checkpoint", str(tmp_path / "none.ckpt")]) == 2
    assert "no such checkpoint file" in capsys.readouterr().err  # was placed as if not given
    checkpoint = _fresh_policy(tmp_path)
    assert main(["place", graph_path, "-p", "ppo", "--checkpoint", str(checkpoint)]) == 2  # searched afresh
    assert "none of the placers run takes a checkpoint" in capsys.readouterr().err


def test_an_output_over_a_file_an_option_reads_is_refused(tmp_path, capsys):
    constructor = tmp_path / "c.ckpt"
    constructor.write_bytes(b"a constructor's bytes")
    graph_path = str(EXAMPLES / "mlp2x8w2048b512.gnpg")
    other = tmp_path / "d.ckpt"
    other.write_bytes(b"another constructor's bytes")
    for flag in ("-o", "--device-map"):  # -o overwrote it with placement JSON, and exited 0
        for given in (str(constructor), f"{other},{constructor}"):  # one, or several comma-separated
            assert main(["place", graph_path, "-p", "policy", "-O", f"policy.constructor={given}",
                         flag, str(constructor)]) == 2
            assert "is the input c.ckpt; write to another file" in capsys.readouterr().err
    assert constructor.read_bytes() == b"a constructor's bytes"


def test_text_output_names_every_device_and_the_file_written(tmp_path, capsys):
    graph_path = EXAMPLES / "mlp2x8w2048b512.gnpg"
    target = tmp_path / "out" / "rr.json"
    assert main(["place", str(graph_path), "-c", "k80x2", "-p", "round_robin", "-o", str(target)]) == 0
    captured = capsys.readouterr()
    assert captured.err == ""
    head, devices, written = captured.out.splitlines()
    graph = load_graph(graph_path)
    assert head.startswith(f"{graph.name} on k80x2 by round_robin in ") and " ms" in head
    assert "OUT OF MEMORY" not in head
    # "gpu0 N ops / M MiB, gpu1 N ops / M MiB", the counts adding up to the graph
    counts = {}
    for part in devices.strip().split(", "):
        name, n, ops, slash, _, unit = part.split()
        assert (ops, slash, unit) == ("ops", "/", "MiB")
        counts[name] = int(n)
    assert list(counts) == load_cluster("k80x2").device_names
    assert sum(counts.values()) == graph.num_ops and min(counts.values()) > 0
    assert written == f"  written to {target}"
    placement = load_placement(target, graph, load_cluster("k80x2"))
    assert [int((placement.devices == k).sum()) for k in range(2)] == list(counts.values())


def test_text_output_without_output_file_writes_nothing(tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)
    assert main(["place", str(EXAMPLES / "mlp2x8w2048b512.gnpg"), "-c", "k80x2", "-p", "single"]) == 0
    out = capsys.readouterr().out
    assert len(out.splitlines()) == 2 and "written to" not in out
    assert list(tmp_path.iterdir()) == []


def test_out_of_memory_placement_is_flagged(capsys):
    # the 1.1 GiB example does not fit one 1 GiB GPU of tight4
    assert main(["place", str(EXAMPLES / "mlp1x8w6144b256.gnpg"), "-c", "tight4", "-p", "single"]) == 0
    assert "OUT OF MEMORY" in capsys.readouterr().out.splitlines()[0]


def test_unknown_placer_is_one_error_line_and_exit_2(tmp_path, capsys):
    target = tmp_path / "p.json"
    code = main(["place", str(EXAMPLES / "mlp2x8w2048b512.gnpg"), "-c", "k80x2", "-p", "magic", "-o", str(target)])
    assert code == 2
    captured = capsys.readouterr()
    assert captured.out == ""
    assert captured.err.startswith("gnplace: error: unknown placer 'magic' (choose one of: ")
    assert captured.err.count("\n") == 1 and "Traceback" not in captured.err
    assert not target.exists()


def test_a_large_cluster_lists_the_devices_used(tmp_path, capsys):
    cluster = tmp_path / "big.yaml"
    cluster.write_text("devices: [{name: a, count: 40, kind: v100}]\nlinks: {default: pcie3}\n")
    assert main(["place", str(EXAMPLES / "mlp2x8w2048b512.gnpg"), "-c", str(cluster), "-p", "single"]) == 0
    line = capsys.readouterr().out.splitlines()[1]
    assert line == "  a0 98 ops / 360.00 MiB; 39 of 40 devices unused"
    cluster.write_text("devices: [{name: a, count: 16, kind: v100}]\nlinks: {default: pcie3}\n")  # 16: every one
    assert main(["place", str(EXAMPLES / "mlp2x8w2048b512.gnpg"), "-c", str(cluster), "-p", "single"]) == 0
    line = capsys.readouterr().out.splitlines()[1]
    assert line.startswith("  a0 98 ops / 360.00 MiB, a1 0 ops / ") and line.count(" ops / ") == 16
    assert "unused" not in line


def test_unknown_placer_is_named_before_its_options(capsys):
    # a comma list (what evaluate's --placers takes) is one unknown name here, not 'an option of a
    # placer not among those run'
    code = main(["place", str(EXAMPLES / "mlp2x8w2048b512.gnpg"), "-c", "k80x2", "-p", "annealing,policy",
                 "-O", "annealing.start=policy"])
    assert code == 2
    assert capsys.readouterr().err.startswith("gnplace: error: unknown placer 'annealing,policy' (choose one of: ")


@pytest.mark.parametrize(
    ("content", "message"),
    [
        (None, "no such graph file"),
        (b"this is not a graph", "not a readable gnplace graph file"),
        (b'{"format": "something-else"}', "not a gnplace graph file"),
    ],
)
def test_bad_graph_file_is_one_error_line_and_exit_2(tmp_path, capsys, content, message):
    path = tmp_path / "bad.gnpg"
    if content is not None:
        path.write_bytes(content)
    assert main(["place", str(path), "-c", "k80x2", "-p", "single"]) == 2
    captured = capsys.readouterr()
    assert captured.out == ""
    assert captured.err.startswith(f"gnplace: error: {path}: {message}")
    assert captured.err.count("\n") == 1


def test_place_passes_placer_options_and_rejects_bad_ones(tmp_path, capsys):
    graph_path = str(EXAMPLES / "mlp2x8w2048b512.gnpg")
    assert main(["place", graph_path, "-c", "k80x2", "-p", "annealing", "--budget", "20", "--json",
                 "-O", "annealing.start=round_robin"]) == 0
    assert json.loads(capsys.readouterr().out)["placer"] == "annealing"
    assert main(["place", graph_path, "-c", "k80x2", "-p", "annealing", "--budget", "20", "-O", "annealing.batch=0"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("gnplace: error: AnnealingPlacer needs") and "batch" in err and err.count("\n") == 1
    assert main(["place", graph_path, "-c", "k80x2", "-p", "heft", "-O", "heft.colour=red"]) == 2
    assert "placer 'heft' does not take these options" in capsys.readouterr().err


def test_learned_search_placer_from_the_command_line(tmp_path, capsys, monkeypatch):
    """``--algo``, ``--budget`` and ``-O`` reach the learned placer, and the placement written is the placer's."""
    import gnplace.cli.place as place_cli
    from gnplace.placers import make_placer
    from gnplace.sim.simulator import Simulator

    made = []

    def spy(*args, **kwargs):
        made.append(make_placer(*args, **kwargs))
        return made[-1]

    monkeypatch.setattr(place_cli, "make_placer", spy)
    graph_path = str(EXAMPLES / "mlp2x8w2048b512.gnpg")
    common = ["place", graph_path, "-c", "k80x2", "-p", "ppo", "--budget", "40", "--json",
              "-O", "ppo.samples=8", "-O", "ppo.imitation_steps=1"]
    assert main([*common, "-O", "ppo.epochs=2"]) == 0
    ppo = json.loads(capsys.readouterr().out)
    assert main([*common, "--algo", "reinforce", "-o", str(tmp_path / "reinforce.json")]) == 0
    reinforce = json.loads(capsys.readouterr().out)
    assert ppo["placer"] == reinforce["placer"] == "ppo" and ppo["step_time_s"] > 0 and reinforce["step_time_s"] > 0
    assert [p.config.algo for p in made] == ["ppo", "reinforce"]
    assert all((p.budget, p.config.samples, p.config.imitation_steps) == (40, 8, 1) for p in made)
    assert made[0].config.epochs == 2
    assert all(0 < p.last_evaluations <= 40 for p in made)
    # epochs are PPO's steps per batch: with --algo reinforce (one step per batch) it is refused, not ignored
    assert main([*common, "-O", "ppo.epochs=2", "--algo", "reinforce"]) == 2
    assert "algo=reinforce makes one step per batch" in capsys.readouterr().err
    graph, cluster = load_graph(graph_path), load_cluster("k80x2")
    own = make_placer("ppo", timer=Simulator(), budget=40, samples=8, imitation_steps=1, algo="reinforce")
    written = load_placement(tmp_path / "reinforce.json", graph, cluster)
    assert written == own.place(graph, cluster, seed=0)  # --seed's default
    assert main(["place", graph_path, "-p", "heft", "--algo", "ppo"]) == 2
    assert "does not take these options" in capsys.readouterr().err


def _fresh_policy(tmp_path):
    import torch

    from gnplace.policy.checkpoint import save_policy
    from gnplace.policy.gnn import PlacementPolicy

    torch.manual_seed(0)
    return save_policy(tmp_path / "policy.ckpt", PlacementPolicy())


def test_place_with_the_policy_placer_and_a_checkpoint(tmp_path, capsys):
    checkpoint = _fresh_policy(tmp_path)
    graph_path = EXAMPLES / "mlp2x8w2048b512.gnpg"
    args = ["place", str(graph_path), "-c", "k80x4", "-p", "policy", "--checkpoint", str(checkpoint),
            "-O", "policy.samples=4", "--json"]
    assert main(args) == 0
    first = json.loads(capsys.readouterr().out)
    assert main(args) == 0
    assert json.loads(capsys.readouterr().out)["step_time_s"] == first["step_time_s"]  # deterministic
    (tmp_path / "bad.ckpt").write_bytes(b"garbage")
    assert main(["place", str(graph_path), "-p", "policy", "--checkpoint", str(tmp_path / "bad.ckpt")]) == 2
    assert "not a readable checkpoint" in capsys.readouterr().err


def test_the_zero_shot_script_compares_with_auto_single_and_the_bound(tmp_path, capsys, load_script):
    import subprocess
    import sys

    checkpoint = _fresh_policy(tmp_path)
    # run as a script, on a file that is not there: its exit status and one line, before torch is imported
    done = subprocess.run([sys.executable, str(ROOT / "scripts" / "place.py"), "nope.gnpg", "--checkpoint",
                           str(checkpoint)], capture_output=True, text=True, cwd=ROOT, timeout=300)
    assert done.returncode == 2 and done.stdout == "" and done.stderr == "place: error: nope.gnpg: no such graph file\n"
    in_process = load_script("place")  # the placements in this process: no start-up of their own
    ptb = str(ROOT / "datasets" / "ptb" / "ptb_030.gnpg")
    assert in_process.main([ptb, "-c", "tight4", "--checkpoint", str(checkpoint), "--samples", "4", "--json",
                            "-o", str(tmp_path / "p.json")]) == 0
    row = json.loads(capsys.readouterr().out)
    assert row["bound"] <= row["policy"] and row["policy_vs_auto"] == pytest.approx(row["policy"] / row["auto"])
    assert not row["oom"] and (tmp_path / "p.json").is_file()
    assert in_process.main([ptb, "-c", "tight4", "--checkpoint", str(checkpoint), "--samples", "2", "--no-subsets",
                            "--op-level", "0", "--temperatures", "1", "--constructor", "none", "--module-chain", "0",
                            "--json"]) == 0
    choice = json.loads(capsys.readouterr().out)["choice"]  # the whole cluster only, coarsened; maybe annealed after
    assert choice.removesuffix(", annealed") in ("greedy", "sample")
    assert in_process.main([ptb, "-c", "tight4", "--constructor", str(tmp_path / "gone.ckpt")]) == 2
    err = capsys.readouterr().err
    assert "gone.ckpt: no such checkpoint" in err and err.count("\n") == 1



def test_the_zero_shot_script_flags_references_out_of_memory_and_the_one_device_case(tmp_path, capsys, load_script):
    """Its --json and table gave single's step on a cluster it overflows as a step like any other; on one device it
    said "greedy: the fastest of 0 placements simulated" with no greedy placement."""
    script = load_script("place")
    small = tmp_path / "small.yaml"
    small.write_text("name: small\ndevices: [{name: gpu, count: 2, kind: k80, memory: 200 MiB}]\n"
                     "links: {default: pcie3}\n")
    graph = str(EXAMPLES / "mlp2x8w2048b512.gnpg")
    fast = ["--samples", "2", "--polish", "0", "--last-rounds", "1", "--constructor", "none"]
    assert script.main([graph, "-c", str(small), *fast, "--json"]) == 0
    row = json.loads(capsys.readouterr().out)
    assert row["single_oom"] is True and row["auto_oom"] is False and row["greedy_oom"] in (True, False)
    assert script.main([graph, "-c", str(small), *fast]) == 0
    single = next(line for line in capsys.readouterr().out.splitlines() if line.strip().startswith("single"))
    assert single.endswith("OUT OF MEMORY")
    one = tmp_path / "one.yaml"
    one.write_text("name: one\ndevices: [{name: gpu0, kind: k80}]\n")
    assert script.main([graph, "-c", str(one), *fast, "--json"]) == 0
    row = json.loads(capsys.readouterr().out)
    assert row["choice"] == "only" and row["greedy"] is None and row["greedy_oom"] is None and row["evaluations"] == 0
    assert script.main([graph, "-c", str(one), *fast]) == 0
    assert "(one device or no ops: the only placement)" in capsys.readouterr().out


def test_the_zero_shot_script_refuses_an_output_over_the_shipped_checkpoints(tmp_path, capsys, load_script, monkeypatch):
    from gnplace.rl import policy_files

    script = load_script("place")
    shipped = [tmp_path / name for name in ("base.ckpt", "construct.ckpt", "construct2.ckpt")]
    for path in shipped:
        path.write_bytes(b"a shipped checkpoint's bytes")
    monkeypatch.setattr(policy_files, "SHIPPED_CHECKPOINT", shipped[0])  # read when no --checkpoint / --constructor
    monkeypatch.setattr(policy_files, "SHIPPED_CONSTRUCTORS", tuple(shipped[1:]))
    for target in shipped:  # -o overwrote it with placement JSON after the placement, or failed to load it first
        assert script.main([str(EXAMPLES / "mlp2x8w2048b512.gnpg"), "-c", "k80x2", "-o", str(target)]) == 2
        assert f"is the input {target.name}; write to another file" in capsys.readouterr().err
    assert all(path.read_bytes() == b"a shipped checkpoint's bytes" for path in shipped)

def test_the_zero_shot_script_refuses_an_output_that_names_no_file_and_a_shape_given_twice(tmp_path, capsys,
                                                                                             load_script, monkeypatch):
    """``-o ""`` wrote nothing and ``-o -`` a file named ``-``, with status 0; of two sizes the last was taken."""
    script = load_script("place")
    monkeypatch.chdir(tmp_path)
    graph = str(EXAMPLES / "mlp2x8w2048b512.gnpg")
    for argv, message in ((["-o", ""], "--output is empty"), (["-o", "-"], "--output -: writes a file, not stdout"),
                          (["--input-shape", "x=8,64", "--input-shape", "x=16,64"], "--input-shape x is given twice")):
        assert script.main([graph, *argv]) == 2
        err = capsys.readouterr().err
        assert message in err and err.count("\n") == 1
    assert list(tmp_path.iterdir()) == []


def test_the_zero_shot_script_refuses_temperatures_with_the_shipped_checkpoint(capsys, load_script):
    """The shipped checkpoint samples around auto at temperature 1: ``--temperatures`` was a silent no-op; then its
    refusal named the placer's arguments ("PolicyPlacer's temperatures ... or use around=False"), not the script's
    flags."""
    graph = str(EXAMPLES / "mlp2x8w2048b512.gnpg")
    assert load_script("place").main([graph, "-c", "k80x2", "--temperatures", "0.5"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("place: error: --temperatures temper samples of ") and "PolicyPlacer" not in err
    assert err.endswith("leave --temperatures out, or use --no-around\n")
    assert err.count("\n") == 1
    # --no-around samples the policy itself, at the temperatures given
    assert load_script("place").main([graph, "-c", "k80x2", "--no-around", "--temperatures", "0.5", "--samples", "2",
                                      "--constructor", "none", "--json"]) == 0
    assert "auto" not in json.loads(capsys.readouterr().out)["choice"]


def test_the_zero_shot_script_refuses_bad_temperatures_in_one_line(tmp_path, capsys, load_script):
    script = load_script("place")
    checkpoint = _fresh_policy(tmp_path)
    for bad in ("0.2,x", "0"):
        assert script.main([str(ROOT / "datasets" / "ptb" / "ptb_030.gnpg"), "--checkpoint", str(checkpoint),
                            "--temperatures", bad]) == 2
        err = capsys.readouterr().err
        assert "temperatures" in err and err.count("\n") == 1


def test_the_zero_shot_script_draws_samples_in_rounds(tmp_path, capsys, load_script):
    script = load_script("place")
    ptb = str(ROOT / "datasets" / "ptb" / "ptb_030.gnpg")
    assert script.main([ptb, "-c", "tight4", "--samples", "4", "--rounds", "2", "--json"]) == 0  # the shipped policy
    row = json.loads(capsys.readouterr().out)
    assert row["policy"] <= row["auto"] * (1 + 1e-12) and not row["oom"]
    checkpoint = _fresh_policy(tmp_path)  # no pretraining prior: nothing to re-centre
    for args, message in ((["--rounds", "0"], "--rounds needs >= 1"), (["--rounds", "2", "--checkpoint", str(checkpoint)],
                                                               "re-centre")):
        assert script.main([ptb, "--samples", "4", *args]) == 2
        err = capsys.readouterr().err
        assert message in err and err.count("\n") == 1


def test_the_zero_shot_script_on_one_device_prints_its_table(tmp_path, capsys, load_script):
    one = tmp_path / "one.yaml"
    one.write_text("devices: [{name: g, kind: v100}]\nlinks: {default: pcie3}\n")
    ptb = str(ROOT / "datasets" / "ptb" / "ptb_030.gnpg")
    assert load_script("place").main([ptb, "-c", str(one), "-o", str(tmp_path / "p.json")]) == 0
    table = capsys.readouterr().out
    assert "policy" in table and "lower bound" in table and (tmp_path / "p.json").exists()


def test_place_writes_a_device_map_and_compares_with_accelerate(tmp_path, capsys):
    import json

    from gnplace.cli import main

    out = tmp_path / "map.json"
    assert main(["place", "gnplace.execute.examples:branchy", "-c", "k80x4", "-p", "auto", "--device-map", str(out),
                 "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    device_map = json.loads(out.read_text())
    assert device_map and set(device_map.values()) <= {0, 1, 2, 3}
    assert out.read_text().endswith("}\n")  # a text file's last line ends as the placement file's does
    assert set(report["device_map_step_s"]) == {"placement", "device_map", "accelerate_auto", "accelerate_sequential"}


def test_the_device_map_comparison_prints_its_step_times_in_one_column(tmp_path, capsys):
    """``accelerate_sequential`` (21 characters) overflowed the 20-character name column, its time one column right."""
    from gnplace.cli import main

    assert main(["place", "gnplace.execute.examples:mlp", "-c", "k80x4", "-p", "auto", "--device-map",
                 str(tmp_path / "map.json")]) == 0
    lines = capsys.readouterr().out.split("simulated step times:\n", 1)[1].splitlines()[:4]
    assert [line.split()[0] for line in lines] == ["placement", "device_map", "accelerate_auto", "accelerate_sequential"]
    assert len({line.index(" ms") for line in lines}) == 1, lines


WRAPPED = """
import torch

class Inner(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.embed = torch.nn.Embedding(50, 32)
        self.blocks = torch.nn.Sequential(*[torch.nn.Linear(32, 32) for _ in range(4)])
        self.head = torch.nn.Linear(32, 50, bias=False)
        self.head.weight = self.embed.weight

    def forward(self, ids):
        return self.head(self.blocks(self.embed(ids)))

class WithLoss(torch.nn.Module):
    def __init__(self):
        super().__init__()
        torch.manual_seed(0)
        self.model = Inner()

    def forward(self, ids):
        return self.model(ids).logsumexp(-1).mean()

def make():
    return WithLoss(), (torch.arange(16) % 50,)
"""


def test_a_device_map_relative_to_the_model_inside_a_loss_wrapper(tmp_path, capsys):
    """The keys ``from_pretrained`` of the inner model expects: no ``model.`` prefix, the tied head included."""
    import importlib.util

    from accelerate.utils import check_device_map

    (tmp_path / "wrapped.py").write_text(WRAPPED)
    factory, out, plain = f"{tmp_path / 'wrapped.py'}:make", tmp_path / "map.json", tmp_path / "plain.json"
    assert main(["place", factory, "-c", "k80x4", "-p", "round_robin", "--device-map", str(plain)]) == 0
    assert "every key is under 'model': --device-map-root model writes them" in capsys.readouterr().out
    assert main(["place", factory, "-c", "k80x4", "-p", "round_robin", "--device-map", str(out),
                 "--device-map-root", "model"]) == 0
    assert "every key is under" not in capsys.readouterr().out
    wrapped, relative = json.loads(plain.read_text()), json.loads(out.read_text())
    assert len(set(relative.values())) > 1 and "head" in relative  # split, and the tied head has a device
    assert wrapped == {f"model.{k}": v for k, v in relative.items()}
    spec = importlib.util.spec_from_file_location("wrapped_models", tmp_path / "wrapped.py")
    models = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(models)
    check_device_map(models.Inner(), relative)  # accelerate's own check: every state-dict entry has a device

    for argv, message in [
        (["--device-map", str(tmp_path / "m.json"), "--device-map-root", "encoder"],
         "device_map root 'encoder': no parameter of graph 'make' lies under it (its top-level modules: model)"),
        (["--device-map-root", "model"], "--device-map-root needs --device-map"),
    ]:
        assert main(["place", factory, "-c", "k80x4", "-p", "round_robin", *argv]) == 2
        err = capsys.readouterr().err
        assert err == f"gnplace: error: {message}\n"
    assert not (tmp_path / "m.json").exists()


def test_a_device_map_root_that_leaves_state_out_is_refused_before_the_placement_file_is_written(tmp_path, capsys):
    """The check ran once the placer had run and ``-o`` was written over: the refused command lost the file."""
    kept = tmp_path / "p.json"
    kept.write_text('{"old": true}')
    argv = ["place", "gnplace.execute.examples:branchy", "-c", "k80x2", "-p", "heft", "-o", str(kept),
            "--device-map", str(tmp_path / "m.json"), "--device-map-root", "body.towers"]
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert err.startswith("gnplace: error: device_map root 'body.towers': 'body.head.") and err.count("\n") == 1
    assert kept.read_text() == '{"old": true}' and not (tmp_path / "m.json").exists()


def test_input_shapes_for_a_factory_are_refused_with_a_device_map_too(tmp_path, capsys):
    """The factory's step was loaded apart for the map, and ``--input-shape`` was dropped without a word."""
    for extra in ([], ["--device-map", str(tmp_path / "m.json")]):
        assert main(["place", "gnplace.execute.examples:tiny", "-c", "k80x2", "-p", "single",
                     "--input-shape", "x=4,8", *extra]) == 2
        assert "input shapes (--input-shape) apply to ONNX models only" in capsys.readouterr().err
    assert not (tmp_path / "m.json").exists()


def test_an_impossible_memory_budget_is_one_error_and_writes_nothing(tmp_path, capsys):
    tiny = tmp_path / "tiny.yaml"
    tiny.write_text("name: tiny\ndevices:\n  - {name: gpu, count: 2, kind: k80, memory: 1 KiB}\nlinks: {default: placeto}\n")
    target = tmp_path / "p.json"
    code = main(["place", str(EXAMPLES / "mlp2x8w2048b512.gnpg"), "-c", str(tiny), "-p", "heft", "-o", str(target)])
    assert code == 2 and not target.exists()
    err = capsys.readouterr().err
    assert err.startswith("gnplace: error: no placement of 'mlp2x8w2048b512' fits the memory of 'tiny': its parameters")
    assert err.count("\n") == 1


def test_json_stays_json_when_metis_prints_from_c(tmp_path):
    # on p100x16 METIS prints "***Cannot bisect a graph with 0 vertices!" from C; with stdout a pipe, C buffers it,
    # and it once came out ahead of the JSON document
    import subprocess
    import sys

    result = subprocess.run(
        [sys.executable, "-m", "gnplace.cli", "place", str(ROOT / "datasets" / "ptb" / "ptb_017.gnpg"),
         "-c", str(ROOT / "configs" / "clusters" / "p100x16.yaml"), "-p", "metis", "--json",
         "-o", str(tmp_path / "p.json")],
        capture_output=True, text=True, cwd=ROOT, timeout=120,
    )
    assert result.returncode == 0, result.stderr[-2000:]
    assert json.loads(result.stdout)["placer"] == "metis"


def test_the_zero_shot_script_places_with_the_placers_defaults_unless_told(capsys, load_script):
    """Flags left out take ``PolicyPlacer``'s defaults (the script kept copies of them, 4 constructor samples)."""
    from gnplace.rl.zeroshot import DEFAULT_CONSTRUCTOR_SAMPLES, PolicyPlacer

    script = load_script("place")
    graph = str(ROOT / "datasets" / "examples" / "mlp2x8w2048b512.gnpg")
    assert script.main([graph, "-c", "k80x2", "--samples", "4", "--json"]) == 0
    row = json.loads(capsys.readouterr().out)
    placer = PolicyPlacer(samples=4)
    placer.place(load_graph(graph), load_cluster("k80x2"), seed=0)
    assert row["evaluations"] == placer.last_evaluations
    assert script.main([graph, "-c", "k80x2", "--samples", "4", "--constructor-samples", "4", "--json"]) == 0
    fewer = json.loads(capsys.readouterr().out)["evaluations"]
    assert fewer == row["evaluations"] - 2 * (DEFAULT_CONSTRUCTOR_SAMPLES - 4)  # two constructors, two devices


@pytest.mark.parametrize("command", [["place"], ["bench", "zeroshot"]])
def test_the_help_states_the_placers_defaults(command, capsys, load_script):
    """What ``--help`` says a flag left out means is what the placer does (the bench said 4 samples after 16 came)."""
    from gnplace.rl import zeroshot

    script = load_script(command[0])
    with pytest.raises(SystemExit):
        script.main([*command[1:], "--help"])
    text = " ".join(capsys.readouterr().out.split())
    for flag, default in (("--constructor-samples", zeroshot.DEFAULT_CONSTRUCTOR_SAMPLES),
                          ("--constructor-temperature", zeroshot.DEFAULT_CONSTRUCTOR_TEMPERATURE),
                          ("--refine", zeroshot.DEFAULT_REFINE),
                          ("--constructor-refine", zeroshot.DEFAULT_CONSTRUCTOR_REFINE),
                          ("--constructor-prior", zeroshot.DEFAULT_CONSTRUCTOR_PRIOR),
                          ("--last-rounds", zeroshot.DEFAULT_LAST_ROUNDS),
                          ("--polish", zeroshot.DEFAULT_POLISH),
                          ("--polish-ops", zeroshot.DEFAULT_POLISH_OPS)):
        said = text.split(f"{flag} ")[-1].split("(default: ")[1].split(")")[0]
        shown = f"{default:g}" if isinstance(default, float) else str(default)  # 5120000, not 5.12e+06
        assert said.split(", ")[-1].split(";")[0] == shown, flag


@pytest.mark.parametrize("under", ["", "sub"])
def test_a_search_folder_that_is_a_file_is_refused_before_the_search(tmp_path, capsys, monkeypatch, under):
    """``-O ppo.out=FILE`` failed only after the whole search had run ("FILE/logs: Not a directory")."""
    import gnplace.cli.place as place_cli

    def never(*args, **kwargs):
        raise AssertionError("the placer was made before its out folder was checked")

    monkeypatch.setattr(place_cli, "make_placer", never)
    file = tmp_path / "file"
    file.write_bytes(b"kept")
    out = file / under if under else file
    code = main(["place", str(EXAMPLES / "mlp2x8w2048b512.gnpg"), "-c", "k80x2", "-p", "ppo", "--budget", "40",
                 "-O", f"ppo.out={out}"])
    err = capsys.readouterr().err
    assert code == 2 and err.startswith("gnplace: error: -O ppo.out ") and err.count("\n") == 1
    assert file.read_bytes() == b"kept"


@pytest.mark.parametrize(("flag", "name"), [("-o", "last.ckpt"), ("--device-map", "last.ckpt"),
                                            ("-o", "logs/version_0/metrics.csv")])
def test_an_output_file_among_the_searchs_own_is_refused(tmp_path, capsys, monkeypatch, flag, name):
    """``-O ppo.out=D -o D/last.ckpt`` wrote the placement over the search's checkpoint (resume then refused it)."""
    import gnplace.cli.place as place_cli

    def never(*args, **kwargs):
        raise AssertionError("the placer was made before its outputs were checked")

    monkeypatch.setattr(place_cli, "make_placer", never)
    code = main(["place", str(EXAMPLES / "mlp2x8w2048b512.gnpg"), "-c", "k80x2", "-p", "ppo", "--budget", "40",
                 "-O", f"ppo.out={tmp_path}", flag, str(tmp_path / name)])
    err = capsys.readouterr().err
    assert code == 2 and err.count("\n") == 1, err
    assert f"is where the search writes its {name.split('/')[0]} (-O ppo.out=" in err, err
    assert not (tmp_path / name).exists()


@pytest.mark.parametrize("placer", ["ppo", "finetune"])
def test_a_search_folder_holding_a_run_names_the_option_that_set_it(tmp_path, capsys, placer):
    """Through ``place`` the search's messages said "use another -o", the placement file's flag there."""
    (tmp_path / "last.ckpt").write_bytes(b"an earlier run")
    extra = ["--checkpoint", str(ROOT / "checkpoints" / "gnplace-base.ckpt")] if placer == "finetune" else []
    code = main(["place", str(EXAMPLES / "mlp2x8w2048b512.gnpg"), "-c", "k80x2", "-p", placer, "--budget", "40",
                 *extra, "-O", f"{placer}.out={tmp_path}"])
    err = capsys.readouterr().err
    assert code == 2 and err.count("\n") == 1, err
    assert err.endswith(f"holds a run already (last.ckpt): resume it (-O {placer}.resume=true), or use another "
                        f"-O {placer}.out\n"), err
    assert (tmp_path / "last.ckpt").read_bytes() == b"an earlier run"


@pytest.mark.parametrize("shipped", ["gnplace-base.ckpt", "gnplace-construct.ckpt"])
def test_an_output_over_a_shipped_checkpoint_is_refused(shipped, tmp_path, monkeypatch, capsys):
    """``policy`` reads them by default: -o and --device-map wrote placement JSON over them, exit 0."""
    import shutil

    import gnplace.shipped

    shutil.copytree(ROOT / "checkpoints", tmp_path / "checkpoints")  # copies: a failure must not spoil the real ones
    monkeypatch.setattr(gnplace.shipped, "CHECKOUT", tmp_path)
    target = tmp_path / "checkpoints" / shipped
    before = target.read_bytes()
    for flag in ("-o", "--device-map"):
        assert main(["place", "datasets/examples/mlp2x8w2048b512.gnpg", "-c", "k80x2", "-p", "single", flag,
                     str(target)]) == 2
        assert f"is the input {shipped}" in capsys.readouterr().err
    assert target.read_bytes() == before


def test_place_imports_a_model_with_the_optimizer_given_and_a_graph_file_keeps_its_own(tmp_path, capsys, load_script):
    """Every module:factory was imported with SGD: an Adam model's state was missing from the predicted memory."""
    from gnplace.execute.examples import tiny

    peaks = {}
    for optimizer in ("sgd", "adam"):
        assert main(["place", "gnplace.execute.examples:tiny", "-c", "k80x2", "-p", "single", "--optimizer",
                     optimizer, "--json"]) == 0
        peaks[optimizer] = sum(d["peak_memory_bytes"] for d in json.loads(capsys.readouterr().out)["devices"])
    param_bytes = sum(p.numel() * p.element_size() for p in tiny()[0].parameters())
    assert peaks["adam"] == peaks["sgd"] + 2 * param_bytes  # Adam's two moments beside each parameter
    graph_file = str(EXAMPLES / "mlp1x8w6144b256.gnpg")  # an SGD graph
    assert main(["place", graph_file, "-c", "k80x2", "-p", "single", "--optimizer", "sgd"]) == 0
    capsys.readouterr()
    for run in (lambda argv: main(["place", *argv]), load_script("place").main):
        assert run([graph_file, "-c", "k80x2", "--optimizer", "adam"]) == 2
        err = capsys.readouterr().err
        assert err.count("\n") == 1 and "its update ops are sgd's (sgd_update), not adam's" in err


def test_an_option_the_placer_does_not_take_is_one_line_naming_it_before_the_graph_is_read(tmp_path, capsys):
    """``--algo reinforce`` for m_etf was ``ListSchedulingPlacer.__init__() got an unexpected keyword argument``."""
    absent = str(tmp_path / "absent.gnpg")  # not read: the option is refused first
    assert main(["place", absent, "-c", "k80x2", "-p", "m_etf", "--algo", "reinforce"]) == 2
    assert capsys.readouterr().err == ("gnplace: error: placer 'm_etf' does not take these options: algo (--algo); "
                                       "it takes: memory_aware, min_speed (shared: timer)\n")
    assert main(["place", absent, "-c", "k80x2", "-p", "heft", "-O", "heft.colour=red", "-O", "heft.min_speed=0.5"]) == 2
    assert capsys.readouterr().err == ("gnplace: error: placer 'heft' does not take these options: colour; "
                                       "it takes: memory_aware, min_speed (shared: timer)\n")


@pytest.mark.skipif(not Path("/proc").is_dir(), reason="needs /proc, a folder no file can be made in")
def test_a_device_map_that_cannot_be_written_leaves_the_placement_file_as_it_was(tmp_path, capsys):
    from gnplace.cli import main

    old = tmp_path / "p.json"
    old.write_text("OLD")
    code = main(["place", str(ROOT / "datasets" / "real" / "resnet50.gnpg"), "-c", "k80x2", "-o", str(old),
                 "--device-map", "/proc/gnplace_map.json"])
    err = capsys.readouterr().err
    assert code == 2 and err.count("\n") == 1 and "/proc/gnplace_map.json" in err, err
    assert old.read_text() == "OLD"


def _outputs_naming(tmp_path, capsys, graph_name: str, cluster_yaml: str) -> dict[str, str]:
    """What ``place``, ``simulate`` and ``inspect`` print of a graph named ``graph_name`` on the cluster file given."""
    from gnplace.graph_io import save_graph
    from gnplace.toy import chain_graph

    graph = chain_graph(4).replace(name=graph_name)
    save_graph(graph, tmp_path / "g.gnpg")
    (tmp_path / "c.yaml").write_text(cluster_yaml)
    outputs = {}
    for command in (["place", "-p", "round_robin"], ["simulate", "-p", "single"], ["inspect"]):
        assert main([command[0], str(tmp_path / "g.gnpg"), "-c", str(tmp_path / "c.yaml"), *command[1:]]) == 0
        outputs[command[0]] = capsys.readouterr().out
    return outputs


def test_names_holding_terminal_escapes_print_escaped(tmp_path, capsys):
    """A shared graph named with ESC's sequences (a cluster's, its devices' too) retitled and cleared the terminal."""
    outputs = _outputs_naming(tmp_path, capsys, "g\x1b]0;title\x07\r",
                              'name: "c\\e[2J"\ndevices:\n  - {name: "gpu\\x9b", count: 2, kind: k80}\n'
                              "links: {default: pcie3}\n")
    for command, out in outputs.items():
        assert not set(out) & {"\x1b", "\x07", "\r", "\x9b"}, command
        assert "g\\x1b]0;title\\x07\\x0d" in out and "c\\x1b[2J" in out and "gpu\\x9b0" in out, command


def test_names_holding_line_breaks_print_on_one_line(tmp_path, capsys):
    """A graph, cluster or device named with a newline split the header lines and the device table's rows."""
    outputs = _outputs_naming(tmp_path, capsys, "g\nh\u2028i\x85j",
                              'name: "c\\nd\\u2029e"\ndevices:\n  - {name: "gp\\nu", count: 2, kind: k80}\n'
                              "links: {default: pcie3}\n")
    for command, out in outputs.items():
        lines = out.splitlines()  # splits at \u2028, \u2029 and \x85 too
        assert any(line.startswith("g\\x0ah\\u2028i\\x85j") for line in lines), (command, lines)
        assert any("c\\x0ad\\u2029e" in line for line in lines) and any("gp\\x0au0" in line for line in lines), command


def test_policy_shows_its_stages_on_stderr_and_no_progress_shows_nothing(capsys, monkeypatch):
    """``-p policy`` ran 23-75 s silent on 100,000-op graphs; stdout (``--json``) is the same with or without lines."""
    import sys

    import gnplace.progress

    monkeypatch.setattr(gnplace.progress, "LINE_EVERY_S", 0.0)  # a line at every update, as a log file gets
    monkeypatch.setattr(sys.stderr, "isatty", lambda: False, raising=False)
    graph = EXAMPLES / "mlp2x8w2048b512.gnpg"
    args = ["place", str(graph), "-c", "k80x2", "-p", "policy", "-O", "policy.polish=20", "--json"]
    assert main(args) == 0
    out, err = capsys.readouterr()
    lines = err.splitlines()
    assert lines and all(line.startswith("policy mlp2x8w2048b512: ") for line in lines)
    assert any(line.endswith("; coarsening") for line in lines) and any(line.endswith("; polish") for line in lines)
    assert main([*args, "--no-progress"]) == 0
    quiet, nothing = capsys.readouterr()
    assert nothing == ""
    shown, hidden = json.loads(out), json.loads(quiet)
    assert {**shown, "place_seconds": 0} == {**hidden, "place_seconds": 0}


def test_the_zero_shot_script_times_each_placement_of_a_one_op_graph_once(tmp_path, capsys, load_script):
    """It timed 1,432 placements of a one-op graph, which has 2 on two devices."""
    from gnplace.graph_io import save_graph
    from gnplace.toy import chain_graph

    script = load_script("place")
    save_graph(chain_graph(1), tmp_path / "one.gnpg")
    for samples in ("0", "16"):
        assert script.main([str(tmp_path / "one.gnpg"), "-c", "k80x2", "--samples", samples, "--json"]) == 0
        row = json.loads(capsys.readouterr().out)
        assert row["choice"] == "every placement" and row["evaluations"] == 2 and row["greedy"] is None
        assert row["policy"] == row["auto"] and not row["oom"]
        assert script.main([str(tmp_path / "one.gnpg"), "-c", "k80x2", "--samples", samples]) == 0
        out = capsys.readouterr().out  # auto's placement is one of the two: among those timed, samples or none
        assert "(every placement: the fastest of 2 placements simulated, auto's included)" in out


def test_the_device_map_step_printed_is_that_of_the_map_written(tmp_path, capsys):
    """The simulated step of ``device_map`` is the map in the file, read back as a placement (keys relative to
    ``--device-map-root`` made full again), with the blocks it keeps whole (no op reads two devices)."""
    from gnplace.execute.device_map import cross_device_reads, from_device_map
    from gnplace.importers.sources import load_step_source
    from gnplace.sim.simulator import Simulator

    (tmp_path / "wrapped.py").write_text(WRAPPED)
    factory, out = f"{tmp_path / 'wrapped.py'}:make", tmp_path / "map.json"
    assert main(["place", factory, "-c", "k80x4", "-p", "round_robin", "--device-map", str(out),
                 "--device-map-root", "model", "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    written = {(f"model.{key}" if key else "model"): value for key, value in json.loads(out.read_text()).items()}
    graph = load_step_source(factory, optimizer="sgd")[0].graph
    cluster = load_cluster("k80x4")
    assert cross_device_reads(graph, cluster, written, root="model") == []
    step = Simulator().time(graph, cluster, from_device_map(graph, cluster, written)).step_time
    assert report["device_map_step_s"]["device_map"] == pytest.approx(step, rel=1e-12)


def test_a_device_map_over_memory_says_so(tmp_path, capsys):
    """A cluster too small for the model: the map's step is marked, its JSON says so, a warning names the devices."""
    from gnplace.cli import main

    cluster = tmp_path / "small.yaml"
    cluster.write_text("name: small\ndevices:\n  - {name: gpu, count: 2, kind: k80, memory: 4 MiB}\nlinks:\n"
                       "  default: pcie3\n")
    args = ["place", "gnplace.execute.examples:mlp", "-c", str(cluster), "-p", "single", "--device-map",
            str(tmp_path / "map.json")]
    assert main(args) == 0
    out, err = capsys.readouterr()
    assert "device_map" in out.split("simulated step times:\n", 1)[1].splitlines()[1]
    assert out.split("simulated step times:\n", 1)[1].splitlines()[1].endswith("OUT OF MEMORY")
    assert "is over memory" in err
    assert main([*args, "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["device_map_oom"] is True


@pytest.mark.parametrize("placer", ["ppo", "policy"])
def test_no_progress_and_an_option_that_asks_for_it_are_refused_as_differing(tmp_path, capsys, placer):
    """``--no-progress -O ppo.progress=true`` showed no bar: --no-progress won without a word."""
    graph = str(EXAMPLES / "mlp2x8w2048b512.gnpg")
    budget = ["--budget", "60"] if placer == "ppo" else []
    assert main(["place", graph, "-c", "k80x2", "-p", placer, *budget, "--no-progress", "-O",
                 f"{placer}.progress=true", "-o", str(tmp_path / "p.json")]) == 2
    assert capsys.readouterr().err == (f"gnplace: error: --no-progress and -O {placer}.progress=true differ: "
                                       "give one\n")
    assert not (tmp_path / "p.json").exists()


def test_fine_tuning_says_when_its_budget_left_the_zero_shot_placement_untimed(tmp_path, capsys):
    """``place -p finetune --budget 60`` skipped the zero-shot candidate (53 evaluations on two devices and a batch
    more) without a word, where ``gnplace finetune`` says so: the 'never worse than zero-shot' promise did not hold."""
    graph = str(EXAMPLES / "mlp2x8w2048b512.gnpg")
    common = ["place", graph, "-c", "k80x2", "-p", "finetune", "--no-progress", "--seed", "0"]
    assert main([*common, "--budget", "60"]) == 0
    out = capsys.readouterr().out
    assert "  zero-shot placement not timed: its candidates and one PPO batch need --budget " in out
    assert main([*common, "--budget", "100"]) == 0
    assert "zero-shot" not in capsys.readouterr().out


def test_a_device_of_one_op_is_counted_in_the_singular(tmp_path, capsys):
    """The per-device line said "gpu0 1 ops / 3.81 MiB"."""
    path = save_graph(chain_graph(1), tmp_path / "one.gnpg")
    assert main(["place", str(path), "-c", "k80x2", "-p", "single"]) == 0
    assert "  gpu0 1 op / 3.81 MiB, gpu1 0 ops / 0 B" in capsys.readouterr().out.splitlines()


def test_a_device_map_of_a_graph_file_says_the_blocks_a_model_keeps_whole_may_be_split(tmp_path, capsys):
    """A graph file keeps no module and so no _no_split_modules: t5_small.gnpg's map split T5Block into its layers
    without a word. A MODULE:FACTORY's map, which reads them, says nothing of it."""
    graph = str(ROOT / "datasets" / "real" / "t5_small.gnpg")
    assert main(["place", graph, "-c", "k80x2", "-p", "m_etf", "--device-map", str(tmp_path / "a.json")]) == 0
    assert "from a graph file, which keeps no module: a block the model keeps on one device (its " \
           "_no_split_modules) may be split; place MODULE:FACTORY" in capsys.readouterr().out
    assert main(["place", "gnplace.execute.examples:branchy", "-c", "k80x4", "-p", "auto", "--device-map",
                 str(tmp_path / "b.json")]) == 0
    assert "from a graph file" not in capsys.readouterr().out
