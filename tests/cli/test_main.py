"""The ``gnplace`` command itself: its version and its subcommands."""

from __future__ import annotations

import pytest

import gnplace
from gnplace.cli import SUBCOMMANDS, build_parser, main


def test_version_prints_the_package_version_and_exits_0(capsys):
    with pytest.raises(SystemExit) as stop:
        main(["--version"])
    assert stop.value.code == 0
    assert capsys.readouterr().out == f"gnplace {gnplace.__version__}\n"


def test_every_subcommand_is_listed_in_the_help():
    text = build_parser().format_help()
    for name in ("simulate", "place", "evaluate", "inspect", "generate", "import", "pretrain", "finetune", "profile"):
        assert f"    {name} " in text
    assert len(SUBCOMMANDS) == 9


@pytest.mark.parametrize("module", ["gnplace", "gnplace.cli"])
def test_python_dash_m_runs_the_command(module):
    import subprocess
    import sys

    done = subprocess.run([sys.executable, "-m", module, "--version"], capture_output=True, text=True)
    assert done.returncode == 0 and done.stdout == f"gnplace {gnplace.__version__}\n"
    done = subprocess.run([sys.executable, "-m", module, "place", "missing.gnpg", "-c", "k80x2"], capture_output=True,
                          text=True)
    assert done.returncode == 2 and done.stderr.startswith("gnplace: error: ")


class _Parsed(Exception):
    """Raised instead of parsing: carries the parser a script built."""


def _options(parser) -> list:
    """The options (argparse actions) of ``parser`` and of its subcommands' parsers, all the way down."""
    import argparse

    found = []
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for sub in action.choices.values():
                found += _options(sub)
        elif action.option_strings:
            found.append(action)
    return found


def test_every_command_and_script_spells_its_output_jobs_and_seed_options_alike(load_script, monkeypatch):
    """pretrain took no -o for --out nor -j for --jobs, nor did demo.py, train.py, make_datasets.py and bench.py's
    subcommands, where evaluate, generate, finetune and profile take both (docs/outputs.md): ``-o`` failed there.
    generate, make_datasets.py, train.py and bench.py vs-search read --seed as any int, the others as a whole number
    (>= 0: "argument --seed: expected a whole number >= 0, got -1")."""
    import argparse

    from gnplace.cli.common import whole_number

    parsers = [build_parser()]

    def capture(parser, *args, **kwargs):
        parsers.append(parser)
        raise _Parsed

    monkeypatch.setattr(argparse.ArgumentParser, "parse_args", capture)
    for script in ("bench", "demo", "train", "make_datasets", "place", "pretrain", "finetune"):
        with pytest.raises(_Parsed):
            load_script(script).main([])
    options = [action for parser in parsers for action in _options(parser)]
    outputs = [a.option_strings for a in options if {"--out", "--output"} & set(a.option_strings)]
    jobs = [a.option_strings for a in options if "--jobs" in a.option_strings]
    seeds = [a for a in options if "--seed" in a.option_strings]
    assert len(outputs) >= 20 and len(jobs) >= 8 and len(seeds) >= 12  # the walk found them
    assert [names for names in outputs if "-o" not in names] == []
    assert [names for names in jobs if "-j" not in names] == []
    assert [a.option_strings for a in seeds if a.type is not whole_number] == []


def test_main_called_from_a_program_leaves_its_streams_as_they_were(tmp_path, monkeypatch):
    """It reconfigured ``sys.stdout`` and ``sys.stderr`` to escape what their encoding lacks and left them so."""
    import io
    import sys

    out = io.TextIOWrapper(io.BytesIO(), encoding="ascii", errors="strict")
    err = io.TextIOWrapper(io.BytesIO(), encoding="ascii", errors="strict")
    monkeypatch.setattr(sys, "stdout", out)
    monkeypatch.setattr(sys, "stderr", err)
    assert main(["place", str(tmp_path / "caf\xe9.gnpg"), "-c", "k80x2"]) == 2
    assert (out.errors, err.errors) == ("strict", "strict")
    err.flush()
    assert b"caf\\xe9.gnpg" in err.buffer.getvalue()  # escaped while it ran
    monkeypatch.setattr(sys, "stdout", None)  # a closed stdout (`>&-`) is written to os.devnull while it runs
    assert main(["place", str(tmp_path / "missing.gnpg"), "-c", "k80x2"]) == 2
    assert sys.stdout is None


