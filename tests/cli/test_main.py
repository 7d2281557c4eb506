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
