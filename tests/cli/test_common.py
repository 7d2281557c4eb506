"""Helpers shared by the subcommands: resolving ``--placer`` and formatting seconds and bytes."""

from __future__ import annotations

import sys

import pytest

from gnplace.cli.common import check_output_folder, counted, parse_placer_options, resolve_placement
from gnplace.cluster import load_cluster
from gnplace.exceptions import InvalidArgument, InvalidPlacement, UnknownName
from gnplace.placement import Placement, save_placement
from gnplace.placers.registry import make_placer
from gnplace.placers.round_robin import RoundRobinPlacer
from gnplace.toy import chain_graph, fork_graph, layered_graph


def test_registered_name_runs_that_placer():
    g, c = chain_graph(5), load_cluster("k80x2")
    name, placement = resolve_placement(g, c, "round_robin")
    assert name == "round_robin"
    assert placement == RoundRobinPlacer().place(g, c)
    assert placement.devices.tolist() == [0, 1, 0, 1, 0]


def test_seed_budget_and_options_are_passed_to_the_placer():
    """The placement is the placer's own under the same seed, budget and options, and another seed changes it."""
    g, c = layered_graph(30, seed=0), load_cluster("k80x4")
    kwargs = {"budget": 16, "options": {"start": None}}  # no deterministic start: the random draws decide
    _, a = resolve_placement(g, c, "random_search", seed=3, **kwargs)
    _, b = resolve_placement(g, c, "random_search", seed=4, **kwargs)
    assert a == make_placer("random_search", budget=16, start=None).place(g, c, seed=3)
    assert a != b


def test_placement_file_is_read_back(tmp_path):
    g, c = chain_graph(4), load_cluster("k80x2")
    written = Placement([1, 1, 0, 1], c)
    path = save_placement(tmp_path / "mine.json", g, written, placer="hand")
    name, placement = resolve_placement(g, c, str(path))
    assert name == "mine.json"  # the file name, not its path
    assert placement == written and placement.cluster is c


def test_existing_file_without_json_suffix_is_a_placement_file(tmp_path):
    g, c = chain_graph(3), load_cluster("k80x2")
    path = save_placement(tmp_path / "placement.txt", g, Placement([0, 1, 1], c))
    name, placement = resolve_placement(g, c, str(path))
    assert name == "placement.txt" and placement.devices.tolist() == [0, 1, 1]


def test_missing_json_file_is_not_taken_for_a_placer_name(tmp_path):
    g, c = chain_graph(3), load_cluster("k80x2")
    with pytest.raises(InvalidPlacement, match="no such placement file"):
        resolve_placement(g, c, str(tmp_path / "absent.json"))


def test_placement_file_of_another_graph_is_rejected(tmp_path):
    c = load_cluster("k80x2")
    path = save_placement(tmp_path / "p.json", chain_graph(3), Placement([0, 1, 1], c))
    with pytest.raises(InvalidPlacement, match="op 'op0' is not in graph 'fork'"):
        resolve_placement(fork_graph(), c, str(path))


def test_unknown_placer_name_lists_the_choices():
    with pytest.raises(UnknownName, match=r"unknown placer 'magic' \(choose one of: .*round_robin"):
        resolve_placement(chain_graph(2), load_cluster("k80x2"), "magic")


def test_a_file_named_like_a_placer_does_not_hide_the_placer(tmp_path, monkeypatch):
    from gnplace.cli.common import resolve_placement
    from gnplace.cluster import load_cluster
    from gnplace.toy import chain_graph

    monkeypatch.chdir(tmp_path)
    (tmp_path / "single").write_text("not a placement")
    name, placement = resolve_placement(chain_graph(3), load_cluster("k80x2"), "single")
    assert name == "single" and len(placement.devices) == 3


@pytest.mark.parametrize("text", ["nan", "NaN", "inf", "-inf", "+Infinity", "[0.5, nan]", "[.inf]"])
def test_a_non_finite_option_value_is_refused_as_such(text):
    """``nan`` and ``inf`` stayed strings (YAML 1.1 spells them .nan, .inf): the placer said "wrong type"."""
    with pytest.raises(InvalidArgument, match="value must be a finite number"):
        parse_placer_options([f"ppo.prior={text}"], ["ppo"])


