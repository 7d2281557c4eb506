"""One rank's share of a placed step (:mod:`gnplace.execute.rank`); the ranks run together in ``test_dist``."""

import numpy as np
import torch

from gnplace.execute.compiler import compile_step
from gnplace.execute.examples import tiny
from gnplace.execute.rank import transfer_tags
from gnplace.importers.torch import import_step


def test_tags_are_unique_per_transfer_and_the_same_on_every_rank():
    step = import_step(*tiny())
    plan = compile_step(step).plan(np.random.default_rng(3).integers(0, 2, step.graph.num_ops))
    tags = transfer_tags(plan)
    assert len(set(tags.values())) == len(tags) == plan.num_moves
    again = compile_step(import_step(*tiny())).plan(np.random.default_rng(3).integers(0, 2, step.graph.num_ops))
    assert transfer_tags(again) == tags  # each rank computes them alone: they must agree


def test_each_rank_times_its_steps_after_the_warmup_and_collects_the_first(monkeypatch):
    """``run_command``: the warm-up steps run untimed, each timed step's seconds come back, and only the first step
    collects its loss and gradients. A mutant timing the warm-up passed (the ranks' real steps are all alike)."""
    import gnplace.execute.rank as rank

    class OneRank:  # torch.distributed of one rank
        @staticmethod
        def get_rank():
            return 0

        @staticmethod
        def get_world_size():
            return 1

        @staticmethod
        def barrier():
            pass

        @staticmethod
        def all_gather_object(out, value):
            out[0] = value

    steps = iter([(100.0, 50.0), (1.0, 0.1), (2.0, 0.2)])
    collects = []

    def scripted(program, plan, rank, device, params, *, lr, collect, state):
        collects.append(collect)
        s, b = next(steps)
        return s, b, {"loss": s} if collect else {}

    monkeypatch.setattr(rank, "dist", OneRank)
    monkeypatch.setattr(rank, "run_rank", scripted)
    step = import_step(*tiny())
    program = compile_step(step)
    options = {"warmup": 1, "repeats": 2, "lr": 0.0, "collect": True}
    ((seconds, busy, collected),) = rank.run_command(program, np.zeros(step.graph.num_ops, dtype=np.int64),
                                                     torch.device("cpu"), options)
    assert seconds == [1.0, 2.0] and busy == [0.1, 0.2]
    assert collects == [True, False, False] and collected["loss"] == 100.0 and set(collected["params"]) == set(
        program.params)
