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