def test_an_option_value_nested_thousands_deep_is_one_error():
    """A RecursionError traceback from the YAML parser."""
    with pytest.raises(InvalidArgument, match="value nested too deep to be a YAML scalar"):
        parse_placer_options(["annealing.start=" + "[" * 5000], ["annealing"])


def test_exponent_notation_inside_a_list_is_a_number():
    """``[1e-1, 0.5]`` kept '1e-1' a string, which the policy placer refused as a temperature."""
    assert parse_placer_options(["policy.temperatures=[1e-1, 0.5]"], ["policy"]) == {
        "policy": {"temperatures": [0.1, 0.5]}}
    with pytest.raises(InvalidArgument, match="value must be a number, string, boolean or list"):
        parse_placer_options(["policy.temperatures=[{a: 1}]"], ["policy"])


def test_an_output_folder_under_a_file_is_refused(tmp_path):
    """``FILE/sub`` was accepted, and a run failed to make it only once its work was done."""
    file = tmp_path / "file"
    file.write_text("kept")
    for path in (file, file / "sub", file / "sub" / "deeper"):
        with pytest.raises(InvalidArgument, match="--out"):
            check_output_folder(path)
    check_output_folder(tmp_path / "new" / "deeper")  # missing folders are made when written


def _checkpoint(tmp_path, name, data):
    import torch

    path = tmp_path / name
    torch.save(data, path)
    return str(path)


def test_a_checkpoint_without_a_format_is_called_what_it_is_not_a_policy_checkpoint(tmp_path):
    """A foreign ``torch.save`` of a dict was reported as a 'gnplace-policy' checkpoint placeto cannot read."""
    from gnplace.cli.common import checkpoint_readers
    from gnplace.exceptions import InvalidCheckpoint

    path = _checkpoint(tmp_path, "foreign.ckpt", {"a": 1})
    with pytest.raises(InvalidCheckpoint) as info:
        checkpoint_readers(path, ["placeto", "heft"])
    message = str(info.value)
    assert message.startswith(f"--checkpoint {path}: records no \"format\" and is not a training run's checkpoint")
    assert "gnplace-policy" not in message and message.endswith("these take one: placeto (gnplace-placeto)")
    # a training run's last.ckpt records none either, and is a policy checkpoint
    run = _checkpoint(tmp_path, "last.ckpt", {"state_dict": {}, "gnplace": {"iteration": 1}})
    assert checkpoint_readers(run, ["policy", "placeto"]) == ["policy"]


@pytest.mark.parametrize("found", [5, "", None, ["gnplace-policy"]])
def test_a_checkpoint_whose_format_is_not_a_name_is_malformed(tmp_path, found):
    """A format of 5 read "is a 5 checkpoint"; an empty one passed as a policy checkpoint."""
    from gnplace.cli.common import checkpoint_readers
    from gnplace.exceptions import InvalidCheckpoint

    path = _checkpoint(tmp_path, "odd.ckpt", {"format": found, "state_dict": {}})
    with pytest.raises(InvalidCheckpoint, match=rf"^--checkpoint {path}: records a malformed \"format\", "
                                                rf"{type(found).__name__} .*\(expected a name such as 'gnplace-policy'\)"):
        checkpoint_readers(path, ["policy"])


