"""The placement policy: a message-passing encoder along the DAG and a device-agnostic head.

**Encoder** (run once per graph). Node features are lifted by an MLP and refined by ``layers``
rounds of message passing along the DAG in both directions, with separate weights for producers
and consumers as Placeto and GiPH do (Addanki et al., NeurIPS 2019; Hu et al., MLSys 2023):

.. math::
    h_v^{(l+1)} = h_v^{(l)} + \\mathrm{ReLU}\\Bigl(\\mathrm{LN}\\bigl(W_s h_v^{(l)}
        + \\tfrac{1}{|P(v)|}\\textstyle\\sum_{u \\in P(v)} W_f [h_u^{(l)} \\| e_{uv}]
        + \\tfrac{1}{|S(v)|}\\textstyle\\sum_{w \\in S(v)} W_b [h_w^{(l)} \\| e_{vw}]\\bigr)\\Bigr)

with :math:`P(v)` the producers and :math:`S(v)` the consumers of node :math:`v`. A group is the mean
of its nodes' embeddings, next to the graph's mean.

**Head** (run per decision, cheap). Every (group, device) pair is scored from the group's embedding,
the device's embedding (from its features: speed, memory, links) and the *dynamic* features of the
partial placement at that decision (:data:`gnplace.policy.features.DYNAMIC_FEATURES`: earliest start and
finish there, data arrival, memory left, ...). One network therefore serves any number and mix of
devices. The logit is a learned residual on the earliest-finish-time rule,

.. math::
    \\ell_{gd} = -\\alpha \\, \\Delta^{EFT}_{gd} + w^\\top \\mathrm{ReLU}\\bigl(A z_g + B y_d + C s_{gd}\\bigr)

where :math:`\\Delta^{EFT}_{gd}` is how much later the group would finish on device :math:`d` than on
the best device (in units of the group's work). The last layer :math:`w` starts at zero, so an
untrained policy decodes greedily exactly as the EFT list scheduler (HEFT's rule) does, and training
moves it from there. Devices the group does not fit on are masked; where it fits on none, only the devices with the
most memory left are allowed (:func:`gnplace.rl._schedule.decision_features`).
"""

from __future__ import annotations

import contextlib
import importlib.util
import math
import sys
import tempfile
import warnings
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch
from torch import nn

with warnings.catch_warnings():  # torch-geometric's own use of a torch API torch deprecates, at import: under
    # PYTHONWARNINGS=error (or -W error) it was a DeprecationWarning traceback from every command that loads the policy
    warnings.filterwarnings("ignore", message="`torch.jit.script` is deprecated", category=DeprecationWarning)
    from torch_geometric.nn import MessagePassing
    from torch_geometric.utils import scatter

from gnplace.limits import MAX_LAYERS, MAX_WIDTH, finite_number, is_number, is_whole
from gnplace.policy.features import DEVICE_FEATURES, EDGE_FEATURES, NODE_FEATURES, PolicyInput

__all__ = ["PolicyConfig", "TidyMessagePassing", "DirectedConv", "GraphEncoder", "Encoded", "PlacementPolicy",
           "EFT_GAP"]

#: Index of the EFT gap among the dynamic features (the MDP puts it first).
EFT_GAP = 0


@dataclass(frozen=True)
class PolicyConfig:
    """The policy network's shape.

    Attributes:
        hidden (int): width of node and device embeddings (default: 64).
        layers (int): rounds of message passing in each direction (default: 4).
        head (int): width of the head's hidden layer (default: 32).
        dynamic_features (int): number of dynamic features per (decision, device) (default: 9).
        alpha (float): initial weight of the EFT rule in the logits, > 0 (default: 3.0).
    """

    hidden: int = 64
    layers: int = 4
    head: int = 32
    dynamic_features: int = 9
    alpha: float = 3.0

    def __post_init__(self) -> None:
        from gnplace.exceptions import InvalidArgument

        for name in ("hidden", "layers", "head", "dynamic_features"):
            value = getattr(self, name)
            if not is_whole(value) or value < 1:
                raise InvalidArgument(f"the policy's {name} must be an int >= 1, got {value!r}")
            most = MAX_LAYERS if name == "layers" else MAX_WIDTH  # a corrupt or absurd file: refused, not allocated
            if value > most:
                raise InvalidArgument(f"the policy's {name} must be at most {most}, got {value!r}")
            # a numpy integer kept as one made a checkpoint that save_policy wrote and load_policy refused as unsafe
            object.__setattr__(self, name, int(value))
        if not is_number(self.alpha) or not finite_number(self.alpha) or self.alpha <= 0:
            # its logarithm is a weight; an int past a float's range (a corrupt file) is no number (np.float32 is one)
            raise InvalidArgument(f"the policy's alpha must be a finite number > 0, got {self.alpha!r}")
        if type(self.alpha) not in (int, float):  # a numpy number: a plain one, as above
            object.__setattr__(self, "alpha", float(self.alpha))


