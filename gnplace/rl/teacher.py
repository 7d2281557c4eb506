"""A long search as the teacher of imitation: learning from search, then placing without it.

The fast heuristics' placements (``auto``'s) are a weak teacher for a constructing policy: on cifar10
a 200,000-evaluation simulated annealing from ``auto``'s placement finds placements 0.74-0.80x its step
time that interleave the cells' branches across devices, far from any heuristic's (model card). The
search is far too slow to run per placement, but it can be run once per *training* pair and its
placements imitated, as expert iteration and AlphaZero distil a search into a policy (Anthony et
al., NeurIPS 2017; Silver et al., Nature 2017): behaviour cloning (:mod:`gnplace.rl.imitation`) of
the search's placement instead of ``auto``'s.

:func:`search_placement` runs the search (:class:`~gnplace.placers.annealing.AnnealingPlacer` from
``auto``'s placement, ``budget`` simulator evaluations, seeded, at annealing revision 3's starting
temperature :data:`TEACHER_TEMPERATURE`, the search the shipped constructors imitated) and keeps its
placement in a cache folder, one placement file per pair, written atomically: a killed pretraining run
that resumes loses at most the search under way, and the same pair, budget and seed give the same
placement. A new revision of ``annealing``, of ``auto`` or of one of ``auto``'s candidates (the search's
start) names another file (:func:`cache_path`): the pair is searched again rather than answered with a
search made before.
"""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path
from typing import Any

from gnplace.cluster import Cluster
from gnplace.exceptions import InvalidPlacement
from gnplace.graph import OpGraph
from gnplace.graph_io import name_in_file
from gnplace.placement import Placement

__all__ = ["search_placement", "cache_path"]

#: :math:`T_0` of the teacher's annealing: 0.05, that of annealing revision 3, with which the shipped
#: constructors' teacher placements were searched (``configs/constructor*.yaml``). The ``annealing``
#: placer starts colder since revision 4 (0.001); the teacher keeps 0.05 so that the constructors'
#: recipe, and its cached searches, still give the same placements (and never reheats, as revision 3 did not).
TEACHER_TEMPERATURE = 0.05

#: What every cache name made before names carried the search's recipe was searched with: ``annealing``
#: revision 5 at :data:`TEACHER_TEMPERATURE` 0.05. Revisions 4 (a colder :math:`T_0`) and 5 (reheating) changed
#: only what the teacher sets itself (``initial_temperature``, ``reheat_after=None``), so that its searches are
#: revision 3's under all three; a name carries the recipe only where it differs from this (:func:`search_recipe`),
#: so that the searches kept under ``OUT/teacher`` stay valid until a revision changes.
RECIPE_BEFORE: dict[str, Any] = {"annealing": "5", "initial_temperature": 0.05}


def search_recipe() -> dict[str, Any]:
    """What the search's placement depends on beside the pair, budget and seed, where it differs from before.

    ``annealing``'s registry revision and the teacher's :math:`T_0` where either differs from the recipe of the
    cache names made before, and ``uses``: the revisions of the placers the search starts from (``auto`` and its
    candidates, :meth:`~gnplace.placers.registry.PlacerRegistry.revisions_used`) where any declares one.

    Returns:
        dict: empty while neither changed and no placer used declares a revision (the names of before stand).
    """
    from gnplace.placers.registry import PLACERS

    recipe = {"annealing": PLACERS.info("annealing").revision, "initial_temperature": TEACHER_TEMPERATURE}
    changed: dict[str, Any] = {k: v for k, v in recipe.items() if v != RECIPE_BEFORE[k]}
    used = PLACERS.revisions_used("annealing")
    if used:  # auto's candidates (or auto) changed: the search starts elsewhere
        changed["uses"] = used
    return changed


def cache_path(folder: str | os.PathLike[str], graph: OpGraph, cluster: Cluster, budget: int, seed: int) -> Path:
    """The placement file of ``graph`` on ``cluster`` searched with ``budget`` evaluations under ``seed``.

    The name carries a digest of the graph's and the cluster's fingerprints, the budget, the seed and the
    search's recipe where it changed (:func:`search_recipe`: a new revision of ``annealing`` or of a placer it
    starts from), so that a changed graph, cluster or search is searched afresh rather than read from a stale
    file.
    """
    recipe = search_recipe()
    text = f"{graph.fingerprint()}|{cluster.fingerprint()}|{budget}|{seed}"
    if recipe:  # empty as long as the names made before stand: the same text, the same name
        text += "|" + json.dumps(recipe, sort_keys=True)
    key = hashlib.sha256(text.encode()).hexdigest()
    readable = name_in_file(f"{graph.name}@{cluster.name}", len(f"-{key[:16]}.json"))  # never a path
    return Path(folder) / f"{readable}-{key[:16]}.json"


def search_placement(
    graph: OpGraph, cluster: Cluster, *, budget: int, seed: int = 0, cache: str | os.PathLike[str] | None = None,
) -> Placement:
    """The placement of a ``budget``-evaluation annealing search from ``auto``'s, read from ``cache`` if there.

    Args:
        graph (OpGraph): the graph.
        cluster (Cluster): the devices.
        budget (int): simulator evaluations of the search (200,000 take 0.5-2.5 minutes on one core for
            the cifar10 training graphs of at most 2,400 ops).
        seed (int, optional): seed of the search, and of ``auto`` where it starts (default: 0).
        cache (str or Path, optional): folder of searched placements (default: none, search every time).

    Returns:
        Placement: the best placement the search timed, the same as ``gnplace place GRAPH -c CLUSTER -p
        annealing --budget BUDGET --seed SEED -O annealing.initial_temperature=0.05`` gives.
    """
    from gnplace.placement import load_placement, save_placement
    from gnplace.placers.annealing import AnnealingPlacer
    from gnplace.sim.simulator import Simulator

    path = cache_path(cache, graph, cluster, budget, seed) if cache is not None else None
    if path is not None and path.is_file():
        try:
            return load_placement(path, graph, cluster)
        except InvalidPlacement as err:
            raise InvalidPlacement(f"{err} (a damaged search in the teacher cache: delete it to search the pair "
                                   "again)") from None
    # no bar or lines of its own: pretraining counts the pairs searched (and --no-progress silenced neither)
    placement = AnnealingPlacer(budget=budget, initial_temperature=TEACHER_TEMPERATURE, reheat_after=None,
                                timer=Simulator(), progress=False).place(graph, cluster, seed=seed)
    if path is not None:
        path.parent.mkdir(parents=True, exist_ok=True)
        save_placement(path, graph, placement, placer=f"annealing, {budget} evaluations, seed {seed}")
    return placement


def search_pair(task: tuple[str, Cluster, int, int, str]) -> None:
    """Search one pair and keep its placement in the cache: a task of pretraining's worker processes.

    It lives here rather than in :mod:`gnplace.pretrain` so that a worker imports the search alone, which needs
    neither torch nor Lightning: a worker that imported pretraining spent 12 s of CPU starting, one that
    imports this module about 2 s (2026-12-01, this 2-core machine).

    Args:
        task (tuple): the graph file, the cluster, the budget (evaluations), the seed and the cache folder.
    """
    from gnplace.graph_io import load_graph

    graph, cluster, budget, seed, cache = task
    search_placement(load_graph(graph), cluster, budget=budget, seed=seed, cache=cache)
