"""Timing placed graphs: the Paleo-style cost model, the step simulator and lower bounds."""

from gnplace.sim.bounds import Bound, lower_bound
from gnplace.sim.costmodel import op_times
from gnplace.sim.simulator import BatchResult, Simulator, StepResult, StepTimer, Timeline, simulate

__all__ = ["Bound", "lower_bound", "op_times", "BatchResult", "Simulator", "StepResult", "StepTimer", "Timeline", "simulate"]
