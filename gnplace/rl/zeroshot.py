"""``policy``: zero-shot placement by a pretrained policy, no training on the graph at hand.

The pretrained :class:`~gnplace.policy.gnn.PlacementPolicy` (the shipped
``checkpoints/gnplace-base.ckpt`` unless another is given) encodes the graph once per device set,
decodes its greedy placement on the whole cluster and on the fastest ``k`` devices alone (on graphs of
at most ``op_level`` ops also on the whole cluster with no coarsening, every op a decision), then
``samples`` tempered samples on the best of those device sets in one batched rollout of the placement
MDP (:mod:`gnplace.rl.agent`), or, for a checkpoint pretrained in the search's regime (a sampling prior
around ``auto``'s placement: ``learner.prior`` in its config), ``samples`` samples around ``auto``'s
placement with that prior (in ``rounds``, each round around the best placement of the rounds before),
the constructors' placements, and last this policy's and each constructor's samples around the best of
all; every candidate is timed (``time_batch``) and the best returned: fitting placements by step time
first, then the least memory overflow; when none fits, the best is repaired
(:func:`~gnplace.placers.groups.repair_memory`) as every memory-aware placer's is. This is the
"sample K and keep the best" wrapper of the learned-placer literature (SLIM, EAS); with ``portfolio``
the fast heuristics' placements (``auto``'s candidates) join the candidates as well, so the result is
never worse than ``auto``'s, at the cost of running them.

Graphs past the policy's node limit are coarsened first (:mod:`gnplace.policy.features`), so a
100,000-op graph places in seconds. A graph with no more placements (a device per colocation group, ``D ** groups``)
than all that would time, its polish included, gets each of them timed once instead, and the exact best: a
one-op graph took 1,432 evaluations on two devices, now 2; a 10-group one 1,432, now 1,024.
"""

from __future__ import annotations

import functools
import math
import os
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from gnplace.cluster import Cluster
from gnplace.exceptions import InvalidArgument, InvalidCheckpoint
from gnplace.graph import OpGraph
from gnplace.limits import MAX_BUDGET, MIN_TEMPERATURE, check_budget, finite_number, is_whole
from gnplace.placement import GraphKey, Placement, check_graph_and_cluster
from gnplace.progress import Advance, evaluation_bar, no_progress
from gnplace.rl.config import FLOAT32_MAX
from gnplace.rl.policy_files import (
    SHIPPED_CHECKPOINT,
    SHIPPED_CONSTRUCTOR,
    SHIPPED_CONSTRUCTORS,
    cached_policy,
    constructor_paths,
    pretraining,
)
from gnplace.rl.zeroshot_budget import POLISH_CAP, EvaluationPlan, Repairs, advance_past
from gnplace.rl.zeroshot_decoding import (
    SUBSETS_EVERY_K,
    Decoder,
    by_speed,
    construct_on,
    device_set_input,
    subset_sizes,
)
from gnplace.rl.zeroshot_polish import MODULE_CHAIN_TEMPERATURE, anneal, module_units
from gnplace.rl.zeroshot_ranking import concat_results, ranking, stacked_row
from gnplace.rl.zeroshot_timers import MemoTimer, ReportingTimer
from gnplace.seed import SeedLike, as_generator, check_seed
from gnplace.sim.simulator import Simulator
from gnplace.sim.timer import BatchResult, BudgetedTimer, StepResult, StepTimer
from gnplace.workers import torch_threads

if TYPE_CHECKING:

    from gnplace.coarsen import Coarsening

__all__ = ["PolicyPlacer", "SHIPPED_CHECKPOINT", "SHIPPED_CONSTRUCTOR", "SHIPPED_CONSTRUCTORS", "cached_policy",
           "pretraining", "module_units", "subset_sizes", "SUBSETS_EVERY_K", "POLISH_CAP", "MODULE_CHAIN_TEMPERATURE"]
# the checkpoints' names too: they are gnplace.rl.policy_files' own; and the names of the modules policy is made of
# (zeroshot_decoding, zeroshot_polish, zeroshot_budget) that were this module's


#: Each constructor's samples beside its greedy placement, per device set. Chosen on the cifar10 training graphs the
#: constructors never saw (more than 2,400 ops, on k80x2, k80x4, v100x8 and tight4; 2026-11-29): 0.880x ``auto``'s
#: step time there with 16 against 0.887 with 4, 0.879 with 32 and 0.876 with 64 (README).
DEFAULT_CONSTRUCTOR_SAMPLES = 16

#: Sampling temperature of the constructor's samples: near its greedy placement, which wins most often. Chosen on
#: the cifar10 training graphs the constructor never saw (more than 2,400 ops, on k80x2, k80x4, v100x8 and tight4):
#: 0.996x the step time of samples at 1 there, better on 10 of 40 pairs and worse on none (README).
DEFAULT_CONSTRUCTOR_TEMPERATURE = 0.1

#: Device counts ``k`` on which the constructor also places, on a cluster's ``k`` fastest devices (where ``k`` is below
#: the cluster's count): it was taught on clusters of 2 and 4 devices, and on 8 it builds worse placements than on
#: the 4 fastest of them (README).
DEFAULT_CONSTRUCTOR_SIZES: tuple[int, ...] = (4,)

