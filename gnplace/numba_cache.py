"""numba's cache folder where it would have none: a package installed read-only, run with no writable home.

numba caches a kernel compiled with ``cache=True`` beside its source, in the user's cache folder or in
``NUMBA_CACHE_DIR``; where none can be written, the first kernel's decoration fails and ``import gnplace``
with it. ``import gnplace`` calls :func:`ensure_numba_cache` before the modules that hold kernels. (A module of
its own, so that ``python -m gnplace.warmup`` does not find its module imported already by the package.)
"""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

__all__ = ["ensure_numba_cache", "KERNEL_FOLDERS"]

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
    """
    from numba.core import config
    from numba.misc.appdirs import AppDirs

    given = getattr(config, "CACHE_DIR", "")  # (set from the environment when numba loads: stubs lack it)
    package = Path(__file__).resolve().parent
    if given and _writable(given):
        return None
    if all(_writable(package / sub / "__pycache__") for sub in KERNEL_FOLDERS):
        return None
    if _writable(AppDirs(appname="numba", appauthor=False).user_cache_dir):
        return None
    try:
        folder = Path(tempfile.gettempdir()) / f"gnplace-numba-{os.getuid() if hasattr(os, 'getuid') else 'user'}"
    except OSError:  # no usable temporary folder either: numba's own error stands
        return None
    if not _own_folder(folder):
        return None
    os.environ["NUMBA_CACHE_DIR"] = str(folder)
    config.CACHE_DIR = str(folder)  # type: ignore[attr-defined]  # numba read the environment when it loaded
    return str(folder)