class TidyMessagePassing(MessagePassing):
    """PyG's ``MessagePassing`` without the source file it leaves in the temporary directory.

    PyG (2.6 and later; pyproject.toml asks for 2.6) renders each class's ``propagate`` from a jinja template into
    ``tempfile.NamedTemporaryFile(delete=False)`` and imports it from there, once a process, and never
    deletes the file: every process that built a policy (each ``gnplace place -p policy``, each rank)
    left a ``gnplace.policy.gnn_DirectedConv_propagate_*.py`` behind, and its bytecode in ``__pycache__``
    there. The module is loaded by then and runs from its code object, so both are deleted as soon as it
    is imported (on construction, and on unpickling in a new process, where PyG renders it again). Its
    lines are then missing from tracebacks.

    Args:
        **kwargs: passed to ``MessagePassing`` (``aggr``, ...).
    """

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        _delete_rendered_sources(type(self))

    def __setstate__(self, data: dict[str, Any]) -> None:
        super().__setstate__(data)
        _delete_rendered_sources(type(self))


def _delete_rendered_sources(cls: type) -> None:
    """Delete the files PyG rendered ``cls``'s ``propagate`` and ``edge_updater`` into, if still there.

    Each is a source file in the temporary directory and, where Python writes bytecode, its compiled copy in
    ``__pycache__`` there, which is removed too if nothing else is left in it.
    """
    temporary = Path(tempfile.gettempdir()).resolve()
    for method in ("propagate", "edge_updater"):
        name = f"{cls.__module__}_{cls.__name__}_{method}"  # PyG's module name for the rendered method
        source = getattr(sys.modules.get(name), "__file__", None)
        if source is None or not Path(source).name.startswith(f"{name}_") \
                or Path(source).resolve().parent != temporary:  # only ever the files PyG wrote there
            continue
        Path(source).unlink(missing_ok=True)
        compiled = Path(importlib.util.cache_from_source(source))
        compiled.unlink(missing_ok=True)
        if compiled.parent.name == "__pycache__":
            with contextlib.suppress(OSError):  # not empty: other programs' bytecode, left alone
                compiled.parent.rmdir()


class DirectedConv(TidyMessagePassing):
    """Mean of ``W [h_u || e_uv]`` over the sources ``u`` of the edges into each node.

    .. math::
        m_v = \\frac{1}{|N(v)|} \\sum_{u \\in N(v)} W [h_u \\| e_{uv}]

    Args:
        channels (int): width of node embeddings in and out.
        edge_dim (int): width of edge features.

    Shapes:
        x ``[N, channels]``, edge_index ``[2, E]``, edge_attr ``[E, edge_dim]`` -> ``[N, channels]``.
    """

    def __init__(self, channels: int, edge_dim: int) -> None:
        super().__init__(aggr="mean")
        self.lin = nn.Linear(channels + edge_dim, channels)

    def forward(self, x: torch.Tensor, edge_index: torch.Tensor, edge_attr: torch.Tensor) -> torch.Tensor:
        """Messages along ``edge_index`` (source to target), averaged at each target."""
        return self.propagate(edge_index, x=x, edge_attr=edge_attr)  # type: ignore[no-any-return]

    def message(self, x_j: torch.Tensor, edge_attr: torch.Tensor) -> torch.Tensor:
        """The message of one edge: ``W [h_u || e_uv]``."""
        return self.lin(torch.cat([x_j, edge_attr], dim=-1))  # type: ignore[no-any-return]


class GraphEncoder(nn.Module):
    """Node embeddings from message passing along the DAG, producers and consumers apart.

    Args:
        config (PolicyConfig): widths and rounds.

    Shapes:
        ``PolicyInput`` -> ``[N, hidden]``.
    """

    def __init__(self, config: PolicyConfig) -> None:
        super().__init__()
        h = config.hidden
        self.lift = nn.Sequential(nn.Linear(len(NODE_FEATURES), h), nn.ReLU(), nn.Linear(h, h))
        self.self_lin = nn.ModuleList(nn.Linear(h, h) for _ in range(config.layers))
        self.forward_conv = nn.ModuleList(DirectedConv(h, len(EDGE_FEATURES)) for _ in range(config.layers))
        self.backward_conv = nn.ModuleList(DirectedConv(h, len(EDGE_FEATURES)) for _ in range(config.layers))
        self.norms = nn.ModuleList(nn.LayerNorm(h) for _ in range(config.layers))

    def forward(self, inp: PolicyInput) -> torch.Tensor:
        """Embeddings of the decision graph's nodes, ``[N, hidden]``."""
        h = self.lift(inp.node_x)  # h_v^(0): the node features through an MLP
        reverse = inp.edge_index.flip(0)  # consumer -> producer: the messages from S(v)
        for lin, fwd, bwd, norm in zip(self.self_lin, self.forward_conv, self.backward_conv, self.norms):
            # W_s h_v + mean_{u in P(v)} W_f [h_u || e_uv] + mean_{w in S(v)} W_b [h_w || e_vw]
            update = lin(h) + fwd(h, inp.edge_index, inp.edge_x) + bwd(h, reverse, inp.edge_x)
            h = h + torch.relu(norm(update))  # h_v^(l+1) = h_v^(l) + ReLU(LN(...))
        return h  # type: ignore[no-any-return]