#: Samples of each last round, drawn around the best candidate of all before it (the constructors' included).
DEFAULT_REFINE = 4
#: Each constructor's samples of each last round, around the best placement of all before them (with samples around
#: ``auto``): the constructor proposes moves of a few decision groups away from that placement. Revision 13 drew 16 in
#: one last round, chosen on the 100 pairs of the cifar10 and ptb training graphs of more than 2,400 ops on k80x2,
#: k80x4, v100x8 and tight4 (2026-11-30): 0.9304x ``auto``'s step time there against 0.9319 without them. A
#: throwaway version drawing both constructors around one centre gave 0.9297 with 16 at prior 6, 0.9298 with 16 at
#: prior 4, 0.9306 with 8 at prior 6 and 0.9312 with 16 at prior 8; 16 more samples of the last round of this
#: policy instead (``refine`` 16) gave 0.9313 (docs/measured-zeroshot.md). Revision 14 draws 8 in each of
#: :data:`DEFAULT_LAST_ROUNDS` rounds.
DEFAULT_CONSTRUCTOR_REFINE = 8
#: Last rounds, each drawn around the best so far: this policy's ``refine`` samples (its greedy decode in the first),
#: then each constructor's ``constructor_refine``: a local search whose proposals are the policies' moves. Chosen on
#: the same 100 validation pairs (2026-11-30; seed 0, step time over ``auto``'s): 8 rounds of 8 constructor samples
#: and 4 of this policy's 0.9217 (cifar10 0.8633, ptb 0.9627), against revision 13's one round of 16 0.9304; without
#: this policy's samples after the first round 0.9230; 2 / 4 / 8 / 16 rounds of 16 / 16 / 4 / 4 constructor samples
#: 0.9283 / 0.9255 / 0.9269 / 0.9233; 8 rounds of 8 at prior 4 / 8 0.9235 / 0.9287; a median 1.55 s a pair
#: against 0.82 s, two pairs at a time on two cores (docs/measured-zeroshot.md). Revision 14 drew 8 rounds; revision
#: 15 draws 4 and anneals with what the other 4 cost (next).
DEFAULT_LAST_ROUNDS = 4
#: Evaluations of simulated annealing from the best candidate, last (:class:`~gnplace.placers.annealing.AnnealingPlacer`
#: with its default chain in revision 15, without the reheat since revision 16: next): the policies propose the start, a
#: short search takes it further. Chosen on the 176 pairs
#: of the training graphs of more than 2,400 ops of the three families on k80x2, k80x4, v100x8 and tight4 (2026-11-30;
#: seed 0, step time over ``auto``'s; ``bench.py zeroshot --split train --min-ops 2400``): revision 14's 8 last rounds
#: (about 160 samples) 0.9399 (cifar10 0.8633, ptb 0.9626, nmt 0.9645); no last rounds and 160 evaluations of
#: annealing from the best candidate 0.9377 (0.8685, 0.9611, 0.9575); 4 last rounds and 80 of annealing 0.9367 (0.8629,
#: 0.9594, 0.9598), level with revision 14 on cifar10 and ahead on ptb and nmt: kept. Annealing from ``auto`` alone with
#: as many evaluations as revision 14 makes: 0.9538 (cifar10 0.9289, nmt 0.9563; a throwaway driver; README).
#: Revision 17 anneals for 320 (2026-12-01): on the same pairs (seed 0 / 1) 80 / 160 / 320 / 640 evaluations give
#: 0.9349 / 0.9314 / 0.9276 / 0.9220 (seed 1: 0.9370 at 80, 0.9295 at 320), better on every family at each doubling
#: (nmt 0.9568 / 0.9540 / 0.9505 / 0.9457), for a median 0.46 / 0.80 / 1.06 / 1.47 s a pair (two at a time, beside
#: other work). 320 keeps a test pair well under a second; 640 would take it past one for half a point more
#: (docs/measured-zeroshot.md).
DEFAULT_POLISH = 320
#: The polish's budget in op-evaluations (ops times evaluations) on a graph small enough that ``polish`` evaluations
#: take less: a graph of ``n`` ops gets ``polish_ops // n`` evaluations, at least ``polish`` and at most
#: :data:`POLISH_CAP` times it. A timing costs in proportion to the ops, so the polish takes about as long on any graph
#: of 4,000 to 16,000 ops and less on a smaller one. 0: ``polish`` evaluations whatever the size (revision 17). Revision
#: 18 (2026-12-01), chosen on the 288 pairs of every training graph of the three families on k80x2, k80x4, v100x8 and
#: tight4 (``bench.py zeroshot --split train --clusters k80x2 k80x4 v100x8 tight4 --real-clusters --unseen-clusters
#: --polish 320 --polish-ops N``; step time over ``auto``'s, seed 0): 0 gives 0.9225 (cifar10 0.8653, ptb 0.9581, nmt
#: 0.9468); 1,280,000 0.9181; 2,560,000 0.9129; 5,120,000 0.9103 (0.8410, 0.9554, 0.9388), better in each of the 12
#: family-cluster cells; 640 evaluations on every graph 0.9166; 10,240,000 with a cap of 8 0.9043, but at a median 1.16
#: s a pair. Seed 1: 0.9238 to 0.9128 at 5,120,000 (0.8425, 0.9557, 0.9446). Median time a pair, two at a time: 0.60 to
#: 0.74 s (seed 0), 0.52 to 0.83 s (seed 1) (docs/measured-zeroshot.md).
DEFAULT_POLISH_OPS = 5_120_000
#: Whether that chain reheats when it stalls (``AnnealingPlacer(reheat_after=0.2)``, its default). It does not since
#: revision 16: 80 evaluations are too few for the restart at 0.05 to cool again. Same pairs (2026-12-01; seeds 0 / 1):
#: with the reheat (revision 15) 0.9367 / 0.9387, without 0.9349 / 0.9370, ahead on each family under both seeds
#: (nmt 0.9598 to 0.9568, 0.9617 to 0.9598). Also tried without the reheat, seed 0: a colder chain (T_0 1e-4) 0.9349;
#: a hotter (3e-3) 0.9359; proposals scored 8 or 4 at a time 0.9349 / 0.9352; 2 or 6 last rounds with 120 or 40
#: annealed 0.9350 / 0.9362; half the moves' devices chosen where the load is least 0.9352 (docs/measured-zeroshot.md).
#: With revision 17's 320 the reheat still loses: 0.9294 against 0.9276 (seed 0; cifar10 0.8494, ptb 0.9578, nmt
#: 0.9516). With revision 18's budget it is level: 0.9107 against 0.9103 on the 288 pairs (cifar10 0.8430, ptb 0.9537,
#: nmt 0.9397).
DEFAULT_POLISH_REHEAT = False
#: The logit bonus ``kappa`` of those samples on the best placement's device of every decision group.
DEFAULT_CONSTRUCTOR_PRIOR = 6.0
#: Evaluations of the module chain before the polish (``module_chain``, revision 21, 2026-12-06; 0: none, revision
#: 20's search). On a graph whose colocation groups are calls of a few modules, a recurrent cell called at every time
#: step, the chain anneals over the module map (every call of a module on one device, :func:`module_units`) from
#: ``single``, hot (:data:`MODULE_CHAIN_TEMPERATURE`), so that it accepts the first of two moves that only gain
#: together: on ptb_010 on k80x2 the map with the cell's nodes 4 and 5 on the second GPU is 0.884x ``auto``, each of
#: them moved alone is slower, and the cold op-level polish never took the first step (0.972). Chosen on the 288 pairs
#: of every training graph on k80x2, k80x4, v100x8 and tight4 (``bench.py zeroshot --split train --clusters k80x2
#: k80x4 v100x8 tight4 --real-clusters --unseen-clusters --module-chain N``, seed 0): 0 gives 0.904 (ptb 0.954 /
#: 0.953 / 0.959 / 0.943 on k80x2 / k80x4 / tight4 / v100x8, nmt 0.924 / 0.948 / 0.938 / 0.944), 1,000 **0.901**
#: (ptb 0.934 / 0.947 / 0.950 / 0.938, nmt 0.920 / 0.947 / 0.937 / 0.943), every cell ahead or level; cifar10, whose
#: modules are called once, runs no chain. The ptb test graphs on k80x2 go from 0.973 to 0.953, where the best module
#: map of each, found by enumeration, with the same polish gives 0.952 (docs/measured-zeroshot.md).
DEFAULT_MODULE_CHAIN = 1000
#: The stream of a constructor's samples around the best (its generator is seeded with ``(seed, rank, stream)``;
#: its samples on ``k`` devices use ``k >= 2``). numpy's SeedSequence pads a short seed with zeros, so stream 0 in
#: the first last round is the stream of the constructor's samples on the whole cluster, ``(seed, rank)``: the
#: two draw the same uniforms, through other logits. Apart (stream 1), the 288 training pairs of revision 18
#: gave 0.9110 of ``auto`` against 0.9103 (cifar10 0.8423, ptb 0.9562, nmt 0.9387; seed 0, 2026-12-02,
#: ``bench.py zeroshot --split train --families cifar10 ptb nmt --clusters k80x2 k80x4 v100x8 tight4``): no
#: gain, so revision 18's streams stay.
_AROUND_BEST_STREAM = 0
#: Most ops of the placements timed in one batch when :meth:`PolicyPlacer.place` times every placement (8 MB each of
#: their int64 devices).
_EVERY_PLACEMENT_CELLS = 1 << 20
#: Most samples of one kind (``samples``, ``constructor_samples``, ``refine``, ``constructor_refine``): each kind
#: is drawn as one batch of rollouts, int64 arrays of samples x decision nodes (a million samples of a 1,000-node
#: graph: 8 GB each).
MAX_SAMPLES = 4096


