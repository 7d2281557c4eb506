"""Fine-tuning the pretrained policy on one graph and cluster, scored by the simulator or by real steps.

:func:`finetune` runs PPO from a policy checkpoint (the shipped one by default) on the target pair for
a budget of timer evaluations (:class:`~gnplace.rl.search.FineTunePlacer`), with the timer named by
``timer``:

* ``"sim"``: the simulator (any graph source);
* ``"local"``: real steps in this process over the devices torch sees
  (:class:`~gnplace.execute.local.LocalTimer`; the graph must come from ``module:factory``);
* ``"dist"``: real steps with one ``torch.distributed`` rank per cluster device
  (:class:`~gnplace.execute.dist.DistTimer`; ``module:factory``; under ``torchrun`` the ranks other
  than 0 serve the timer and return). Its gloo ranks are CPUs: the cluster must be of CPUs (the one
  ``gnplace profile --timer dist`` writes); a GPU cluster is refused before anything runs.

The checkpoint's zero-shot placement is timed first and returned if the search, which starts from
``auto``'s placement, ends slower (``zero_shot``; the zero-shot candidates' evaluations count against
the budget), so fine-tuning never returns worse than ``auto`` or placing zero-shot with the same checkpoint.

Lightning shows progress and writes ``OUT/last.ckpt`` every ``checkpoint_every_s`` seconds and at the
end (``resume=True`` continues from it, and refuses one that is unreadable or another run's: of
another graph, cluster or starting checkpoint) and CSV logs in ``OUT/logs``. A real timer's measurements
also go to ``OUT/measurements.jsonl`` as they are taken (:mod:`gnplace.execute.journal`), and a resumed
run answers from it every placement measured before, after the last checkpoint too. The best placement goes to
``OUT/placement.json`` and a summary, with the same timer's step times of ``single``, ``round_robin``
and ``auto`` beside it, to ``OUT/summary.json``. With a real timer the best placement is measured
again for the summary, beside the others: the best of many noisy measurements flatters itself. They
race in ``final_rounds`` rounds, each measuring every one afresh in turn, medians kept, with the next
fastest placement the search measured among them (:data:`FINALISTS`). The fastest of the search's
two, ``auto``'s and ``single``'s is what ``placement.json`` holds and the summary reports (``chosen``;
``search_step_s`` is the search's best's). During the search a real timer measures a placement ``confirm``
more times when its first measurement is the fastest yet, and keeps the median (:data:`CONFIRM`), so that the
search does not anchor to, nor its polish anneal from, a lucky draw.
"""

from __future__ import annotations

import math
import os
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from gnplace.exceptions import InvalidArgument
from gnplace.graph_io import refuse_link, write_atomically
from gnplace.limits import as_path, is_whole, json_text
from gnplace.runlock import holds_folder
from gnplace.sim.timer import median_step, relative_step

__all__ = ["finetune", "TIMERS", "JOURNAL", "FINAL_ROUNDS", "FINALISTS", "CONFIRM"]

#: The timers fine-tuning can score with.
TIMERS = ("sim", "local", "dist")

#: Rounds of the comparison after a real timer's search: each placement compared is measured once a round,
#: afresh and in turn, and its median counts (the default of ``final_rounds``, ``--final-rounds``).
FINAL_ROUNDS = 3

#: The search's placements in that comparison: its best and the next fastest it measured. The best of many
#: noisy measurements flatters itself, and the placement it beat by a lucky draw may be the faster one.
FINALISTS = 2

#: A real timer's search measures a placement this many more times when its first measurement is the fastest yet,
#: and keeps the median (:class:`~gnplace.execute.base.RealStepTimer`'s ``confirm``; ``--confirm``). On a stand-in
#: for real steps with the noise measured on this project's VM (``python scripts/bench.py noisy-steps``), 2 left the
#: search's best 0.971 of ``auto``'s true step where it was 0.981 without, for 28% more measurements; without it and
#: a budget of as many measurements, 0.980.
CONFIRM = 2

#: The file in the output folder that keeps a real timer's measurements (:mod:`gnplace.execute.journal`).
JOURNAL = "measurements.jsonl"


