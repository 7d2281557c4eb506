"""What the scripts that run ``policy`` share: its decoding flags, its errors named by those flags, the comparison row.

``scripts/place.py``, ``scripts/demo.py`` and ``bench.py zeroshot`` take :class:`~gnplace.rl.zeroshot.PolicyPlacer`'s
options as flags (:func:`add_decoding_arguments`), tell its refusals by those flags (:func:`named_by_flag`) and print
its step time beside ``single``, ``auto`` and the lower bound (:func:`compare_with_references`, seconds).
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, Any

from gnplace.cluster import Cluster
from gnplace.exceptions import InvalidArgument
from gnplace.graph import OpGraph
from gnplace.placement import Placement
from gnplace.rl.zeroshot import (
    DEFAULT_CONSTRUCTOR_PRIOR,
    DEFAULT_CONSTRUCTOR_REFINE,
    DEFAULT_CONSTRUCTOR_SAMPLES,
    DEFAULT_CONSTRUCTOR_SIZES,
    DEFAULT_CONSTRUCTOR_TEMPERATURE,
    DEFAULT_LAST_ROUNDS,
    DEFAULT_MODULE_CHAIN,
    DEFAULT_POLISH,
    DEFAULT_POLISH_OPS,
    DEFAULT_REFINE,
    POLISH_CAP,
    PolicyPlacer,
)
from gnplace.sim.timer import StepTimer, relative_step

if TYPE_CHECKING:
    import argparse

__all__ = ["DECODING_ARGUMENTS", "add_decoding_arguments", "compare_with_references", "named_by_flag"]

#: The :class:`PolicyPlacer` options that :func:`add_decoding_arguments` adds a flag for, by the flags' destinations:
#: a caller passes each one given (not None) on to the placer.
DECODING_ARGUMENTS = ("constructor_samples", "constructor_temperature", "constructor_sizes", "refine",
                      "constructor_refine", "constructor_prior", "last_rounds", "polish", "polish_ops", "module_chain")


def named_by_flag(err: Exception, args: argparse.Namespace) -> Exception:
    """``err`` of :class:`PolicyPlacer` naming its argument (``rounds``) by a script's flag (``--rounds``) instead.

    Only where ``args`` has that argument's destination, as the flags of :func:`add_decoding_arguments` and the
    scripts' ``--rounds``, ``--samples``, ``--temperatures`` and ``--constructor`` have; any other error is returned
    as it is. ``scripts/place.py --rounds 0`` said "PolicyPlacer needs rounds >= 1", a class and an argument the user
    never wrote; so did the messages that start with the argument (``PolicyPlacer's module_chain needs a budget``
    for ``--module-chain 99999999999``, ``PolicyPlacer's constructor names an empty path`` for ``--constructor ''``),
    and ``--temperatures`` of a checkpoint that samples around ``auto`` advised ``around=False`` where the script's
    flag is ``--no-around`` (where ``args`` has ``around``).

    Examples:
        >>> import argparse
        >>> named_by_flag(InvalidArgument("PolicyPlacer needs rounds >= 1, got 0"), argparse.Namespace(rounds=0))
        InvalidArgument('--rounds needs >= 1, got 0')
        >>> named_by_flag(InvalidArgument("PolicyPlacer's module_chain needs a budget >= 1, got 10"),
        ...               argparse.Namespace(module_chain=10))
        InvalidArgument('--module-chain needs a budget >= 1, got 10')
    """
    text = str(err)
    found = re.match(r"PolicyPlacer needs (\w+) (?:of )?(.*)", text, flags=re.DOTALL)
    if found is not None:
        name, said = found[1], f"needs {found[2]}"
    else:  # "PolicyPlacer's NAME needs ..." (check_budget's), "PolicyPlacer's NAME names ..."
        found = re.match(r"PolicyPlacer's (\w+) ((?:needs|names|temper|on a small graph) .*)", text, flags=re.DOTALL)
        if found is None:
            return err
        name, said = found[1], found[2]
    if not isinstance(err, InvalidArgument) or not hasattr(args, name):
        return err
    if hasattr(args, "around"):  # the script's flags, not the placer's arguments, in its advice too
        said = said.replace("leave temperatures out, or use around=False",
                            "leave --temperatures out, or use --no-around")
    return InvalidArgument(f"--{name.replace('_', '-')} {said}")


def add_decoding_arguments(parser: argparse.ArgumentParser) -> None:
    """Add the flags of the constructors' samples and of the last rounds to an :mod:`argparse` parser.

    ``--constructor-samples``, ``--constructor-temperature``, ``--constructor-sizes``, ``--refine``,
    ``--constructor-refine``, ``--constructor-prior``, ``--last-rounds``, ``--polish``, ``--polish-ops`` and
    ``--module-chain``, as
    ``scripts/place.py`` and ``bench.py zeroshot`` take them: each is None unless given (the placer's default, which its
    help states); their destinations are :data:`DECODING_ARGUMENTS`.
    """
    sizes = " ".join(str(k) for k in DEFAULT_CONSTRUCTOR_SIZES)
    parser.add_argument("--constructor-samples", type=int, default=None, metavar="N",
                        help=f"each constructor's samples beside its greedy placement, per device set "
                             f"(default: {DEFAULT_CONSTRUCTOR_SAMPLES})")
    parser.add_argument("--constructor-temperature", type=float, default=None, metavar="TAU",
                        help=f"sampling temperature of the constructor's samples "
                             f"(default: {DEFAULT_CONSTRUCTOR_TEMPERATURE:g})")
    parser.add_argument("--constructor-sizes", type=int, nargs="*", default=None, metavar="K",
                        help=f"device counts k: on larger clusters each constructor also places on the k fastest "
                             f"devices alone (default: {sizes}; none given: the whole cluster only)")
    parser.add_argument("--refine", type=int, default=None, metavar="N",
                        help=f"samples of each last round around the best placement so far, for checkpoints that "
                             f"sample around auto (default: {DEFAULT_REFINE}; 0: none)")
    parser.add_argument("--constructor-refine", type=int, default=None, metavar="N",
                        help=f"each constructor's samples of each last round, around the best placement so far, for "
                             f"checkpoints that sample around auto (default: {DEFAULT_CONSTRUCTOR_REFINE}; 0: none)")
    parser.add_argument("--constructor-prior", type=float, default=None, metavar="KAPPA",
                        help=f"logit bonus of those samples on the best placement's devices "
                             f"(default: {DEFAULT_CONSTRUCTOR_PRIOR:g})")
    parser.add_argument("--last-rounds", type=int, default=None, metavar="N",
                        help=f"last rounds, each the policy's and then each constructor's samples around the best "
                             f"placement so far (default: {DEFAULT_LAST_ROUNDS})")
    parser.add_argument("--polish", type=int, default=None, metavar="N",
                        help=f"evaluations of simulated annealing from the best placement, last "
                             f"(default: {DEFAULT_POLISH}; 0: none)")
    parser.add_argument("--polish-ops", type=int, default=None, metavar="N",
                        help=f"the polish's budget in op-evaluations (ops times evaluations): a graph of n ops gets "
                             f"N // n evaluations, at least the polish's and at most {POLISH_CAP} times them "
                             f"(default: {DEFAULT_POLISH_OPS}; 0: the polish's on every graph)")
    parser.add_argument("--module-chain", type=int, default=None, metavar="N",
                        help=f"evaluations of simulated annealing over the module map before the polish, on graphs "
                             f"whose groups are calls of a few modules (a recurrent cell) (default: "
                             f"{DEFAULT_MODULE_CHAIN}; 0: none)")


def compare_with_references(
    graph: OpGraph, cluster: Cluster, placer: PolicyPlacer, *, seed: int = 0, timer: StepTimer | None = None
) -> tuple[Placement, dict[str, Any]]:
    """Place with ``placer`` and time the result beside ``single``, ``auto`` and the simulator's lower bound.

    Returns:
        tuple: the policy's placement, and a row of seconds (``policy``, ``greedy``, ``auto``,
        ``single``, ``bound``), ``policy_vs_auto``, ``auto_choice``, ``choice``, ``oom`` (the policy's), its
        references' ``greedy_oom`` (``None`` where nothing was decoded), ``auto_oom`` and ``single_oom``,
        ``place_seconds`` (the policy's wall time, coarsening included) and ``evaluations`` (the
        placements it timed, ``auto``'s included).
    """
    import time

    from gnplace.placers.auto import AutoPlacer
    from gnplace.sim.bounds import lower_bound

    timer = timer or placer.timer
    start = time.perf_counter()
    placement = placer.place(graph, cluster, seed=seed)
    took = time.perf_counter() - start
    result = timer.time(graph, cluster, placement)
    auto = AutoPlacer(timer=timer)
    auto.place(graph, cluster, seed=seed)  # times every candidate, single among them
    assert auto.last_choice is not None
    auto_step, single_step = auto.last_step_times[auto.last_choice], auto.last_step_times["single"]
    bound = float(lower_bound(graph, cluster, times=timer.cost_model.op_times(graph, cluster)).value)
    row = {
        "graph": graph.name, "ops": graph.num_ops, "cluster": cluster.name, "policy": float(result.step_time),
        "greedy": placer.last_greedy_step, "choice": placer.last_choice, "auto": auto_step,
        "auto_choice": auto.last_choice, "single": single_step, "bound": bound,
        "policy_vs_auto": relative_step(float(result.step_time), auto_step), "oom": bool(result.is_oom),
        "greedy_oom": bool(placer.last_greedy_oom) if placer.last_greedy_step is not None else None,
        "auto_oom": auto.last_oom[auto.last_choice], "single_oom": auto.last_oom["single"],
        "place_seconds": took, "evaluations": int(placer.last_evaluations),
    }
    return placement, row
