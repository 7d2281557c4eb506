"""Run placed training steps on real devices and time them: the real-device side of ``StepTimer``.

* :mod:`~gnplace.execute.program`: a recorded step as a picklable program, and where each op runs;
* :mod:`~gnplace.execute.runner`: one step in this process, over the devices torch sees;
* :mod:`~gnplace.execute.optim`: the update of the graph's optimizer (SGD, momentum, Adam, AdamW) and its state;
* :mod:`~gnplace.execute.local`: :class:`LocalTimer`, the in-process executor as a timer;
* :mod:`~gnplace.execute.dist`: :class:`DistTimer`, one ``torch.distributed`` rank per device;
* :mod:`~gnplace.execute.journal`: :class:`MeasurementJournal`, a timer's measurements on file, replayed on resume;
* :mod:`~gnplace.execute.apply`: :func:`apply`, a module whose training step runs placed;
* :mod:`~gnplace.execute.profile`: calibration of the simulator from measured op and link times;
* :mod:`~gnplace.execute.device_map`: placements as ``device_map`` dicts for accelerate and transformers.
"""

from gnplace.execute.compiler import compile_step
from gnplace.execute.program import Plan, Program

__all__ = ["Plan", "Program", "compile_step"]