@dataclass
class Encoded:
    """The per-graph part of the head, computed once per graph and reused for every decision.

    Attributes:
        group (torch.Tensor): projection of each group's embedding, ``[G, head]``.
        device (torch.Tensor): projection of each device's embedding, ``[D, head]``.
    """

    group: torch.Tensor
    device: torch.Tensor


class PlacementPolicy(nn.Module):
    """Scores every (group, device) pair of a decision; the same weights serve any graph and any cluster.

    Args:
        config (PolicyConfig, optional): widths and rounds (default: ``PolicyConfig()``).

    Examples:
        >>> import torch
        >>> from gnplace.toy import mlp_training_graph
        >>> from gnplace.cluster import load_cluster
        >>> from gnplace.policy.features import build_policy_input
        >>> _ = torch.manual_seed(0)
        >>> policy = PlacementPolicy()
        >>> inp = build_policy_input(mlp_training_graph(layers=3, width=64, batch=8), load_cluster("k80x2"))
        >>> enc = policy.encode(inp)
        >>> dyn = torch.zeros(5, 1, 2, policy.config.dynamic_features)
        >>> dyn[..., 1, 0] = 1.0  # device 1 would finish one group-work later
        >>> logits = policy.logits(enc, torch.tensor([0]), dyn, torch.ones(5, 1, 2, dtype=torch.bool))
        >>> gap = float((logits[0, 0, 0] - logits[0, 0, 1]).detach())
        >>> tuple(logits.shape), round(gap, 3)  # untrained: the EFT rule
        ((5, 1, 2), 3.0)
    """

    def __init__(self, config: PolicyConfig | None = None) -> None:
        super().__init__()
        self.config = config = config or PolicyConfig()
        h, k = config.hidden, config.head
        self.encoder = GraphEncoder(config)
        self.device_mlp = nn.Sequential(nn.Linear(len(DEVICE_FEATURES), h), nn.ReLU(), nn.Linear(h, h))
        self.group_proj = nn.Linear(2 * h, k)
        self.device_proj = nn.Linear(h, k)
        self.dynamic_proj = nn.Linear(config.dynamic_features, k)
        self.out = nn.Linear(k, 1)
        nn.init.zeros_(self.out.weight)  # untrained: exactly the EFT rule
        nn.init.zeros_(self.out.bias)
        self.log_alpha = nn.Parameter(torch.tensor(math.log(config.alpha)))

    def encode(self, inp: PolicyInput) -> Encoded:
        """Run the encoder on ``inp`` and project groups and devices for the head."""
        nodes = self.encoder(inp)
        groups = scatter(nodes, inp.node_group, dim=0, dim_size=inp.num_groups, reduce="mean")
        context = nodes.mean(dim=0, keepdim=True).expand_as(groups)
        devices = self.device_mlp(inp.device_x)
        return Encoded(self.group_proj(torch.cat([groups, context], dim=-1)), self.device_proj(devices))

    def logits(self, enc: Encoded, groups: torch.Tensor, dynamic: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        """Masked logits of every (sample, decision, device).

        Args:
            enc (Encoded): from :meth:`encode`.
            groups (torch.Tensor): the group decided at each decision, ``[S]`` int64.
            dynamic (torch.Tensor): dynamic features, ``[B, S, D, dynamic_features]``.
            mask (torch.Tensor): allowed devices, ``[B, S, D]`` bool.

        Returns:
            torch.Tensor: logits ``[B, S, D]``; ``-inf`` where not allowed.
        """
        # ReLU(A z_g + B y_d + C s_gd): A z_g and B y_d projected once per graph by encode
        z = torch.relu(enc.group[groups][None, :, None, :] + enc.device[None, None] + self.dynamic_proj(dynamic))
        residual = self.out(z).squeeze(-1)  # w^T ReLU(...)
        logits = residual - self.log_alpha.exp() * dynamic[..., EFT_GAP]  # l_gd = -alpha Delta^EFT_gd + w^T ReLU(...)
        return logits.masked_fill(~mask, float("-inf"))
