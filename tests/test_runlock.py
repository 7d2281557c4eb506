"""Tests of the run lock that keeps two runs out of one output folder."""

from __future__ import annotations

import os
import signal
import subprocess
import sys

import pytest

from gnplace.exceptions import InvalidArgument
from gnplace.runlock import LOCK_NAME, folder_lock, holds_folder

fcntl = pytest.importorskip("fcntl")

HOLD = """
import sys, time
from gnplace.runlock import folder_lock
with folder_lock(sys.argv[1]):
    print("held", flush=True)
    time.sleep(60)
"""


@pytest.fixture()
def holder(tmp_path):
    """A process that holds ``tmp_path / "run"``'s lock until it is killed."""
    folder = tmp_path / "run"
    process = subprocess.Popen([sys.executable, "-c", HOLD, str(folder)], stdout=subprocess.PIPE, text=True)
    try:
        assert process.stdout is not None and process.stdout.readline() == "held\n"
        yield folder, process
    finally:
        process.kill()
        process.wait()


def test_a_folder_another_process_runs_in_is_refused_until_that_process_dies(holder):
    folder, process = holder
    with pytest.raises(InvalidArgument, match=rf"^--out {folder}: another gnplace run is writing into this folder"):
        with folder_lock(folder):
            raise AssertionError("entered a folder another run holds")
    assert folder.is_dir()  # the other run's folder is left alone
    os.kill(process.pid, signal.SIGKILL)  # a kill -9 releases it: the kernel drops the flock with the process
    process.wait()
    with folder_lock(folder):
        assert (folder / LOCK_NAME).exists()
    assert not (folder / LOCK_NAME).exists()


def test_torchruns_rank_on_a_second_host_leaves_a_shared_folder_to_rank_0(holder, monkeypatch):
    """``torchrun --nnodes 2 --nproc-per-node 1`` with ``-o`` on a shared filesystem: the second host's rank
    (``RANK=1``, ``LOCAL_RANK=0``) took the folder's lock, so rank 0's ``gnplace finetune`` was refused."""
    folder, _ = holder  # rank 0's run, holding the folder
    monkeypatch.delenv("NODE_RANK", raising=False)
    for name, value in {"MASTER_ADDR": "127.0.0.1", "MASTER_PORT": "29500", "WORLD_SIZE": "2", "RANK": "1",
                        "LOCAL_RANK": "0", "GROUP_RANK": "1"}.items():
        monkeypatch.setenv(name, value)
    with folder_lock(folder, "-o"):
        pass  # a rank that serves rank 0's run takes nothing