#: Sampling temperatures of the ``K`` samples, cycled: tempered draws stay near the greedy placement,
#: where the best placements are; at ``tau = 1`` the best of 16 samples is slower than the greedy one.
DEFAULT_TEMPERATURES: tuple[float, ...] = (0.1, 0.2, 0.3, 0.5)


#: Graphs of at most this many ops also get a greedy decode with no coarsening: on the test splits this took
#: ``policy`` from 1.009 to 1.000 of ``auto``'s step time, mostly on cifar10 (v100x8: 1.011 to 0.977).
DEFAULT_OP_LEVEL = 4000


class PolicyPlacer(EvaluationPlan):
    """Zero-shot placement by a pretrained policy: greedy decodes, then ``samples`` tempered samples, best by the timer.

    The policy decodes greedily on the whole cluster (on graphs of at most ``op_level`` ops also with no
    coarsening) and, with ``subsets``, on the fastest ``k``
    devices alone for every ``k`` from 2 to ``D - 1`` (past :data:`SUBSETS_EVERY_K` devices, for the ``k`` of
    :func:`subset_sizes`) (a placement that leaves slow or surplus devices
    idle, which the per-node decoder rarely finds on many devices); ``k = 1``, the whole graph on the
    fastest device, is a candidate too. The ``K`` samples are then drawn on the device set (``k >= 2``)
    whose greedy placement was fastest, at the ``temperatures`` in turn, and every candidate is timed;
    the best that fits is returned.

    Args:
        checkpoint (str, optional): a policy checkpoint, or a pretraining run's ``last.ckpt``
            (default: the shipped ``checkpoints/gnplace-base.ckpt``).
        samples (int, optional): sampled placements beside the greedy ones, ``K`` (default: 16).
        portfolio (bool, optional): also time the fast heuristics' placements (``auto``'s candidates)
            and keep the best of all; with samples ``around`` ``auto``'s placement, that placement (the
            best of them) is a candidate already and nothing more is run (default: :obj:`False`).
        max_nodes (int, optional): most nodes of the decision graph; larger graphs are coarsened
            (default: 1,000).
        timer (StepTimer, optional): scores the candidates (default: ``Simulator()``).
        subsets (bool, optional): also decode greedily on the fastest ``k`` devices alone,
            ``k = 2 .. D-1`` (one more encoding each; past :data:`SUBSETS_EVERY_K` devices those of
            :func:`subset_sizes`), and try the fastest device alone (default: :obj:`True`).
        temperatures (sequence of float, optional): sampling temperatures ``tau`` (draws from
            ``softmax(logits / tau)``), cycled over the samples (default: :data:`DEFAULT_TEMPERATURES`;
            ``(1.0,)`` samples the policy itself); refused with samples ``around`` ``auto``'s placement,
            which are drawn at 1.
        op_level (int, optional): on graphs of at most this many ops, also decode greedily on the
            whole cluster with every op its own decision node (no coarsening: a consumer does not wait
            for a merged node), one more encoding and candidate; 0 never (default:
            :data:`DEFAULT_OP_LEVEL`).
        around (bool or None, optional): draw the ``samples`` around ``auto``'s placement, as the policy
            was pretrained to (its greedy decode and samples with a logit bonus ``prior`` on ``auto``'s
            device of every decision group, a group left there keeping ``auto``'s ops), and make
            ``auto``'s placement a candidate too, so the result is never slower than ``auto``'s; runs
            ``auto`` (its six heuristics, timed) first. None: when the checkpoint was pretrained with a
            prior (default: None).
        prior (float, optional): the logit bonus ``kappa`` of the samples around ``auto`` (default: the
            checkpoint's pretraining prior, else 3).
        rounds (int, optional): draw the samples around ``auto`` in this many rounds, each a greedy decode
            and an equal share of the ``K`` samples around the best placement of the rounds before
            (``auto``'s in the first), timed before the next round is drawn; ``rounds - 1`` more greedy
            decodes in all. 1 draws them all around ``auto``'s placement. It pays with many samples: on
            the test splits on k80x2, k80x4, v100x8 and tight4, 256 samples in 4 rounds place at 0.953x
            ``auto``'s step time against 0.956x in one round; 16 samples at 0.965x in 4 rounds and
            0.964x in one (README; default: 1).
        constructor (str, Path or sequence of them, optional): constructors, policy checkpoints whose greedy
            placement and ``constructor_samples`` samples (at ``constructor_temperature``, no prior) each join
            the candidates: policies that build whole placements, distilled from long searches
            (:mod:`gnplace.rl.teacher`), where this policy moves groups around ``auto``'s; several paths
            as a sequence or separated by commas; ``"none"``: no constructor (default:
            :data:`SHIPPED_CONSTRUCTORS`, the two shipped ones).
        constructor_samples (int, optional): each constructor's samples per device set (default:
            :data:`DEFAULT_CONSTRUCTOR_SAMPLES`, 16).
        constructor_temperature (float, optional): their sampling temperature ``tau`` (default:
            :data:`DEFAULT_CONSTRUCTOR_TEMPERATURE`, 0.1).
        constructor_sizes (sequence of int, optional): device counts ``k``: on every cluster of more than
            ``k`` devices each constructor also places on the ``k`` fastest alone, a greedy placement and
            ``constructor_samples`` samples more per ``k`` (default: :data:`DEFAULT_CONSTRUCTOR_SIZES`).
        refine (int, optional): with samples around ``auto``, this policy's samples of each last round, after
            every other candidate (the constructors' included): its greedy decode (in the first last round) and
            ``refine`` samples around the best placement timed so far, so that a constructor's placement that
            beats ``auto``'s is searched around as well; never a slower result; 0: none (default:
            :data:`DEFAULT_REFINE`, 4).
        constructor_refine (int, optional): with samples around ``auto``, each constructor's samples of each last
            round, after this policy's: drawn with a logit bonus ``constructor_prior`` on the best placement's
            device of every decision group (anchored, as this policy's are), so the constructor moves a few groups
            of the best placement so far, a local search of the constructor's proposals; the constructors in
            turn, each around the best after the one before. A constructor that decides on another decision graph
            than this policy (``modules``) draws none. Never a slower result; 0: none (default:
            :data:`DEFAULT_CONSTRUCTOR_REFINE`, 8).
        constructor_prior (float, optional): that logit bonus ``kappa`` (default:
            :data:`DEFAULT_CONSTRUCTOR_PRIOR`, 6).
        last_rounds (int, optional): the last rounds, each ``refine`` samples of this policy and
            ``constructor_refine`` of each constructor around the best so far: ``last_rounds * (refine +
            constructor_refine * constructors)`` evaluations in all, and one for this policy's greedy decode
            when ``refine`` is not 0 (default: :data:`DEFAULT_LAST_ROUNDS`, 4; 8 with ``polish`` 0 is revision 14,
            1 with ``constructor_refine`` 16 and ``polish`` 0 revision 13).
        polish (int, optional): last, simulated annealing from the best candidate for this many evaluations
            (:class:`~gnplace.placers.annealing.AnnealingPlacer`, seeded from ``seed``); its placement is returned
            where it is faster (or fits where the best did not); 0: none (default: :data:`DEFAULT_POLISH`, 320;
            80 is revision 16). A graph small enough gets more by ``polish_ops``.
        polish_ops (int, optional): the polish's budget in op-evaluations (ops times evaluations): a graph of ``n``
            ops gets ``polish_ops // n`` evaluations, at least ``polish`` and at most :data:`POLISH_CAP` (4) times
            it, so that the polish of a smaller graph, whose timings are cheaper, takes about as long
            (:meth:`polish_evaluations`); 0: ``polish`` on every graph, as revision 17 (default:
            :data:`DEFAULT_POLISH_OPS`, 5,120,000).
        polish_reheat (bool, optional): whether that chain restarts hot from its best when it stalls, as
            annealing's default chain does (default: :data:`DEFAULT_POLISH_REHEAT`, False; True is revision 15).
        module_chain (int, optional): before the polish, on a graph whose groups are calls of a few modules
            (:func:`module_units`), simulated annealing over the module map for this many evaluations, from
            ``single`` and hot; its best is the polish's start where it is faster; at most ``polish_ops``
            op-evaluations (:meth:`module_chain_evaluations`; default: :data:`DEFAULT_MODULE_CHAIN`, 1,000 since
            revision 21; 0: none, revision 20).
        progress (bool or None, optional): show the stages (coarsening, greedy decodes, samples, constructors, last
            rounds, polish) and the evaluations made of :meth:`evaluations_needed` as a bar on stderr (True), nothing
            (False), or the bar on a terminal and a line every half minute elsewhere (None; default). A
            100,000-op graph takes about half a minute to a minute (:mod:`gnplace.progress`).

    After :meth:`place`: ``last_greedy_step`` and ``last_step`` (seconds, by the timer), ``last_greedy_oom``,
    ``last_choice`` (``"only"`` on one device or for no ops, ``"greedy"``, ``"constructor greedy"``,
    ``"constructor sample"`` (``"constructor 2
    greedy"`` and so on for the second; ``" on the k fastest"`` added on a device subset),
    ``"greedy on the k fastest"``, ``"greedy, op level"``, ``"sample"``,
    ``"sample on the k fastest"``, ``"greedy around auto"``, ``"sample around auto"``,
    ``"greedy around the best so far"``, ``"sample around the best so far"``, ``"greedy, last round"``,
    ``"sample, last round"``, ``"constructor around the best"`` (``"constructor 2 around the best"``),
    ``"auto"``, ``"repaired"``, a heuristic's name, ``"modules"`` (the module chain's), or any of these followed by
    ``", annealed"`` when the polish improved on it; ``"every placement"`` where every placement was timed,
    :meth:`place`), ``last_evaluations``.

    Examples:
        >>> from gnplace.graph_io import load_graph
        >>> from gnplace.cluster import load_cluster
        >>> g = load_graph("datasets/examples/mlp2x8w2048b512.gnpg")
        >>> placer = PolicyPlacer(samples=4)
        >>> placer.place(g, load_cluster("k80x2"), seed=0).devices.shape == (g.num_ops,)
        True
        >>> placer.last_evaluations  # 3 greedy; auto + 5; 17 a constructor; 4 x 20 + 1; 4 x 320 annealed; auto's 16
        1420
    """

    name = "policy"
    learned = True
    accepts = frozenset({"timer", "checkpoint"})
    uses = ("auto",)  # the samples around auto's placement, and the portfolio
    # 2026-12-01: graphs under 16,000 ops anneal for 5,120,000 op-evaluations, up to 4 x 320 evaluations (17, earlier
    # that day: 320 evaluations of annealing from the best, was 80; 16, the same day: the annealing does not
    # reheat; 15, 2026-11-30: 4 last rounds, then 80 evaluations of annealing from the best; 14: 8 last rounds, 4
    # samples of this policy and 8 of each constructor; 13: each constructor's 16 samples around the best of all,
    # last; 12: 16 constructor samples per device set, was 4; 11: two constructors, each also on the 4 fastest devices
    # of larger clusters; 10: a last round around the best, constructor samples at tau 0.1; 9: the constructor)
    # 19, 2026-12-04: on clusters of more than 16 devices, the device sets of subset_sizes, not every k (the same
    # placements on 16 devices or fewer)
    # 20, 2026-12-06: the greedy decodes decide on the decision graph the policy was pretrained on (module subtrees
    # first for a ``modules`` checkpoint, as the shipped one is since d522bf0), not the plain coarsening; the graphs
    # past ``max_nodes`` only
    # 21, 2026-12-06: on graphs whose groups are calls of a few modules, 1,000 evaluations of annealing over the module
    # map before the polish (module_chain)
    revision = "21"
    default_checkpoint = SHIPPED_CHECKPOINT  # its content is part of evaluate's row identity
    default_files = {"constructor": SHIPPED_CONSTRUCTORS}  # so are the constructors'
    checkpoint_format = "gnplace-policy"  # gnplace.policy.checkpoint.FORMAT (that module loads torch)

    def __init__(
        self, checkpoint: str | os.PathLike[str] | None = None, samples: int = 16, portfolio: bool = False,
        max_nodes: int = 1000, timer: StepTimer | None = None, subsets: bool = True,
        temperatures: Sequence[float] | None = None, op_level: int = DEFAULT_OP_LEVEL,
        around: bool | None = None, prior: float | None = None, rounds: int = 1,
        constructor: str | os.PathLike[str] | Sequence[str | os.PathLike[str]] | None = None,
        constructor_samples: int = DEFAULT_CONSTRUCTOR_SAMPLES,
        constructor_temperature: float = DEFAULT_CONSTRUCTOR_TEMPERATURE, refine: int = DEFAULT_REFINE,
        constructor_sizes: Sequence[int] = DEFAULT_CONSTRUCTOR_SIZES,
        constructor_refine: int = DEFAULT_CONSTRUCTOR_REFINE, constructor_prior: float = DEFAULT_CONSTRUCTOR_PRIOR,
        last_rounds: int = DEFAULT_LAST_ROUNDS, polish: int = DEFAULT_POLISH,
        polish_reheat: bool = DEFAULT_POLISH_REHEAT, polish_ops: int = DEFAULT_POLISH_OPS,
        progress: bool | None = None, module_chain: int = DEFAULT_MODULE_CHAIN,
    ) -> None:
        for label, count in (("samples", samples), ("constructor_samples", constructor_samples), ("refine", refine),
                             ("constructor_refine", constructor_refine)):
            if is_whole(count) and count > MAX_SAMPLES:
                raise InvalidArgument(f"PolicyPlacer needs {label} <= {MAX_SAMPLES} (one batch of rollouts), "
                                      f"got {count}")
        if not is_whole(samples) or samples < 0:
            raise InvalidArgument(f"PolicyPlacer needs samples >= 0, a whole number, got {samples!r}")
        if not is_whole(max_nodes) or max_nodes < 1:
            raise InvalidArgument(f"PolicyPlacer needs max_nodes >= 1, a whole number of nodes, got {max_nodes!r}")
        given = temperatures
        temperatures = DEFAULT_TEMPERATURES if temperatures is None else temperatures
        taus = (temperatures,) if isinstance(temperatures, (int, float)) else tuple(temperatures)
        if not taus or not all(isinstance(t, (int, float)) and finite_number(t) and t >= MIN_TEMPERATURE
                               for t in taus):
            raise InvalidArgument(f"PolicyPlacer needs temperatures > 0 (at least {MIN_TEMPERATURE}), "
                                  f"got {temperatures!r}")
        if checkpoint is not None and (not isinstance(checkpoint, (str, os.PathLike))
                                       or not os.fspath(checkpoint).strip()):
            raise InvalidArgument(f"PolicyPlacer: checkpoint must be a policy checkpoint file's path, "
                                  f"got {checkpoint!r}")
        self.checkpoint = Path(checkpoint) if checkpoint is not None else SHIPPED_CHECKPOINT  # ("" was the cwd)
        self.samples = int(samples)
        self.portfolio = bool(portfolio)
        self.subsets = bool(subsets)
        if not is_whole(op_level) or op_level < 0:
            raise InvalidArgument(f"PolicyPlacer needs op_level >= 0 ops, got {op_level!r}")
        self.op_level = int(op_level)
        self.temperatures = tuple(float(t) for t in taus)
        self.max_nodes = int(max_nodes)
        self.timer = timer or Simulator()
        # fail early on a bad checkpoint; zero-shot placement decodes in the constructive MDP
        self.policy, self.meta = cached_policy(self.checkpoint, mode="construct")
        trained = pretraining(self.meta)
        self.around = trained["prior"] > 0 if around is None else bool(around)
        if given is not None and self.around:  # they were accepted, and the samples drawn at tau = 1 all the same
            raise InvalidArgument(f"PolicyPlacer's temperatures temper samples of the policy alone; {self.checkpoint} "
                                  "samples around auto's placement (at temperature 1), where they have no effect: "
                                  "leave temperatures out, or use around=False")
        if prior is not None and (not isinstance(prior, (int, float)) or not finite_number(prior)):  # (10**400)
            raise InvalidArgument(f"PolicyPlacer needs prior >= 0, a number, got {prior!r}")
        self.prior = float(prior if prior is not None else trained["prior"] or 3.0)
        if not (math.isfinite(self.prior) and 0 <= self.prior <= FLOAT32_MAX):  # a bias of float32 logits: 1e308
            raise InvalidArgument(f"PolicyPlacer needs prior >= 0 and within float32's range (3.4e38), "  # overflowed
                                  f"got {prior!r}")
        self.modules, self.anchored = trained["modules"], trained["anchored"]
        if not is_whole(rounds) or rounds < 1:
            raise InvalidArgument(f"PolicyPlacer needs rounds >= 1, a whole number, got {rounds!r}")
        if rounds > 1 and not self.around:
            raise InvalidArgument("PolicyPlacer's rounds re-centre samples drawn around auto's placement, and this "
                                  "checkpoint has no pretraining prior: use rounds=1 or around=True")
        if rounds > max(self.samples, 1):
            raise InvalidArgument(f"PolicyPlacer needs at most one round per sample, got rounds={rounds} "
                                  f"for samples={self.samples}")
        self.rounds = int(rounds)
        if not is_whole(constructor_samples) \
                or constructor_samples < 0:
            raise InvalidArgument(f"PolicyPlacer needs constructor_samples >= 0, a whole number, "
                                  f"got {constructor_samples!r}")
        self.constructor_samples = int(constructor_samples)
        if not isinstance(constructor_temperature, (int, float)) \
                or not (finite_number(constructor_temperature) and constructor_temperature >= MIN_TEMPERATURE):
            raise InvalidArgument(f"PolicyPlacer needs constructor_temperature > 0 (at least {MIN_TEMPERATURE}), "
                                  f"got {constructor_temperature!r}")
        self.constructor_temperature = float(constructor_temperature)
        sizes = (constructor_sizes,) if isinstance(constructor_sizes, (int, np.integer)) else constructor_sizes
        if isinstance(sizes, (str, bytes)) or not isinstance(sizes, Iterable) or not all(
                is_whole(k) and k >= 2 for k in sizes):
            raise InvalidArgument(f"PolicyPlacer needs constructor_sizes of whole numbers >= 2 (devices), "
                                  f"got {constructor_sizes!r}")
        self.constructor_sizes = tuple(sorted({int(k) for k in sizes}))
        if not is_whole(refine) or refine < 0:
            raise InvalidArgument(f"PolicyPlacer needs refine >= 0 samples, a whole number, got {refine!r}")
        self.refine = int(refine)
        if not is_whole(constructor_refine) \
                or constructor_refine < 0:
            raise InvalidArgument(f"PolicyPlacer needs constructor_refine >= 0 samples, a whole number, "
                                  f"got {constructor_refine!r}")
        self.constructor_refine = int(constructor_refine)
        if not isinstance(constructor_prior, (int, float, np.floating)) \
                or not (finite_number(constructor_prior) and 0 <= constructor_prior <= FLOAT32_MAX):
            raise InvalidArgument(f"PolicyPlacer needs constructor_prior >= 0 and within float32's range (3.4e38), "
                                  f"a number, got {constructor_prior!r}")
        self.constructor_prior = float(constructor_prior)
        if not is_whole(last_rounds) or not 1 <= last_rounds <= MAX_BUDGET:  # 10**20 rounds: no end, not an error
            raise InvalidArgument(f"PolicyPlacer needs last_rounds from 1 to {MAX_BUDGET:,}, a whole number, "
                                  f"got {last_rounds!r}")
        self.last_rounds = int(last_rounds)
        if not is_whole(polish) or polish < 0:
            raise InvalidArgument(f"PolicyPlacer needs polish >= 0 evaluations, a whole number, got {polish!r}")
        self.polish = int(polish)
        if not isinstance(polish_reheat, (bool, np.bool_)):
            raise InvalidArgument(f"PolicyPlacer needs polish_reheat true or false, got {polish_reheat!r}")
        self.polish_reheat = bool(polish_reheat)
        if not is_whole(polish_ops) or polish_ops < 0:
            raise InvalidArgument(f"PolicyPlacer needs polish_ops >= 0 op-evaluations, a whole number, "
                                  f"got {polish_ops!r}")
        self.polish_ops = int(polish_ops)
        if not is_whole(module_chain) or module_chain < 0:
            raise InvalidArgument(f"PolicyPlacer needs module_chain >= 0 evaluations, a whole number, "
                                  f"got {module_chain!r}")
        self.module_chain = int(module_chain)
        if self.module_chain:
            check_budget(self.module_chain, "PolicyPlacer's module_chain")
        self.progress = progress
        if self.polish:  # the most any graph's chain is given, refused here rather than by the chain after the rest
            check_budget(self.polish_evaluations(), "PolicyPlacer's polish" + (
                f" on a small graph ({POLISH_CAP} x polish, with polish_ops)" if self.polish_ops else ""))
        self.constructors = constructor_paths(constructor)
        refining = self.refine + self.constructor_refine * len(self.constructors)
        if refining:  # the last rounds' samples, all timed: refused here rather than after hours of them
            check_budget(self.last_rounds * refining, "PolicyPlacer's last rounds (last_rounds x (refine + "
                         "constructor_refine for each constructor))")
        self.constructor_policies: list[tuple[Any, bool]] = []  # (policy, decides on module subtrees first)
        for path in self.constructors:
            try:
                built_by, constructor_meta = cached_policy(path, mode="construct")  # fail early here too
            except InvalidCheckpoint as err:  # "abc: no such checkpoint file" named no option (evaluate: no placer)
                raise InvalidCheckpoint(f"PolicyPlacer's constructor: {err}") from err
            self.constructor_policies.append((built_by, pretraining(constructor_meta)["modules"]))
        self.last_greedy_step: float | None = None
        self.last_greedy_oom = False
        self.last_step: float | None = None
        self.last_choice: str | None = None
        self.last_evaluations = 0

    def __repr__(self) -> str:
        return (f"PolicyPlacer(checkpoint={str(self.checkpoint)!r}, samples={self.samples}, "
                f"portfolio={self.portfolio}, subsets={self.subsets}, temperatures={self.temperatures}, "
                f"op_level={self.op_level}, around={self.around}, rounds={self.rounds}, "
                f"constructor={[str(p) for p in self.constructors]!r}, "
                f"constructor_samples={self.constructor_samples}, "
                f"constructor_temperature={self.constructor_temperature}, refine={self.refine}, "
                f"constructor_sizes={self.constructor_sizes}, constructor_refine={self.constructor_refine}, "
                f"constructor_prior={self.constructor_prior}, last_rounds={self.last_rounds}, polish={self.polish}, "
                f"polish_reheat={self.polish_reheat}, polish_ops={self.polish_ops}, module_chain={self.module_chain})")

    def place(self, graph: OpGraph, cluster: Cluster, *, seed: SeedLike = None) -> Placement:
        """Place ``graph`` on ``cluster`` with the policy (see the class docstring).

        Args:
            graph (OpGraph): the graph.
            cluster (Cluster): the devices.
            seed (int, np.random.Generator or None, optional): seed of the samples and of the
                coarsening (default: None). The same seed gives the same placement.
        """
        check_graph_and_cluster(graph, cluster)
        check_seed(seed)  # also where no sample is drawn (every placement timed, one placement): a bad one is refused
        self.last_evaluations = 0
        self.last_greedy_step, self.last_greedy_oom = None, False  # not the last graph's, when nothing is decoded
        if graph.num_ops == 0 or cluster.num_devices == 1:  # one placement: nothing decoded or timed
            self.last_choice, self.last_step = "only", None
            return Placement(np.zeros(graph.num_ops, dtype=np.int64), cluster, GraphKey.of(graph))
        space = self.placement_space(graph, cluster)  # None unless the search would time more placements than exist
        # a 100,000-op graph took 23 to 75 s without a word: its stages and evaluations are shown (stderr)
        with evaluation_bar(f"{self.name} {graph.name}", self.evaluations_needed(cluster, graph),
                            self.progress) as advance_to:
            if space is not None:  # a one-op graph took 1,432 evaluations of its 2 placements: each is timed once
                return self._every_placement(graph, cluster, space, advance_to)
            return self._place(graph, cluster, seed, advance_to)

    def _every_placement(self, graph: OpGraph, cluster: Cluster, count: int, advance_to: Advance) -> Placement:
        """Every one of the ``count`` (``D ** groups``) placements of ``graph`` timed once, and the best returned.

        The best by the timer, as :meth:`_place` ranks its candidates: fitting placements by step time first, then
        the least overflow, ties to the first (group 0's device changing slowest); the search, whose candidates and
        polish are among these placements, can do no better. Timed in batches of at most
        :data:`_EVERY_PLACEMENT_CELLS` ops in all: a one-group graph of 100,000 ops has but ``D``.
        """
        d, groups = cluster.num_devices, graph.num_groups
        digit = d ** np.arange(groups - 1, -1, -1, dtype=np.int64)  # group 0's device changes slowest
        rows = max(1, _EVERY_PLACEMENT_CELLS // max(graph.num_ops, 1))
        timed: BatchResult | None = None
        for start in range(0, count, rows):
            index = np.arange(start, min(start + rows, count), dtype=np.int64)
            result = self.timer.time_batch(graph, cluster, np.take((index[:, None] // digit) % d, graph.group, axis=1))
            timed = result if timed is None else concat_results(timed, result)
            advance_to(int(index[-1]) + 1, "every placement")
        assert timed is not None
        best = int(ranking(timed, cluster)[0])
        self.last_evaluations, self.last_greedy_step, self.last_greedy_oom = count, None, False  # nothing decoded
        self.last_step, self.last_choice = float(timed.step_time[best]), "every placement"
        return Placement(((best // digit) % d)[graph.group], cluster, GraphKey.of(graph))

    def _place(self, graph: OpGraph, cluster: Cluster, seed: SeedLike, shown: Advance) -> Placement:
        """:meth:`place` on two devices or more and one op or more, its stages and evaluations told ``shown``.

        The total shown grows where memory repairs take the count past :meth:`evaluations_needed`
        (:class:`~gnplace.rl.zeroshot_budget.Repairs`).
        """
        import torch

        from gnplace.placers.groups import held_at_peak
        from gnplace.policy.features import decision_graph

        polish = self.polish_evaluations(graph)
        polish = polish if polish >= 2 else 0
        chain = self.module_chain_evaluations(graph)
        advance_to = Repairs(shown, self._searched(cluster, graph), polish + chain)
        rng = as_generator(seed)
        coarsen_seed = int(rng.integers(2**31 - 1))
        with torch_threads(1):  # small tensors: one thread is fastest
            with torch.no_grad():
                # greedy on every device set, the whole cluster first (ties go to it); one coarsening for all
                advance_to(0, "coarsening")
                # the decision graph this policy was pretrained on (module subtrees first where ``modules``)
                whole = decision_graph(graph, cluster, max_nodes=self.max_nodes, seed=coarsen_seed,
                                       modules=self.modules, cost_model=self.timer.cost_model)
                held = held_at_peak(graph, cluster)  # one simulation for every device set
                advance_to(0, "greedy decodes")
                decoders, candidates, names = self._greedy_decodes(graph, cluster, whole, held)
                advance_to(0, "scoring the greedy decodes")
                timed = self.timer.time_batch(graph, cluster, candidates)
                # the candidates are kept as the blocks they were timed in until the best is known: stacked, the 137 of
                # a 93,567-op graph with the defaults (103 MB) were held twice at once, and `place` peaked 114 MB higher
                blocks: list[np.ndarray] = [candidates]
                auto_evaluations = 0
                around_auto = self.samples > 0 and self.around
                if around_auto:  # the search's regime: samples around auto's placement, the constructor's among them
                    # auto runs under the caller's seed: its placement is the one `auto` itself gives for it
                    auto_seed = int(seed) if isinstance(seed, int | np.integer) else coarsen_seed
                    around, drawn_timed, labels, auto_evaluations = self._around(
                        graph, cluster, rng, coarsen_seed, auto_seed, (candidates, timed), held,
                        lambda done, note: advance_to(candidates.shape[0] + done, note),
                        coarsened={self.modules: whole})
                    timed = concat_results(timed, drawn_timed)
                    blocks += around
                    names += labels
                elif self.samples > 0:
                    best = decoders[next(int(i) for i in ranking(timed, cluster) if i < len(decoders))]
                    taus = np.resize(np.asarray(self.temperatures), self.samples)
                    advance_to(candidates.shape[0], "samples")
                    drawn = best.sample(self.samples, rng, taus)
                    sampled = self.timer.time_batch(graph, cluster, drawn)
                    blocks.append(drawn)
                    names += [best.name("sample")] * self.samples
                    timed = concat_results(timed, sampled)
                if self.constructor_policies and not around_auto:  # around auto, _around built them
                    advance_to(sum(block.shape[0] for block in blocks), "constructors")
                    built, built_names = self._construct(graph, cluster, coarsen_seed, held=held)
                    timed = concat_results(timed, self.timer.time_batch(graph, cluster, built))
                    blocks.append(built)
                    names += built_names
        result = timed
        if self.portfolio and not around_auto:  # around auto, auto's placement is a candidate already
            advance_to(sum(block.shape[0] for block in blocks) + auto_evaluations, "heuristics")
            heuristics, heuristic_names, own_evaluations = self._heuristics(graph, cluster, coarsen_seed)
            auto_evaluations += own_evaluations
            result = concat_results(result, self.timer.time_batch(graph, cluster, heuristics))
            blocks.append(heuristics)
            names += heuristic_names
        # this call's figures are kept in locals and reported at its end: threads placing with this placer at once
        # overwrote the attributes, and the polish compared its chain with another graph's step
        evaluations = sum(block.shape[0] for block in blocks) + auto_evaluations  # auto's own, choosing its placement
        best_index = int(ranking(result, cluster)[0])
        greedy_step, greedy_oom = float(result.step_time[0]), bool(result.oom[0])
        step: float | None = float(result.step_time[best_index])
        choice = names[best_index]
        chosen = stacked_row(blocks, best_index).copy()
        if result.oom[best_index]:  # nothing fits: move groups off overflowing devices, as memory-aware placers do
            fixed, repaired, spent = self._repair(
                graph, cluster, chosen, functools.partial(advance_past, advance_to, evaluations, "memory repair"))
            evaluations += spent
            if not repaired.is_oom:
                chosen, step, choice = fixed.devices, float(repaired.step_time), "repaired"
        placement = Placement(chosen, cluster, GraphKey.of(graph))
        # annealing from the best (the start's timing and at least one move), over the module map first where it runs
        if polish or chain:
            fits = not result.oom[best_index] or choice == "repaired"
            placement, step, choice, spent = anneal(
                self.timer, graph, cluster, placement, fits, int(rng.integers(2**31 - 1)), step, choice, polish=polish,
                reheat=self.polish_reheat, module_chain=chain, report=functools.partial(advance_to.polish, evaluations))
            evaluations += spent
        self.last_evaluations, self.last_greedy_step, self.last_greedy_oom = evaluations, greedy_step, greedy_oom
        self.last_step, self.last_choice = step, choice
        return placement

    def _greedy_decodes(
        self, graph: OpGraph, cluster: Cluster, whole: Coarsening, held: np.ndarray,
    ) -> tuple[list[Decoder], np.ndarray, list[str]]:
        """The greedy decode on every device set, the whole cluster first (ties go to it): decoders, placements, names.

        The decoders of the device sets (the whole cluster, then with ``subsets`` the ``k`` fastest of
        :func:`subset_sizes`, the largest first), and their greedy placements (``[n, num_ops]``) and names; with
        ``subsets`` then the whole graph on the fastest device (``k = 1``, nothing to decode), and on graphs of at most
        ``op_level`` ops the whole cluster's decode with every op its own decision node. ``whole`` is the decision graph
        made for the whole cluster, reused by every device set; ``held`` the bytes each op holds at the memory peak
        (:func:`~gnplace.placers.groups.held_at_peak` of the whole cluster).
        """
        from gnplace.policy.features import ops_alone

        d = cluster.num_devices
        sizes = [*subset_sizes(d), d] if self.subsets else [d]
        decoders = [self._decoder(graph, cluster, size, whole, held) for size in sizes][::-1]
        greedy = [dec.greedy() for dec in decoders]
        names = [dec.name("greedy") for dec in decoders]
        if self.subsets:  # k = 1: the whole graph on the fastest device, nothing to decode
            greedy.append(np.full((1, graph.num_ops), by_speed(cluster)[0]))
            names.append("greedy on the 1 fastest")
        if graph.num_ops <= self.op_level:  # every op its own decision node: no node waits for a merged one
            greedy.append(self._decoder(graph, cluster, d, ops_alone(graph), held).greedy())
            names.append("greedy, op level")
        return decoders, np.concatenate(greedy, axis=0), names

    def _heuristics(self, graph: OpGraph, cluster: Cluster, seed: int) -> tuple[np.ndarray, list[str], int]:
        """The ``portfolio``'s candidates: the fast heuristics' placements (``auto``'s candidates) under ``seed``.

        ``[heuristics, num_ops]``, their names, and the evaluations they made themselves (memory repairs, single's
        devices), which count.
        """
        from gnplace.placers.auto import FAST_PLACERS
        from gnplace.placers.registry import make_placer

        own = BudgetedTimer(self.timer)  # the heuristics' own timings (memory repairs, single's devices) count
        heuristics = np.stack([make_placer(name, timer=own).place(graph, cluster, seed=seed).devices
                               for name in FAST_PLACERS])
        return heuristics, list(FAST_PLACERS), own.evaluations

    def _repair(
        self, graph: OpGraph, cluster: Cluster, chosen: np.ndarray, report: Callable[[int], None],
    ) -> tuple[Placement, StepResult, int]:
        """``chosen`` (a device per op) with groups moved off overflowing devices, as memory-aware placers do; timed.

        Returns the repaired placement, its timing (it may still overflow), and the evaluations spent, the repair's
        and that timing, each told ``report`` (the evaluations so far) as made.
        """
        from gnplace.placers.groups import repair_memory

        per_group = np.zeros(graph.num_groups, dtype=np.int64)
        per_group[graph.group] = chosen
        counter = ReportingTimer(self.timer, report)
        fixed = Placement.from_groups(graph, cluster, repair_memory(graph, cluster, per_group, timer=counter))
        repaired = counter.time(graph, cluster, fixed)
        return fixed, repaired, counter.evaluations

    def _around(
        self, graph: OpGraph, cluster: Cluster, rng: np.random.Generator, seed: int, auto_seed: int,
        greedy: tuple[np.ndarray, BatchResult], held: np.ndarray | None = None,
        report: Callable[[int, str], None] | None = None, coarsened: dict[bool, Coarsening] | None = None,
    ) -> tuple[list[np.ndarray], BatchResult, list[str], int]:
        """``auto``'s placement, rounds of samples around the best so far, the constructors', the last rounds; timed.

        Per round a greedy decode and samples around the best placement so far; then the constructors'
        candidates, then ``last_rounds`` rounds around the best of all: this policy's samples (a greedy
        decode in the first), then each constructor's, each around the best so far.

        Returns the candidates as the blocks they were timed in (``[n, num_ops]`` each; stacked,
        ``[samples + rounds + 1 (+ constructors') (+ refine * last_rounds + 1)
        (+ constructor_refine * last_rounds per constructor), num_ops]``),
        their timings, their names and the evaluations ``auto`` made to choose its placement. ``greedy``
        holds the greedy decodes timed before (``[n, num_ops]``, and their timings): the last round's
        centre is the best of those too. ``held``: the bytes each op holds at the memory peak on the whole
        cluster, for the problem's and the constructors' inputs (default: computed there). ``coarsened`` maps a
        ``modules`` setting to the decision graph of ``graph`` on ``cluster`` made with ``seed``, ``max_nodes``, the
        timer's cost model and that setting (:func:`~gnplace.policy.features.decision_graph`): where this policy
        decides with that setting, the problem decides on it rather than coarsening the graph again, the same
        coarsening (default: none, coarsened here). ``report(evaluations, stage)`` is told the
        evaluations made here so far (``auto``'s included) as each stage starts and as ``auto`` times (default:
        nothing).

        The policy decides per decision group (module subtrees first when it was pretrained so) with
        a bonus ``prior`` on the incumbent's device of each group (:math:`\\kappa 1[d = d^{inc}_g]`, as
        in pretraining), the incumbent being ``auto``'s placement in the first round and the best
        placement timed so far in the next; with anchoring, a group left on the incumbent's device
        keeps the incumbent's ops.
        """
        from gnplace.rl.agent import sample
        from gnplace.rl.problem import PlacementProblem

        shown = report or no_progress

        def stage(note: str) -> None:
            """Tell ``report`` that ``note`` starts, with the evaluations so far."""
            shown(counted.evaluations + sum(block.shape[0] for block in candidates), note)

        candidates: list[np.ndarray] = []
        # auto's own evaluations (it times its heuristics' placements), shown as they are made
        memo = MemoTimer(self.timer) if type(self.timer) is Simulator else self.timer  # (a real timer measures again)
        counted = ReportingTimer(memo, lambda evaluations: stage("auto"))
        stage("coarsening and auto")
        # the same coarsening (graph, cluster, seed, max_nodes, cost model, modules) and peak bytes as _place's, reused
        problem = PlacementProblem.build(graph, cluster, counted, max_nodes=self.max_nodes, seed=seed,
                                         reference_seed=auto_seed, modules=self.modules,
                                         coarsening=(coarsened or {}).get(self.modules), held=held)
        problem.anchored = self.anchored
        enc = self.policy.encode(problem.inp)
        candidates.append(problem.reference_devices[None, :])
        timed = memo.time_batch(graph, cluster, candidates[0])  # auto's timing of it, and the problem's
        names = ["auto"]
        def draw_round(count: int, label: str, greedy: bool = True) -> tuple[np.ndarray, BatchResult, list[str]]:
            """The greedy decode (if ``greedy``) and ``count`` samples around the incumbent, scored."""
            bias = problem.prior(self.prior)  # + kappa 1[d = d^inc_g]: around the incumbent
            parts = [sample(self.policy, problem.mdp, 1, greedy=True, enc=enc, bias=bias).rollout.group_devices] \
                if greedy else []
            if count:
                parts.append(sample(self.policy, problem.mdp, count, rng, enc=enc, bias=bias).rollout.group_devices)
            groups = np.concatenate(parts)
            devices = problem.placements(groups)  # before scoring: anchored to this round's incumbent
            result, _ = problem.score(groups, self.timer, oom_penalty=0.0)
            return devices, result, ([f"greedy{label}"] if greedy else []) + [f"sample{label}"] * count

        def add(devices: np.ndarray, result: BatchResult, labels: list[str]) -> None:
            nonlocal timed
            candidates.append(devices)
            timed = concat_results(timed, result)
            names.extend(labels)

        for index, share in enumerate(np.array_split(np.arange(self.samples), self.rounds)):
            stage("samples around auto" if index == 0 else f"samples, round {index + 1} of {self.rounds}")
            add(*draw_round(share.size, " around auto" if index == 0 else " around the best so far"))
        offers = [greedy]
        if self.constructor_policies:  # whole placements built by the search-distilled policies
            stage("constructors")
            reuse = {self.modules: problem.inp}  # the same decision graph where they decide as this policy does
            built, built_names = self._construct(graph, cluster, seed, reuse, held=held)
            offers.append((built, self.timer.time_batch(graph, cluster, built)))
            add(*offers[-1], built_names)
        refining = self._refining_constructors() if self.constructor_refine else []
        if self.refine or refining:  # the incumbent moves to the fastest of the others that fits, if faster
            for placements, result in offers:
                best = int(ranking(result, cluster)[0])
                if not result.oom[best]:
                    problem.offer(placements[best], float(result.step_time[best]), False, evaluations=0)  # counted
        encoded = {rank: constructor.encode(problem.inp) for rank, constructor in refining}  # once for every round
        for again in range(self.last_rounds):  # local search: every proposer moves groups of the best so far
            stage(f"last round {again + 1} of {self.last_rounds}")
            if self.refine:  # this policy's round around the best of everything before it (a greedy decode first)
                add(*draw_round(self.refine, ", last round", greedy=again == 0))
            for rank, constructor in refining:  # each constructor's moves around the best (scoring moves it)
                bias = problem.prior(self.constructor_prior)  # + kappa 1[d = d^best_g]
                rng_c = np.random.default_rng((seed, rank, _AROUND_BEST_STREAM) + ((again,) if again else ()))
                groups = sample(constructor, problem.mdp, self.constructor_refine, rng_c, enc=encoded[rank],
                                bias=bias).rollout.group_devices
                devices = problem.placements(groups)  # anchored to the best: a group left there keeps its ops
                result, _ = problem.score(groups, self.timer, oom_penalty=0.0)
                label = "constructor" if rank == 1 else f"constructor {rank}"
                add(devices, result, [f"{label} around the best"] * self.constructor_refine)
        return candidates, timed, names, counted.evaluations

    def _construct(
        self, graph: OpGraph, cluster: Cluster, seed: int, inputs: dict[bool, Any] | None = None,
        held: np.ndarray | None = None,
    ) -> tuple[np.ndarray, list[str]]:
        """Every constructor's greedy placement and ``constructor_samples`` samples, on the whole cluster and subsets.

        For each constructor in turn, on the whole cluster, then on the ``k`` fastest devices for each
        ``k`` of :meth:`_constructor_subsets`: ``[(1 + samples) * (1 + subsets) * constructors, num_ops]``
        placements and their names. ``inputs`` maps a ``modules`` setting to a policy input of ``graph``
        on ``cluster`` made with ``seed`` and that setting, reused rather than coarsened again (default:
        made here, and kept in it for the next constructor); the subsets reuse its decision graph, and
        ``held`` (bytes each op holds at the memory peak on the whole cluster; default: computed once).
        Each constructor's samples draw from their own generators (seeded from ``seed``, its rank and
        ``k``), so that the draws of every other candidate are the same with or without it (the last
        round's centre may move to a constructor's placement).
        """
        from gnplace.placers.groups import held_at_peak
        from gnplace.policy.features import build_policy_input

        inputs = {} if inputs is None else inputs
        subsets = self._constructor_subsets(cluster)
        if held is None:
            held = held_at_peak(graph, cluster)
        built, names = [], []
        on_subsets: dict[tuple[bool, int], tuple[np.ndarray, Any]] = {}  # one input per decision graph and k
        for rank, (policy, modules) in enumerate(self.constructor_policies, 1):
            label = "constructor" if rank == 1 else f"constructor {rank}"
            inp = inputs.get(modules)
            if inp is None:
                inp = inputs[modules] = build_policy_input(graph, cluster, cost_model=self.timer.cost_model,
                                                           max_nodes=self.max_nodes, seed=seed, modules=modules,
                                                           held=held)
            built.append(construct_on(policy, inp, np.random.default_rng((seed, rank)), self.constructor_samples,
                                      self.constructor_temperature))
            names += [f"{label} greedy"] + [f"{label} sample"] * self.constructor_samples
            for k in subsets:
                if (modules, k) not in on_subsets:
                    on_subsets[modules, k] = device_set_input(graph, cluster, k, inp.coarsening, held,
                                                              cost_model=self.timer.cost_model,
                                                              max_nodes=self.max_nodes)
                keep, sub = on_subsets[modules, k]
                built.append(keep[construct_on(policy, sub, np.random.default_rng((seed, rank, k)),
                                               self.constructor_samples, self.constructor_temperature)])
                names += [f"{label} greedy on the {k} fastest"] + \
                    [f"{label} sample on the {k} fastest"] * self.constructor_samples
        return np.concatenate(built), names

    def _decoder(
        self, graph: OpGraph, cluster: Cluster, size: int, coarsening: Coarsening, held: np.ndarray | None = None,
    ) -> Decoder:
        """The policy on the ``size`` fastest devices (by effective FLOP/s, ties by index), or on all of them.

        ``coarsening`` is the decision graph to decode on: the one made for the whole cluster, reused
        for every device set, or :func:`~gnplace.policy.features.ops_alone`; ``held`` the bytes each op
        holds at the memory peak (:func:`~gnplace.placers.groups.held_at_peak` of the whole cluster; None:
        computed for the device set).
        """
        keep, inp = device_set_input(graph, cluster, size, coarsening, held, cost_model=self.timer.cost_model,
                                     max_nodes=self.max_nodes)
        return Decoder(self.policy, inp, keep, size == cluster.num_devices)
