"""The CP-SAT model of the ``exact`` placer (see :mod:`gnplace.placers.exact` for the formulation).

Kept apart so that OR-Tools is imported only when the exact placer runs. Times are integer ticks,
memory integer units of a power of two bytes; every constraint below is named in the docstring of
:mod:`gnplace.placers.exact`.
"""

from __future__ import annotations

import math
import multiprocessing
import os
import sys
import time
import warnings
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from ortools.sat.python import cp_model

from gnplace.cluster import Cluster
from gnplace.graph import OpGraph
from gnplace.placers.base import group_order

__all__ = ["Outcome", "fits_nowhere", "memory_unit", "solve", "wall_net"]

#: :func:`_solve`'s arguments before the worker count and seed: graph, cluster, dur, delay, activation_memory,
#: link_contention, op_gap, symmetric, hint, time_limit.
_Args = tuple[OpGraph, Cluster, np.ndarray, np.ndarray, bool, bool, int, list[list[int]], "np.ndarray | None", float]

#: CP-SAT subsolvers the interleaved search runs without (OR-Tools 9.15), and which the search would otherwise wait on
#: far past its deterministic time, to the wall-clock net (then ``10 x time_limit + 30`` s). "reduced_costs": its chunk
#: ran on after the optimum was proved (33,000 conflicts, 0.18 deterministic units in 15 s): a 5-op graph proved
#: optimal in 0.08 s returned after 230 s at time_limit 20; 6 of 80 random 5-7-op graphs took 13-231 s (then 4.2 at
#: most). "fixed": it counted 0.40 deterministic units in 39.9 wall seconds on a loaded 2-core machine, and with
#: batches of CP-SAT's default 6 tasks (each chunk up to one unit) ``scripts/bench.py exact`` left ptb_004@12 and
#: nmt_004@12 on k80x4 "feasible" at the net (gaps 0.011 and 0.023), where an idle machine proved both optimal; the
#: batch is now one task per worker (``interleave_batch_size``).
IGNORED_SUBSOLVERS = ("reduced_costs", "fixed")

#: Wall seconds the solve may take per unit of ``time_limit`` (CP-SAT's deterministic time) before the wall-clock net
#: stops it, plus :data:`WALL_NET_BASE_S`. The net only guards against a search whose deterministic time stops
#: advancing: where it stops the solve before the deterministic limit, the result depends on the machine's load.
#: Measured on a 2-core machine beside two busy processes (load 8-11): 15 to 63 wall seconds a unit over bench.py
#: exact's 16 solves at time_limit 20 (median 30), 25 to 56 over tests/placers/test_exact*.py's solves of 0.01 units
#: or more, and up to 114 on memory-tight models before; the net of 10 x time_limit + 30 s (before exact revision 5)
#: came first there, and left ptb_004@12 on k80x4 "unknown" and three others "feasible" where an idle machine proved
#: them optimal. 1000 is about nine times the slowest unit seen; a search that stalls is ended by Ctrl-C at once.
WALL_SECONDS_PER_UNIT = 1000.0
#: Wall seconds the net allows whatever the limit (model building and presolve of a small limit).
WALL_NET_BASE_S = 60.0


@dataclass
class Outcome:
    """What one solve found."""

    status: str  # "optimal", "feasible", "infeasible" or "unknown"
    solutions: list[np.ndarray]  # group placements [num_groups] of the solution pool, distinct, the final one last
    objective: float | None  # ticks
    bound: float  # ticks
    gap: float | None
    #: CP-SAT's deterministic time spent, in its units (0 where it did not run): a statistic, left out of ``==``
    deterministic_time: float = field(default=0.0, compare=False)
    #: CP-SAT's wall seconds (0 where it did not run): a statistic, left out of ``==``
    wall_s: float = field(default=0.0, compare=False)
    #: whether the wall-clock net (:func:`wall_net`), not the deterministic limit or a proof, ended the search: the
    #: status and solutions may then depend on the machine's load
    wall_net_hit: bool = False


def wall_net(time_limit: float) -> float:
    """Wall seconds after which CP-SAT stops whatever deterministic time it counted: ``1000 x time_limit + 60``.

    Args:
        time_limit (float): CP-SAT deterministic time of the solve.

    Returns:
        float: seconds, :data:`WALL_SECONDS_PER_UNIT` per unit plus :data:`WALL_NET_BASE_S`.
    """
    return WALL_SECONDS_PER_UNIT * time_limit + WALL_NET_BASE_S