def test_a_slurm_task_leaves_the_folder_to_task_0_only_where_asked(holder, monkeypatch):
    """Lightning takes a SLURM job's tasks for pretraining's ranks (``slurm=True``); a command of one process does not
    (two ``srun -n 2 gnplace finetune`` tasks into one folder are two runs, the second refused)."""
    folder, _ = holder
    for name in ("WORLD_SIZE", "MASTER_ADDR", "LOCAL_RANK", "NODE_RANK", "RANK", "GROUP_RANK", "SLURM_JOB_NAME"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("SLURM_NTASKS", "2")
    monkeypatch.setenv("SLURM_PROCID", "1")
    with folder_lock(folder, slurm=True):
        pass
    with pytest.raises(InvalidArgument, match="another gnplace run is writing into this folder"):
        with folder_lock(folder):
            raise AssertionError("entered a folder another run holds")
    assert holds_folder("out", slurm=True)(lambda out: "ran")(folder) == "ran"  # as pretrain is decorated
    with pytest.raises(InvalidArgument, match="another gnplace run is writing into this folder"):
        holds_folder("out")(lambda out: "ran")(folder)


def test_a_process_enters_its_own_folder_again_and_lets_go_once_out(tmp_path):
    with folder_lock(tmp_path / "run"):
        with folder_lock(tmp_path / "run" / ".", "-o"):  # the same folder, named another way
            pass
        fd = os.open(tmp_path / "run" / LOCK_NAME, os.O_RDWR)
        try:
            with pytest.raises(BlockingIOError):  # still held after the inner block
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        finally:
            os.close(fd)
    assert sorted(os.listdir(tmp_path / "run")) == []


def test_a_refused_run_leaves_no_folder_it_made_and_keeps_one_it_wrote_into(tmp_path):
    with pytest.raises(InvalidArgument, match="refused"):
        with folder_lock(tmp_path / "a"):
            raise InvalidArgument("refused")
    assert not (tmp_path / "a").exists()
    with pytest.raises(KeyboardInterrupt):
        with folder_lock(tmp_path / "b"):
            (tmp_path / "b" / "log.csv").write_text("x")
            raise KeyboardInterrupt
    assert os.listdir(tmp_path / "b") == ["log.csv"]
    (tmp_path / "c").mkdir()
    with pytest.raises(InvalidArgument):
        with folder_lock(tmp_path / "c"):
            raise InvalidArgument("refused")
    assert (tmp_path / "c").is_dir()  # not made by the run
    with pytest.raises(InvalidArgument):
        with folder_lock(tmp_path / "d" / "e" / "f"):
            raise InvalidArgument("refused")
    assert not (tmp_path / "d").exists()  # the parents it made too


def test_a_folder_that_is_a_file_or_under_one_is_one_line(tmp_path):
    (tmp_path / "file").write_text("kept")
    with pytest.raises(InvalidArgument, match=r"^-o .*file: not a folder$"):
        with folder_lock(tmp_path / "file", "-o"):
            pass
    with pytest.raises(InvalidArgument, match=r"^-o .*file/sub: cannot make the folder \(Not a directory\)$"):
        with folder_lock(tmp_path / "file" / "sub", "-o"):
            pass
    assert (tmp_path / "file").read_text() == "kept"


def test_a_folder_that_is_no_path_is_one_line():
    # abspath's TypeError ("expected str, bytes or os.PathLike object, not int") from finetune(out=3), pretrain(out=3)
    with pytest.raises(InvalidArgument, match=r"^a --out folder is given by its path \(str or os\.PathLike\), got 3$"):
        with folder_lock(3):
            pass


def test_a_link_to_a_folder_that_is_not_there_is_named_so(tmp_path):
    """``--out dl``, ``dl`` a link to a missing folder, was refused as "dl is not a folder", of a link to a folder."""
    (tmp_path / "dl").symlink_to(tmp_path / "gone")
    with pytest.raises(InvalidArgument, match=r"^--out .*dl: .*dl is a link to .*gone, which is not there: make that "
                                              r"folder, or give another$"):
        with folder_lock(tmp_path / "dl"):
            pass
    assert (tmp_path / "dl").is_symlink() and not (tmp_path / "gone").exists()


def test_holds_folder_locks_the_named_argument_default_included(tmp_path, monkeypatch):
    seen = []

    @holds_folder("out", "-o")
    def run(graph, out=str(tmp_path / "default")):
        seen.append(sorted(os.listdir(out)))
        return out

    assert run("g") == str(tmp_path / "default") and seen == [[LOCK_NAME]]
    assert run("g", out=tmp_path / "given") == tmp_path / "given" and seen[-1] == [LOCK_NAME]
    assert os.listdir(tmp_path / "given") == []


def test_evaluate_finetune_pretrain_and_fit_refuse_a_folder_another_run_holds(holder):
    from gnplace.evaluate import Task, evaluate
    from gnplace.finetune import finetune
    from gnplace.pretrain import pretrain
    from gnplace.pretrain_config import PretrainConfig
    from gnplace.train import fit

    folder, _ = holder
    with pytest.raises(InvalidArgument, match="another gnplace run is writing into this folder"):
        evaluate([Task("datasets/examples/mlp2x8w2048b512.gnpg", "k80x2", "single")], folder)
    with pytest.raises(InvalidArgument, match=r"^-o .*another gnplace run is writing into this folder"):
        finetune("datasets/examples/mlp2x8w2048b512.gnpg", "k80x2", out=folder, budget=10)
    with pytest.raises(InvalidArgument, match=r"^--out .*another gnplace run is writing into this folder"):
        pretrain(PretrainConfig(), folder)
    with pytest.raises(InvalidArgument, match=r"^--out .*another gnplace run is writing into this folder"):
        fit([("datasets/examples/mlp2x8w2048b512.gnpg", "k80x2")], folder, iterations=1)  # scripts/train.py
    assert os.listdir(folder) == [LOCK_NAME]  # nothing written beside the holder's lock


def test_a_run_refused_in_a_race_leaves_the_holders_lock_and_folder(holder, monkeypatch):
    """A run that found the folder missing, then lost the race for it, removed the holder's lock file and folder
    on its way out: a third run then got in beside the holder."""
    import gnplace.runlock as runlock

    folder, _ = holder
    monkeypatch.setattr(runlock, "_make_folders", lambda path, given, flag: [path])  # as if this run had made it
    with pytest.raises(InvalidArgument, match="another gnplace run is writing into this folder"):
        with folder_lock(folder):
            pass
    assert (folder / LOCK_NAME).is_file()
    monkeypatch.undo()
    with pytest.raises(InvalidArgument, match="another gnplace run is writing into this folder"):
        with folder_lock(folder):  # still held: the third run is refused too
            pass


def test_a_file_or_link_under_the_lock_files_name_is_refused_and_kept(tmp_path):
    """An input named OUT/.gnplace.lock (a checkpoint, a graph, an export) was locked, then deleted at the end;
    a link there was followed, making its target."""
    (tmp_path / "a").mkdir()
    (tmp_path / "a" / LOCK_NAME).write_bytes(b"a checkpoint")
    with pytest.raises(InvalidArgument, match=r"\.gnplace\.lock: not a gnplace lock file \(it holds 12 bytes\)"):
        with folder_lock(tmp_path / "a"):
            pass
    assert (tmp_path / "a" / LOCK_NAME).read_bytes() == b"a checkpoint"
    (tmp_path / "b").mkdir()
    (tmp_path / "b" / LOCK_NAME).symlink_to(tmp_path / "elsewhere")
    with pytest.raises(InvalidArgument, match="cannot write its lock file"):
        with folder_lock(tmp_path / "b"):
            pass
    assert not (tmp_path / "elsewhere").exists() and (tmp_path / "b" / LOCK_NAME).is_symlink()
    (tmp_path / "c").mkdir()
    with folder_lock(tmp_path / "c"):  # a run that writes over its lock file's name keeps what it wrote
        (tmp_path / "c" / LOCK_NAME).unlink()
        (tmp_path / "c" / LOCK_NAME).write_bytes(b"exported")
    assert (tmp_path / "c" / LOCK_NAME).read_bytes() == b"exported"


def test_a_refused_run_through_dot_dot_leaves_nothing(tmp_path):
    with pytest.raises(InvalidArgument, match="refused"):
        with folder_lock(str(tmp_path / "nope" / ".." / "out")):
            raise InvalidArgument("refused")
    assert os.listdir(tmp_path) == []


def test_another_users_lock_file_is_locked_read_only_held_or_left_by_a_killed_run(holder, monkeypatch):
    """In a folder several users write into, the lock file another user's run made (0644: not writable here) was
    refused as "cannot write its lock file (Permission denied)": while that run held it, which did not say another
    run was writing there, and for good once that run was killed and left it, though the folder was writable."""
    import errno

    folder, process = holder
    lock = folder / LOCK_NAME
    opened = os.open

    def as_another_user(path, flags, *args):  # (root may write any file: another user's file is faked)
        if os.fspath(path) == os.fspath(lock) and flags & (os.O_RDWR | os.O_WRONLY):
            raise PermissionError(errno.EACCES, os.strerror(errno.EACCES), os.fspath(path))
        return opened(path, flags, *args)

    monkeypatch.setattr(os, "open", as_another_user)
    with pytest.raises(InvalidArgument, match=rf"^--out {folder}: another gnplace run is writing into this folder"):
        with folder_lock(folder):
            raise AssertionError("entered a folder another run holds")
    os.kill(process.pid, signal.SIGKILL)  # its lock file stays, and no one holds it
    process.wait()
    with folder_lock(folder):
        fd = opened(lock, os.O_RDONLY)
        try:
            with pytest.raises(BlockingIOError):  # taken over: held by this run
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        finally:
            os.close(fd)
    assert not lock.exists()  # and removed at the end, as a run's own


def test_a_filesystem_without_flock_runs_with_a_warning_not_a_refusal(tmp_path, monkeypatch, capsys):
    """On Lustre mounted without ``-o flock`` (flock: ENOSYS) or NFS without its lock daemon (ENOLCK), every
    evaluate, finetune and pretrain was refused: "cannot write its lock file .gnplace.lock (Function not
    implemented)", though the file was written and nothing could be done about it but another filesystem."""
    import errno

    from gnplace.cli import main

    def no_flock(fd, operation):
        raise OSError(errno.ENOSYS, os.strerror(errno.ENOSYS))

    monkeypatch.setattr(fcntl, "flock", no_flock)
    folder = tmp_path / "run"
    with pytest.warns(UserWarning, match=rf"^--out {folder}: its filesystem does not lock files \(flock: "
                                         rf"{os.strerror(errno.ENOSYS)}\), so another gnplace run"):
        with folder_lock(folder):
            (folder / "out.txt").write_text("written")
    assert os.listdir(folder) == ["out.txt"]  # no lock file left
    with pytest.warns(UserWarning), pytest.raises(RuntimeError):
        with folder_lock(tmp_path / "failed"):
            raise RuntimeError("the run fails")
    assert not (tmp_path / "failed").exists()  # a failed run leaves no folder it made, as with a lock

    assert main(["evaluate", "-g", "datasets/examples/mlp2x8w2048b512.gnpg", "-c", "k80x2", "-p", "single",
                 "-o", str(tmp_path / "ev")]) == 0
    assert "its filesystem does not lock files" in capsys.readouterr().err
    assert sorted(os.listdir(tmp_path / "ev")) == ["results.csv", "results.md"]


def test_a_folder_this_process_let_go_of_is_refused_once_another_run_holds_it(tmp_path):
    """Leaving a folder's lock ends this process's hold: entered again later, another run's lock refuses it."""
    folder = tmp_path / "run"
    with folder_lock(folder):
        pass
    process = subprocess.Popen([sys.executable, "-c", HOLD, str(folder)], stdout=subprocess.PIPE, text=True)
    try:
        assert process.stdout is not None and process.stdout.readline() == "held\n"
        with pytest.raises(InvalidArgument, match="another gnplace run is writing into this folder"):
            with folder_lock(folder):
                raise AssertionError("entered a folder another run holds")
    finally:
        process.kill()
        process.wait()