def _unhelpful(parser) -> tuple[list[str], list[str]]:
    """The options of ``parser`` (subcommands' included) without help, and those whose help does not state a default.

    A default of none, ``False`` or ``[]`` (a flag, a list to add to) needs no words; ``0`` or ``0.0`` does (``--seed``).
    """
    import argparse

    missing, silent = [], []
    for action in _options(parser):
        if isinstance(action, (argparse._HelpAction, argparse._VersionAction)):
            continue
        name = "/".join(action.option_strings)
        if not action.help:
            missing.append(name)
        elif (action.default is not None and action.default is not False and action.default != []
              and not action.required and "default" not in action.help):
            silent.append(f"{name} (default {action.default!r})")
    return missing, silent


def test_every_option_of_every_subcommand_has_help_that_states_its_default():
    """--help must say what each option does and what it is when not given: evaluate's, finetune's and profile's
    --seed and generate's --optimizer had no help at all, and evaluate's --clusters (k80x2,k80x4), --split and
    --mode, place's --budget and --mode, finetune's --timer and profile's --placements (20) said no default."""
    import argparse

    missing, silent = _unhelpful(build_parser())
    assert missing == [], f"options without help: {missing}"
    assert silent == [], f"options whose help does not state their default: {silent}"
    parser = argparse.ArgumentParser()  # the check sees a default of 0 left unsaid (it took 0 for False)
    parser.add_argument("--seed", type=int, default=0, help="seed")
    parser.add_argument("--ratio", type=float, default=0.0, help="ratio")
    parser.add_argument("--quiet", action="store_true", help="say less")
    assert _unhelpful(parser) == ([], ["--seed (default 0)", "--ratio (default 0.0)"])


def test_each_commands_optimizer_help_names_what_it_imports_and_whether_it_runs_steps():
    """--optimizer's help came from one text: profile's said "imported from MODULE:FACTORY or ONNX" (it takes
    MODULE:FACTORY alone) and place, simulate and inspect's said of "real steps run" (they run none)."""
    import argparse

    commands = {}
    for action in build_parser()._actions:
        if isinstance(action, argparse._SubParsersAction):
            commands = action.choices
    helps = {name: next(a.help for a in _options(parser) if "--optimizer" in a.option_strings)
             for name, parser in commands.items() if name in ("place", "simulate", "inspect", "finetune", "profile")}
    assert len(helps) == 5
    for name, text in helps.items():
        assert ("ONNX" in text) == (name != "profile"), name
        assert "MODULE:FACTORY" in text, name
        assert ("a graph file keeps its own" in text) == (name != "profile"), name
        assert ("real steps run" in text) == (name in ("finetune", "profile")), name


def test_the_default_each_option_states_is_its_default():
    """The help stated a default beside the one argparse had (a mutant of finetune's --budget default of 100 passed the
    test above: its help still said 1000). Where the help names a value (not words: "the cores this process may run
    on"), it is the option's default."""
    import re

    checked = []
    for action in _options(build_parser()):
        said = re.search(r"\(default:? ([^);]*)", action.help or "")
        if said is None or isinstance(action.default, bool) or action.default in (None, ""):
            continue
        text = said.group(1)
        if isinstance(action.default, (int, float)):
            try:
                value = float(text.split(",")[0].split()[0].replace("_", ""))
            except ValueError:  # a default told in words
                continue
            assert value == action.default, (action.option_strings, text, action.default)
        elif isinstance(action.default, str):
            assert text == action.default or text.startswith(f"{action.default},"), (action.option_strings, text)
        checked.append(action.option_strings[0])
    assert {"--budget", "--lr", "--checkpoint-every", "--top", "--seed", "--clusters"} <= set(checked)