def solve(
    graph: OpGraph,
    cluster: Cluster,
    dur: np.ndarray,
    delay: np.ndarray,
    *,
    activation_memory: bool,
    link_contention: bool,
    op_gap: int,
    symmetric: list[list[int]],
    hint: np.ndarray | None,
    time_limit: float,
    num_workers: int,
    random_seed: int,
) -> Outcome:
    """Build and solve the placement-and-schedule model; times in ticks.

    Args:
        graph (OpGraph): the graph.
        cluster (Cluster): the devices.
        dur (np.ndarray): int ticks of each op on each device, ``[num_ops, D]``.
        delay (np.ndarray): int ticks of each edge's transfer between each device pair, ``[num_edges, D, D]``.
        activation_memory (bool): count live activations, not only parameters, against memory.
        link_contention (bool): transfers are tasks on links, one at a time per ordered device pair.
        op_gap (int): ticks a device idles after each op of non-zero duration (Placeto's simulator).
        symmetric (list[list[int]]): classes of interchangeable devices, for symmetry breaking.
        hint (np.ndarray | None): a group placement to start the search from, ``[num_groups]``.
        time_limit (float): CP-SAT deterministic time, not seconds; a wall-clock net (:func:`wall_net`) stops a
            search that falls far behind it, and says so in the outcome's ``wall_net_hit``.
        num_workers (int): solver threads.
        random_seed (int): the solver's seed.

    Returns:
        Outcome: status, the distinct group placements of CP-SAT's final solution and solution pool (the final one
        last, :func:`_pool_placements`), objective and bound in ticks.
    """
    if graph.num_ops == 0:
        return Outcome("optimal", [np.zeros(0, dtype=np.int64)], 0.0, 0.0, 0.0)
    if fits_nowhere(graph, cluster, dur, activation_memory) is not None:
        return Outcome("infeasible", [], None, 0.0, None)
    args: _Args = (graph, cluster, dur, delay, activation_memory, link_contention, op_gap, symmetric, hint, time_limit)
    workers = 1 if cluster.num_devices == 1 else num_workers  # one device: nothing to search in parallel
    if workers == 1:
        return _solve(*args, workers, random_seed)
    # CP-SAT's deterministic parallel search (interleave_search) aborted the whole process in OR-Tools
    # 9.15 on about 1 in 100 random small models (failed CHECKs "threshold > 0", "heuristics.fixed_search
    # != nullptr"; tests/placers/test_exact.py keeps five): it runs in a child process, and a model that kills
    # the child is solved again here with one worker, deterministic too and never seen to abort
    outcome = _solve_forked(args, workers, random_seed) if _can_fork() else _solve_apart(args, workers, random_seed)
    if outcome is None:
        warnings.warn(f"CP-SAT's parallel search aborted on graph {graph.name!r}; solved again with one worker",
                      RuntimeWarning, stacklevel=2)
        return _solve(*args, 1, random_seed)
    return outcome


def memory_unit(cluster: Cluster) -> float:
    """Bytes per memory unit of the model: the power of two that puts the largest capacity near 2^20 units."""
    return 2.0 ** max(0, math.ceil(math.log2(max(cluster.memory.max(), 1.0) / 2**20)))


