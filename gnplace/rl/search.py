"""Search placers that learn: a fresh policy trained on one graph for a budget of timer evaluations.

``ppo`` is Spotlight's method used as a search: simulated annealing from the reference placement
(``auto``'s) spends the first fifth of the budget (``prelude``; 0 for PPO alone), then a
:class:`~gnplace.policy.gnn.PlacementPolicy` starts from the earliest-finish-time rule, imitates the
best placement so far, samples batches of placements, has them timed and improves by PPO until the
budget is spent; the best placement seen wins, and the reference is one of them, so the search never
returns worse than ``auto``. Three things make the policy search *around* the best placement rather
than beside it (revision 7): a graph too big for ``max_nodes`` is coarsened along its module
hierarchy, so one decision places a whole branch of a cell (``modules``); a group the policy leaves
where the best placement has it keeps that placement's ops (``anchor``), so the incumbent's own
choices reproduce it exactly; and sampling adds a logit bonus ``prior`` to the incumbent's device,
so a sample moves a few groups and PPO learns which moves pay. ``reinforce`` is the same with one
REINFORCE step per batch (the policy-gradient ablation).
Both run on the Lightning system of :mod:`gnplace.train` and take any
:class:`~gnplace.sim.timer.StepTimer`, so the same code searches against the simulator or real devices.

On a terminal, Lightning's progress bar shows the iterations and the evaluations spent; elsewhere (a log
file) a line every half minute does (:func:`gnplace.callbacks.progress_callbacks`). Evaluations: timing the reference
placement is one; each batch of samples costs the placements in it that the search has not timed
before (``memo``, revision 8; without it, ``samples``); the reference placer's own evaluations
(``auto`` times its six candidates) are not counted. A batch that brings few new placements lowers
the sampling prior for the next (``widen``, revision 9), so a policy collapsed onto its incumbent
samples further from it instead of iterating on repeats; the bar shows the evaluations spent. A
search whose samples stop being new ends early, and annealing from its best placement spends the
budget it left (revision 10).
"""

from __future__ import annotations

import inspect
import math
import os
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import numpy as np

from gnplace.cluster import Cluster
from gnplace.exceptions import BudgetExhausted, InvalidArgument, InvalidCheckpoint, UnknownName
from gnplace.graph import OpGraph
from gnplace.limits import MAX_COUNT, check_budget, is_number, is_whole
from gnplace.placement import GraphKey, Placement, check_graph_and_cluster
from gnplace.rl.policy_files import SHIPPED_CHECKPOINT, SHIPPED_CONSTRUCTORS
from gnplace.rl.zeroshot import MAX_SAMPLES, PolicyPlacer
from gnplace.seed import SeedLike, as_generator
from gnplace.sim.simulator import Simulator
from gnplace.sim.timer import BudgetedTimer, StepTimer, relative_step, simulated, unwrapped
from gnplace.workers import stray_ranks_hidden, torch_threads

__all__ = [
    "PPOSearchPlacer", "FineTunePlacer", "ReinforceSearchPlacer", "RUN_KEY",
]

#: With ``memo``, a search iterates at most this many times as often as a budget of all-new batches takes.
MEMO_ITERATIONS = 4

#: ``reheat_after`` of the annealing prelude and polish: ``None``, annealing revision 4's chain, which never
#: reheats. ``ppo`` revision 11 and ``finetune`` revisions 18 and 19 were measured with it; the ``annealing`` placer
#: reheats a stalled chain since revision 5, not measured inside the searches yet.
SEARCH_REHEAT_AFTER: float | None = None

#: Each constructor's samples among a search's zero-shot candidates, and the ``policy`` revision whose candidates
#: those are. The search's budget pays for every candidate, so it keeps ``policy`` revision 11's 4 (D + 33
#: evaluations on D devices besides ``auto``'s own timings, which the budget pays for too: 57 in all on four devices)
#: where ``policy`` itself now draws 16 (D + 57, and D + 89 with revision 13's samples
#: around the best): ``finetune`` revision 18 was measured
#: with them, and on real steps at budgets of a hundred the difference would be a fifth of the budget. With 16 the
#: 18 pairs of ``bench.py finetune`` were no better after 400 or 1,000 evaluations under seeds 0 and 1, and worse
#: after 100 (docs/measured-real-devices.md, 2026-11-29).
ZERO_SHOT_CONSTRUCTOR_SAMPLES = 4
#: Its samples of the one last round of ``policy`` revision 11 (``refine``: a greedy decode and these around the best),
#: named here so that ``policy``'s defaults cannot move them; and no annealing polish (``policy`` revision 15's): the
#: search anneals at its end anyway.
ZERO_SHOT_REFINE = 4
#: Nor do the search's zero-shot candidates include the constructors' samples around the best (``policy`` revision
#: 13, ``constructor_refine``) or more than one last round (revision 14, ``last_rounds``): 32 and 124 evaluations
#: more, which the search spends around the best placement itself. "11.1": those candidates with ``policy``
#: revision 20's greedy decodes, on the decision graph the policy was pretrained on (graphs past ``max_nodes``).
_ZERO_SHOT_REVISION = "11.1"

#: ``finetune``'s ``polish`` (revision 19): the share of its budget spent last on simulated annealing from the
#: search's best placement. Chosen on the training graphs no shipped checkpoint trained on (``python
#: scripts/bench.py finetune --split val --budget 4000 --clusters k80x4 v100x8 tight4 -O finetune.polish=P``, seed
#: 0, 18 pairs): 0 / 0.25 / 0.5 ended at 0.8729 / **0.8677** / 0.8680 of ``auto`` (cifar10 0.786 / 0.772 / 0.773,
#: ptb 0.920 / 0.921 / 0.922, nmt 0.919 / 0.920 / 0.919); the search from scratch at 0.8816. Under seed 1, 0 and
#: 0.25 ended at 0.8839 and 0.8772 (scratch 0.8931).
FINETUNE_POLISH = 0.25

#: The key of a search's Lightning checkpoints that records the run (:meth:`PPOSearchPlacer.run_identity`).
RUN_KEY = "gnplace_run"

#: What a run that did not record a setting (:meth:`PPOSearchPlacer.run_identity`) ran with: ``screen``,
#: ``screen_model`` and the simulator's ``timer_mode`` are recorded only off these, ``entropy`` and ``elite``
#: not by runs of before they were.
_DEFAULT_SETTINGS: dict[str, Any] = {"screen": 1, "screen_model": "learned", "entropy": 0.01, "elite": 1.0,
                                     "timer_mode": "default"}

#: What a Lightning training checkpoint holds that a resumed run needs, with the learner's own section.
_LIGHTNING_KEYS = ("pytorch-lightning_version", "state_dict", "optimizer_states", "loops", "gnplace")


def _checkpoint_path(owner: str, checkpoint: Any) -> str:
    """``checkpoint`` as a path's text, refused unless it is a path (``""`` read the current folder, ``0`` a file "0").

    Raises:
        InvalidArgument: naming ``owner`` and the value.
    """
    if not isinstance(checkpoint, (str, os.PathLike)) or not os.fspath(checkpoint).strip():
        raise InvalidArgument(f"{owner}: checkpoint must be a policy checkpoint file's path, got {checkpoint!r}")
    return str(os.fspath(checkpoint))


