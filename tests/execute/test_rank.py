"""One rank's share of a placed step (:mod:`gnplace.execute.rank`); the ranks run together in ``test_dist``."""

import numpy as np

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
