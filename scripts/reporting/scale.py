"""Section 5's rows: seconds to place ENAS cifar10 graphs of growing size (one core)."""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from benchmarks.common import Store, large_graph

from reporting.config import SEEDS, Config
from reporting.keys import holds_kinds, revised
from reporting.points import scale_points

#: What the report reads of each row of section 5 (:func:`scale_rows`), and the kinds of value it reads there (a row
#: holding another is made again, as one without the field is).
SCALE_FIELDS = ("ops", "placer", "seconds")
SCALE_KINDS: dict[str, tuple[type, ...]] = {"placer": (str,)}


def scale_row_readable(row: dict[str, Any]) -> bool:
    """Whether section 5's saved row holds a time to place the report reads: a point :func:`scale_points` draws.

    And a placer's name (:data:`SCALE_KINDS`: ``"placer": null`` was a ``TypeError`` where the figure sorts them).

    :func:`scale_rows` never saves another (seconds measured, above 0); a line edited by hand may (``"seconds":
    NaN``, JSON's not-a-number, read back as one): it was reused, a ``-`` in the table and a point left out of the
    figure on every rerun. It is made again, as a row of section 2 whose curve cannot be read is
    (:func:`learned_row_readable`).
    """
    return holds_kinds(row, SCALE_KINDS) and scale_points([row])[1] is None


def _placed_ops(ops: int) -> Callable[[dict[str, Any]], bool]:
    """Whether a scale row of before 2026-11-30 (no fingerprint recorded) placed ``ops`` ops, all it can be checked by.

    A partial check: a generator change that keeps the op count passes it.
    """
    return lambda row: row.get("ops") == ops


def scale_rows(config: Config, cache: Path, store: Store) -> list[dict[str, Any]]:
    """Seconds to place ENAS cifar10 graphs of growing size (one core)."""
    import torch

    from gnplace.cluster import load_cluster
    from gnplace.placers.registry import make_placer
    from gnplace.toy import layered_graph

    torch.set_num_threads(1)
    cluster = load_cluster("k80x4")
    warm = layered_graph(8, width=2, seed=0)
    plan = []  # (graph, its identity, placer, key, saved): what is saved said before anything runs
    for ops in config.scale_ops:
        graph = large_graph(ops, cache)  # made again where its generator changed: rows on the one of before run again
        identity = {"graph_fingerprint": graph.fingerprint()}
        same_ops = _placed_ops(graph.num_ops)
        for name in config.scale_placers:
            key = f"scale|{ops}|{revised(name)}|{config.scale_budget}"
            row = store.saved(key, identity, same_ops)
            # else (edited by hand, or cut) made again, as a row of section 2 whose curve cannot be read is
            saved = row is not None and all(field in row for field in SCALE_FIELDS) and scale_row_readable(row)
            if not saved and name in ("auto", "m_etf") and ops > config.scale_auto_up_to:  # they place every op,
                continue  # no coarsening
            plan.append((graph, identity, name, key, saved))
    reused = sum(saved for *_, saved in plan)
    print(f"[report] section 5: {reused} saved, {len(plan) - reused} to run", flush=True)
    rows = []
    for graph, identity, name, key, saved in plan:
        if not saved:
            options: dict[str, Any] = {}
            if name in SEEDS or name in ("ppo", "finetune"):
                options = {"budget": config.scale_budget}
            placer = make_placer(name, **options)
            placer.place(warm, cluster, seed=0)  # untimed: compiled kernels and checkpoints load once a process
            start = time.perf_counter()
            placer.place(graph, cluster, seed=0)
            store.add({"key": key, "ops": graph.num_ops, "placer": name, "seconds": time.perf_counter() - start,
                       "budget": options.get("budget"), **identity})
            print(f"[report] scale {graph.num_ops} ops {name}: {store.rows[key]['seconds']:.1f} s", flush=True)
        rows.append(store.rows[key])
    return rows