class PPOSearchPlacer:
    """Train a fresh placement policy on one graph with PPO for ``budget`` evaluations; return the best seen.

    Args:
        budget (int, optional): timer evaluations of the search, all included but the reference placer's
            own (``auto`` times its six candidates first); 1 to :data:`~gnplace.limits.MAX_BUDGET` (default: 2000).
        samples (int, optional): placements per iteration, ``B`` (default: 32).
        epochs (int, optional): PPO steps per batch (default: 10).
        imitation_steps (int, optional): imitation steps on the reference before PPO (default: 30).
        lr (float, optional): Adam's learning rate (default: 3e-3).
        entropy (float, optional): entropy bonus (default: 0.01).
        elite (float, optional): weight of the cross-entropy pull toward the best placement seen
            (default: 1.0; see :class:`~gnplace.rl.config.LearnerConfig`).
        hidden (int, optional): the policy's embedding width (default: 64).
        layers (int, optional): the policy's message-passing rounds (default: 4).
        max_nodes (int, optional): most nodes of the decision graph (default: 1,000).
        algo (str, optional): ``"ppo"`` or ``"reinforce"`` (default: ``"ppo"``).
        mode (str, optional): ``"construct"`` (Spotlight's MDP) or ``"refine"`` (Placeto's and
            GiPH's, whose moves take no ``prior``, ``elite`` or ``screen``; see
            :class:`~gnplace.rl.config.LearnerConfig`) (default: ``"construct"``).
        reference (str, optional): the registered placer whose placement starts the search and
            is imitated first (default: ``"auto"``): a fast one, which takes no budget (its own
            evaluations are not counted in ``budget``).
        polish (float, optional): share of the budget spent last on simulated annealing from the
            best placement the policy found (a local search around the policy, as REGAL puts one around
            its learned proposals); 0 spends it all on the policy, but for what a ``memo`` search leaves
            (default: 0.0).
        prelude (float, optional): share of the budget spent first on simulated annealing from the
            reference; the policy then imitates and searches from the better of the two, so the search
            is never worse than annealing with that budget. Annealing finds what the policy's
            constructive samples miss on ptb and nmt, and the policy finds on some cifar10 graphs what
            annealing misses (see the README) (default: 0.2; 0 for Spotlight's PPO alone).
        modules (bool, optional): coarsen a graph too big for ``max_nodes`` along its module hierarchy
            first, so that each decision places a whole branch or cell
            (:func:`~gnplace.coarsen.module_units`) (default: :obj:`True`).
        anchor (bool, optional): score the policy's placements relative to the best seen, so that a
            group the policy leaves where the best placement has it keeps that placement's ops
            (:meth:`~gnplace.rl.problem.PlacementProblem.anchor`) (default: :obj:`True`).
        prior (float, optional): logit bonus of the best placement's device for every group while
            sampling (see :class:`~gnplace.rl.config.LearnerConfig`): each decision keeps the incumbent's
            device unless the policy prefers another by more than ``e**prior``, so a sample differs from
            the best placement in a few groups, a local search whose moves the policy learns; 0 samples
            the policy alone (default: 6.0).
        memo (bool, optional): time each distinct placement once and count only new ones against the
            budget (:attr:`~gnplace.rl.problem.PlacementProblem.memo`), iterating until the budget is spent
            or :data:`MEMO_ITERATIONS` times the iterations of all-new batches are done; what it leaves
            goes to the polish, annealing from the best placement (revision 10). Sampled around
            the incumbent, most samples repeat placements already timed (the incumbent itself above
            all): 71-95% of a 1,000-evaluation search's on the k80x4 test pairs before revision 8
            (default: :obj:`True`).
        widen (bool, optional): with ``memo``, lower the prior by 1 for a pair's next batch when fewer
            than a quarter of its batch were new placements, and raise it back toward ``prior`` when more
            than half were (:meth:`~gnplace.rl.problem.PlacementProblem.widen`), so a policy collapsed
            onto its incumbent explores instead of iterating on repeats (revision 9). Over the 18 pairs
            of ``bench.py finetune`` at 2,000 evaluations it placed them at 0.903 (seed 0) and 0.904
            (seed 1) of ``auto`` against 0.907 and 0.906, in 21-33% less time (see the README)
            (default: :obj:`True`).
        screen (int, optional): candidates drawn per placement timed, ``M``: once a
            :class:`~gnplace.rl.screen.MoveScreen` has learned from 32 timed placements, each batch draws
            ``M`` times ``samples`` and times only the new ones it ranks fastest (see
            :class:`~gnplace.rl.config.LearnerConfig`); 1 times every sample (default: 1; fine-tuning: 48).
        screen_model (str, optional): what the screen starts from (``LearnerConfig.screen_model``):
            ``"learned"``, nothing; ``"simulator"``, the simulator's step of each candidate, corrected by
            what the timer measures; ``"auto"``, the simulator beside a real timer and nothing with the
            simulator as the timer (default: ``"auto"``).
        timer (StepTimer, optional): times placements (default: ``Simulator()``).
        checkpoint (str, optional): a policy checkpoint to start from instead of a fresh policy
            (fine-tuning; its network shape replaces ``hidden`` and ``layers``, and other values given for them
            are refused) (default: ``None``).
        zero_shot (bool, optional): with a ``checkpoint``, first place the graph zero-shot with it
            (:class:`~gnplace.rl.zeroshot.PolicyPlacer`, ``zero_shot_samples`` samples; its evaluations
            count against the budget) and return that placement if the search ends slower, so
            fine-tuning is never worse than zero-shot placement; the best-so-far history counts it from
            the evaluation that timed it (default: :obj:`False`).
        zero_shot_start (bool, optional): with ``zero_shot``, also centre the search on the zero-shot
            placement when it beats the reference (fine-tuning's revision 6). Off by default: a search
            around the zero-shot placement stalled on two of six test graphs where the search around
            ``auto``'s went on improving (see the README) (default: :obj:`False`).
        zero_shot_samples (int, optional): the zero-shot placer's samples ``K`` (default: 16).
        out (str, optional): folder for Lightning's checkpoint ``last.ckpt`` (written every
            ``checkpoint_every_s`` seconds and at the end) and CSV logs (default: none written).
        resume (bool, optional): continue from ``out/last.ckpt`` if it exists (refused without ``out``); one
            that is unreadable, not a search's or another run's (another graph, cluster, problem setting or starting
            checkpoint, :meth:`run_identity`) is refused with :class:`~gnplace.exceptions.InvalidCheckpoint`
            before anything is timed or written (default: :obj:`False`).
        checkpoint_every_s (float, optional): seconds between checkpoints (default: 60).
        progress (bool or None, optional): show Lightning's progress bar (True), nothing (False), or the bar on a
            terminal and a line every half minute elsewhere, e.g. in a log file (None; default).

    Examples:
        >>> from gnplace.toy import mlp_training_graph
        >>> from gnplace.cluster import load_cluster
        >>> placer = PPOSearchPlacer(budget=65, samples=16, epochs=2, imitation_steps=2)
        >>> placer.place(mlp_training_graph(layers=3, width=256, batch=32), load_cluster("k80x2"), seed=0).devices.shape
        (20,)
        >>> placer.last_evaluations <= 65
        True
    """

    name = "ppo"
    learned = True
    accepts = frozenset({"timer", "budget"})
    uses: tuple[str, ...] = ("auto",)  # the reference: the start, the reward's baseline and the imitation target
    algo = "ppo"
    # 12 (2026-12-03): a best that still overflows at the end is repaired (reference=single on tight4 returned
    # an out-of-memory placement); 11 (2026-11-28): its prelude and polish anneal from T_0 0.001 (annealing
    # revision 4); 10: the budget a memoised search leaves goes to the polish (9: widen; 8: memo)
    revision = "12"
    #: How the user names ``out`` in messages: ``gnplace finetune``'s ``-o``; ``gnplace place`` sets
    #: ``-O NAME.out`` (there ``-o`` is the placement file).
    out_option = "-o"
    #: How the user asks for a resume in messages: ``gnplace finetune``'s ``--resume``; ``gnplace place`` sets
    #: ``-O NAME.resume=true``.
    resume_option = "--resume"

    def __init__(
        self, budget: int = 2000, samples: int = 32, epochs: int = 10, imitation_steps: int = 30, lr: float = 3e-3,
        entropy: float = 0.01, elite: float = 1.0, hidden: int = 64, layers: int = 4, max_nodes: int = 1000,
        algo: str | None = None, mode: str = "construct", reference: str = "auto", polish: float = 0.0,
        timer: StepTimer | None = None, checkpoint: str | None = None, out: str | None = None, resume: bool = False,
        checkpoint_every_s: float = 60.0, progress: bool | None = None, zero_shot: bool = False,
        zero_shot_samples: int = 16, zero_shot_start: bool = False, prelude: float = 0.2, modules: bool = True,
        anchor: bool = True, prior: float = 6.0, memo: bool = True, widen: bool = True, screen: int = 1,
        screen_model: str = "auto",
    ) -> None:
        from gnplace.rl.config import LearnerConfig

        budget = check_budget(budget, type(self).__name__)  # at most MAX_BUDGET: a typo is not a search of years
        for name, value, low in (("max_nodes", max_nodes, 1), ("zero_shot_samples", zero_shot_samples, 0)):
            if not is_whole(value) or value < low:  # 2.5 was cut to 2
                raise InvalidArgument(f"{type(self).__name__} needs {name} >= {low} (a whole number), got {value!r}")
        if zero_shot_samples > MAX_SAMPLES:  # was refused mid-search, after the reference, as PolicyPlacer's samples
            raise InvalidArgument(f"{type(self).__name__} needs zero_shot_samples <= {MAX_SAMPLES} (one batch of "
                                  f"rollouts), got {zero_shot_samples}")
        wrong = [f"{name}={value!r}" for name, value in (("polish", polish), ("prelude", prelude))
                 if not is_number(value)]
        if wrong:  # None named another option ("wrong type (budget=60)"), false was taken as 0
            raise InvalidArgument(f"{type(self).__name__}: polish and prelude are shares of the budget, numbers in "
                                  f"[0, 1), got {' and '.join(wrong)}")
        if not 0.0 <= polish < 1.0 or not 0.0 <= prelude < 1.0 or polish + prelude >= 1.0:
            raise InvalidArgument(f"{type(self).__name__}: polish and prelude must be in [0, 1) and sum to less "
                                  f"than 1, got {polish} and {prelude}")
        self.prelude = float(prelude)
        self.modules, self.anchor, self.memo = bool(modules), bool(anchor), bool(memo)
        self.budget = int(budget)
        self.polish = float(polish)
        from gnplace.placers.registry import PLACERS

        if not isinstance(reference, str) or reference not in PLACERS:  # was "unknown placer 'foo'", naming no option
            raise UnknownName(f"{type(self).__name__}: reference must be a registered placer's name (choose one of: "
                              f"{', '.join(sorted(PLACERS))}), got {reference!r}")
        info = PLACERS.info(reference)
        if info.learned or "budget" in info.accepts:  # its own evaluations are not counted: --budget bound nothing
            raise InvalidArgument(f"{type(self).__name__}: reference must be a fast placer that takes no budget "
                                  f"(auto, single, heft, ...), got {reference!r}")
        self.reference = reference
        self.max_nodes = int(max_nodes)
        self.checkpoint = None if checkpoint is None else _checkpoint_path(type(self).__name__, checkpoint)
        if out is not None and not isinstance(out, str | os.PathLike):  # -O ppo.out=[a] made a folder "['a']"
            raise InvalidArgument(f"{type(self).__name__}: out must be a folder's path, got {out!r}")
        if out is not None and not str(out).strip():  # not read as the current folder, among the user's files
            raise InvalidArgument(f"{type(self).__name__}: out is empty; name the folder to write into (. for the "
                                  "current one)")
        self.out = None if out is None else str(out)
        self.resume = bool(resume)
        if self.resume and self.out is None:  # nothing to continue from: a new run started, without a word
            raise InvalidArgument(f"{type(self).__name__}: resume continues the run checkpointed in out "
                                  "(out/last.ckpt), and no out is given: name the run's folder")
        try:  # a numpy integer or float32 is a number too (they were refused)
            seconds = float(checkpoint_every_s) if is_number(checkpoint_every_s) else math.nan
        except OverflowError:  # an int past a float's range
            seconds = math.inf
        if not 0 < seconds < math.inf:
            raise InvalidArgument(f"{type(self).__name__}: checkpoint_every_s must be a number of seconds > 0, "
                                  f"got {checkpoint_every_s!r}")
        self.checkpoint_every_s = seconds
        self.progress = progress
        if type(self).algo == "reinforce" and algo not in (None, "reinforce"):  # it ran as ppo, named reinforce
            use = "use the 'ppo' placer" if algo == "ppo" else "leave algo out"  # was "use the 'abc' placer"
            raise InvalidArgument(f"{type(self).__name__} is the REINFORCE ablation, and algo={algo!r} would make "
                                  f"it another placer under its name: {use} (ppo takes algo='reinforce')")
        algo = self.algo if algo is None else algo  # None alone is the default: -O ppo.algo=false ran ppo
        self._check_inert(epochs=epochs, algo=algo, zero_shot=zero_shot,
                          zero_shot_samples=zero_shot_samples, zero_shot_start=zero_shot_start, screen=screen,
                          screen_model=screen_model)
        self.zero_shot = bool(zero_shot)
        self.zero_shot_samples = int(zero_shot_samples)
        self.zero_shot_start = bool(zero_shot_start)
        shape: dict[str, Any] = {"hidden": hidden, "layers": layers}
        if self.checkpoint is not None:
            from gnplace.rl.policy_files import cached_policy

            policy, _ = cached_policy(self.checkpoint)  # raises InvalidCheckpoint on a bad file, before any work
            shape = {k: getattr(policy.config, k) for k in ("hidden", "layers", "head", "alpha")}
            self._check_shape_given(hidden=hidden, layers=layers, shape=shape)
        self.timer = timer or Simulator()
        if screen_model == "auto":  # the simulator ranks a real timer's candidates; it cannot rank its own
            screen_model = "learned" if simulated(self.timer) else "simulator"
        try:
            self.config = LearnerConfig(
                algo=algo, samples=samples, epochs=epochs, imitation_steps=imitation_steps, lr=lr,
                entropy=entropy, elite=elite, mode=mode, prior=prior, screen=screen, screen_model=screen_model,
                **shape,
            )
        except InvalidArgument as err:  # "need samples >= 2, got 1" named no placer (evaluate -p ppo,finetune)
            raise InvalidArgument(f"{type(self).__name__}: {err}") from None
        self.config.check_timer(self.timer)  # refused here, not after the reference and prelude are timed
        if self.checkpoint is not None:  # its weights read the dynamic features of the MDP they were trained in
            cached_policy(self.checkpoint, mode=self.config.mode)
        if self.zero_shot and self.config.mode != "construct":
            raise InvalidArgument(f"{type(self).__name__}: zero-shot placement decodes in the constructive MDP, so a "
                                  f"search with mode={self.config.mode} from a checkpoint takes zero_shot=false")
        self.widen = bool(widen) and self.memo
        self.last_evaluations = 0
        self.last_polish_evaluations = 0  # of last_evaluations, the polish's annealing chain's
        self.last_repair_evaluations = 0  # outside last_evaluations: moving groups off overflowing devices at the end
        self.last_reference_step: float | None = None
        self.last_step: float | None = None
        self.last_history: list[tuple[int, float]] = []
        self.last_greedy_after_imitation: float | None = None
        self.last_greedy_after_search: float | None = None
        self.last_zero_shot_step: float | None = None  # as the search timed it (real steps: one noisy measurement)
        self.last_zero_shot_placement: np.ndarray | None = None  # its devices [num_ops], to measure afresh
        self.last_zero_shot_budget_needed: int | None = None  # set when the budget was too small to time it

    @classmethod
    def _default(cls, name: str) -> Any:
        """The default of option ``name`` in the nearest constructor that gives one (fine-tuning's are its own)."""
        for owner in cls.__mro__:
            parameter = inspect.signature(owner.__init__).parameters.get(name)  # type: ignore[misc]
            if parameter is not None and parameter.default is not inspect.Parameter.empty:
                return parameter.default
        raise KeyError(name)

    def _check_inert(self, *, epochs: Any, algo: str, zero_shot: Any, zero_shot_samples: Any,
                     zero_shot_start: Any, screen: Any = 1, screen_model: Any = "auto") -> None:
        """Refuse options set to no effect: never ignored silently (``-O reinforce.epochs=5`` changed nothing).

        Raises:
            InvalidArgument: for ``zero_shot`` without a ``checkpoint``, ``zero_shot_samples`` or
                ``zero_shot_start`` set without ``zero_shot``, ``epochs`` set with ``algo="reinforce"``
                (one policy-gradient step per batch), or ``screen_model`` set with ``screen`` 1 (no screen:
                every sample is timed; ``gnplace finetune --screen 1 --screen-model learned`` was taken).
        """
        owner = type(self).__name__
        if zero_shot and self.checkpoint is None:
            raise InvalidArgument(f"{owner}: zero_shot places the graph with a checkpoint's policy first: give "
                                  "checkpoint too (--checkpoint PATH), or leave zero_shot out")
        unused = [name for name, value in (("zero_shot_samples", zero_shot_samples),
                                            ("zero_shot_start", zero_shot_start)) if value != self._default(name)]
        if unused and not zero_shot:
            apply, them = ("apply", "them") if len(unused) > 1 else ("applies", "it")
            raise InvalidArgument(f"{owner}: {' and '.join(unused)} {apply} only with zero_shot=true (and a "
                                  f"checkpoint); leave {them} out")
        if screen_model != self._default("screen_model") and is_whole(screen) and screen <= 1:
            raise InvalidArgument(f"{owner}: screen_model is what the screen of screen > 1 starts from, and screen="
                                  f"{screen} screens nothing (every sample is timed): leave screen_model out, or "
                                  "set screen above 1")
        if algo == "reinforce" and epochs != self._default("epochs"):
            raise InvalidArgument(f"{owner}: epochs counts PPO's gradient steps per batch; algo=reinforce makes one "
                                  f"step per batch, so leave epochs out (got {epochs!r})")

    def _check_shape_given(self, *, hidden: Any, layers: Any, shape: dict[str, Any]) -> None:
        """Refuse a ``hidden`` or ``layers`` set beside a checkpoint: its network's ``shape`` replaces them.

        ``-O finetune.hidden=8`` fine-tuned the checkpoint's 64-wide network without a word. A value equal to the
        default or to the checkpoint's own is accepted: it asks for nothing else.

        Raises:
            InvalidArgument: naming the options and the checkpoint's values.
        """
        given = [name for name, value in (("hidden", hidden), ("layers", layers))
                 if value != self._default(name) and value != shape[name]]
        if given:
            ours = ", ".join(f"{name}={shape[name]}" for name in given)
            raise InvalidArgument(f"{type(self).__name__}: {' and '.join(given)} shape a new network, and this search "
                                  f"starts from the checkpoint {self.checkpoint}, whose network is its own ({ours}): "
                                  f"leave {' and '.join(given)} out")

    def __repr__(self) -> str:
        c = self.config
        epochs = f"epochs={c.epochs}, " if c.algo != "reinforce" else ""  # reinforce refuses it: one step a batch
        return (f"{type(self).__name__}(budget={self.budget}, samples={c.samples}, {epochs}"
                f"imitation_steps={c.imitation_steps}, prelude={self.prelude}, algo={c.algo!r})")

    def place(self, graph: OpGraph, cluster: Cluster, *, seed: SeedLike = None) -> Placement:
        """Search for a placement of ``graph`` on ``cluster`` within the budget.

        Args:
            graph (OpGraph): the graph.
            cluster (Cluster): the devices.
            seed (int, np.random.Generator or None, optional): seed of the policy and its samples (default: None).

        Returns:
            Placement: the best placement timed (the reference, ``auto``'s, unless a sample beat it).
        """
        check_graph_and_cluster(graph, cluster)
        if self.out is None:
            return self._place(graph, cluster, seed)
        from gnplace.runlock import folder_lock

        with folder_lock(self.out, self.out_option):  # one search at a time writes its checkpoints there
            return self._place(graph, cluster, seed)

    @stray_ranks_hidden  # LOCAL_RANK=1 left in the shell: no logs were written, a rank other than 0 writes none
    def _place(self, graph: OpGraph, cluster: Cluster, seed: SeedLike) -> Placement:
        """:meth:`place`, its folder (if any) held."""
        import lightning as L

        from gnplace.callbacks import (
            StopAtBudget,
            fit_interruptibly,
            progress_callbacks,
            quiet_lightning,
            single_process_plugins,
        )
        from gnplace.train import PlacementDataModule, PlacementLearner

        self.last_zero_shot_step = self.last_zero_shot_budget_needed = None  # this call's, whichever way it ends
        self.last_zero_shot_placement = None
        self.last_repair_evaluations = 0
        last = None if self.out is None else Path(self.out) / "last.ckpt"
        identity = {} if last is None else self.run_identity(graph, cluster)
        if identity:  # the run's seed too: resuming under another would mix two runs' draws
            identity["settings"]["seed"] = int(seed) if isinstance(seed, int | np.integer) else None
        resume_from, saved_start = None, None
        if last is not None and (last.exists() or last.is_symlink()):
            if not last.is_file():
                raise InvalidCheckpoint(f"{last}: not a checkpoint file (move it away or use another "
                                        f"{self.out_option})")
            if not self.resume:  # a new run would overwrite it: the earlier run's state is not ours to drop
                raise InvalidArgument(f"{last.parent} holds a run already ({last.name}): resume it "
                                      f"({self.resume_option}), or use another {self.out_option}")
            saved_start = self.check_resumable(last, identity, cluster).get("start")  # refused before anything is timed
            resume_from = str(last)
        if graph.num_ops == 0:
            return Placement(np.zeros(0, dtype=np.int64), cluster, GraphKey.of(graph))
        seed_value = int(as_generator(seed).integers(2**31 - 1))
        counted = BudgetedTimer(self.timer, self.budget)
        # the reference runs under the caller's seed, so it is the placement `auto` itself gives for that seed
        reference_seed = int(seed) if isinstance(seed, int | np.integer) else seed_value
        data = PlacementDataModule([(graph, cluster)], timer=self.timer, max_nodes=self.max_nodes, seed=seed_value,
                                   reference=self.reference, reference_seed=reference_seed, modules=self.modules,
                                   anchored=self.anchor, memo=self.memo, widen=self.widen)
        problem = data.problem(0)
        counted.evaluations = 1  # timing the reference placement
        self.last_reference_step = problem.reference_step
        if problem.reference_step <= 0 and not problem.best_oom:  # a step of no work (0 s): nothing is faster
            self.last_evaluations, self.last_step, self.last_history = 1, 0.0, list(problem.history)
            self.last_polish_evaluations = 0
            self.last_greedy_after_imitation = self.last_greedy_after_search = None
            return Placement(problem.best_devices, cluster, GraphKey.of(graph))
        polish_budget = int(self.budget * self.polish)
        greedy_checks = 2 if self.config.imitation_steps > 0 else 1  # the greedy policy after imitation, at the end
        start = _SearchStart.restore(saved_start, graph.num_ops) if resume_from is not None else None
        if start is None:  # a new run (or one checkpointed by an older gnplace): time the start
            # zero-shot under the caller's seed too: its placement is the one `policy` gives for that seed
            spent_before = counted.evaluations
            zero_shot = self._zero_shot(problem, counted, reference_seed) if self.zero_shot else None
            given_up = counted.evaluations - spent_before if zero_shot is None else 0  # candidates past the budget
            start = _SearchStart(zero_shot, self._annealing_start(problem, counted, seed_value),
                                 self.last_zero_shot_budget_needed, given_up)
        # what the run reports of its start (a resumed run's problem, these evaluations in it, is the checkpoint's)
        self.last_zero_shot_budget_needed = start.budget_needed
        if start.zero_shot is not None:
            self.last_zero_shot_step, self.last_zero_shot_placement = start.zero_shot[1], start.zero_shot[0].copy()
        if identity:  # in every checkpoint, a resumed run's too: a resume takes it from there, not timing it again
            identity["start"] = start.state()
        zero_shot = start.zero_shot
        start_budget = start.spent
        policy_budget = self.budget - 1 - start_budget - polish_budget - greedy_checks
        samples = min(self.config.samples, max(policy_budget, 0))
        iterations = policy_budget // samples if samples >= 2 and cluster.num_devices > 1 else 0
        if iterations > 0:
            config = replace(self.config, samples=samples, seed=seed_value)
            # memo: a batch costs only its new placements, so iterate until the budget is spent (at most
            # MEMO_ITERATIONS times as many iterations as a budget of all-new batches takes)
            # (capped: Lightning takes the epoch's length as an index-sized integer, and a huge budget is no end anyway)
            data.steps_per_epoch = min(config.imitation_steps + iterations * (MEMO_ITERATIONS if self.memo else 1),
                                       MAX_COUNT)
            learner = PlacementLearner(config, counted)
            if self.checkpoint is not None:
                from gnplace.rl.policy_files import cached_policy

                learner.policy.load_state_dict(cached_policy(self.checkpoint)[0].state_dict())
            callbacks: list[Any] = []
            if last is not None:
                from lightning.pytorch.loggers import CSVLogger

                from gnplace.callbacks import TimedCheckpoint

                callbacks += [_record_run(identity), TimedCheckpoint(last, self.checkpoint_every_s)]
            if self.memo:  # a batch, the greedy check at the end and the polish must fit in what is left
                callbacks.append(StopAtBudget(counted, samples + polish_budget + 1,
                                              spent=lambda: data.problem(0).evaluations))
            bars = progress_callbacks(self.progress, f"{self.name} {graph.name}", self.budget, count="evaluations")
            with torch_threads(1):  # the policy's tensors are small: more threads spin and slow it down
                with quiet_lightning():
                    trainer = L.Trainer(
                        max_epochs=1, accelerator="cpu", devices=1,
                        logger=CSVLogger(self.out, name="logs") if self.out is not None else False,
                        log_every_n_steps=1, enable_checkpointing=False, callbacks=callbacks + bars,
                        enable_progress_bar=bool(bars),
                        enable_model_summary=False, num_sanity_val_steps=0, limit_val_batches=0,
                        plugins=single_process_plugins(),
                    )
                    fit_interruptibly(trainer, learner, datamodule=data, ckpt_path=resume_from,
                                      weights_only=True)  # saves at the end
                problem = data.problem(0)  # a resumed run's, with its saved best placement and reference step
                self.last_reference_step = problem.reference_step
                self.last_greedy_after_search = relative_step(learner.greedy_step(problem), problem.reference_step)
            after = problem.greedy_steps.get(config.imitation_steps - 1)
            self.last_greedy_after_imitation = None if after is None else relative_step(after, problem.reference_step)
        history = list(problem.history)
        if zero_shot is not None and not self.zero_shot_start:  # the candidate beside the search
            devices, step, oom, timed_at, _ = zero_shot
            # fits first: while the search's best overflows (the reference's, which only a fitting placement
            # replaces), the candidate that fits is the best at any step
            overflowing = problem.reference_step if problem.reference_oom else None  # its step while it is the best
            history = [(e, step if e >= timed_at and not oom and (step < s or s == overflowing) else s)
                       for e, s in history]
            problem.offer(devices, step, oom, 0)
        best = Placement(problem.best_devices, cluster, GraphKey.of(graph))
        used = problem.evaluations
        # memo: a search whose samples stopped being new placements ends with budget left; annealing from
        # the best placement spends it on placements not timed yet (revision 10)
        polish_now = polish_budget + (max(self.budget - used - polish_budget, 0) if self.memo else 0)
        polish_now = min(polish_now, self.budget - used)  # zero-shot candidates given up may have spent into its share
        if polish_now < 2 or cluster.num_devices == 1:
            polish_now = 0
        overflows = problem.best_oom  # the best timed still overflows a device: only a fitting placement replaces it
        if polish_now:
            from gnplace.placers.annealing import AnnealingPlacer, GivenStart

            annealer = AnnealingPlacer(budget=polish_now, start=GivenStart(best), timer=self.timer,
                                       reheat_after=SEARCH_REHEAT_AFTER, progress=self.progress)
            polished = annealer.place(graph, cluster, seed=seed_value)
            before = history[-1][1]
            fitting = [(used + e, step) for e, over, step in annealer.last_trace if over == 0]
            if problem.best_oom and fitting:  # the search found nothing that fits, the polish did: it wins at any step
                history += fitting
                best, overflows = polished, False
            else:
                history += [(e, step) for e, step in fitting if step < before]
                if history[-1][1] < problem.best_step:
                    best = polished
            used += polish_now
        self.last_polish_evaluations = polish_now
        self.last_evaluations = used
        self.last_step = history[-1][1]
        self.last_history = history
        if overflows:  # nothing timed fits (an overflowing reference, a budget too small to leave it): move groups
            # off the devices that overflow, outside the budget, as every memory-aware placer does (revision 12)
            from gnplace.rl.comparator import repair_best

            best = Placement(repair_best(self, graph, cluster, best.devices), cluster, GraphKey.of(graph))
        return best

    def run_identity(self, graph: OpGraph, cluster: Cluster) -> dict[str, Any]:
        """What a run of this placer on ``graph`` and ``cluster`` is: saved in its checkpoints, checked on resume.

        The graph's and the cluster's fingerprints (:meth:`~gnplace.graph.OpGraph.fingerprint`),
        the settings that shape the problem or the policy (``max_nodes``, ``modules``, ``anchor``, the
        reference placer, the MDP, the algorithm, the policy's shape, the kind of timer, the simulator's mode
        and how a real one measures: repeats, threads, devices) and the content
        of the checkpoint fine-tuned from (plain data: it goes into Lightning checkpoints).
        """
        from gnplace.evaluate import file_digest

        c = self.config
        identity: dict[str, Any] = {
            "graph": graph.fingerprint(), "graph_name": graph.name, "ops": graph.num_ops,
            "cluster": cluster.fingerprint(), "cluster_name": cluster.name,
            "checkpoint": None if self.checkpoint is None else file_digest(self.checkpoint),
            "settings": {
                "max_nodes": self.max_nodes, "modules": self.modules, "anchor": self.anchor,
                "reference": str(self.reference), "mode": c.mode, "algo": c.algo, "hidden": c.hidden,
                "layers": c.layers, "head": c.head, "alpha": float(c.alpha), "timer": type(self.timer).__name__,
                "budget": self.budget, "samples": c.samples, "epochs": c.epochs, "lr": float(c.lr),
                # how the budget is spent: a resume under others would overrun it or mix two searches
                "zero_shot": self.zero_shot, "zero_shot_samples": self.zero_shot_samples,
                "zero_shot_start": self.zero_shot_start, "prelude": self.prelude, "polish": self.polish,
                "prior": float(c.prior), "imitation_steps": c.imitation_steps, "memo": self.memo,
                "widen": self.widen, "entropy": float(c.entropy), "elite": float(c.elite),
            },
        }
        mode = getattr(unwrapped(self.timer), "mode", "default")
        if mode != "default":  # the simulator's other cost model (runs in the default one resume as before)
            identity["settings"]["timer_mode"] = mode
        measures = getattr(self.timer, "settings", None)
        if callable(measures):  # a real timer's repeats, threads, devices (the simulator has none to record)
            identity["settings"]["timer_settings"] = measures()
        if c.screen > 1:  # (runs of before the screen, which had none, still resume)
            identity["settings"]["screen"] = c.screen
            if c.screen_model != "learned":  # (nor those of before its models)
                identity["settings"]["screen_model"] = c.screen_model
        if self.checkpoint is not None:  # fine-tuning's zero-shot candidates include the shipped constructors'
            identity["settings"]["constructor"] = [file_digest(p) for p in SHIPPED_CONSTRUCTORS]  # (from scratch: none)
        if self.zero_shot:  # how the zero-shot candidates are drawn (a run without them does not depend on it)
            identity["settings"]["zero_shot_revision"] = _ZERO_SHOT_REVISION
            identity["settings"]["zero_shot_seed"] = "caller"  # revision 12 (11 drew from the search's own seed)
        return identity

    def check_resumable(self, path: Path, identity: dict[str, Any], cluster: Cluster | None = None) -> dict[str, Any]:
        """Refuse a checkpoint ``path`` that cannot continue the run ``identity``: unreadable, foreign or another run's.

        Reads the file only (``weights_only``), so a refused checkpoint stays as it was. A run on ``cluster`` that
        recorded its :meth:`~gnplace.cluster.Cluster.earlier_fingerprint` (a gnplace of before 2026-12-04, on a
        cluster file that restates a default in another form) is a run on it.

        Returns:
            dict: the run recorded in the checkpoint (``identity``'s keys, and the search's start).

        Raises:
            InvalidCheckpoint: with one line saying which.
        """
        from gnplace.policy.checkpoint import (
            check_training_state,
            check_training_weights,
            is_training_checkpoint,
            read_checkpoint,
        )

        kind = "fine-tuning" if self.checkpoint is not None else "search"
        data = read_checkpoint(path)
        if any(key not in data for key in _LIGHTNING_KEYS) or not is_training_checkpoint(data):
            raise InvalidCheckpoint(f"{path}: not a {kind} run's checkpoint (cannot resume from it; use another "
                                    f"{self.out_option})")
        saved = data.get(RUN_KEY)
        if not isinstance(saved, dict):
            raise InvalidCheckpoint(f"{path}: records no graph or cluster (another kind of run, or an older "
                                    f"gnplace's), so it cannot be checked: use another {self.out_option}")
        differ = []
        if saved.get("graph") != identity["graph"]:
            differ.append(f"another graph ({saved.get('graph_name')!r}, {saved.get('ops')} ops; "
                          f"here {identity['graph_name']!r}, {identity['ops']} ops)")
        earlier = None if cluster is None else cluster.earlier_fingerprint()
        if saved.get("cluster") not in (identity["cluster"], earlier):
            name, here = saved.get("cluster_name"), identity["cluster_name"]
            differ.append(f"another cluster ({name}; here {here})" if name != here
                          else f"another cluster ({name} with other devices)")
        if saved.get("checkpoint") != identity["checkpoint"]:
            differ.append("another policy checkpoint to start from")
        settings, mine = saved.get("settings"), identity["settings"]
        # a setting recorded only off its default is at its default where a run did not record it (either run)
        settings = {**_DEFAULT_SETTINGS, **(settings if isinstance(settings, dict) else {})}
        mine = {**_DEFAULT_SETTINGS, **mine}
        unrecorded = sorted(k for k in mine if k not in settings)
        if unrecorded and not differ:  # an older gnplace's run: what it did not record cannot be checked
            raise InvalidCheckpoint(f"{path}: a {kind} run of an older gnplace, which did not record "
                                    f"{', '.join(unrecorded)}, so it cannot be checked: use another {self.out_option}")
        changed = sorted(k for k in mine if k in settings and settings[k] != mine[k])
        if changed:
            differ.append(f"other settings ({', '.join(changed)})")
        if differ:
            raise InvalidCheckpoint(f"{path} is a {kind} run of {' and '.join(differ)}: "
                                    f"resume with the same inputs or use another {self.out_option}")
        check_training_weights(path, data["state_dict"], self.config.policy, f"the {kind}'s policy")
        check_training_state(path, data, self.config.policy, max_epochs=1)  # loops, Adam, the pairs' state (budget)
        return saved

    def _annealing_start(self, problem: Any, counted: BudgetedTimer, seed: int) -> int:
        """Anneal from ``problem``'s best placement for ``prelude`` of the budget and offer the result.

        Returns the evaluations spent.
        """
        from gnplace.placers.annealing import AnnealingPlacer, GivenStart

        graph, cluster = problem.inp.graph, problem.inp.cluster
        budget = int(self.budget * self.prelude)
        if budget < 1 or cluster.num_devices < 2:
            return 0
        start = GivenStart(Placement(problem.best_devices, cluster, GraphKey.of(graph)))
        annealer = AnnealingPlacer(budget=budget, start=start, timer=counted, reheat_after=SEARCH_REHEAT_AFTER,
                                   progress=self.progress)
        before = counted.evaluations
        found = annealer.place(graph, cluster, seed=seed)
        _, excess, step = annealer.last_trace[-1]  # the best the chain timed: (evaluations, overflow, seconds)
        spent = counted.evaluations - before
        problem.offer(found.devices, float(step), excess > 0, spent)
        return spent

    def _zero_shot(self, problem: Any, counted: BudgetedTimer,
                   seed: int) -> tuple[np.ndarray, float, bool, int, int] | None:
        """Time the checkpoint's zero-shot placement of ``problem``; with ``zero_shot_start``, centre the search on it.

        Returns:
            ``(devices [num_ops], step seconds, oom, evaluations when it was timed, evaluations it
            took)``, or ``None`` (nothing spent) when the budget cannot cover the zero-shot
            candidates, the policy's greedy decodes and ``zero_shot_samples`` samples, and still
            leave one PPO batch.
        """
        graph, cluster = problem.inp.graph, problem.inp.cluster
        if cluster.num_devices < 2:
            return None
        assert self.checkpoint is not None
        kept = 1 + 2 * self.config.samples  # what the search needs left: its zero-shot timing and one PPO batch
        # the estimate can fall short where memory repairs run (up to 36 timings each, on a tight cluster, 1,061 where
        # the repair's fallbacks overflow too):
        # the zero-shot placement spends at most what leaves the search its batch, or is given up
        capped = counted if counted.remaining is None else BudgetedTimer(counted, max(counted.remaining - kept, 0))
        placer = PolicyPlacer(self.checkpoint, samples=self.zero_shot_samples, max_nodes=self.max_nodes,
                              constructor_samples=ZERO_SHOT_CONSTRUCTOR_SAMPLES, constructor_refine=0, last_rounds=1,
                              refine=ZERO_SHOT_REFINE, polish=0, module_chain=0,
                              timer=capped, progress=self.progress)
        needed = placer.evaluations_needed(cluster)
        if counted.remaining is not None and counted.remaining < needed + kept:
            self.last_zero_shot_budget_needed = counted.evaluations + needed + kept
            return None
        before = counted.evaluations
        try:
            placement = placer.place(graph, cluster, seed=seed)
        except BudgetExhausted:  # spent, and counted as spent; the search goes on from the reference
            self.last_zero_shot_budget_needed = int(counted.budget or 0) + 1  # more than this budget, at least
            problem.evaluations += counted.evaluations - before
            problem.history.append((problem.evaluations, problem.best_step))
            return None
        result = counted.time(graph, cluster, placement)
        spent = counted.evaluations - before
        step, oom = float(result.step_time), bool(result.is_oom)
        if self.zero_shot_start:
            problem.offer(placement.devices, step, oom, spent)
        else:  # counted now, offered after the search
            problem.evaluations += spent
            problem.history.append((problem.evaluations, problem.best_step))
        return placement.devices, step, oom, problem.evaluations, spent