def _with_costs(graph: Any, costs: str | None, cluster: Any) -> Any:
    """``graph`` with the measured ``cost_s`` of the profiled graph file ``costs`` (same nodes), for ``cluster``.

    Raises:
        InvalidArgument: if ``costs`` profiles another graph, or no device kind of ``cluster``, or holds no measured
            seconds at all (a graph file gnplace profile did not write): either would have been ignored without a word.
    """
    if costs is None:
        return graph
    from gnplace.graph_io import load_graph

    measured = load_graph(costs)
    if not measured.cost_s:  # the graph file, not the profiled one: the cost model planned, without a word
        raise InvalidArgument(f"{costs}: holds no measured op seconds (a graph file gnplace profile wrote has them): "
                              "give that file, or leave --costs out")
    if not set(measured.cost_s) & set(cluster.kinds):
        raise InvalidArgument(
            f"{costs}: measured seconds on device kinds {', '.join(sorted(measured.cost_s))}, of which cluster "
            f"{cluster.name!r} ({', '.join(sorted(set(cluster.kinds)))}) has none: give the cluster file gnplace "
            "profile wrote beside it, or leave --costs out")
    if measured.node_names != graph.node_names:
        raise InvalidArgument(
            f"{costs}: profiled for another graph ({measured.num_ops} nodes, this one {graph.num_ops})"
        )
    # the same names with other ops or sizes (another optimizer: an adam_update took an sgd_update's seconds;
    # other input shapes) is another graph too
    for field in ("op_types", "edge_src", "edge_dst", "flops", "out_bytes", "param_bytes", "edge_bytes"):
        if not np.array_equal(np.asarray(getattr(measured, field)), np.asarray(getattr(graph, field))):
            raise InvalidArgument(f"{costs}: profiled for another graph (the same op names, other {field}: "
                                  "another optimizer or other input shapes?)")
    return graph.replace(cost_s={**graph.cost_s, **measured.cost_s})


def _refuse_another_run(path: Path, graph: Any, cluster: Any) -> None:
    """Refuse to run again into a finished run, without a ``last.ckpt``, whose placement file ``path`` is another's.

    Another graph's or cluster's, by the fingerprints the file records (an unreadable file, or one that records
    none, is taken as this run's, as before). A run too short for a checkpoint leaves only its results, and
    ``--resume`` runs again into that folder: of another graph it overwrote them, where a ``last.ckpt`` of another
    graph's run is refused.

    Raises:
        InvalidArgument: naming what differs.
    """
    import json

    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, ValueError):
        return
    if not isinstance(data, dict):
        return
    differ = []
    if isinstance(data.get("graph_fingerprint"), str) and data["graph_fingerprint"] != graph.fingerprint():
        differ.append(f"another graph ({str(data.get('graph'))[:80]!r}; here {graph.name!r})")
    if isinstance(data.get("cluster_fingerprint"), str) and \
            data["cluster_fingerprint"] not in (cluster.fingerprint(), cluster.earlier_fingerprint()):
        name = str(data.get("cluster"))[:80]
        differ.append(f"another cluster ({name}; here {cluster.name})" if name != cluster.name
                      else f"another cluster ({name} with other devices)")
    if differ:
        raise InvalidArgument(f"{path.parent} holds a finished run of {' and '.join(differ)} ({path.name}): "
                              "resume with the same inputs or use another -o")


def _runners_up(timed: dict[tuple[str, bytes], Any], cluster: Any, best: Any, count: int) -> list[np.ndarray]:
    """The devices of the ``count`` placements measured fastest in ``timed`` (a real timer's cache) after ``best``.

    Placements out of memory are left out; ``best`` too, wherever it ranks.
    """
    fingerprint, skip = cluster.fingerprint(), best.devices.astype(np.int64).tobytes()
    fitting = sorted((result.step_time, devices) for (fp, devices), result in timed.items()
                     if fp == fingerprint and devices != skip and not result.is_oom)
    return [np.frombuffer(devices, dtype=np.int64).copy() for _, devices in fitting[:count]]


