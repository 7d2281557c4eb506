"""numba's cache folder where it would have none: a package installed read-only, run with no writable home.

numba caches a kernel compiled with ``cache=True`` beside its source, in the user's cache folder or in
``NUMBA_CACHE_DIR``; where none can be written, the first kernel's decoration fails and ``import gnplace``
with it. ``import gnplace`` calls :func:`ensure_numba_cache` before the modules that hold kernels. (A module of
its own, so that ``python -m gnplace.warmup`` does not find its module imported already by the package.)

numba reads a kernel from the package's ``__pycache__`` only where it can write there too: a package installed
and warmed up (``python -m gnplace.warmup``) by one user and run by another, who cannot write it (a system-wide
install, a container image run as another user), compiled every kernel again on its first command (17 s of CPU,
44 s on the 2-core VM, for ``gnplace place -p heft``), in each new container, whose temporary folder is empty.
:func:`ensure_numba_cache` copies the kernels the package holds into the folder numba uses instead.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import tempfile
from pathlib import Path

__all__ = ["ensure_numba_cache", "seed_cache", "KERNEL_FOLDERS"]

#: The package's folders that hold numba kernels (``cache=True``), relative to the package.
KERNEL_FOLDERS = (".", "sim", "placers", "rl")


def _writable(folder: str | Path) -> bool:
    """Whether a file can be made in ``folder`` (made if missing), as numba checks a cache folder it may use."""
    try:
        os.makedirs(folder, exist_ok=True)
        tempfile.TemporaryFile(dir=folder).close()
    except OSError:
        return False
    return True


def _own_folder(folder: Path) -> bool:
    """Whether ``folder`` is made or found, a folder of this user's that others cannot write in (the cache is code)."""
    try:
        folder.mkdir(mode=0o700, exist_ok=True)
        found = folder.lstat()
    except OSError:
        return False
    import stat

    ours = not hasattr(os, "getuid") or found.st_uid == os.getuid()
    return stat.S_ISDIR(found.st_mode) and ours and not found.st_mode & 0o022 and _writable(folder)


def ensure_numba_cache() -> str | None:
    """Give numba a cache folder under the temporary folder where it has no writable one; returns it, or None.

    numba caches a kernel compiled with ``cache=True`` in ``NUMBA_CACHE_DIR`` (where set), else beside its source
    (``__pycache__``), else in the user's cache folder (``~/.cache/numba``); where none of these could be written
    (a package installed read-only, run by a user whose home is not writable: a container's arbitrary user) the
    first kernel's decoration failed with ``RuntimeError: cannot cache function ...: no locator available``, and
    ``import gnplace`` with it. Then the kernels are cached in ``gnplace-numba-UID`` under the temporary folder
    (``tempfile.gettempdir()``; a folder of this user's, which others cannot write in), set as ``NUMBA_CACHE_DIR``
    for this process and those it starts. None where numba had a folder, or where the temporary one fails too.

    Where numba caches elsewhere than the package's ``__pycache__`` (``NUMBA_CACHE_DIR``, the user's cache folder,
    the temporary one), the kernels compiled into the package at its install are copied there first
    (:func:`seed_cache`): numba does not read the package's folders where it cannot write them.
    """
    from numba.core import config
    from numba.misc.appdirs import AppDirs

    given = getattr(config, "CACHE_DIR", "")  # (set from the environment when numba loads: stubs lack it)
    package = Path(__file__).resolve().parent
    installed = Path(os.path.abspath(os.path.dirname(__file__)))  # as numba names it: not resolved
    if given and _writable(given):
        seed_cache(installed, given)
        return None
    if all(_writable(package / sub / "__pycache__") for sub in KERNEL_FOLDERS):
        return None
    user_wide = AppDirs(appname="numba", appauthor=False).user_cache_dir
    if _writable(user_wide):
        seed_cache(installed, user_wide)
        return None
    try:
        folder = Path(tempfile.gettempdir()) / f"gnplace-numba-{os.getuid() if hasattr(os, 'getuid') else 'user'}"
    except OSError:  # no usable temporary folder either: numba's own error stands
        return None
    if not _own_folder(folder):
        return None
    os.environ["NUMBA_CACHE_DIR"] = str(folder)
    config.CACHE_DIR = str(folder)  # type: ignore[attr-defined]  # numba read the environment when it loaded
    seed_cache(installed, folder)
    return str(folder)


def seed_cache(package: str | Path, cache_dir: str | Path) -> int:
    """Copy the kernels compiled into ``package``'s ``__pycache__`` folders to numba's ``cache_dir``; returns the files.

    numba caches a kernel of ``package/sub/module.py`` in ``cache_dir/sub_HASH`` (``HASH`` of the folder's path)
    where it uses ``NUMBA_CACHE_DIR`` or the user's cache folder, and reads the package's ``__pycache__`` only where
    it could write there. An index (``.nbi``) that ``cache_dir`` lacks is copied with its data files (``.nbc``), the
    index last and each file under a temporary name first, so that a process starting beside this one finds a whole
    kernel or none; one ``cache_dir`` holds already is left as it is (numba compiles again what does not match the
    source). A folder that cannot be read or written is passed over: numba then compiles, as it did.

    Args:
        package (str or Path): the package's folder, as numba names its modules' files (absolute, not resolved).
        cache_dir (str or Path): the folder numba caches in.

    Examples:
        >>> import tempfile
        >>> with tempfile.TemporaryDirectory() as empty, tempfile.TemporaryDirectory() as cache:
        ...     seed_cache(empty, cache)
        0
    """
    copied = 0
    for sub in KERNEL_FOLDERS:
        folder = os.path.normpath(os.path.join(package, sub))
        tree = os.path.join(folder, "__pycache__")
        try:
            names = os.listdir(tree)
        except OSError:
            continue
        indexes = sorted(name for name in names if name.endswith(".nbi"))
        if not indexes:
            continue
        from numba.core.caching import _CacheLocator  # (where there is a kernel to copy: numba names its folder)

        target = os.path.join(cache_dir, _CacheLocator.get_suitable_cache_subpath(os.path.join(folder, "_.py")))
        try:
            os.makedirs(target, exist_ok=True)
            present = set(os.listdir(target))
        except OSError:
            continue
        for index in indexes:
            if index in present:
                continue
            stem = index.removesuffix(".nbi") + "."
            data = sorted(name for name in names if name.startswith(stem) and name.endswith(".nbc"))
            try:
                for name in [*data, index]:  # the index last: a process that finds it finds its data
                    _copy(os.path.join(tree, name), os.path.join(target, name))
            except OSError:
                continue
            copied += len(data) + 1
    return copied


def _copy(source: str, destination: str) -> None:
    """Copy ``source`` to ``destination`` under a temporary name first, then rename it (no half-written file)."""
    handle, temporary = tempfile.mkstemp(dir=os.path.dirname(destination), suffix=".tmp")
    os.close(handle)
    try:
        shutil.copyfile(source, temporary)
        os.replace(temporary, destination)
    except OSError:
        with contextlib.suppress(OSError):
            os.unlink(temporary)
        raise