@dataclass(frozen=True)
class _SearchStart:
    """What a search timed before training: its zero-shot candidate and the annealing prelude.

    Saved in every checkpoint of the run, so that a resumed run neither times these placements again
    (on a real timer, real steps: the zero-shot candidates alone are 57 of them on four devices) nor measures
    its zero-shot candidate anew.

    Attributes:
        zero_shot: ``(devices [num_ops], step seconds, oom, evaluations when it was timed, evaluations
            it took)`` (see :meth:`PPOSearchPlacer._zero_shot`), or ``None``.
        prelude (int): evaluations the annealing prelude spent.
        budget_needed (int or None): the budget the zero-shot candidates would have needed, where they
            did not fit.
        given_up (int): evaluations spent on zero-shot candidates given up when their memory repairs
            outran the budget (``zero_shot`` is then ``None``) (default: 0).
    """

    zero_shot: tuple[np.ndarray, float, bool, int, int] | None
    prelude: int
    budget_needed: int | None
    given_up: int = 0

    @property
    def spent(self) -> int:
        """Evaluations spent before training (zero-shot candidates, given up or not, and prelude)."""
        return self.prelude + self.given_up + (0 if self.zero_shot is None else self.zero_shot[4])

    def state(self) -> dict[str, Any]:
        """Plain data for a checkpoint (lists and numbers)."""
        zero_shot = None if self.zero_shot is None else [self.zero_shot[0].tolist(), *self.zero_shot[1:]]
        return {"zero_shot": zero_shot, "prelude": self.prelude, "budget_needed": self.budget_needed,
                **({"given_up": self.given_up} if self.given_up else {})}

    @classmethod
    def restore(cls, state: Any, num_ops: int) -> _SearchStart | None:
        """The start :meth:`state` saved for a graph of ``num_ops`` ops; ``None`` where none or a malformed one is."""
        try:
            zero_shot = state["zero_shot"]
            if zero_shot is not None:
                devices, step, oom, timed_at, spent = zero_shot
                zero_shot = (np.asarray(devices, dtype=np.int64), float(step), bool(oom), int(timed_at), int(spent))
                if zero_shot[0].shape != (num_ops,):
                    return None
            needed = state["budget_needed"]
            return cls(zero_shot, int(state["prelude"]), None if needed is None else int(needed),
                       int(state.get("given_up", 0)))
        except (KeyError, TypeError, ValueError):
            return None