def fits_nowhere(graph: OpGraph, cluster: Cluster, dur: np.ndarray, activation_memory: bool) -> int | None:
    """An op that no device can run within the model's memory count, or ``None``: the model is then infeasible.

    A necessary condition of the model, checked before CP-SAT: while an op runs on device ``k`` (``dur[v, k] > 0``
    ticks), its device holds its group's parameters, its own output and each input (the whole output of a producer
    in its group; of another, at least the bytes of the edges to it, capped at the whole output), all in units
    rounded up as :meth:`_Model.add_memory` counts them; an op that takes no tick holds its own output. CP-SAT's
    parallel search did not prove such models infeasible: its "fixed" subsolver counted 0.4 deterministic units in
    40 s, so the search ran to the wall-clock safety net ("unknown" at time_limit=1, for a fork of four 4 MB
    outputs on two devices of 9.6 MB) and ended at a load-dependent point.

    Args:
        graph (OpGraph): the graph.
        cluster (Cluster): the devices.
        dur (np.ndarray): int ticks of each op on each device, ``[num_ops, D]``.
        activation_memory (bool): count live activations, not only parameters.

    Returns:
        int | None: the first such op's index, or ``None`` if every op fits some device by this count.
    """
    unit = memory_unit(cluster)
    limit = np.floor(cluster.memory / unit)
    params = np.ceil(np.bincount(graph.group, weights=graph.param_bytes, minlength=graph.num_groups) / unit)
    need = np.repeat(params[graph.group][:, None], cluster.num_devices, axis=1)  # [num_ops, D] units
    if activation_memory:
        own = np.ceil(graph.out_bytes / unit)
        inputs = np.zeros(graph.num_ops)
        read: dict[tuple[int, int], float] = {}  # (producer, consumer) -> bytes of their edges
        for u, w, b in zip(graph.edge_src.tolist(), graph.edge_dst.tolist(), graph.edge_bytes.tolist()):
            read[u, w] = read.get((u, w), 0.0) + b
        group = graph.group
        for (u, w), b in read.items():
            inputs[w] += own[u] if group[u] == group[w] else min(own[u], math.ceil(b / unit))
        need += own[:, None] + np.where(dur > 0, inputs[:, None], 0.0)
    nowhere = np.flatnonzero((need > limit[None, :]).all(axis=1))
    return int(nowhere[0]) if nowhere.size else None


def _can_fork() -> bool:
    """Whether the solver's child is forked: on Linux; elsewhere it is a fresh interpreter (:func:`_solve_apart`).

    Where ``fork`` was not a start method (Windows) the two workers searched in this process, and a model
    that aborts CP-SAT ended the caller (``Fatal Python error: Aborted``); macOS has ``fork``, but Python
    calls it unsafe there (system libraries start threads).
    """
    return sys.platform.startswith("linux") and "fork" in multiprocessing.get_all_start_methods()


def _solve_forked(args: _Args, workers: int, random_seed: int) -> Outcome | None:
    """:func:`_solve` in a forked child, or ``None`` if the child died (CP-SAT aborted)."""
    from concurrent.futures import ProcessPoolExecutor
    from concurrent.futures.process import BrokenProcessPool

    from gnplace.workers import terminate_workers

    try:
        with ProcessPoolExecutor(max_workers=1, mp_context=multiprocessing.get_context("fork"),
                                 initializer=_start_solver, initargs=(os.getpid(),)) as pool:
            future = pool.submit(_solve, *args, workers, random_seed)
            try:
                return future.result()
            except BaseException:
                # Ctrl-C or SIGTERM to this process alone (kill -INT PID, not the terminal's process group): the
                # child solved on to its limit while the pool's exit waited for it (56 s at time_limit=60)
                terminate_workers(pool)
                raise
    except BrokenProcessPool:
        return None


_APART = "from gnplace.placers._exact_model import _solve_for_parent; _solve_for_parent()"


def _solve_apart(args: _Args, workers: int, random_seed: int) -> Outcome | None:
    """:func:`_solve` in a fresh interpreter, or ``None`` if it died (CP-SAT aborted).

    Not ``multiprocessing``'s spawn, which runs the caller's script again in the child (a script without
    ``if __name__ == "__main__"`` would place again there): the child reads its arguments, pickled, from
    its stdin, which stays open while this process lives, and writes the :class:`Outcome` to its stdout.
    """
    import pickle
    import subprocess

    env = {**os.environ, "PYTHONPATH": os.pathsep.join(p for p in sys.path if p)}  # the modules this process sees
    child = subprocess.Popen([sys.executable, "-c", _APART], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                             stderr=subprocess.DEVNULL, env=env)
    assert child.stdin is not None and child.stdout is not None
    try:
        payload = pickle.dumps((os.getpid(), args, workers, random_seed))
        child.stdin.write(len(payload).to_bytes(8, "little") + payload)
        child.stdin.flush()
        result = child.stdout.read()
        child.wait()
    except BaseException:  # Ctrl-C, SIGTERM's exception: the child ends now, not at its limit
        child.kill()
        child.wait()
        raise
    finally:
        child.stdin.close()
        child.stdout.close()
    if child.returncode != 0 or not result:
        return None
    outcome = pickle.loads(result)
    if isinstance(outcome, BaseException):
        raise outcome
    assert isinstance(outcome, Outcome)
    return outcome


