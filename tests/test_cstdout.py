"""``quiet_c_stdout``: what C writes to standard output inside is dropped, what comes after is kept."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from gnplace.cstdout import quiet_c_stdout

pytestmark = pytest.mark.skipif(sys.platform == "win32", reason="C's stdio through ctypes.CDLL(None)")

# C's stdout is fully buffered when it is not a terminal, unless Python runs unbuffered (-u, PYTHONUNBUFFERED):
# so a fresh interpreter without it, writing to a pipe, where a buffer the block left would come out after it
_SCRIPT = """
import ctypes, os
from gnplace.cstdout import quiet_c_stdout
libc = ctypes.CDLL(None)
print("before", flush=True)
with quiet_c_stdout():
    libc.printf(b"buffered by C\\n")
    os.write(1, b"written to fd 1\\n")
libc.fflush(None)
print("after", flush=True)
"""


def test_c_output_inside_is_dropped_and_output_after_is_kept():
    env = {k: v for k, v in os.environ.items() if k != "PYTHONUNBUFFERED"}
    result = subprocess.run([sys.executable, "-c", _SCRIPT], capture_output=True, text=True, env=env, timeout=60)
    assert result.returncode == 0, result.stderr[-2000:]
    assert result.stdout == "before\nafter\n"


def test_fd_1_is_given_back_after_an_exception(capfd):
    with pytest.raises(RuntimeError), quiet_c_stdout():
        raise RuntimeError("inside")
    os.write(1, b"still here\n")
    assert capfd.readouterr().out == "still here\n"


_THREADS = """
import os, threading
from gnplace.cstdout import quiet_c_stdout
inside, leave_first = threading.Event(), threading.Event()
def first():
    with quiet_c_stdout():
        inside.set()
        leave_first.wait()
def second():
    inside.wait()
    with quiet_c_stdout():  # enters while the first thread's redirection stands, leaves after it
        leave_first.set()
        a.join()
        os.write(1, b"dropped\\n")
a, b = threading.Thread(target=first), threading.Thread(target=second)
a.start(); b.start(); b.join()
os.write(1, b"after both\\n")
"""


def test_threads_inside_at_once_leave_standard_output_as_it_was():
    """A thread that entered while another's redirection stood saved /dev/null and restored it last: the process's
    standard output stayed in /dev/null for good (nothing printed after two threads' metis placements)."""
    done = subprocess.run([sys.executable, "-c", _THREADS], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout == "after both\n"



def test_a_closed_standard_output_is_left_closed():
    # `python prog.py >&-`: Python sets sys.stdout to None; a metis placement was an AttributeError ('flush')
    script = ("import os, sys\nfrom gnplace.cstdout import quiet_c_stdout\n"
              "os.close(1)\nsys.stdout = None\n"
              "with quiet_c_stdout():\n    pass\n"
              "os.write(1, b'fd 1 open again')\n")
    result = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=60)
    assert "AttributeError" not in result.stderr and "Bad file descriptor" in result.stderr, result.stderr[-2000:]


def test_a_standard_output_without_flush_is_written_as_before(monkeypatch):
    class WriteOnly:  # all that print needs; a metis placement was an AttributeError ('flush')
        def __init__(self):
            self.text = ""

        def write(self, text):
            self.text += text

    out = WriteOnly()
    monkeypatch.setattr("sys.stdout", out)
    with quiet_c_stdout():
        print("inside")
    assert out.text == "inside\n"
