"""Every script's ``--help``: each option says what it does and its default, as ``gnplace``'s own do."""

from __future__ import annotations

from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


class _Parsed(Exception):
    """Raised instead of parsing: carries the parser a script built."""


def test_every_option_of_every_script_has_help_that_states_its_default(load_script, monkeypatch):
    """``gnplace``'s options are held to it (``tests/cli/test_main.py``), the scripts' were not: bench.py's
    subcommands had dozens of options without help (sim's --ops, search's --budget, ...) and others that left their
    default unsaid (scale's --full-up-to, exact's --groups, finetune's --ft-lr, fidelity's --placements), train.py
    about 30 without help (every LearnerConfig flag), make_datasets.py's --out, --families, --count and --seed none,
    and demo.py --baselines' --mode none, its --clusters, --budget and --exact-time no default."""
    import argparse

    from tests.cli.test_main import _unhelpful

    def capture(parser, *args, **kwargs):
        raise _Parsed(parser)

    monkeypatch.setattr(argparse.ArgumentParser, "parse_args", capture)
    monkeypatch.setattr(argparse.ArgumentParser, "parse_known_args", capture)
    # every script with a main (report.py has none: its parser is bench.py's report subcommand, reached below)
    scripts = sorted(p.stem for p in (ROOT / "scripts").glob("*.py") if "\ndef main(" in p.read_text())
    assert {"bench", "demo", "finetune", "make_datasets", "place", "pretrain", "train"} <= set(scripts)
    parsers = {}
    for script in scripts:
        for argv in ([], ["--baselines"]) if script == "demo" else ([],):  # demo --baselines: a parser of its own
            with pytest.raises(_Parsed) as parsed:
                load_script(script).main(argv)
            parsers[" ".join([script, *argv])] = parsed.value.args[0]
    subcommands = next(a for a in parsers["bench"]._actions if isinstance(a, argparse._SubParsersAction)).choices
    assert {"sim", "zeroshot", "fidelity", "report"} <= set(subcommands)  # the walk reaches report.py's options
    found = {name: _unhelpful(parser) for name, parser in parsers.items()}
    assert found == dict.fromkeys(parsers, ([], [])), {name: f for name, f in found.items() if f != ([], [])}
