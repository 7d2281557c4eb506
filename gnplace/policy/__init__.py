"""The graph-neural placement policy: features of a graph and a cluster, and the network that places it.

Importing this package imports torch and torch-geometric; ``import gnplace`` never does.
"""

from __future__ import annotations

from gnplace.policy.features import PolicyInput, build_policy_input
from gnplace.policy.gnn import PlacementPolicy, PolicyConfig

__all__ = ["PolicyInput", "build_policy_input", "PlacementPolicy", "PolicyConfig"]
