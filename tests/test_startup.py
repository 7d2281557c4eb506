"""What ``import gnplace`` settles first: numba's thread count, and a command's Ctrl-C during its imports."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

import gnplace
from gnplace.exceptions import InvalidArgument
from gnplace.startup import MAX_THREADS, check_thread_settings, command_name

ROOT = Path(gnplace.__file__).resolve().parents[1]


@pytest.mark.parametrize("given", ["0", "-3", "abc", "", "1.5", str(MAX_THREADS + 1), "100000"])
def test_a_thread_count_numba_cannot_use_is_refused(monkeypatch, given):
    monkeypatch.setenv("NUMBA_NUM_THREADS", given)
    with pytest.raises(InvalidArgument, match=rf"^NUMBA_NUM_THREADS={given!r}: numba's thread count must be a whole "
                       rf"number from 1 to {MAX_THREADS}; "):
        check_thread_settings()


@pytest.mark.parametrize("given", ["1", " 2 ", str(MAX_THREADS)])
def test_a_thread_count_numba_can_use_is_kept(monkeypatch, given):
    monkeypatch.setenv("NUMBA_NUM_THREADS", given)
    check_thread_settings()


@pytest.mark.parametrize(("argv", "orig_argv", "name"), [
    (["/venv/bin/gnplace", "place"], ["/venv/bin/python", "/venv/bin/gnplace", "place"], "gnplace"),
    (["-m", "place"], ["python", "-X", "importtime", "-m", "gnplace", "place"], "gnplace"),
    (["-m"], ["python", "-mgnplace.cli"], "gnplace"),
    (["-m"], ["python", "-m", "gnplace.warmup"], "gnplace"),
    (["-m"], ["python", "-m", "gnplace.toy"], None),
    ([str(ROOT / "scripts" / "place.py"), "g.gnpg"], ["python", "scripts/place.py", "g.gnpg"], "place"),
    (["my_program.py"], ["python", "my_program.py"], None),
    (["-c"], ["python", "-c", "import gnplace", "-m", "gnplace"], None),
    ([], [], None),
])
def test_command_name_is_the_command_the_process_runs(monkeypatch, argv, orig_argv, name):
    monkeypatch.setattr(sys, "argv", argv)
    monkeypatch.setattr(sys, "orig_argv", orig_argv)
    assert command_name() == name


def _run(args: list[str], tmp_path: Path, *, stop_numba: bool = True, **env: str) -> subprocess.CompletedProcess[str]:
    """``python ARGS``, with a sitecustomize that stops the first import of numba as a Ctrl-C then would."""
    (tmp_path / "sitecustomize.py").write_text("" if not stop_numba else textwrap.dedent("""\
        import sys

        class StopAtNumba:
            def find_spec(self, name, path=None, target=None):
                if name == "numba":
                    raise KeyboardInterrupt
                return None

        sys.meta_path.insert(0, StopAtNumba())
    """))
    paths = os.pathsep.join([str(tmp_path), str(ROOT), os.environ.get("PYTHONPATH", "")])
    return subprocess.run([sys.executable, *args], capture_output=True, text=True, cwd=tmp_path,
                          env={**os.environ, "PYTHONPATH": paths, **env})


@pytest.mark.parametrize(("args", "prog"), [
    (["-m", "gnplace", "--version"], "gnplace"),
    (["-m", "gnplace.cli", "place", "g.gnpg", "-c", "k80x2"], "gnplace"),
    (["-m", "gnplace.warmup"], "gnplace"),  # make install's compile
    ([str(ROOT / "scripts" / "place.py"), "g.gnpg"], "place"),
])
def test_a_ctrl_c_during_a_commands_imports_is_one_line_and_130(tmp_path, args, prog):
    """Ctrl-C while the package imported numba (the first second of any command) printed Python's traceback."""
    done = _run(args, tmp_path)
    assert done.stderr == f"{prog}: interrupted\n"
    assert done.returncode in (130, -signal.SIGINT)  # Python ends with SIGINT's status: 130 in a shell


def test_a_ctrl_c_during_a_programs_import_of_gnplace_is_its_own(tmp_path):
    """A program of the user's that imports gnplace handles (or reports) its Ctrl-C as before."""
    done = _run(["-c", "import gnplace"], tmp_path)
    assert done.stderr.startswith("Traceback") and done.stderr.endswith("KeyboardInterrupt\n")


def test_a_thread_count_numba_cannot_use_is_one_line_and_2_for_a_command(tmp_path):
    """NUMBA_NUM_THREADS=0 was numba's ValueError traceback at import gnplace."""
    done = _run(["-m", "gnplace.cli", "--version"], tmp_path, NUMBA_NUM_THREADS="0")
    assert done.returncode == 2
    assert done.stderr == (f"gnplace: error: NUMBA_NUM_THREADS='0': numba's thread count must be a whole number from 1 "
                           f"to {MAX_THREADS}; set it to one, or unset it for one thread per core\n")


def test_numbas_warning_about_a_setting_it_cannot_read_is_one_line_for_a_command(tmp_path):
    """NUMBA_OPT=abc printed numba's warning with the traceback of its parse in it, at every command."""
    done = _run(["-m", "gnplace.cli", "--version"], tmp_path, stop_numba=False, NUMBA_OPT="abc")
    assert done.returncode == 0 and done.stdout == f"gnplace {gnplace.__version__}\n"
    assert done.stderr == ("gnplace: warning: Environment variable 'NUMBA_OPT' is defined but its associated value "
                           "'abc' could not be parsed.\n")
