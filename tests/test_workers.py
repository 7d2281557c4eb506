"""``gnplace.workers``: pool workers end when their parent dies, so a killed run leaves nothing running."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from gnplace.workers import PARENT_POLL_S, process_pool, task_mapper

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(autouse=True)
def _tests_importable_in_workers(monkeypatch: pytest.MonkeyPatch) -> None:
    """A spawned worker imports this module (``tests.test_workers``) to find the functions sent to it, on the
    parent's ``sys.path``: the checkout goes on it. Without, this file failed alone (``No module named 'tests'``),
    and in the whole suite it passed or failed by the order the tests ran in."""
    monkeypatch.syspath_prepend(str(ROOT))

PARENT = f"""
import multiprocessing, os, sys, time
from concurrent.futures import ProcessPoolExecutor
sys.path.insert(0, {str(ROOT)!r})
from gnplace.workers import _start_worker, process_pool

method = sys.argv[1]
pool = process_pool(1) if method == "spawn" else ProcessPoolExecutor(
    1, mp_context=multiprocessing.get_context(method), initializer=_start_worker, initargs=(os.getpid(), False, 1))
print(pool.submit(os.getpid).result(), flush=True)
pool.submit(time.sleep, 600)  # a long task under way when the parent is killed
time.sleep(600)
"""


def _running(pid: int) -> bool:
    """Whether process ``pid`` exists and is not a zombie (a container's init may never reap one)."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except (FileNotFoundError, ProcessLookupError):
        return False
    return fields[0] != "Z"


def test_the_pool_runs_tasks():
    with process_pool(2) as pool:
        assert list(pool.map(abs, [-1, -2, 3])) == [1, 2, 3]


@pytest.mark.skipif(not Path("/proc/self/stat").exists(), reason="reads process states from /proc")
@pytest.mark.parametrize("method", ["spawn", "forkserver", "fork"])
def test_a_worker_exits_when_its_parent_is_killed(method):
    """Whatever starts the workers: a forkserver's worker (the server's child, not the pool's) exited at once, its
    parent id not the pool's, and each task of the pool was a ``BrokenProcessPool`` (Python 3.14's default on
    Linux, had the pool not asked for spawn)."""
    parent = subprocess.Popen([sys.executable, "-c", PARENT, method], stdout=subprocess.PIPE, text=True)
    try:
        worker = int(parent.stdout.readline())
        assert worker != parent.pid and _running(worker)
        time.sleep(3 * PARENT_POLL_S)
        assert _running(worker), "the worker must live while its parent does"
        os.kill(parent.pid, signal.SIGKILL)  # no chance for the parent to stop its workers
        parent.wait(timeout=30)
        deadline = time.monotonic() + 20 * PARENT_POLL_S
        while _running(worker) and time.monotonic() < deadline:
            time.sleep(0.1)
        assert not _running(worker), "the worker outlived its killed parent"
    finally:
        parent.kill()
        parent.wait(timeout=30)


def _worker_threads(_: int) -> tuple[int, int]:
    """numba's and torch's compute threads in this (worker) process."""
    import numba
    import torch

    return numba.get_num_threads(), torch.get_num_threads()


def test_workers_share_the_cores():
    # two workers of as many threads as cores each spin against each other (4x slower measured): split them
    with process_pool(2, threads=1) as pool:
        assert list(pool.map(_worker_threads, [0, 1])) == [(1, 1), (1, 1)]



#: A fresh process (numba's OpenMP pool starts once per process), torch on the one thread OMP_NUM_THREADS gives it.
_KEEP_TORCH = """
import torch
import numba
from gnplace.workers import limit_threads
limit_threads(1, torch=False)
print(torch.get_num_threads(), numba.get_num_threads())
"""


def test_sharing_the_cores_without_torch_leaves_torchs_thread_count_as_it_was():
    """``torch=False``: the first ``numba.set_num_threads`` starts numba's OpenMP pool, which set the OpenMP count
    torch reads to one per core. The ranks of a ``ddp_spawn`` pretraining under ``OMP_NUM_THREADS=1`` then trained
    on two threads, not one, and ended with other weights than the same run under ``ddp`` (2026-12-01)."""
    env = {**os.environ, "OMP_NUM_THREADS": "1", "NUMBA_NUM_THREADS": "2"}  # a pool of 2 wherever it runs
    done = subprocess.run([sys.executable, "-c", _KEEP_TORCH], capture_output=True, text=True, env=env, timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.split() == ["1", "1"]

def test_threads_per_worker_splits_the_cores():
    from gnplace.workers import threads_per_worker

    assert threads_per_worker(1, cores=2) == 2
    assert threads_per_worker(3, cores=16) == 5
    assert threads_per_worker(8, cores=2) == 1


def test_threads_per_worker_counts_the_cores_this_process_may_use(monkeypatch):
    """Under ``taskset -c 0`` on two cores, one worker was given two threads (the machine's count, not its own)."""
    from gnplace.workers import threads_per_worker

    monkeypatch.setattr(os, "cpu_count", lambda: 16)
    monkeypatch.setattr(os, "sched_getaffinity", lambda pid: {0, 1}, raising=False)
    assert threads_per_worker(1) == 2
    assert threads_per_worker(2) == 1


def test_is_launched_rank_reads_the_launchers_rank_variables(monkeypatch):
    from gnplace.workers import is_launched_rank

    for name in ("RANK", "GROUP_RANK", "LOCAL_RANK", "NODE_RANK", "WORLD_SIZE", "MASTER_ADDR"):
        monkeypatch.delenv(name, raising=False)
    assert not is_launched_rank()
    monkeypatch.setenv("LOCAL_RANK", "1")
    assert not is_launched_rank()  # a stray rank variable, no launcher: a plain run (it skipped the run lock)
    monkeypatch.setenv("WORLD_SIZE", "2")
    monkeypatch.setenv("LOCAL_RANK", "0")
    assert not is_launched_rank()
    monkeypatch.setenv("LOCAL_RANK", "1")
    assert is_launched_rank()
    monkeypatch.setenv("LOCAL_RANK", "0")
    monkeypatch.setenv("NODE_RANK", "1")
    assert is_launched_rank()
    monkeypatch.delenv("WORLD_SIZE")
    monkeypatch.setenv("MASTER_ADDR", "node0")  # a multi-node run's second machine, as its user starts it
    assert is_launched_rank()


def test_is_launched_rank_reads_torchruns_rank_on_a_second_host(monkeypatch):
    """``torchrun --nnodes 2 --nproc-per-node 1``: the second host's rank has ``LOCAL_RANK=0`` and no ``NODE_RANK``.

    It was taken for a rank 0, so ``gnplace finetune --timer dist`` there took the run lock of a shared ``-o``, and
    one of the two nodes was refused ("another gnplace run is writing into this folder").
    """
    from gnplace.workers import is_launched_rank

    for name in ("NODE_RANK", "SLURM_NTASKS", "SLURM_PROCID"):
        monkeypatch.delenv(name, raising=False)
    for name, value in {"MASTER_ADDR": "node0", "MASTER_PORT": "29500", "WORLD_SIZE": "2", "LOCAL_RANK": "0",
                        "RANK": "0", "GROUP_RANK": "0"}.items():
        monkeypatch.setenv(name, value)
    assert not is_launched_rank()  # node 0's rank
    monkeypatch.setenv("RANK", "1")
    monkeypatch.setenv("GROUP_RANK", "1")
    assert is_launched_rank()
    monkeypatch.setenv("RANK", "0")
    assert is_launched_rank()  # GROUP_RANK alone: a rank of node 1


def test_is_launched_rank_reads_a_slurm_jobs_task_where_asked(monkeypatch):
    """srun sets neither ``WORLD_SIZE`` nor ``MASTER_ADDR``: Lightning reads ``SLURM_PROCID`` for pretraining's ranks."""
    from gnplace.workers import RANK_VARIABLES, is_launched_rank

    for name in (*RANK_VARIABLES, "WORLD_SIZE", "MASTER_ADDR"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("SLURM_NTASKS", "2")
    monkeypatch.setenv("SLURM_PROCID", "1")
    monkeypatch.setenv("SLURM_JOB_NAME", "train")
    assert is_launched_rank(slurm=True)
    assert not is_launched_rank()  # finetune and the others read none of SLURM's variables
    monkeypatch.setenv("SLURM_PROCID", "0")
    assert not is_launched_rank(slurm=True)
    monkeypatch.setenv("SLURM_PROCID", "1")
    monkeypatch.setenv("SLURM_JOB_NAME", "interactive")  # Lightning's way out of SLURM's ranks inside a job
    assert not is_launched_rank(slurm=True)
    monkeypatch.setenv("SLURM_JOB_NAME", "train")
    monkeypatch.setenv("SLURM_NTASKS", "1")
    assert not is_launched_rank(slurm=True)
    monkeypatch.setenv("SLURM_NTASKS", "two")
    assert not is_launched_rank(slurm=True)


def _first_quick_then_slow(arg: tuple[str, int, bool]) -> int:
    """Task ``i`` of a run: the first ends at once (or raises), the others take 2 s; each leaves a file when done."""
    folder, i, first_raises = arg
    if i == 0 and first_raises:
        raise ValueError("task 0 failed")
    if i > 0:
        time.sleep(2.0)
    Path(folder, str(i)).touch()
    return i


@pytest.mark.parametrize("first_raises", [False, True], ids=["caller-stops", "task-raises"])
def test_task_mapper_stops_its_workers_when_the_run_stops(tmp_path, first_raises):
    """The pool finished the tasks under way and started the queued ones before the error (or Ctrl-C) got out."""
    import multiprocessing

    from gnplace.workers import task_mapper

    tasks = [(str(tmp_path), i, first_raises) for i in range(6)]
    with pytest.raises((RuntimeError, ValueError), match="stop|task 0 failed"), task_mapper(2) as mapper:
        for _ in mapper(_first_quick_then_slow, tasks):
            raise RuntimeError("stop")
    assert sorted(p.name for p in tmp_path.iterdir()) == ([] if first_raises else ["0"])
    assert multiprocessing.active_children() == []


class _InlinePool:
    """A process pool that runs each task at once, in this process."""

    def submit(self, fn, *args):
        from concurrent.futures import Future

        future = Future()
        future.set_result(fn(*args))
        return future

    def shutdown(self, wait=True, cancel_futures=False):
        pass


def _terminate_self(i):
    os.kill(os.getpid(), signal.SIGTERM)
    time.sleep(5)  # the handler runs at the next bytecode
    return i


def test_task_mapper_of_one_job_stops_on_sigterm_as_on_ctrl_c():
    """One job ran its tasks here with no SIGTERM handler: a kill ended the process at once and without a word
    (``scripts/bench.py zeroshot -j 1``), where two jobs raise Terminated ("SIGTERM: interrupted", 143)."""
    from gnplace.exceptions import Terminated

    assert signal.getsignal(signal.SIGTERM) == signal.SIG_DFL
    with pytest.raises(Terminated), task_mapper(1) as mapper:
        assert signal.getsignal(signal.SIGTERM) != signal.SIG_DFL  # else the kill would end the test run
        list(mapper(_terminate_self, [1, 2]))
    assert signal.getsignal(signal.SIGTERM) == signal.SIG_DFL


def test_task_mapper_starts_no_more_workers_than_tasks(monkeypatch):
    """``task_mapper(16)`` for 2 tasks started a pool of 16, whose 2 busy workers got a 16th of the cores each."""
    import gnplace.workers
    from gnplace.workers import task_mapper

    started = []
    monkeypatch.setattr(gnplace.workers, "process_pool", lambda jobs, **kwargs: started.append(jobs) or _InlinePool())
    with task_mapper(16) as mapper:
        assert started == []  # nothing started before the first call
        assert list(mapper(abs, [])) == [] and started == []  # nor for no task
        assert list(mapper(abs, [-1, -2])) == [1, 2] and started == [2]
        assert list(mapper(pow, [2, 3, 4], [2, 2, 2])) == [4, 9, 16] and started == [2]  # the same workers again
    with task_mapper(2) as mapper:
        assert list(mapper(abs, range(-5, 0))) == [5, 4, 3, 2, 1] and started == [2, 2]


def _threads_given(_: int) -> int:
    """The compute threads this worker was told to use (``limit_threads`` sets them, whatever cores there are)."""
    return int(os.environ["OMP_NUM_THREADS"])


def test_task_mapper_workers_share_the_cores_among_the_tasks(monkeypatch):
    """Two tasks under ``task_mapper(4)`` on 8 cores: each of the 2 workers was given 2 threads (8 / 4), not 4."""
    import multiprocessing

    import gnplace.workers
    from gnplace.workers import task_mapper

    monkeypatch.setattr(gnplace.workers, "available_cores", lambda: 8)  # read in this process, for the pool
    with task_mapper(4) as mapper:
        assert list(mapper(_threads_given, [0, 1])) == [4, 4]
        assert list(mapper(_threads_given, [2, 3, 4])) == [4, 4, 4]  # a second call runs on the same workers
    assert multiprocessing.active_children() == []


def test_terminate_workers_is_typed_as_the_pool_it_ends():
    """Typed ``Any``; it is the ``ProcessPoolExecutor`` its docstring names, so mypy checks its callers."""
    import inspect

    from gnplace.workers import terminate_workers

    assert inspect.signature(terminate_workers).parameters["pool"].annotation == "ProcessPoolExecutor"


def test_a_shared_setting_is_made_by_the_first_to_enter_and_undone_by_the_last_to_leave_across_threads():
    import threading

    from gnplace.workers import SharedSetting

    steps: list[str] = []
    shared = SharedSetting(lambda: steps.append("made") or (lambda: steps.append("undone")))
    inside, leave = threading.Event(), threading.Event()

    def hold() -> None:
        with shared:
            inside.set()
            leave.wait(10)

    other = threading.Thread(target=hold)
    other.start()
    assert inside.wait(10)
    with shared:  # entered while the other thread's stands: shared, not saved and restored
        pass
    assert steps == ["made"]
    leave.set()
    other.join(10)
    assert steps == ["made", "undone"]
    with pytest.raises(RuntimeError), shared:
        raise RuntimeError("the body fails")
    assert steps == ["made", "undone", "made", "undone"]


_TOP_LEVEL = "from gnplace.workers import process_pool\n"


@pytest.mark.parametrize(("body", "refused"), [
    ("process_pool(2).shutdown()\n", True),  # each spawned worker ran it again: a traceback in each, 'a worker died'
    ("def main():\n    process_pool(2).shutdown()\n\nmain()\n", True),
    ("def main():\n    process_pool(2).shutdown()\n\nif __name__ == '__main__':\n    main()\n", False),
    ("if '__main__' == __name__:\n    process_pool(2).shutdown()\n", False),
    ("try:\n    if __name__ == '__main__' and True:\n        process_pool(2).shutdown()\nexcept OSError:\n    pass\n", False),
])
def test_workers_are_refused_from_a_scripts_unguarded_top_level(tmp_path, body, refused):
    script = tmp_path / "user.py"
    script.write_text(_TOP_LEVEL + body)
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")])}
    result = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, env=env, timeout=60)
    assert (result.returncode != 0) == refused, result.stderr[-2000:]
    if refused:
        assert f"{script}:" in result.stderr and "if __name__ ==" in result.stderr


def test_workers_are_let_through_from_python_c():
    code = _TOP_LEVEL + "process_pool(2).shutdown()\n"  # no file that a worker runs again
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60, cwd=ROOT)
    assert result.returncode == 0, result.stderr[-2000:]


def test_workers_are_refused_to_a_program_read_from_standard_input():
    # `python - < script.py`: each spawned worker tried to run the file '<stdin>' and died, guard or not
    code = _TOP_LEVEL + "if __name__ == '__main__':\n    process_pool(2).shutdown()\n"
    result = subprocess.run([sys.executable, "-"], input=code, capture_output=True, text=True, timeout=60, cwd=ROOT)
    assert result.returncode != 0
    assert "read from <stdin>" in result.stderr and "jobs=1" in result.stderr, result.stderr[-2000:]


def test_stray_ranks_hidden_takes_out_rank_variables_no_launcher_set_and_puts_them_back(monkeypatch):
    """``LOCAL_RANK=1`` left in a shell made Lightning take a plain run for rank 1 (no logs written)."""
    from lightning_utilities.core.rank_zero import rank_zero_only

    from gnplace.workers import stray_ranks_hidden

    monkeypatch.delenv("WORLD_SIZE", raising=False)
    monkeypatch.delenv("MASTER_ADDR", raising=False)
    monkeypatch.setenv("LOCAL_RANK", "1")
    monkeypatch.setenv("RANK", "1")
    # what Lightning read at its import; this file imports no Lightning, whose import makes the attribute (alone, the
    # test was an AttributeError: it passed only after another file's import)
    monkeypatch.setattr(rank_zero_only, "rank", 1, raising=False)
    with stray_ranks_hidden:
        assert "LOCAL_RANK" not in os.environ and "RANK" not in os.environ and rank_zero_only.rank == 0
    assert os.environ["LOCAL_RANK"] == os.environ["RANK"] == "1" and rank_zero_only.rank == 1
    monkeypatch.setenv("WORLD_SIZE", "2")  # a launcher's rank keeps its variables and its rank
    with stray_ranks_hidden:
        assert os.environ["LOCAL_RANK"] == "1" and rank_zero_only.rank == 1


#: A fresh process with a numba pool of 2 (the tests' own numba has one thread, conftest.py): ``threads_kept`` around
#: ``limit_threads(1)`` prints the thread variables and numba's count inside, then whether both are as before.
_KEEP_THREADS = """
import os
import numba
from gnplace.workers import THREAD_VARIABLES, limit_threads, threads_kept

os.environ["OMP_NUM_THREADS"] = "3"
os.environ.pop("MKL_NUM_THREADS", None)
numba_before = numba.get_num_threads()  # (starts numba's pool)
before = {name: os.environ.get(name) for name in THREAD_VARIABLES}
with threads_kept():
    limit_threads(1, torch=False)
    print(os.environ["OMP_NUM_THREADS"], os.environ["MKL_NUM_THREADS"], numba.get_num_threads())
print(numba_before, {name: os.environ.get(name) for name in THREAD_VARIABLES} == before, numba.get_num_threads())
"""


def test_threads_kept_gives_back_the_variables_and_numbas_count_limit_threads_set():
    done = subprocess.run([sys.executable, "-c", _KEEP_THREADS], capture_output=True, text=True, timeout=120,
                          env={**os.environ, "NUMBA_NUM_THREADS": "2"})
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.split() == ["1", "1", "1", "2", "True", "2"]


_OVERLAPPING_TORCH_THREADS = """
import threading
import torch
from gnplace.workers import torch_threads

torch.set_num_threads(3)
a_inside, b_inside, a_left = threading.Event(), threading.Event(), threading.Event()
counts = {}

def first():
    with torch_threads(1):
        a_inside.set()
        assert b_inside.wait(60)
    a_left.set()

def second():  # first uses torch inside first's call, and leaves after it
    assert a_inside.wait(60)
    with torch_threads(1):
        b_inside.set()
        assert a_left.wait(60)
    counts["second, after"] = torch.get_num_threads()

threads = [threading.Thread(target=first), threading.Thread(target=second)]
for thread in threads:
    thread.start()
for thread in threads:
    thread.join(120)
later = threading.Thread(target=lambda: counts.update(later=torch.get_num_threads()))
later.start()
later.join(60)
print(torch.get_num_threads(), counts["second, after"], counts["later"])
"""


@pytest.mark.skipif("parallel backend: OpenMP" not in __import__("torch").__config__.parallel_info(),
                    reason="torch's thread counts are each thread's under its OpenMP backend alone")
def test_torch_threads_in_threads_at_once_give_every_thread_the_callers_count_back():
    """Under OpenMP each thread has its count, and new threads start with the last one ``torch.set_num_threads`` set:
    a thread that first used torch inside another's call started at its 1 and kept it, and ``policy`` placements in
    threads (which set torch's count without this context) left threads started later at 1 thread, not the caller's
    3. A fresh process: the counts are the process's."""
    done = subprocess.run([sys.executable, "-c", _OVERLAPPING_TORCH_THREADS], capture_output=True, text=True,
                          timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.split() == ["3", "3", "3"]


def _deaf_to_sigterm(arg: tuple[str, int]) -> int:
    """Task ``i``: takes SIGTERM as a search under Lightning does (it saves and goes on), then works for a minute."""
    folder, i = arg
    signal.signal(signal.SIGTERM, lambda signum, frame: None)
    Path(folder, f"started{i}").touch()
    time.sleep(60.0)
    return i


@pytest.mark.parametrize("stop", [KeyboardInterrupt, RuntimeError])
def test_a_stopped_run_ends_workers_whose_tasks_take_sigterm_and_go_on(tmp_path, stop):
    """A Ctrl-C to ``gnplace evaluate -j 2 -p ppo`` waited for every task of the run: the workers were ended with
    SIGTERM, which a ppo search under Lightning takes as "save, then stop after this iteration"."""
    import multiprocessing

    from gnplace.workers import task_mapper

    began = time.monotonic()
    with pytest.raises(stop), task_mapper(2) as mapper:
        mapper(_deaf_to_sigterm, [(str(tmp_path), i) for i in range(4)])
        while len(list(tmp_path.glob("started*"))) < 2 and time.monotonic() - began < 60:
            time.sleep(0.05)  # both workers in a task, deaf to SIGTERM
        raise stop("stop")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["started0", "started1"]
    assert time.monotonic() - began < 50 and multiprocessing.active_children() == []


def test_sigterm_raises_terminated_while_workers_run_and_leaves_other_handlers_alone():
    """SIGTERM ended a run of worker processes at once: its finished results unsaved, a warning of leaked
    semaphores from multiprocessing's resource tracker. Raised as Terminated, it stops them as Ctrl-C does."""
    from gnplace.exceptions import Terminated
    from gnplace.workers import sigterm_as_interrupt

    assert signal.getsignal(signal.SIGTERM) == signal.SIG_DFL
    with pytest.raises(Terminated), sigterm_as_interrupt():
        assert signal.getsignal(signal.SIGTERM) != signal.SIG_DFL  # else the kill below would end the test run
        os.kill(os.getpid(), signal.SIGTERM)
        time.sleep(5)  # the handler runs at the next bytecode
    assert signal.getsignal(signal.SIGTERM) == signal.SIG_DFL  # put back
    with sigterm_as_interrupt():
        pass
    assert signal.getsignal(signal.SIGTERM) == signal.SIG_DFL

    def own(signum, frame):
        got.append(signum)

    got: list[int] = []
    previous = signal.signal(signal.SIGTERM, own)  # a caller's handler, or Lightning's during a fit: left alone
    try:
        with sigterm_as_interrupt():
            assert signal.getsignal(signal.SIGTERM) is own
            os.kill(os.getpid(), signal.SIGTERM)
            time.sleep(0.1)
        assert got == [signal.SIGTERM] and signal.getsignal(signal.SIGTERM) is own
    finally:
        signal.signal(signal.SIGTERM, previous)
