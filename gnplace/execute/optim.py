"""The optimizer update the executors run on each parameter: SGD, SGD with momentum, Adam or AdamW.

A training graph names its optimizer on its update nodes (op type ``"<optimizer>_update"``,
:data:`gnplace.importers.OPTIMIZERS`), and counts there the state that optimizer keeps
(``param_bytes`` = parameter bytes x state factor) and its FLOP per element. The executors
(:func:`~gnplace.execute.runner.run_step`, :func:`~gnplace.execute.rank.run_rank`) run that update
on the parameter's device, its state (:class:`OptimizerState`) kept there across steps, and count
the state's bytes there, so that what they measure is the step the simulator models.

Each update computes what ``torch.optim`` computes with its defaults (the same operations in the
same order as its single-tensor path, so the same values on a CPU): ``SGD(momentum=0.9)`` (no
dampening, no Nesterov), ``Adam`` (betas 0.9 and 0.999, eps 1e-8, no weight decay) and ``AdamW``
(Adam's, with weight decay 1e-2). Unlike ``torch.optim``, which makes a parameter's state at its
first update, the state of every parameter is made when the executor places the parameters: the
simulator counts it from the start, for every parameter.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

import torch

from gnplace.exceptions import InvalidArgument, InvalidGraph
from gnplace.graph import UPDATE, OpGraph
from gnplace.importers import OPTIMIZERS, check_optimizer

__all__ = [
    "OptimizerState", "optimizer_of", "graph_optimizer", "state_bytes", "MOMENTUM", "BETAS", "EPS",
    "ADAMW_WEIGHT_DECAY",
]

#: Momentum of ``"momentum"`` (``torch.optim.SGD(momentum=0.9)``, dampening 0, no Nesterov).
MOMENTUM = 0.9
#: Adam's and AdamW's decay rates of the first and second moments (``torch.optim``'s defaults).
BETAS = (0.9, 0.999)
#: Adam's and AdamW's term added to the denominator (``torch.optim``'s default).
EPS = 1e-8
#: AdamW's decoupled weight decay (``torch.optim.AdamW``'s default); Adam has none.
ADAMW_WEIGHT_DECAY = 1e-2

_SUFFIX = "_update"


def optimizer_of(op_types: Iterable[str]) -> str | None:
    """The optimizer that update op types name (``"adam_update"``: ``"adam"``); ``None`` if none names one.

    Op types that are not a known optimizer's ``"<name>_update"`` (a hand-built graph's) name none.

    Raises:
        InvalidGraph: if they name several optimizers (one step runs one).

    Examples:
        >>> optimizer_of(["adam_update", "adam_update"]), optimizer_of(["update"])
        ('adam', None)
    """
    names = sorted({t[: -len(_SUFFIX)] for t in op_types if t.endswith(_SUFFIX) and t[: -len(_SUFFIX)] in OPTIMIZERS})
    if len(names) > 1:
        raise InvalidGraph(f"the graph's update ops name several optimizers ({', '.join(names)}): a step runs one")
    return names[0] if names else None


def graph_optimizer(graph: OpGraph) -> str | None:
    """The optimizer ``graph``'s update nodes (phase ``UPDATE``) name; ``None`` for a graph with none.

    Raises:
        InvalidGraph: as :func:`optimizer_of`.

    Examples:
        >>> import torch
        >>> from gnplace.importers.torch import from_module
        >>> graph_optimizer(from_module(torch.nn.Linear(2, 1), (torch.ones(4, 2),), loss=lambda y: y.sum(),
        ...                             optimizer="adam"))
        'adam'
    """
    return optimizer_of(str(graph.op_types[k]) for k in range(graph.num_ops) if int(graph.phase[k]) == UPDATE)


def state_bytes(optimizer: str, param_bytes: int) -> int:
    """Bytes of the state ``optimizer`` keeps for a parameter of ``param_bytes`` bytes (beyond the parameter).

    Examples:
        >>> state_bytes("sgd", 400), state_bytes("momentum", 400), state_bytes("adam", 400)
        (0, 400, 800)
    """
    return (OPTIMIZERS[optimizer][0] - 1) * param_bytes


class OptimizerState:
    """What an optimizer keeps for each parameter between steps, on the parameter's device, and its update.

    Args:
        optimizer (str): ``"sgd"``, ``"momentum"``, ``"adam"`` or ``"adamw"``.
        params (Mapping[str, torch.Tensor]): the parameters (on their devices); each gets zeroed state
            tensors like it: a momentum buffer (``"momentum"``), Adam's first and second moments.

    Raises:
        InvalidArgument: for another optimizer.

    Attributes:
        slots (dict[str, list[torch.Tensor]]): each parameter's state tensors.
        steps (dict[str, int]): updates applied to each parameter (Adam's ``t``).

    Examples:
        >>> p = torch.ones(3)
        >>> state = OptimizerState("adam", {"p": p})
        >>> state.update("p", p, torch.ones(3), lr=0.1)  # Adam's first step moves each weight by lr
        >>> [round(x, 4) for x in p.tolist()], state.steps["p"]
        ([0.9, 0.9, 0.9], 1)
    """

    def __init__(self, optimizer: str, params: Mapping[str, torch.Tensor]) -> None:
        check_optimizer(optimizer, InvalidArgument)
        self.optimizer = optimizer
        self.slots: dict[str, list[torch.Tensor]] = {}
        self.steps: dict[str, int] = {}
        for name, p in params.items():
            self.add(name, p)

    def __repr__(self) -> str:
        return f"OptimizerState({self.optimizer!r}, {len(self.slots)} parameters)"

    def add(self, name: str, param: torch.Tensor) -> None:
        """Make parameter ``name``'s state: zeroed tensors like ``param``, on its device; no update applied yet."""
        self.slots[name] = [torch.zeros_like(param) for _ in range(OPTIMIZERS[self.optimizer][0] - 1)]
        self.steps[name] = 0

    def update(self, name: str, param: torch.Tensor, grad: torch.Tensor, lr: float) -> None:
        """Apply one update of parameter ``name`` in place, from its gradient ``grad`` and learning rate ``lr``."""
        step = self.steps[name] + 1
        self.steps[name] = step
        slots = self.slots[name]
        with torch.no_grad():
            if self.optimizer == "sgd":
                param.sub_(grad, alpha=lr)  # θ ← θ − η g, as the executors have always run it
            elif self.optimizer == "momentum":
                _momentum(param, grad, slots[0], lr, step)
            else:
                decay = ADAMW_WEIGHT_DECAY if self.optimizer == "adamw" else 0.0
                _adam(param, grad, slots[0], slots[1], lr, step, decay)


def _momentum(param: torch.Tensor, grad: torch.Tensor, velocity: torch.Tensor, lr: float, step: int) -> None:
    r"""SGD with momentum (Sutskever et al., ICML 2013, as ``torch.optim.SGD`` writes it), in place.

    .. math::
        v_t = \mu v_{t-1} + g_t \quad (v_1 = g_1), \qquad \theta_t = \theta_{t-1} - \eta v_t
    """
    if step == 1:
        velocity.copy_(grad)
    else:
        velocity.mul_(MOMENTUM).add_(grad)
    param.add_(velocity, alpha=-lr)


def _adam(param: torch.Tensor, grad: torch.Tensor, m: torch.Tensor, v: torch.Tensor, lr: float, step: int,
          weight_decay: float) -> None:
    r"""Adam (Kingma and Ba, ICLR 2015, Algorithm 1) in place, with AdamW's decoupled weight decay ``weight_decay``.

    AdamW: Loshchilov and Hutter, ICLR 2019 (:math:`\lambda` below; 0 is Adam).

    .. math::
        \theta \leftarrow (1 - \eta\lambda)\,\theta, \quad
        m_t = \beta_1 m_{t-1} + (1 - \beta_1) g_t, \quad
        v_t = \beta_2 v_{t-1} + (1 - \beta_2) g_t^2, \quad
        \theta_t = \theta - \frac{\eta}{1 - \beta_1^t} \frac{m_t}{\sqrt{v_t} / \sqrt{1 - \beta_2^t} + \epsilon}
    """
    beta1, beta2 = BETAS
    if weight_decay:
        param.mul_(1 - lr * weight_decay)
    m.lerp_(grad, 1 - beta1)
    v.mul_(beta2).addcmul_(grad, grad, value=1 - beta2)
    step_size = lr / (1 - beta1**step)
    denominator = (v.sqrt() / (1 - beta2**step) ** 0.5).add_(EPS)
    param.addcdiv_(m, denominator, value=-step_size)