def _race(timer: Any, graph: Any, cluster: Any, placements: dict[str, Any], rounds: int, *,
          afresh: bool) -> tuple[dict[str, Any], dict[str, list[float]]]:
    """Measure ``placements`` in ``rounds`` interleaved rounds; one placement under several names once a round.

    ``afresh``: each measurement past a real timer's cache (:meth:`~gnplace.execute.base.RealStepTimer.measure`),
    so that none is the draw a search or ``auto`` picked it by; otherwise :meth:`~gnplace.sim.timer.StepTimer.time`
    (the simulator: exact, so one round is all).

    Returns:
        tuple: each name's median :class:`~gnplace.sim.timer.StepResult` (the lower middle one of an even
        count), and each name's seconds in every round.
    """
    keys = {name: placement.devices.astype(np.int64).tobytes() for name, placement in placements.items()}
    timed = timer.measure if afresh else timer.time
    samples: dict[bytes, list[Any]] = {key: [] for key in keys.values()}
    for done in range(rounds):
        for name, placement in placements.items():
            if len(samples[keys[name]]) == done:  # (not under another name this round)
                samples[keys[name]].append(timed(graph, cluster, placement))
    medians = {name: median_step(samples[key]) for name, key in keys.items()}
    return medians, {name: [r.step_time for r in samples[key]] for name, key in keys.items()}