@pytest.mark.parametrize("command", [["inspect"], ["simulate", "-c", "k80x2"]])
def test_json_output_parses_when_the_users_factory_prints(tmp_path, monkeypatch, capsys, command):
    """A MODULE:FACTORY that prints while it loads, builds or runs put its lines on stdout before the ``{``."""
    import json

    from gnplace.cli import main

    module = f"chatty_{command[0]}"  # (imported once per process: "loading" prints once)
    (tmp_path / f"{module}.py").write_text(
        "import torch\n"
        "print('loading')\n"
        "class M(torch.nn.Module):\n"
        "    def __init__(self):\n"
        "        super().__init__()\n"
        "        self.l = torch.nn.Linear(4, 2)\n"
        "    def forward(self, x):\n"
        "        print('forward')\n"
        "        return self.l(x).sum()\n"
        "def make():\n"
        "    print('making')\n"
        "    return M(), (torch.randn(2, 4),)\n"
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    assert main([command[0], f"{module}:make", *command[1:], "--json"]) == 0
    out, err = capsys.readouterr()
    assert json.loads(out)["graph"] and "loading" in err and "making" in err
    assert main([command[0], f"{module}:make", *command[1:]]) == 0  # without --json, stdout is the user's as before
    assert "making" in capsys.readouterr().out


def test_json_output_parses_when_c_code_writes_to_stdout(tmp_path):
    """What C code writes to file descriptor 1 (``printf``, ``os.write(1, ...)``) went past ``sys.stdout``."""
    import json
    import subprocess
    import sys

    (tmp_path / "c_chatty.py").write_text(
        "import ctypes, os, torch\n"
        "def make():\n"
        "    os.write(1, b'raw fd write\\n')\n"
        "    libc = ctypes.CDLL(None)\n"
        "    libc.printf(b'buffered printf\\n')\n"
        "    return torch.nn.Linear(4, 2), (torch.randn(2, 4),), lambda y: y.sum()\n"
    )
    run = subprocess.run([sys.executable, "-m", "gnplace", "inspect", "c_chatty:make", "--json"], cwd=tmp_path,
                         capture_output=True, text=True, timeout=300)
    assert run.returncode == 0, run.stderr
    assert json.loads(run.stdout)["graph"]
    assert "raw fd write" in run.stderr and "buffered printf" in run.stderr


@pytest.mark.parametrize("value", ["2024-13-45", "9" * 5000])
def test_an_option_value_yamls_own_builders_cannot_read_is_one_error(value):
    """PyYAML's date and int builders raise a plain ValueError: it was a traceback, exit 1."""
    with pytest.raises(InvalidArgument, match=r"^--option 'heft.min_speed=.*': a value YAML cannot read \("):
        parse_placer_options([f"heft.min_speed={value}"], ["heft"])


def test_print_json_writes_non_finite_numbers_as_null(capsys):
    """``--json`` printed ``"speedup_vs_single": Infinity`` (finetune over a 0 s reference): not JSON."""
    import json

    from gnplace.cli.common import print_json

    print_json({"speedup_vs_single": float("inf"), "ratio": float("nan"), "step_time_s": 0.0})
    out = capsys.readouterr().out
    assert json.loads(out, parse_constant=lambda name: pytest.fail(f"{name} in --json")) == \
        {"speedup_vs_single": None, "ratio": None, "step_time_s": 0.0}


def test_run_reporting_errors_is_typed_as_the_run_it_calls():
    """``run`` was ``Any``; it is called with the parsed arguments and its result read as the exit status."""
    import inspect

    from gnplace.cli.common import run_reporting_errors

    assert inspect.signature(run_reporting_errors).parameters["run"].annotation == \
        "Callable[[argparse.Namespace], int | None]"


def test_a_cluster_list_names_each_cluster_once(tmp_path, monkeypatch):
    """Spaces around a name and empty items are dropped; a cluster named twice, a file by two paths too, is one."""
    from gnplace.cli.common import cluster_list

    (tmp_path / "c.yaml").write_text("x")
    monkeypatch.chdir(tmp_path)
    assert cluster_list("k80x2, k80x4,,k80x2 ") == ["k80x2", "k80x4"]
    assert cluster_list(f"c.yaml,{tmp_path / 'c.yaml'}") == [str(tmp_path / "c.yaml")]
    assert cluster_list(" , ") == []


def test_a_blank_option_value_is_kept_blank_not_read_as_null():
    """YAML reads " " as null, a placer's default: ``-O ppo.out=" "`` ran a search with no folder, exit 0."""
    assert parse_placer_options(["ppo.out= ", "ppo.resume="], ["ppo"]) == {"ppo": {"out": " ", "resume": ""}}
    assert parse_placer_options(["ppo.out=~"], ["ppo"]) == {"ppo": {"out": None}}  # null, said as YAML says it


def _gnplace_with_closed(stream: str, *args: str, cwd):
    """``python -m gnplace ARGS`` with its stdout (``>&-``) or stderr (``2>&-``) closed; the other one captured."""
    import os
    import subprocess
    import sys
    from pathlib import Path

    root = Path(__file__).resolve().parents[2]
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(root), os.environ.get("PYTHONPATH")]))}
    close = ">&-" if stream == "stdout" else "2>&-"
    return subprocess.run(["sh", "-c", f'exec "$@" {close}', "sh", sys.executable, "-m", "gnplace", *args], cwd=cwd,
                          env=env, capture_output=True, text=True, timeout=300)


