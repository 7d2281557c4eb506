"""``python -m gnplace.warmup``: it compiles the kernel signatures that placing with auto and the policy use."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]

#: In a process of its own (a dispatcher's signatures are per process): the signatures each numba kernel has after
#: the warm-up, then those that ``gnplace place`` with ``auto`` and ``policy`` added on a shipped graph.
_CHECK = """
import json, sys
import numba
import gnplace.coarsen, gnplace.placers._listsched_kernel, gnplace.rl._schedule, gnplace.sim._kernel
from gnplace.cli import main
from gnplace.warmup import main as warm_up_main

modules = [gnplace.coarsen, gnplace.placers._listsched_kernel, gnplace.rl._schedule, gnplace.sim._kernel]
kernels = {f"{m.__name__}.{n}": f for m in modules for n, f in vars(m).items()
           if isinstance(f, numba.core.dispatcher.Dispatcher)}
assert warm_up_main() == 0
before = {name: set(map(str, f.signatures)) for name, f in kernels.items()}
graph = sys.argv[1]
for placer in ("auto", "policy"):
    assert main(["place", graph, "-c", "k80x4", "-p", placer, "--json"]) == 0
added = {name: sorted(set(map(str, f.signatures)) - before[name]) for name, f in kernels.items()}
print(json.dumps({"compiled": sorted(n for n, s in before.items() if s),
                  "added": {n: s for n, s in added.items() if s}}))
"""


@pytest.mark.heavy
def test_after_the_warm_up_placing_with_auto_and_the_policy_compiles_nothing():
    graph = str(ROOT / "datasets" / "ptb" / "ptb_017.gnpg")
    done = subprocess.run([sys.executable, "-c", _CHECK, graph], capture_output=True, text=True, cwd=ROOT, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    report = json.loads(done.stdout.strip().splitlines()[-1])
    said = next(line for line in done.stderr.splitlines() if line.startswith("gnplace: compiled"))
    assert said.startswith("gnplace: compiled and cached the numba kernels of simulate, bound, heft, m_etf, m_sct, "
                           "coarsen, policy in ") and said.endswith(" s")
    assert {"gnplace.sim._kernel.simulate_step", "gnplace.sim._kernel.simulate_many",
            "gnplace.placers._listsched_kernel.heft_kernel", "gnplace.rl._schedule.decision_features",
            "gnplace.coarsen._acyclic_kernel"} <= set(report["compiled"])
    assert report["added"] == {}  # nothing left for the first command to compile



@pytest.fixture
def no_numba_cache_folder(monkeypatch, tmp_path):
    """numba's folders (NUMBA_CACHE_DIR, the package's __pycache__, ~/.cache/numba) unwritable; tmp_path the temp one."""
    from numba.core import config

    from gnplace import warmup

    monkeypatch.setattr(config, "CACHE_DIR", "")
    monkeypatch.setenv("NUMBA_CACHE_DIR", "")
    monkeypatch.setattr(warmup, "_writable", lambda folder: Path(folder).is_relative_to(tmp_path))
    monkeypatch.setattr(warmup.tempfile, "tempdir", str(tmp_path))
    return tmp_path / f"gnplace-numba-{os.getuid()}"


def test_where_numba_has_no_writable_cache_folder_it_is_given_one_of_this_users_under_the_temporary_folder(
        no_numba_cache_folder):
    from numba.core import config

    from gnplace.warmup import ensure_numba_cache

    assert ensure_numba_cache() == str(no_numba_cache_folder)
    assert config.CACHE_DIR == os.environ["NUMBA_CACHE_DIR"] == str(no_numba_cache_folder)
    assert no_numba_cache_folder.stat().st_mode & 0o777 == 0o700


def test_a_temporary_cache_folder_others_can_write_in_is_not_used(no_numba_cache_folder):
    from numba.core import config

    from gnplace.warmup import ensure_numba_cache

    no_numba_cache_folder.mkdir(mode=0o777)
    no_numba_cache_folder.chmod(0o777)  # (past the umask) another user could have put code there
    assert ensure_numba_cache() is None
    assert config.CACHE_DIR == ""


def test_where_numba_has_a_cache_folder_it_is_left_alone(monkeypatch):
    from numba.core import config

    from gnplace.warmup import ensure_numba_cache

    monkeypatch.setattr(config, "CACHE_DIR", "")
    assert ensure_numba_cache() is None  # the package's __pycache__ of a checkout
    assert config.CACHE_DIR == ""


def _can_mount_read_only() -> bool:
    if not hasattr(os, "geteuid") or os.geteuid() != 0 or shutil.which("unshare") is None:
        return False
    done = subprocess.run(["unshare", "-m", "sh", "-c", "mount --bind / /mnt && mount -o remount,bind,ro /mnt"],
                          capture_output=True, timeout=30)
    return done.returncode == 0


@pytest.mark.skipif(not _can_mount_read_only(), reason="needs root and mount namespaces (unshare -m)")
def test_a_package_installed_read_only_with_no_writable_home_imports_and_simulates(tmp_path):
    # a copy of the package with no compiled kernels, mounted read-only; HOME and XDG_CACHE_HOME inside it
    package = tmp_path / "site"
    shutil.copytree(ROOT / "gnplace", package / "gnplace", ignore=shutil.ignore_patterns("__pycache__"))
    script = (f"mount --bind {package} {package} && mount -o remount,bind,ro {package} && "
              f'exec "$@"')
    env = {**os.environ, "PYTHONPATH": str(package), "HOME": str(package / "home"),
           "XDG_CACHE_HOME": str(package / "cache"), "TMPDIR": str(tmp_path)}
    env.pop("NUMBA_CACHE_DIR", None)
    probe = ("import numpy as np; from gnplace.sim._kernel import longest_path; "
             "print(longest_path(np.zeros(1, np.int64), np.ones(1), np.zeros(2, np.int64), np.zeros(0, np.int64)))")
    done = subprocess.run(["unshare", "-m", "sh", "-c", script, "sh", sys.executable, "-c", probe],
                          capture_output=True, text=True, env=env, cwd=tmp_path, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]  # was: RuntimeError: cannot cache function '_push'
    assert done.stdout.strip() == "1.0"
    assert any((tmp_path / f"gnplace-numba-{os.getuid()}").iterdir())  # compiled once, for the next run
