"""``gnplace.numba_cache``: numba gets a cache folder of the user's where it would have none."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture
def no_numba_cache_folder(monkeypatch, tmp_path):
    """numba's folders (NUMBA_CACHE_DIR, the package's __pycache__, ~/.cache/numba) unwritable; tmp_path the temp one."""
    from numba.core import config

    from gnplace import numba_cache

    monkeypatch.setattr(config, "CACHE_DIR", "")
    monkeypatch.setenv("NUMBA_CACHE_DIR", "")
    monkeypatch.setattr(numba_cache, "_writable", lambda folder: Path(folder).is_relative_to(tmp_path))
    monkeypatch.setattr(numba_cache.tempfile, "tempdir", str(tmp_path))
    return tmp_path / f"gnplace-numba-{os.getuid()}"


def test_where_numba_has_no_writable_cache_folder_it_is_given_one_of_this_users_under_the_temporary_folder(
        no_numba_cache_folder):
    from numba.core import config

    from gnplace.numba_cache import ensure_numba_cache

    assert ensure_numba_cache() == str(no_numba_cache_folder)
    assert config.CACHE_DIR == os.environ["NUMBA_CACHE_DIR"] == str(no_numba_cache_folder)
    assert no_numba_cache_folder.stat().st_mode & 0o777 == 0o700


def test_a_temporary_cache_folder_others_can_write_in_is_not_used(no_numba_cache_folder):
    from numba.core import config

    from gnplace.numba_cache import ensure_numba_cache

    no_numba_cache_folder.mkdir(mode=0o777)
    no_numba_cache_folder.chmod(0o777)  # (past the umask) another user could have put code there
    assert ensure_numba_cache() is None
    assert config.CACHE_DIR == ""


def test_where_numba_has_a_cache_folder_it_is_left_alone(monkeypatch):
    from numba.core import config

    from gnplace.numba_cache import ensure_numba_cache

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


def test_seed_cache_copies_the_kernels_a_cache_folder_lacks_and_leaves_those_it_holds(tmp_path):
    """numba read the package's own compiled kernels only where it could write there: a user who could not (a
    system-wide install warmed up by root, a container run as another user) compiled each again on a first run."""
    from numba.core.caching import _CacheLocator

    from gnplace.numba_cache import seed_cache

    package, cache = tmp_path / "gnplace", tmp_path / "cache"
    tree = package / "sim" / "__pycache__"
    tree.mkdir(parents=True)
    for name in ("_kernel.f-10.py311.nbi", "_kernel.f-10.py311.1.nbc", "_kernel.f-10.py311.2.nbc",
                 "_kernel.g-20.py311.nbi", "_kernel.g-20.py311.1.nbc", "_kernel.cpython-311.pyc"):
        (tree / name).write_text(f"package's {name}")
    target = cache / _CacheLocator.get_suitable_cache_subpath(str(package / "sim" / "_kernel.py"))
    target.mkdir(parents=True)
    (target / "_kernel.g-20.py311.nbi").write_text("the user's own")  # compiled by the user: left as it is
    assert seed_cache(package, cache) == 3
    assert sorted(p.name for p in target.iterdir()) == ["_kernel.f-10.py311.1.nbc", "_kernel.f-10.py311.2.nbc",
                                                        "_kernel.f-10.py311.nbi", "_kernel.g-20.py311.nbi"]
    assert (target / "_kernel.f-10.py311.2.nbc").read_text() == "package's _kernel.f-10.py311.2.nbc"
    assert (target / "_kernel.g-20.py311.nbi").read_text() == "the user's own"
    assert seed_cache(package, cache) == 0  # all there: nothing copied again


@pytest.mark.skipif(not _can_mount_read_only(), reason="needs root and mount namespaces (unshare -m)")
def test_a_read_only_package_warmed_up_at_its_install_compiles_nothing_on_a_first_run(tmp_path):
    # the kernel compiled into the copy's __pycache__ (the install's warm-up), then the copy mounted read-only
    package = tmp_path / "site"
    shutil.copytree(ROOT / "gnplace", package / "gnplace", ignore=shutil.ignore_patterns("__pycache__"))
    env = {**os.environ, "PYTHONPATH": str(package), "HOME": str(package / "home"),
           "XDG_CACHE_HOME": str(package / "cache"), "TMPDIR": str(tmp_path), "NUMBA_DEBUG_CACHE": "1"}
    env.pop("NUMBA_CACHE_DIR", None)
    probe = ("import numpy as np; from gnplace.sim._kernel import longest_path; "
             "print(longest_path(np.zeros(1, np.int64), np.ones(1), np.zeros(2, np.int64), np.zeros(0, np.int64)))")
    warm = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, env=env, cwd=tmp_path,
                          timeout=300)
    assert warm.returncode == 0 and "data saved to" in warm.stdout, warm.stderr[-2000:]
    script = f'mount --bind {package} {package} && mount -o remount,bind,ro {package} && exec "$@"'
    done = subprocess.run(["unshare", "-m", "sh", "-c", script, "sh", sys.executable, "-c", probe],
                          capture_output=True, text=True, env=env, cwd=tmp_path, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.strip().endswith("1.0")
    assert "data loaded from" in done.stdout and "data saved to" not in done.stdout  # was: compiled again