def test_a_closed_stdout_drops_the_output_and_the_command_still_succeeds(tmp_path):
    """``>&-`` made every command end in a traceback (``'NoneType' object has no attribute 'flush'``), status 1."""
    from pathlib import Path

    graph = str(Path(__file__).resolve().parents[2] / "datasets" / "examples" / "mlp1x8w6144b256.gnpg")
    run = _gnplace_with_closed("stdout", "place", graph, "-c", "k80x2", "-p", "heft", "-o", "placed.json",
                               cwd=tmp_path)
    assert (run.returncode, run.stderr) == (0, "")
    assert (tmp_path / "placed.json").is_file()
    run = _gnplace_with_closed("stdout", "simulate", graph, "-c", "k80x2", "-p", "heft", "--json", cwd=tmp_path)
    assert (run.returncode, run.stderr) == (0, "")  # the JSON was printed on stderr, then the traceback


def test_a_closed_stderr_keeps_the_error_off_stdout(tmp_path):
    """``2>&-`` sent ``gnplace: error: ...`` to stdout: ``print(file=sys.stderr)`` prints on stdout when it is None."""
    from pathlib import Path

    graph = str(Path(__file__).resolve().parents[2] / "datasets" / "examples" / "mlp1x8w6144b256.gnpg")
    run = _gnplace_with_closed("stderr", "place", graph, "-c", "no_such_cluster", "--json", cwd=tmp_path)
    assert (run.returncode, run.stdout) == (2, "")


@pytest.mark.parametrize("columns", ["0", "00"])
def test_a_width_of_zero_columns_prints_the_tables_at_80(monkeypatch, capsys, columns):
    """``COLUMNS=0`` (a container's terminal that reports no size): rich took it as it was and printed nothing."""
    from gnplace.cli.common import stdout_console

    monkeypatch.setenv("COLUMNS", columns)
    console = stdout_console()
    assert console.width == 80
    console.print("step time 1.000 ms")
    assert capsys.readouterr().out == "step time 1.000 ms\n"
    assert stdout_console(width=150).width == 150


def test_simulate_prints_its_table_where_columns_is_zero(monkeypatch, capsys):
    from pathlib import Path

    from gnplace.cli import main

    monkeypatch.setenv("COLUMNS", "0")
    graph = str(Path(__file__).resolve().parents[2] / "datasets" / "examples" / "mlp1x8w6144b256.gnpg")
    assert main(["simulate", graph, "-c", "k80x2", "-p", "heft"]) == 0
    out = capsys.readouterr().out
    assert "step time 401.094 ms" in out and "gpu1" in out