def _solve_for_parent() -> None:
    """The fresh interpreter of :func:`_solve_apart`: solve what stdin holds, write the outcome (or error) to stdout.

    It ends within a second of its parent, when the parent's end of stdin closes (any platform) or its
    parent process id changes.
    """
    import pickle
    import threading

    stdin = sys.stdin.buffer
    size = int.from_bytes(stdin.read(8), "little")
    received: tuple[int, _Args, int, int] = pickle.loads(stdin.read(size))
    parent, args, workers, random_seed = received
    _start_solver(parent)
    threading.Thread(target=_exit_at_end_of, args=(stdin.fileno(),), name="gnplace-parent-pipe", daemon=True).start()
    result = os.dup(1)
    os.dup2(os.open(os.devnull, os.O_WRONLY), 1)  # nothing but the outcome reaches the parent
    try:
        outcome: Outcome | Exception = _solve(*args, workers, random_seed)
    except Exception as err:  # noqa: BLE001 - raised again in the parent, as a pool's worker hands it back
        outcome = err
    with os.fdopen(result, "wb") as out:
        out.write(pickle.dumps(outcome))
    os._exit(0)  # not Python's shutdown: the watch threads block in reads and sleeps


def _exit_at_end_of(fd: int) -> None:
    """End this process (status 1) once ``fd``, this end of a pipe from the parent, reads end of file: it is gone."""
    while os.read(fd, 1 << 16):
        pass
    os._exit(1)


def _start_solver(parent: int) -> None:
    """In the solver's child process: end with ``parent`` (a process id), and write nothing to stderr.

    A command killed with SIGTERM or SIGKILL (no handler: it dies at once) left the child solving, orphaned, to
    its time limit (``exact.time_limit=600`` kept a core busy for ten minutes); it now exits within a second.
    """
    from gnplace.workers import watch_parent

    watch_parent(parent)
    _quiet_stderr()


def _quiet_stderr() -> None:
    """In the solver's child process: OR-Tools' abort trace (and Python's fault handler) write nowhere."""
    import faulthandler
    import os

    faulthandler.disable()
    os.dup2(os.open(os.devnull, os.O_WRONLY), 2)


def _solve(
    graph: OpGraph, cluster: Cluster, dur: np.ndarray, delay: np.ndarray, activation_memory: bool,
    link_contention: bool, op_gap: int, symmetric: list[list[int]], hint: np.ndarray | None, time_limit: float,
    workers: int, random_seed: int,
) -> Outcome:
    """:func:`solve` in this process with ``workers`` solver threads (interleaved, so deterministic, if several)."""
    m = _Model(cp_model.CpModel(), graph, cluster, dur, delay, op_gap)
    if link_contention:
        m.add_transfers()
    m.add_memory(activation_memory)
    for members in symmetric:
        m.break_symmetry(members)
    model, x, devices = m.model, m.x, range(cluster.num_devices)
    model.minimize(m.makespan)
    if hint is not None:
        for g in range(graph.num_groups):
            for k in devices:
                model.add_hint(x[g][k], int(hint[g]) == k)
    solver = cp_model.CpSolver()
    # deterministic: the limit is CP-SAT's deterministic time and parallel workers interleave in a
    # fixed order; the wall-clock limit (wall_net) is only a safety net against a pathological model: a
    # tight one ended the search at a load-dependent point on a loaded machine
    net = wall_net(time_limit)
    solver.parameters.max_deterministic_time = time_limit
    solver.parameters.max_time_in_seconds = net
    solver.parameters.interleave_search = workers > 1  # one worker is deterministic by itself
    solver.parameters.num_workers = workers
    solver.parameters.random_seed = random_seed
    solver.parameters.ignore_subsolvers.extend(IGNORED_SUBSOLVERS)
    solver.parameters.interleave_batch_size = workers  # one task per worker a batch (CP-SAT's default: 6 tasks)
    # the solutions come from CP-SAT's pool, synchronized between batches, not from a solution callback (see
    # _pool_placements): only the response's fields are read, and the search is the same with it filled
    solver.parameters.fill_additional_solutions_in_response = True
    began = time.perf_counter()
    status = _solve_interruptibly(solver, model)
    spent, wall = float(solver.response_proto.deterministic_time), time.perf_counter() - began
    # a proof ends the search whenever it comes; otherwise the net ended it if its time came. Timed around the call,
    # not by CP-SAT's wall_time, which starts after the net's clock (0.046 s reported for a net of 0.05 s); where both
    # limits came at once, the net is blamed: the result may depend on the load
    cut = status not in (cp_model.OPTIMAL, cp_model.INFEASIBLE) and wall >= net
    if status == cp_model.INFEASIBLE:
        return Outcome("infeasible", [], None, 0.0, None, spent, wall)
    if status not in (cp_model.OPTIMAL, cp_model.FEASIBLE):
        if status == cp_model.MODEL_INVALID:  # pragma: no cover - a bug in this module
            raise RuntimeError(f"CP-SAT rejected the model: {model.validate().splitlines()[0]}")
        return Outcome("unknown", [], None, float(solver.best_objective_bound), None, spent, wall, cut)
    objective = float(solver.objective_value)
    bound = float(solver.best_objective_bound)
    solutions = _pool_placements(solver.response_proto, [[lit.index for lit in lits] for lits in x])
    gap = (objective - bound) / objective if objective > 0 else 0.0
    status_name = "optimal" if status == cp_model.OPTIMAL else "feasible"
    return Outcome(status_name, solutions, objective, bound, gap, spent, wall, cut)