def _record_run(identity: dict[str, Any]) -> Any:
    """A Lightning callback that writes ``identity`` into every checkpoint under :data:`RUN_KEY`."""
    import lightning as L

    class RecordRun(L.Callback):
        def on_save_checkpoint(self, trainer: L.Trainer, pl_module: L.LightningModule,
                               checkpoint: dict[str, Any]) -> None:
            """Record the run (Lightning calls this before the learner adds its ``"gnplace"`` section)."""
            checkpoint[RUN_KEY] = identity

    return RecordRun()


class FineTunePlacer(PPOSearchPlacer):
    """:class:`PPOSearchPlacer` starting from a pretrained policy (the shipped checkpoint by default): fine-tuning.

    Placeto's and GiPH's point: a policy pretrained on a family should be a better start than a fresh
    one, so a search from it needs fewer evaluations (the README measures how far the shipped
    checkpoint is from that). The checkpoint's own zero-shot placement is timed first (``zero_shot``,
    on by default; counted: 53 evaluations on two devices, 57 on four and 75 on eight, ``auto``'s own timings of
    its candidates among them, 18 on up to five devices; more where memory repairs run) and returned if the search
    ends slower, so fine-tuning never returns worse than ``auto`` or zero-shot placement. It is drawn
    under the caller's seed: the placement ``policy`` (:class:`~gnplace.rl.zeroshot.PolicyPlacer`)
    gives for the same seed with ``constructor_samples`` 4 (:data:`ZERO_SHOT_CONSTRUCTOR_SAMPLES`),
    ``constructor_refine`` 0, ``last_rounds`` 1, ``refine`` 4, ``polish`` 0 and ``module_chain`` 0. Then PPO
    searches around ``auto``'s placement as :class:`PPOSearchPlacer` does (module decisions, anchored scoring, a
    sampling prior), with no imitation (the policy already places well) and the pretraining's step sizes.
    Arguments as for :class:`PPOSearchPlacer`.

    The sampling prior ``kappa`` is 4 (revision 13), between the checkpoint's pretraining prior (2)
    and the search's (6): over the 18 pairs of ``bench.py finetune`` at 1,000 evaluations under seeds
    0, 1 and 2, prior 4 was at 0.918 / 0.925 / 0.922x ``auto`` after 400 evaluations where prior 6 was
    at 0.928 / 0.933 / 0.936 (prior 3: 0.921 / 0.922 / 0.928; prior 2, seed 0: 0.924). With the
    checkpoint shipped before 72981d82, prior 6 had beaten prior 2 (README).

    Each batch is screened (revision 17, ``screen`` 48): once a :class:`~gnplace.rl.screen.MoveScreen`
    has learned from 32 timed placements, 48 times the batch is drawn and only the 16 new placements
    it ranks fastest are timed. Over the 18 pairs of ``bench.py finetune`` at 4,000 evaluations (seed
    0) it ends at 0.891x ``auto`` against revision 16's 0.896 and reaches the search from scratch's
    final mean 3.7 times sooner (1.9); at 1,000 evaluations under seeds 1 and 2 a throwaway version of
    it moved the best after 400 from 0.922 and 0.919 to 0.918 and 0.915. The screen helps a search from
    fresh weights as much (``screen=48`` here: 0.892 at 4,000), so it is not the checkpoint's gain.
    Drawing 48 times the batch makes a simulator-timed run about twice as slow, nothing beside real
    steps (README). With a real timer the screen starts from the simulator (``screen_model`` ``"auto"``,
    2026-11-28): it ranks each candidate by its simulated step on the pair's cluster (``gnplace
    profile``'s, with its op seconds), corrected by a ridge model of what the real steps measure, and
    so screens from the first batch (see :class:`~gnplace.rl.screen.MoveScreen`'s ``residual``).

    The last quarter of the budget (``polish``, :data:`FINETUNE_POLISH`, revision 19) anneals from the
    search's best placement, as :class:`PPOSearchPlacer`'s polish does: on the simulator a longer
    annealing from ``policy``'s candidates had ended ahead of revision 18's PPO at the same 4,000
    evaluations (docs/measured-real-devices.md). The share was chosen on held-out training graphs (see
    :data:`FINETUNE_POLISH`); the crossing of the search from scratch's final comes before the polish on
    most pairs, so it moves the final, not the saving.

    ``widen`` is off: fine-tuning's batches rarely repeat placements (its prior is lower), and with it
    on the 18 pairs at 1,000 evaluations gave 0.934 / 0.918 / 0.905 after 100 / 400 / 1,000 evaluations
    against 0.934 / 0.917 / 0.905 without (12 of the 18 searches unchanged).

    Examples:
        >>> FineTunePlacer(budget=200).checkpoint.endswith("gnplace-base.ckpt")
        True
    """

    name = "finetune"
    accepts = frozenset({"timer", "budget", "checkpoint"})
    # auto as the reference, and the pretrained policy's placement: its zero-shot candidates (constructor_refine=0,
    # last_rounds=1, refine=4, polish=0) are the same under policy's revisions 11 to 15, so rows made under 13 stand
    uses = ("auto", "policy@13")

    # 20: a best that still overflows at the end is repaired, as ppo's (revision 12); 19: a quarter of the budget
    # goes to the polish (2026-11-28: the polish anneals from T_0 0.001, annealing
    # revision 4; 17: screened batches, 48 candidates per placement timed; 16: zero-shot candidates of policy
    # revision 11, two constructors; 15: what the search leaves goes to the polish; 14: memo; 13: prior 4)
    revision = "20"
    default_checkpoint = SHIPPED_CHECKPOINT  # its content is part of evaluate's row identity
    default_files = {"constructor": SHIPPED_CONSTRUCTORS}  # so are the constructors', in its zero-shot candidates
    checkpoint_format = "gnplace-policy"  # gnplace.policy.checkpoint.FORMAT (that module loads torch)

    def __init__(self, budget: int = 2000, samples: int = 16, epochs: int = 4, imitation_steps: int = 0,
                 lr: float = 1e-3, checkpoint: str | None = None, zero_shot: bool = True, prelude: float = 0.0,
                 prior: float = 4.0, widen: bool = False, screen: int = 48, polish: float = FINETUNE_POLISH,
                 **kwargs: Any) -> None:
        # None alone is the shipped one: "", 0, false and [] were read as it, without a word
        checkpoint = (str(SHIPPED_CHECKPOINT) if checkpoint is None
                      else _checkpoint_path(type(self).__name__, checkpoint))
        super().__init__(budget=budget, samples=samples, epochs=epochs, imitation_steps=imitation_steps, lr=lr,
                         checkpoint=checkpoint, zero_shot=zero_shot, prelude=prelude, prior=prior, widen=widen,
                         screen=screen, polish=polish, **kwargs)

    def __repr__(self) -> str:
        c = self.config
        return (f"FineTunePlacer(budget={self.budget}, samples={c.samples}, epochs={c.epochs}, "
                f"checkpoint={self.checkpoint!r})")


class ReinforceSearchPlacer(PPOSearchPlacer):
    """:class:`PPOSearchPlacer` with one REINFORCE step per batch instead of PPO: the policy-gradient ablation.

    Examples:
        >>> ReinforceSearchPlacer(budget=100)
        ReinforceSearchPlacer(budget=100, samples=32, imitation_steps=30, prelude=0.2, algo='reinforce')
    """

    name = "reinforce"
    algo = "reinforce"
