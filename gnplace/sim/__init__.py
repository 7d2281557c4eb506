"""Timing placed graphs: the step-timer interface, the Paleo-style cost model, the step simulator and lower bounds."""

from gnplace.sim.bounds import Bound, lower_bound
from gnplace.sim.costmodel import DEFAULT_COSTS, PLACETO_COSTS, CostModel, op_times
from gnplace.sim.simulator import Simulator, simulate
from gnplace.sim.timer import BatchResult, BudgetedTimer, StepResult, StepTimer, Timeline

__all__ = [
    "Bound", "lower_bound", "op_times", "CostModel", "DEFAULT_COSTS", "PLACETO_COSTS", "BatchResult", "BudgetedTimer",
    "Simulator", "StepResult", "StepTimer", "Timeline", "simulate",
]
