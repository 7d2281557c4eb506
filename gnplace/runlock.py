"""One run at a time in an output folder: an advisory lock that gnplace's long runs take on their folder.

Two ``gnplace pretrain`` (or ``finetune``, or ``evaluate``) runs started into one folder both passed the
check for an earlier run (its checkpoint is written minutes in), then wrote their logs, checkpoints and
exported policy into the same files: one run's weights were exported under the other's config. The
first run now holds ``FOLDER/.gnplace.lock`` (``flock``, released by the kernel however the process
ends, ``kill -9`` included) and the second is refused at once with one line.

The file is removed when the run ends. One that another user's run made (not writable here) is locked read-only:
while that run holds it the second is refused as above, and once it was killed and left it the folder is taken over.
A process takes the lock of a folder once and may enter it again
(fine-tuning holds its folder, and the search it runs names the same folder); the ranks a launcher
starts (:func:`~gnplace.workers.is_launched_rank`) share their rank 0's run and take nothing.
"""

from __future__ import annotations

import contextlib
import errno
import functools
import inspect
import os
import stat
import warnings
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, TypeVar

from gnplace.exceptions import InvalidArgument

__all__ = ["LOCK_NAME", "folder_lock", "holds_folder"]

#: The lock file a run keeps in its output folder while it runs.
LOCK_NAME = ".gnplace.lock"

_held: set[str] = set()  # the real paths of the folders this process holds

#: What ``flock`` fails with on a filesystem that has no locks: Lustre mounted without ``-o flock`` (ENOSYS), NFS
#: without its lock daemon (ENOLCK), others (EOPNOTSUPP).
_NO_FLOCK = {errno.ENOSYS, errno.ENOLCK, errno.EOPNOTSUPP, getattr(errno, "ENOTSUP", errno.EOPNOTSUPP)}


class _NoFlock(Exception):
    """The lock file's filesystem has no ``flock``; ``reason`` is the system's word for it, ``fd`` the file, open."""

    def __init__(self, reason: str, fd: int) -> None:
        super().__init__(reason)
        self.reason = reason
        self.fd = fd

F = TypeVar("F", bound=Callable[..., Any])


@contextlib.contextmanager
def folder_lock(folder: str | os.PathLike[str], flag: str = "--out", *, slurm: bool = False) -> Iterator[None]:
    """Hold ``folder``'s run lock for the body (making the folder if it is missing).

    A folder this made is removed again when the body fails and leaves nothing in it, so that a refused
    run writes nothing. The lock file is an empty file; anything else under its name (a symbolic link, a
    file with content) is refused rather than locked and removed at the end.

    Args:
        folder (str or Path): the output folder.
        flag (str, optional): how the user names it, for the message (default: ``"--out"``).
        slurm (bool, optional): the tasks but 0 of a SLURM job step are ranks of this run too, as Lightning takes
            them for ``gnplace pretrain`` (:func:`~gnplace.workers.is_launched_rank`), and take nothing
            (default: False).

    Raises:
        InvalidArgument: if another process holds the lock (another run writes into ``folder``), the
            folder cannot be made, or its lock file's name is taken by something else; if ``folder`` is no
            ``str`` or ``os.PathLike``.

    Warns (:class:`UserWarning`, one line) where the folder's filesystem has no ``flock`` (Lustre mounted
    without ``-o flock``, NFS without its lock daemon): the body runs, but unlocked.
    """
    try:
        import fcntl
    except ImportError:  # no flock (Windows): runs are not kept apart
        yield
        return
    from gnplace.limits import as_path
    from gnplace.workers import is_launched_rank

    folder = as_path(folder, f"{flag} folder")  # finetune(out=3) was abspath's TypeError
    path = Path(os.path.abspath(folder))  # "a/../b" made "a" too, which a refusal could not remove
    key = os.path.realpath(path)
    if key in _held or is_launched_rank(slurm=slurm):  # held by this process already (its outer run lets go of it)
        yield
        return
    if path.exists() and not path.is_dir():
        raise InvalidArgument(f"{flag} {folder}: not a folder")
    made = _make_folders(path, folder, flag)  # those this run made: removed again if it is refused
    lock = path / LOCK_NAME
    try:
        fd = _locked(lock, fcntl)
    except _NoFlock as err:  # runs into this folder cannot be kept apart: said, and this one runs, unlocked
        warnings.warn(f"{flag} {folder}: its filesystem does not lock files (flock: {err.reason}), so another gnplace "
                      "run into this folder would not be refused: start one at a time there", stacklevel=3)
        fd = err.fd
    except OSError as err:
        _remove_made(made)
        raise InvalidArgument(f"{flag} {folder}: cannot write its lock file {LOCK_NAME} "
                              f"({err.strerror or err})") from None
    except BaseException:
        _remove_made(made)
        raise
    if fd is None:
        _remove_made(made)
        raise InvalidArgument(f"{flag} {folder}: another gnplace run is writing into this folder (it holds "
                              f"{LOCK_NAME}): wait for it to end, or use another folder")
    _held.add(key)
    failed = True
    try:
        yield
        failed = False
    finally:
        _held.discard(key)
        with contextlib.suppress(OSError):
            if _is_our_lock(lock, fd):  # (a file the run wrote over its name is not removed)
                lock.unlink()  # under the lock: a run that opened this file finds it gone and opens afresh
        os.close(fd)
        if failed:
            _remove_made(made)