@holds_folder("out", "-o")  # one run at a time in a folder
def finetune(
    source: str | os.PathLike[str],
    cluster: Any,
    *,
    checkpoint: str | None = None,
    timer: str = "sim",
    budget: int = 1000,
    out: str | os.PathLike[str] = "out/finetune",
    resume: bool = False,
    seed: int = 0,
    samples: int = 16,
    epochs: int = 4,
    lr: float = 1e-3,
    screen: int = 48,
    screen_model: str = "auto",
    devices: list[str] | None = None,
    threads: int = 1,
    repeats: int = 5,
    costs: str | None = None,
    checkpoint_every_s: float = 60.0,
    progress: bool | None = None,
    zero_shot: bool = True,
    optimizer: str | None = None,
    polish: float | None = None,
    final_rounds: int = FINAL_ROUNDS,
    confirm: int = CONFIRM,
    input_shapes: Mapping[str, Sequence[int]] | None = None,
) -> dict[str, Any] | None:
    """Fine-tune the policy on ``source`` placed on ``cluster`` (see the module docstring).

    Args:
        source (str or Path): a graph file, an ONNX file or ``module:factory`` (real timers: ``module:factory``);
            an :class:`~gnplace.graph.OpGraph` in hand must be saved first (:func:`~gnplace.graph_io.save_graph`).
        cluster (Cluster or str): the target cluster (a preset, a YAML file such as ``gnplace profile``'s).
        checkpoint (str, optional): the policy to start from (default: the shipped checkpoint).
        timer (str, optional): ``"sim"``, ``"local"`` or ``"dist"`` (default: ``"sim"``).
        budget (int, optional): timer evaluations in all (default: 1,000).
        out (str or Path, optional): output folder (default: ``out/finetune``).
        resume (bool, optional): continue from ``OUT/last.ckpt`` (default: :obj:`False`).
        seed (int, optional): seed (default: 0).
        samples (int, optional): placements per PPO iteration (default: 16).
        epochs (int, optional): PPO epochs per batch (default: 4).
        lr (float, optional): Adam's learning rate (default: 1e-3).
        screen (int, optional): candidates drawn per placement timed: a model learned from the
            placements timed so far picks which to time (:mod:`gnplace.rl.screen`); 1 times every sample
            drawn (default: 48).
        screen_model (str, optional): what that model starts from: ``"simulator"``, the simulator's step
            of each candidate on ``cluster`` (with ``costs``' op seconds), corrected by what the timer
            measures; ``"learned"``, nothing; ``"auto"``, the simulator with a real timer and nothing with
            ``"sim"`` (default: ``"auto"``).
        devices (list[str], optional): torch device of each cluster device for ``"local"``.
        threads (int, optional): torch CPU threads per rank for ``"dist"``, and while each step is timed for
            ``"local"`` (default: 1).
        repeats (int, optional): timed steps per real measurement, median taken (default: 5).
        costs (str, optional): a graph file from ``gnplace profile`` whose measured op seconds the
            policy plans with (default: the cost model).
        checkpoint_every_s (float, optional): seconds between checkpoints (default: 60).
        progress (bool, optional): show the progress bar (default: on a terminal).
        zero_shot (bool, optional): time the checkpoint's zero-shot placement first
            (:class:`~gnplace.rl.zeroshot.PolicyPlacer`, 16 samples; its evaluations count against
            ``budget``) and return it if the search ends slower; :obj:`False`: ``auto``'s placement
            and the search alone (default: :obj:`True`).
        optimizer (str, optional): the optimizer ``source`` is imported with (an ONNX file, ``module:factory``):
            the update and state its graph counts and real steps run; a graph file keeps its own, and one
            given must be it (default: ``"sgd"`` for imported models).
        polish (float, optional): share of ``budget`` spent last on simulated annealing from the search's
            best placement; 0: PPO spends it all, but for the evaluations its memo leaves unspent (placements it
            drew again are not timed again), which annealing spends
            (default: :data:`~gnplace.rl.search.FINETUNE_POLISH`).
        final_rounds (int, optional): real timers: rounds of the comparison after the search, each
            measuring every placement compared afresh, in turn; medians count (default: :data:`FINAL_ROUNDS`;
            the simulator is exact and times each once).
        confirm (int, optional): real timers: more measurements of a placement the search measures faster than
            every one before it, the median kept (beyond ``budget``: real steps, not evaluations); 0: none
            (default: :data:`CONFIRM`; the simulator is exact and ignores it).
        input_shapes (mapping, optional): an ONNX ``source``'s sizes of its inputs' dynamic dimensions, by input
            name (``--input-shape``); refused for a real timer, which runs a ``module:factory``'s example inputs.

    Returns:
        dict | None: the summary (also in ``OUT/summary.json``); ``None`` on a serving rank. Of its
        ``evaluations``, ``polish_evaluations`` annealed from the search's best placement. Step times
        in seconds, each measured afresh after the search (with a real timer the median of
        ``final_rounds`` interleaved rounds, the rounds in ``final_rounds_s``; ``measured_steps`` counts a real
        timer's measurements, the search's, their confirmations and the race's): ``step_time_s`` of the
        placement returned (``chosen``: ``"search"``, the search's best; with a real timer ``"search_2"``,
        the next fastest placement it measured, or ``"auto"`` or ``"single"``, when that one measures
        faster afresh), ``search_step_s`` of the search's best, and those of ``single``,
        ``round_robin``, ``auto`` and the zero-shot placement (``zero_shot_s`` is ``None`` when the budget
        left it untimed); beside each, ``*_oom`` says whether that placement runs out of device memory
        (``oom`` for the one returned).

    Raises:
        InvalidArgument: for an unknown timer, a setting out of its range or of the wrong kind (``resume``,
            ``zero_shot`` or ``progress`` no bool, ``out`` no path), a real timer with a graph file, without
            ``resume`` an ``OUT/measurements.jsonl`` that holds measurements or a finished run's results, or with
            ``resume`` a finished run without ``OUT/last.ckpt`` whose ``placement.json`` is of another graph or cluster
            (nothing in ``out`` is written then).
        InvalidCheckpoint: for a bad checkpoint, or with ``resume`` an ``OUT/last.ckpt`` or
            ``OUT/measurements.jsonl`` that is unreadable, foreign or another run's (nothing in ``out`` is
            written then).
        InfeasiblePlacement: if no placement of the graph fits the cluster's memory (nothing is written).
    """
    from gnplace.cluster import load_cluster
    from gnplace.graph import require_ops
    from gnplace.placement import Placement, save_placement
    from gnplace.placers import get_placer
    from gnplace.rl.search import FINETUNE_POLISH, FineTunePlacer
    from gnplace.sim.bounds import require_memory

    as_path(source, "finetune source (a graph file, an ONNX file or MODULE:FACTORY)")  # an OpGraph: pathlib's TypeError
    source = os.fspath(source)
    if timer not in TIMERS:
        raise InvalidArgument(f"unknown timer {timer!r} (choose one of: {', '.join(TIMERS)})")
    if screen_model not in ("auto", "learned", "simulator"):
        raise InvalidArgument(f"unknown screen model {screen_model!r} (choose one of: auto, learned, simulator)")
    if screen_model == "simulator" and timer == "sim":
        raise InvalidArgument("the simulator screen ranks a real timer's candidates; with --timer sim it would "
                              "make evaluations free (use --screen-model learned)")
    if devices and timer != "local":
        raise InvalidArgument(f"devices name the torch devices of the local timer; the {timer} timer takes none")
    for name, value, least in (("repeats", repeats, 1), ("threads", threads, 1), ("screen", screen, 1),
                               ("final_rounds", final_rounds, 1), ("confirm", confirm, 0)):
        if not is_whole(value) or value < least:  # a numpy integer is whole too, a bool is not
            raise InvalidArgument(f"{name} must be a whole number >= {least}, got {value!r}")
    repeats, threads, screen, final_rounds, confirm = map(int, (repeats, threads, screen, final_rounds, confirm))
    from gnplace.placers.base import check_flag

    # each was read by its truth: resume="no" resumed, progress="no" showed the bar
    resume, zero_shot = check_flag("finetune", "resume", resume), check_flag("finetune", "zero_shot", zero_shot)
    progress = None if progress is None else check_flag("finetune", "progress", progress)
    as_path(out, "finetune output folder")  # None was pathlib's TypeError, after the graph was loaded
    step_timer: Any
    closer = None
    if timer == "sim":
        from gnplace.importers.sources import load_graph_source
        from gnplace.sim.simulator import Simulator

        graph = load_graph_source(source, input_shapes=input_shapes, optimizer=optimizer)
        step_timer = Simulator()
    else:
        from gnplace.importers.sources import load_step_source, refuse_input_shapes

        if input_shapes:  # a real step runs the factory's example inputs: an ONNX file has none to run
            refuse_input_shapes(source)

        if timer == "dist":
            from gnplace.execute.dist import check_cores, launched_by_torchrun, serve_unless_rank_zero

            if serve_unless_rank_zero():  # (rank 0 that stops before its timer joins them tells them why)
                return None
        step, _ = load_step_source(source, optimizer=optimizer or "sgd")
        graph = step.graph
        if timer == "local":
            from gnplace.execute.local import LocalTimer

            # every measurement on as many threads: the search's PPO runs torch on one, the rest of the run on all
            step_timer = LocalTimer(step, devices=devices, repeats=repeats, threads=threads)
        else:
            from gnplace.execute.dist import DistTimer

            step_timer = closer = DistTimer(step, threads=threads, repeats=repeats)
        step_timer.confirm = confirm  # (before the journal and the checkpoint record the timer's settings)
    try:
        cluster = load_cluster(cluster)
        graph = require_ops(_with_costs(graph, costs, cluster), source)
        if closer is not None:
            closer.check_cluster(cluster)  # gloo ranks are CPUs: a GPU cluster's names and memory would be a lie
        require_memory(graph, cluster)  # an impossible memory budget: refused before any search, as by gnplace place
    except BaseException:  # bad input: the ranks a dist timer started stop with the error
        if closer is not None:
            closer.close()
        raise
    if timer == "dist" and not launched_by_torchrun():
        check_cores(cluster.num_devices, threads)  # one rank per device, each a core of this machine
    if timer == "local":
        from gnplace.execute.base import torch_devices

        torch_devices(cluster, devices)  # a torch device for every cluster device, refused before the folder is made
    folder = Path(out)
    for name in ("summary.json", "placement.json", "last.ckpt", JOURNAL):  # written through: out of the folder
        refuse_link(folder / name, "finetune")
    for name in ("summary.json", "placement.json"):  # a --resume ran the whole search, then "Is a directory"
        if (folder / name).is_dir():
            raise InvalidArgument(f"{folder / name}: is a folder, where finetune writes its {name}: move it away or "
                                  "use another -o")
    if (folder / "logs").exists() and not (folder / "logs").is_dir():  # the CSV logs' folder: "logs: File exists"
        raise InvalidArgument(f"{folder / 'logs'}: is not a folder, where finetune writes its CSV logs: move it away "
                              "or use another -o")
    finished = [name for name in ("summary.json", "placement.json") if (folder / name).exists()]
    if finished and not resume and not (folder / "last.ckpt").exists():  # (with one, the search names it)
        # a run too short for a checkpoint (no PPO iteration) left only its results: not ours to overwrite
        raise InvalidArgument(f"{folder} holds a finished run ({finished[0]}): use another -o, or --resume to run "
                              "again into it")
    if finished and resume and not (folder / "last.ckpt").exists():  # its placement file says whose run it was
        _refuse_another_run(folder / "placement.json", graph, cluster)
    journal = None
    try:
        if timer != "sim":  # each real measurement on file as it is taken: a resumed run answers from it
            from gnplace.execute.journal import MeasurementJournal

            journal = MeasurementJournal(folder / JOURNAL, {"graph": step.graph.fingerprint(), "timer": timer,
                                                            "settings": step_timer.settings()}, resume=resume)
        placer = FineTunePlacer(budget=budget, samples=samples, epochs=epochs, lr=lr, screen=screen,
                                screen_model=screen_model,
                                checkpoint=checkpoint, timer=step_timer, out=str(folder), resume=resume,
                                checkpoint_every_s=checkpoint_every_s, progress=progress, zero_shot=zero_shot,
                                polish=FINETUNE_POLISH if polish is None else polish)
        folder.mkdir(parents=True, exist_ok=True)  # after the settings are checked: a refused run writes nothing
        if journal is not None:
            step_timer.attach(journal)
        start = time.perf_counter()
        best = placer.place(graph, cluster, seed=seed)
        seconds = time.perf_counter() - start
        save_placement(folder / "placement.json", graph, best)
        runners_up: list[Any] = []
        if journal is not None:  # real steps: measure the winner afresh, beside the others (no selection bias)
            runners_up = _runners_up(step_timer.cache, cluster, best, FINALISTS - 1)  # what the search timed
            step_timer.attach(None)  # (afresh on resume too: these are not the search's measurements)
            step_timer.cache.clear()
        placed = {}
        for name in ("single", "round_robin", "auto"):
            kwargs = {"timer": step_timer} if name == "auto" else {}
            placed[name] = get_placer(name, **kwargs).place(graph, cluster, seed=seed)
        zero_shot_devices = placer.last_zero_shot_placement  # measured afresh too (the search's was one draw)
        raced = {"search": best, **{f"search_{rank}": Placement(devices, cluster)
                                    for rank, devices in enumerate(runners_up, start=2)}, **placed}
        if zero_shot_devices is not None:
            raced["zero_shot"] = Placement(zero_shot_devices, cluster)
        real = journal is not None
        measured, rounds_s = _race(step_timer, graph, cluster, raced, final_rounds if real else 1, afresh=real)
        # the search kept its best by the least of noisy measurements; measured afresh beside the others it
        # may lose: return the one that won, never a placement measured slower than auto's or single's
        eligible = [name for name in raced if name.startswith("search")] + ["auto", "single"]
        chosen = min(eligible, key=lambda name: (measured[name].is_oom, measured[name].step_time))  # ties: search
        result, searched = measured[chosen], measured["search"]
        zero_shot_timed = measured.get("zero_shot")
        # the one returned, with what its measurement said (it was written bare above, in case the race fails)
        save_placement(folder / "placement.json", graph, raced[chosen],
                       placer="finetune" if chosen.startswith("search") else f"finetune ({chosen})",
                       predicted={"step_time_s": float(result.step_time) if math.isfinite(result.step_time) else None,
                                  "oom": bool(result.is_oom), "timer": timer})
    finally:
        if journal is not None:
            journal.close()
        if closer is not None:
            closer.close()
    others = {name: measured[name].step_time for name in ("single", "round_robin", "auto")}
    summary = {
        "graph": graph.name, "ops": graph.num_ops, "cluster": cluster.name, "timer": timer,
        "checkpoint": placer.checkpoint, "budget": budget, "evaluations": placer.last_evaluations,
        "polish_evaluations": placer.last_polish_evaluations,
        "step_time_s": result.step_time, "oom": result.is_oom, "chosen": chosen,
        "search_step_s": searched.step_time, "search_oom": searched.is_oom,
        "zero_shot_s": None if zero_shot_timed is None else zero_shot_timed.step_time,
        "zero_shot_oom": None if zero_shot_timed is None else zero_shot_timed.is_oom,
        "zero_shot_budget_needed": placer.last_zero_shot_budget_needed,
        "single_s": others["single"],
        "round_robin_s": others["round_robin"], "auto_s": others["auto"],
        **{f"{name}_oom": measured[name].is_oom for name in others},  # a time that does not fit is no time
        "speedup_vs_single": relative_step(others["single"], result.step_time),
        "vs_auto": relative_step(result.step_time, others["auto"]),
        "final_rounds_s": rounds_s,
        "measured_steps": step_timer.measured if journal is not None else None,  # real timers: measurements in all
        "history": [[e, t] for e, t in placer.last_history], "seconds": seconds,
        "placement": str(folder / "placement.json"),
    }
    # a speed-up over 0 s as null, not Infinity; a failed write leaves no .tmp
    write_atomically(folder / "summary.json", json_text(summary, indent=1).encode("utf-8"))
    return summary
