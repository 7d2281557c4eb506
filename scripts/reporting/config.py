"""What one benchmark report runs: the placers it compares, and the full and the quick report's settings."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

#: The project's folder (``scripts/reporting/`` is two below it).
ROOT = Path(__file__).resolve().parents[2]

#: The fast placers, the learned ones, and the seeds' methods among them.
FAST = ["single", "expert", "metis", "heft", "m_etf", "m_sct"]
LEARNED = ["policy", "finetune", "ppo", "rnn_pg", "hierarchical", "spotlight", "post", "placeto"]
SEEDS = ["rnn_pg", "hierarchical", "spotlight", "post", "placeto"]


@dataclass(frozen=True)
class Config:
    """What one report runs (``full`` or ``quick``)."""

    families: tuple[str, ...] = ("cifar10", "ptb", "nmt")
    table_clusters: tuple[str, ...] = ("k80x2", "k80x4", "v100x8", "cpu_gpu", "tight4")
    table_per_family: int | None = None  # test graphs per family in section 1 (None: all)
    table_placers: tuple[str, ...] = (*FAST, "auto", "policy")
    real: bool = True
    rl_per_family: int = 2
    rl_clusters: tuple[str, ...] = ("k80x4", "tight4")
    rl_budget: int = 1000
    rl_placers: tuple[str, ...] = tuple(LEARNED)
    placeto_train_graphs: int = 8
    placeto_episodes: int = 400
    exact_clusters: tuple[str, ...] = ("k80x2", "k80x4")
    exact_per_family: int = 2
    exact_examples: bool = True
    exact_time_limit: float = 20.0
    exact_samples: int = 64
    scale_ops: tuple[int, ...] = (1_000, 10_000, 100_000)
    scale_placers: tuple[str, ...] = ("m_etf", "auto", "policy", "rnn_pg", "placeto")
    scale_budget: int = 64
    scale_auto_up_to: int = 200_000  # auto took 6.5 s, m_etf 2.4 s on 93,567 ops (2026-11-24)
    baseline_placers: tuple[str, ...] = ("single", "round_robin", "expert", "metis", "heft", "m_etf", "m_sct",
                                         "random_search", "annealing", "auto")
    baseline_budget: int = 200
    curve_per_family: int = 1
    curve_cluster: str = "k80x4"
    curve_placers: tuple[str, ...] = ("ppo", "reinforce", "annealing")
    curve_budget: int = 20_000


FULL = Config()
QUICK = Config(
    families=("ptb",), table_clusters=("k80x4", "cpu_gpu"), table_per_family=1,
    table_placers=("single", "heft", "auto", "policy"), real=False, rl_per_family=1, rl_clusters=("k80x4",),
    rl_budget=64, placeto_train_graphs=2, placeto_episodes=2, exact_clusters=("k80x2",), exact_per_family=1,
    exact_examples=False, exact_time_limit=0.5, exact_samples=8, scale_ops=(500, 2_000),
    scale_placers=("m_etf", "policy", "rnn_pg"), scale_budget=32,
    baseline_placers=("single", "round_robin", "heft", "annealing", "auto"), baseline_budget=16, curve_budget=64,
)