def test_a_line_longer_than_the_width_is_printed_whole(monkeypatch, capsys, tmp_path):
    """rich broke text at the width (80 in a file): ``timeline written to PATH`` came out with PATH in pieces."""
    from pathlib import Path

    from gnplace.cli import main

    monkeypatch.delenv("COLUMNS", raising=False)
    graph = str(Path(__file__).resolve().parents[2] / "datasets" / "examples" / "mlp1x8w6144b256.gnpg")
    chart = tmp_path / ("a_folder_name_long_enough_to_pass_the_width_" * 2) / "timeline.png"
    chart.parent.mkdir()
    assert main(["simulate", graph, "-c", "k80x2", "-p", "heft", "--timeline", str(chart)]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert f"timeline written to {chart}" in lines
    assert any(line.startswith("step time ") and line.endswith("step/bound 1.591") for line in lines)
    assert max(len(line) for line in lines if line.startswith(("┃", "│"))) <= 80  # the table still fits


def test_a_deleted_current_folder_is_named_as_the_cause(tmp_path):
    """``place -o rel.json`` run in a folder deleted since: ``gnplace: error: [Errno 2] No such file or directory``."""
    import os
    import subprocess
    import sys
    from pathlib import Path

    root = Path(__file__).resolve().parents[2]
    graph = str(root / "datasets" / "examples" / "mlp1x8w6144b256.gnpg")
    gone = tmp_path / "gone"
    gone.mkdir()
    script = f'cd {gone} && rmdir {gone} && exec "$@"'
    env = {**os.environ, "PYTHONPATH": str(root)}
    done = subprocess.run(["sh", "-c", script, "sh", sys.executable, "-m", "gnplace", "place", graph, "-c", "k80x2",
                           "-p", "heft", "-o", "rel.json"], env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 2
    assert done.stderr == ("gnplace: error: the current folder no longer exists (deleted since it was entered): "
                           "change to another one\n")


def test_a_nameless_missing_file_where_the_current_folder_exists_is_told_as_it_is():
    from gnplace.cli.common import describe_os_error

    assert describe_os_error(FileNotFoundError(2, "No such file or directory")) == \
        "[Errno 2] No such file or directory"


def test_a_name_the_output_encoding_lacks_prints_escaped_from_every_entry_point(monkeypatch):
    """``PYTHONIOENCODING=ascii python scripts/place.py G -c clüster.yaml``: a UnicodeEncodeError traceback (only
    the ``gnplace`` command's main escaped such names; the scripts share :func:`run_reporting_errors`)."""
    import argparse
    import io
    import sys

    from gnplace.cli.common import run_reporting_errors

    raw = io.BytesIO()
    monkeypatch.setattr(sys, "stdout", io.TextIOWrapper(raw, encoding="ascii"))

    def run(args):
        print("mlp on clüster_中 by heft")
        return 0

    assert run_reporting_errors(run, argparse.Namespace(), "place") == 0
    sys.stdout.flush()
    assert raw.getvalue() == b"mlp on cl\\xfcster_\\u4e2d by heft\n"


def test_an_undecodable_byte_of_a_name_prints_as_the_shell_spells_it(tmp_path):
    r"""A file name that is not UTF-8 ($'nope\xff.gnpg') printed with Python's surrogate: nope\udcff.gnpg."""
    import os
    import subprocess
    import sys
    from pathlib import Path

    import gnplace
    from gnplace.cli.common import ESCAPED

    assert "g\udcff, cl\xfcster \u2192".encode("ascii", ESCAPED) == b"g\\xff, cl\\xfcster \\u2192"
    root = str(Path(gnplace.__file__).resolve().parents[1])
    done = subprocess.run([sys.executable.encode(), b"-m", b"gnplace.cli", b"inspect", b"nope\xff.gnpg"],
                          capture_output=True, cwd=tmp_path,
                          env={**os.environ, "PYTHONPATH": os.pathsep.join([root, os.environ.get("PYTHONPATH", "")]),
                               "PYTHONIOENCODING": "utf-8"})
    assert done.returncode == 2
    assert done.stderr == b"gnplace: error: nope\\xff.gnpg: no such graph file\n"


def test_printable_name_escapes_every_line_break():
    from gnplace.cli.common import markup_name, printable_name

    breaks = "\n\r\x0b\x0c\x1c\x1d\x1e\x85\u2028\u2029"
    assert len(printable_name(f"a{breaks}b").splitlines()) == 1
    assert printable_name("a\nb\u2028c\té") == "a\\x0ab\\u2028c\té"
    assert markup_name("[red]\n") == "\\[red]\\x0a"


@pytest.mark.parametrize("script, argv", [("place", ["--help"]), ("demo", ["--help"]), ("demo", ["--baselines", "--help"]),
                                          ("bench", ["--help"]), ("finetune", ["--help"]), ("pretrain", ["--help"]),
                                          ("make_datasets", ["--help"]), ("train", ["--help"])])
def test_the_scripts_name_themselves_whatever_sys_argv_holds(load_script, monkeypatch, capsys, script, argv):
    """With ``sys.argv == []`` (an embedded interpreter) argparse's default name was an IndexError; in another program
    the usage named that program (``usage: pytest ...``)."""
    main = load_script(script).main
    monkeypatch.setattr(sys, "argv", [])
    with pytest.raises(SystemExit) as stop:
        main(argv)
    assert stop.value.code == 0
    assert capsys.readouterr().out.startswith(f"usage: {script}.py ")


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="counts this process's descriptors in /proc")
def test_a_closed_pipe_on_stdout_leaves_no_descriptor_open_in_a_program_that_ran_the_command(monkeypatch):
    """The pipe's descriptor is pointed at os.devnull; the one opened on os.devnull to copy from stayed open."""
    import os
    from pathlib import Path

    from gnplace.cli import main

    graph = str(Path(__file__).resolve().parents[2] / "datasets" / "examples" / "mlp1x8w6144b256.gnpg")
    reader, writer = os.pipe()
    os.close(reader)  # the reader went away (`| head`)
    out = open(writer, "w")  # noqa: SIM115 - closed below
    monkeypatch.setattr(sys, "stdout", out)
    before = len(os.listdir("/proc/self/fd"))
    try:
        assert main(["inspect", graph, "--json"]) == 141
        assert len(os.listdir("/proc/self/fd")) == before
    finally:
        out.close()


def test_a_whole_number_past_pythons_digits_is_refused_as_too_long_not_as_no_whole_number():
    """``--seed`` of 5,000 digits said "expected a whole number >= 0, got '<every digit>'": it is one."""
    import argparse

    from gnplace.cli.common import whole_number

    with pytest.raises(argparse.ArgumentTypeError, match=r"^5,000 digits: too many \(at most 4,300\)$"):
        whole_number("7" * 5000)
    with pytest.raises(argparse.ArgumentTypeError, match=r"^expected a whole number >= 0, got 'x1'$"):
        whole_number("x1")
    assert whole_number("12") == 12


def test_option_numbers_are_read_as_written():
    # YAML 1.1 read -O annealing.batch=010 as octal 8 and ran it; now the text is kept and the placer refuses it
    options = parse_placer_options(["annealing.batch=010", "annealing.max_block=1:30", "annealing.start=08"],
                                   ["annealing"])
    assert options == {"annealing": {"batch": "010", "max_block": "1:30", "start": "08"}}
    assert parse_placer_options(["annealing.batch=10"], ["annealing"]) == {"annealing": {"batch": 10}}


@pytest.mark.parametrize("flag, name", [("-o", "loop"), ("--device-map", "loop"), ("-o", "loop/p.json")])
def test_an_output_through_a_symlink_loop_is_one_error_line(tmp_path, capsys, flag, name):
    """pathlib's ``resolve()`` reports a link loop as a ``RuntimeError`` before Python 3.13: it was a traceback, exit 1."""
    from gnplace.cli import main
    from gnplace.graph_io import save_graph

    graph = save_graph(chain_graph(3), tmp_path / "chain.gnpg")
    (tmp_path / "loop").symlink_to(tmp_path / "back")
    (tmp_path / "back").symlink_to(tmp_path / "loop")
    assert main(["place", str(graph), "-c", "k80x2", "-p", "single", flag, str(tmp_path / name)]) == 2
    err = capsys.readouterr().err
    assert err.startswith("gnplace: error: ") and err.count("\n") == 1 and "Traceback" not in err, err
    assert "Too many levels of symbolic links" in err and str(tmp_path / "loop") in err, err


def test_a_count_at_either_bound_is_accepted_and_one_past_it_refused():
    from gnplace.cli.common import check_count

    check_count(5, "--jobs", minimum=5, maximum=5)
    check_count(None, "--jobs", minimum=5, maximum=5)  # not given
    with pytest.raises(InvalidArgument, match=r"^--jobs must be at least 5, got 4$"):
        check_count(4, "--jobs", minimum=5, maximum=5)
    with pytest.raises(InvalidArgument, match=r"^--jobs must be at most 5, got 6$"):
        check_count(6, "--jobs", minimum=5, maximum=5)


def test_a_count_of_one_takes_the_singular():
    """The summaries said "1 ops", "1 groups" and "1 graphs x 1 clusters x 1 placers"."""
    assert [counted(n, "op") for n in (0, 1, 2)] == ["0 ops", "1 op", "2 ops"]