def _make_folders(path: Path, folder: Any, flag: str) -> list[Path]:
    """Make ``path`` and its missing parents; return those this call made, deepest first.

    Another run may make one of them at the same moment: that one is not this run's to remove.

    Raises:
        InvalidArgument: if a folder cannot be made.
    """
    missing = []
    parent = path
    while not parent.exists() and parent != parent.parent:
        missing.append(parent)
        parent = parent.parent
    made: list[Path] = []
    for step in reversed(missing):
        try:
            os.mkdir(step)
        except FileExistsError:
            if not step.is_dir():  # a dangling link, or a file made meanwhile
                _remove_made(made[::-1])
                if step.is_symlink():  # "is not a folder" of a link to a folder that is not there: name the target
                    raise InvalidArgument(f"{flag} {folder}: {step} is a link to {os.readlink(step)}, which is not "
                                          "there: make that folder, or give another") from None
                raise InvalidArgument(f"{flag} {folder}: {step} is not a folder") from None
            continue
        except OSError as err:
            _remove_made(made[::-1])
            raise InvalidArgument(f"{flag} {folder}: cannot make the folder ({err.strerror or err})") from None
        made.append(step)
    return made[::-1]


def _remove_made(made: list[Path]) -> None:
    """Remove the folders ``made`` (deepest first) while they are empty: what a refused run made and left empty.

    A lock file is never removed here: a refused run does not hold it (the run that does may be writing there).
    """
    for folder in made:
        try:
            folder.rmdir()
        except OSError:  # something is there (another run's lock, its files): kept, and so are its parents
            return


def _is_our_lock(lock: Path, fd: int) -> bool:
    """Whether the file named ``lock`` (not followed, if a link) is the one open as ``fd``."""
    return os.stat(lock, follow_symlinks=False).st_ino == os.fstat(fd).st_ino


def _locked(lock: Path, fcntl: Any) -> int | None:
    """A descriptor of ``lock`` holding its ``flock``, or :obj:`None` when another process holds it."""
    nofollow = getattr(os, "O_NOFOLLOW", 0)  # a link: ELOOP
    while True:
        try:
            fd = os.open(lock, os.O_RDWR | os.O_CREAT | nofollow, 0o644)
        except PermissionError:
            # another user's lock file, left by a run killed there or held by one running: an flock needs no write
            # access to it (where the folder is writable, this run's outputs are too), and was refused as unwritable
            if not (os.access(lock.parent, os.W_OK) and os.path.isfile(lock)):
                raise
            try:
                fd = os.open(lock, os.O_RDONLY | nofollow)
            except FileNotFoundError:  # its run ended meanwhile and removed it: make one
                continue
        try:
            info = os.fstat(fd)
            if not stat.S_ISREG(info.st_mode) or info.st_size:  # not an empty lock file: someone's file
                raise InvalidArgument(f"{lock}: not a gnplace lock file (it holds {info.st_size} bytes), which a "
                                      "run would remove at its end: move it away")
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(fd)
            return None
        except OSError as err:
            if err.errno in _NO_FLOCK:  # left open: the run goes on unlocked and removes the file at its end
                raise _NoFlock(err.strerror or str(err), fd) from err
            os.close(fd)
            raise
        except BaseException:
            os.close(fd)
            raise
        try:  # the holder before may have removed the file between our open and our flock: lock the one there
            same = _is_our_lock(lock, fd)
        except FileNotFoundError:
            same = False
        if same:
            return fd
        os.close(fd)


def holds_folder(parameter: str, flag: str = "--out", *, slurm: bool = False) -> Callable[[F], F]:
    """Decorate a function to run under :func:`folder_lock` of its argument ``parameter`` (where given).

    ``flag`` and ``slurm`` are :func:`folder_lock`'s.

    Examples:
        >>> @holds_folder("out")
        ... def run(out):
        ...     return "ran"
    """
    def decorate(function: F) -> F:
        signature = inspect.signature(function)

        @functools.wraps(function)
        def locked(*args: Any, **kwargs: Any) -> Any:
            bound = signature.bind(*args, **kwargs)
            bound.apply_defaults()
            folder = bound.arguments.get(parameter)
            if folder is None:
                return function(*args, **kwargs)
            with folder_lock(folder, flag, slurm=slurm):
                return function(*args, **kwargs)

        return locked  # type: ignore[return-value]

    return decorate
