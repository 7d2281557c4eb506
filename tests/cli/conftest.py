"""Fixtures of the command-line tests."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture()
def two_hosts(tmp_path):
    """``two_hosts(argv, timeout_s)``: ``gnplace ARGV -o host<rank>`` as ranks 1 and 0 of two "hosts".

    Each process gets torch.distributed's variables by hand (``MASTER_ADDR``, ``MASTER_PORT``, ``RANK``,
    ``WORLD_SIZE``), as ``torchrun`` on two machines gives them, and its own output folder; ``GNPLACE_DIST_TIMEOUT``
    is ``timeout_s``. Returns ``(exit codes, stderr texts, seconds)``, rank 1's first.
    """
    def run(argv: list[str], timeout_s: int = 200) -> tuple[list[int], list[str], float]:
        with socket.socket() as free:
            free.bind(("127.0.0.1", 0))
            port = free.getsockname()[1]
        env = {**os.environ, "MASTER_ADDR": "127.0.0.1", "MASTER_PORT": str(port), "WORLD_SIZE": "2",
               "GNPLACE_DIST_TIMEOUT": str(timeout_s),
               "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")])}
        start = time.perf_counter()
        ranks = [subprocess.Popen([sys.executable, "-m", "gnplace", *argv, "-o", str(tmp_path / f"host{rank}")],
                                  env={**env, "RANK": str(rank)}, cwd=ROOT, stderr=subprocess.PIPE, text=True)
                 for rank in (1, 0)]
        try:
            errors = [rank.communicate(timeout=150)[1] for rank in ranks]
        finally:
            for rank in ranks:
                rank.kill()
        return [rank.returncode for rank in ranks], errors, time.perf_counter() - start

    return run