def _pool_placements(response: Any, literals: list[list[int]]) -> list[np.ndarray]:
    """The group placements of CP-SAT's final solution and of the other solutions of its pool, distinct, the final last.

    Not the solutions a solution callback is handed: the interleaved search runs a batch's tasks in parallel threads,
    and a solution is reported only if it is strictly better than every solution reported before it, so which of two
    tasks' solutions are reported depends on the threads' timing, that is on the machine's load (nmt_004@12 on k80x4
    handed the callback 47 or 50 solutions at the same deterministic time and final solution, and the descent from them
    returned 46.3206 or 46.3149 ms). The pool (``solution_pool_size`` best, CP-SAT's default 3) and the final
    solution are read from CP-SAT's solution repository, which keeps every solution found, sorted by objective and
    then by values at each synchronization between batches: the same whatever the timing.

    Args:
        response (CpSolverResponse): the solve's response, with ``additional_solutions`` filled.
        literals (list[list[int]]): the model's index of the literal "group g on device k", ``[num_groups][D]``.

    Returns:
        list[np.ndarray]: int64 group placements ``[num_groups]``, the pool's worst first, the final solution last.
    """
    index = np.asarray(literals, dtype=np.int64)
    found: list[np.ndarray] = []
    for values in [response.solution, *(other.values for other in response.additional_solutions)]:
        placement = np.asarray(values, dtype=np.int64)[index].argmax(axis=1)
        if not any(np.array_equal(placement, seen) for seen in found):
            found.append(placement)
    return found[::-1]


def _solve_interruptibly(solver: Any, model: Any) -> Any:
    """``solver.solve(model)``, ended by Ctrl-C with a ``KeyboardInterrupt``; returns the status.

    CP-SAT's own SIGINT handler (``catch_sigint_signal``, on by default) stopped the search and returned
    its best so far as if the time limit had come: ``gnplace place -p exact`` with one solver worker (a
    single-device cluster, ``num_workers=1``, the one-worker solve after an abort) went on and exited 0 on
    Ctrl-C. Python runs signal handlers only in the main thread between bytecodes, never inside the solve,
    so the solve runs in a thread (CP-SAT releases the GIL) while the main thread waits on an event, and on
    Ctrl-C stops the search, waits for the thread to end and raises. (Not ``Thread.join``: Python 3.11's join
    interrupted by Ctrl-C marks a running thread stopped, and the process then aborted at exit with the
    solver's thread running.) Off the main thread, where no signal arrives, it solves in place.
    """
    import threading

    if threading.current_thread() is not threading.main_thread():
        return solver.solve(model)
    solver.parameters.catch_sigint_signal = False
    done: list[Any] = []
    finished = threading.Event()

    def run() -> None:
        try:
            done.append(solver.solve(model))
        except BaseException as err:  # noqa: BLE001 - raised again in the caller's thread
            done.append(err)
        finally:
            finished.set()

    threading.Thread(target=run, name="cp-sat", daemon=True).start()
    try:
        while not finished.wait(0.1):
            pass
    except BaseException:  # Ctrl-C (or SIGTERM's SystemExit) while solving: stop the search, then raise
        solver.stop_search()
        finished.wait()
        raise
    if isinstance(done[0], BaseException):
        raise done[0]
    return done[0]


class _Model:
    """The CP-SAT model: placement literals, op intervals, precedence with delays, and add-ons."""

    def __init__(
        self, model: Any, graph: OpGraph, cluster: Cluster, dur: np.ndarray, delay: np.ndarray, op_gap: int = 0
    ) -> None:
        self.model, self.graph, self.cluster, self.delay = model, graph, cluster, delay
        n, devices = graph.num_ops, range(cluster.num_devices)
        # ops that take no tick on some device: a memory interval of theirs may have no length, which a
        # cumulative constraint ignores (its bytes were never counted: "optimal" placements out of memory)
        self.instant = (dur.min(axis=1) == 0).tolist() if n else []
        self.group = group = graph.group.tolist()
        # a serial schedule fits: every op at its slowest, each followed by its device's gap and by its transfers
        self.horizon = int(dur.max(axis=1).sum() + delay.max(axis=(1, 2)).sum() + op_gap * n) + 1
        # ALGO LOGIC: placement literals, one set per colocation group
        self.x = x = [[model.new_bool_var(f"x{g}_{k}") for k in devices] for g in range(graph.num_groups)]
        for lits in x:
            model.add_exactly_one(lits)
        self.start = start = [model.new_int_var(0, self.horizon, f"s{v}") for v in range(n)]
        self.end = end = [model.new_int_var(0, self.horizon, f"e{v}") for v in range(n)]
        self.makespan = model.new_int_var(0, self.horizon, "makespan")
        per_device: list[list[Any]] = [[] for _ in devices]
        for v in range(n):
            lits = x[group[v]]
            model.add(end[v] == start[v] + sum(int(dur[v, k]) * lits[k] for k in devices))
            model.add(self.makespan >= end[v])
            for k in devices:
                if dur[v, k] > 0:
                    # the device is busy for the op and the gap after it; the output is ready at its end
                    busy = int(dur[v, k]) + op_gap
                    interval = model.new_optional_fixed_size_interval_var(start[v], busy, lits[k], "")
                    per_device[k].append(interval)
        for k in devices:
            model.add_no_overlap(per_device[k])
            # redundant: a device's work fits before the makespan (strengthens the bound)
            model.add(sum(int(dur[v, k]) * x[group[v]][k] for v in range(n)) <= self.makespan)
        # precedence, plus the transfer delay when producer and consumer sit on different devices
        for e, (u, w) in enumerate(zip(graph.edge_src.tolist(), graph.edge_dst.tolist())):
            model.add(start[w] >= end[u])
            if group[u] != group[w]:
                for a in devices:
                    for b in devices:
                        if a != b and delay[e, a, b] > 0:
                            late = model.add(start[w] >= end[u] + int(delay[e, a, b]))
                            late.only_enforce_if(x[group[u]][a], x[group[w]][b])
        # remote[u]: consumers of u's output outside u's group, by group
        ptr, dst, _ = graph.out_csr
        self.remote: list[dict[int, list[int]]] = []
        for u in range(n):
            by_group: dict[int, list[int]] = {}
            for w in dst[ptr[u] : ptr[u + 1]].tolist():
                if group[w] != group[u]:
                    by_group.setdefault(group[w], []).append(w)
            self.remote.append(by_group)
        self._received: dict[tuple[int, int], Any] = {}
        self.transfer_start: dict[tuple[int, int], Any] = {}

    def received(self, u: int, b: int) -> Any:
        """Literal: u's output is sent to device b (u is not on b and a consumer is); forced up, not down."""
        key = (u, b)
        if key not in self._received:
            lit = self.model.new_bool_var(f"recv{u}_{b}")
            gu = self.group[u]
            for gw in self.remote[u]:
                self.model.add_bool_or([lit, self.x[gw][b].Not(), self.x[gu][b]])
            self._received[key] = lit
        return self._received[key]

    def add_transfers(self) -> None:
        """Transfers as tasks on links, one at a time per ordered device pair, as in the simulator.

        Each output goes once to each remote device that consumes it, carrying the largest of the
        edges to the consumers on that device (the simulator's size when edges carry the whole output,
        and never more than it); consumers start after it.
        """
        model, x, group, devices = self.model, self.x, self.group, range(self.cluster.num_devices)
        links: dict[tuple[int, int], list[Any]] = {}
        ptr, dst, _ = self.graph.out_csr
        csr_edge = np.argsort(self.graph.edge_src, kind="stable")  # CSR position -> edge index
        for u, by_group in enumerate(self.remote):
            if not by_group:
                continue
            gu = group[u]
            edges: dict[int, list[int]] = {}  # consumer group -> u's edges into it
            for i in range(ptr[u], ptr[u + 1]):
                if group[int(dst[i])] != gu:
                    edges.setdefault(group[int(dst[i])], []).append(int(csr_edge[i]))
            for b in devices:
                sent = model.new_int_var(0, self.horizon, f"xfer{u}_{b}")
                model.add(sent >= self.end[u])
                self.transfer_start[u, b] = sent
                here = self.received(u, b)
                for a in devices:
                    if a == b:
                        continue
                    sizes = {gw: max(int(self.delay[e, a, b]) for e in es) for gw, es in edges.items()}
                    on_link = model.new_bool_var(f"link{u}_{a}_{b}")  # u on a and sent to b
                    model.add_bool_or([on_link, x[gu][a].Not(), here.Not()])
                    model.add_implication(on_link, x[gu][a])
                    model.add_implication(on_link, here)
                    size: Any
                    if len(set(sizes.values())) == 1:
                        size = next(iter(sizes.values()))
                        transfer = model.new_optional_fixed_size_interval_var(sent, size, on_link, "")
                    else:  # the largest edge into a consumer group on b: an edge to another device is not sent here
                        size = model.new_int_var(min(sizes.values()), max(sizes.values()), f"xfersize{u}_{a}_{b}")
                        for gw, ticks in sizes.items():
                            model.add(size >= ticks).only_enforce_if(x[gw][b])
                        arrived = model.new_int_var(0, 2 * self.horizon, f"xferend{u}_{a}_{b}")
                        model.add(arrived == sent + size)
                        transfer = model.new_optional_interval_var(sent, size, arrived, on_link, "")
                    links.setdefault((a, b), []).append(transfer)
                    for gw, ws in by_group.items():
                        for w in ws:
                            model.add(self.start[w] >= sent + size).only_enforce_if(x[gu][a], x[gw][b])
        for intervals in links.values():
            model.add_no_overlap(intervals)

    def add_memory(self, activations: bool) -> None:
        """Resident parameters, plus live activations if asked, within each device's capacity.

        Memory is counted in units of a power of two bytes that puts the largest capacity near 2^20
        (demands rounded up, capacities down: conservative). An op's output lives on its device from
        the op's start until its last local consumer ends and its transfers are done (before every
        remote consumer starts); a received copy lives on the receiver from the transfer's start
        until the last consumer there ends, and holds the bytes the consumers there read (at most the
        whole output), as in the simulator.

        A device that would hold every parameter, every output and a whole copy of every output sent
        elsewhere at once gets no cumulative constraint, which could never bind there: on tiny graphs
        far below their devices' memory it kept CP-SAT from proving optimal placements of 5 and 6 ops
        within the default limit, and returned ones up to 1.5 times the optimum.
        """
        model, graph, x, group = self.model, self.graph, self.x, self.group
        capacity, devices = self.cluster.memory, range(self.cluster.num_devices)
        unit = memory_unit(self.cluster)
        params = np.bincount(graph.group, weights=graph.param_bytes, minlength=graph.num_groups)
        resident = [sum(math.ceil(params[g] / unit) * x[g][k] for g in range(graph.num_groups) if params[g] > 0)
                    for k in devices]
        limit = [int(capacity[k] // unit) for k in devices]
        ceiling = sum(math.ceil(p / unit) for p in params.tolist()) + sum(
            math.ceil(graph.out_bytes[u] / unit) * (2 if self.remote[u] else 1) for u in range(graph.num_ops))
        if activations:
            tight = [k for k in devices if ceiling > limit[k]]  # where live activations may exceed the memory
        if not activations or not tight:
            for k in devices:
                model.add(resident[k] <= limit[k])
            return
        intervals: list[list[Any]] = [[] for _ in devices]
        demands: list[list[int]] = [[] for _ in devices]
        ptr, consumers, edge_bytes = graph.out_csr
        for u in range(graph.num_ops):
            size = math.ceil(graph.out_bytes[u] / unit)
            if size == 0:
                continue
            gu = group[u]
            live_end = model.new_int_var(0, self.horizon, f"live{u}")
            model.add(live_end >= self.end[u])
            for w in consumers[ptr[u] : ptr[u + 1]].tolist():
                if group[w] == gu:
                    model.add(live_end >= self.end[w])
                else:
                    model.add(live_end >= self.start[w])
                    for k in devices:
                        model.add(live_end >= self.end[w]).only_enforce_if(x[gu][k], x[group[w]][k])
            if self.instant[u]:  # held for a tick at least: stricter than the timer, as demands rounded up are
                model.add(live_end >= self.start[u] + 1)
            live = model.new_int_var(0, self.horizon, f"livesize{u}")
            model.add(live == live_end - self.start[u])
            for k in devices:
                intervals[k].append(model.new_optional_interval_var(self.start[u], live, live_end, x[gu][k], ""))
                demands[k].append(size)
            if not self.remote[u]:
                continue
            # a copy on device k holds the bytes its consumers there read, at most the whole output (the simulator's
            # rule): per consumer group, in units rounded up, so the model stays as strict as the timer or stricter
            to_group: dict[int, float] = {}
            for w, b in zip(consumers[ptr[u] : ptr[u + 1]].tolist(), edge_bytes[ptr[u] : ptr[u + 1]].tolist()):
                if group[w] != gu:
                    to_group[group[w]] = to_group.get(group[w], 0.0) + b
            whole = math.ceil(graph.out_bytes[u] / unit)
            units = {gw: math.ceil(b / unit) for gw, b in to_group.items()}
            most = sum(units.values())  # every consumer group on one device
            for k in devices:
                read_here = sum(n * x[gw][k] for gw, n in units.items())
                if len(units) == 1 and most <= whole:
                    copy_bytes: Any = read_here  # one variable: a demand CP-SAT takes as it is (affine)
                else:  # a demand is affine in one variable at most: the sum, capped at the whole output, in one
                    copy_bytes = model.new_int_var(0, min(whole, most), f"copybytes{u}_{k}")
                    if most <= whole:
                        model.add(copy_bytes == read_here)
                    else:
                        model.add_min_equality(copy_bytes, [whole, read_here])
                arrives = self.transfer_start.get((u, k), self.end[u])
                copy_end = model.new_int_var(0, self.horizon, f"copyend{u}_{k}")
                model.add(copy_end >= arrives)
                if any(self.instant[w] for ws in self.remote[u].values() for w in ws):  # (as above)
                    model.add(copy_end >= arrives + 1)
                for gw, ws in self.remote[u].items():
                    for w in ws:
                        model.add(copy_end >= self.end[w]).only_enforce_if(x[gw][k])
                copy = model.new_int_var(0, self.horizon, f"copysize{u}_{k}")
                model.add(copy == copy_end - arrives)
                intervals[k].append(model.new_optional_interval_var(arrives, copy, copy_end, self.received(u, k), ""))
                demands[k].append(copy_bytes)
        for k in devices:
            if k not in tight:  # everything fits at once: only the parameters' bound, trivially met
                model.add(resident[k] <= limit[k])
                continue
            free = model.new_int_var(0, limit[k], f"free{k}")  # memory units left for activations
            model.add(free == limit[k] - resident[k])
            model.add_cumulative(intervals[k], demands[k], free)

    def break_symmetry(self, members: list[int]) -> None:
        """Interchangeable devices ``members``: device ``members[i]`` is used only after ``members[i-1]``."""
        model, x = self.model, self.x
        used: list[Any] = [False] * len(members)  # literal "an earlier group sits on members[i]"
        for g in group_order(self.graph).tolist():
            for i in range(1, len(members)):
                if used[i - 1] is False:
                    model.add(x[g][members[i]] == 0)
                else:
                    model.add_implication(x[g][members[i]], used[i - 1])
            now = []
            for i, k in enumerate(members):
                if used[i] is False:
                    now.append(x[g][k])
                else:
                    lit = model.new_bool_var(f"used{g}_{k}")
                    model.add_max_equality(lit, [used[i], x[g][k]])
                    now.append(lit)
            used = now
