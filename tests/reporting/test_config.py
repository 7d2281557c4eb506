"""``scripts/reporting/config.py``: what the full and the quick report run."""

from __future__ import annotations

import dataclasses


def test_the_quick_report_runs_a_small_version_of_every_section_of_the_full_one(load_script):
    """Each family, cluster and placer the quick report runs is one the full report runs, each section with a smaller
    budget: the quick report (the tests') exercises the full one's code, not settings of its own."""
    config = load_script("reporting.config")
    full, quick = config.FULL, config.QUICK
    for field in dataclasses.fields(config.Config):
        mine, theirs = getattr(quick, field.name), getattr(full, field.name)
        if field.name.endswith(("families", "clusters", "placers")):
            assert set(mine) <= set(theirs) and mine, field.name
    assert set(full.rl_placers) == set(config.LEARNED) and set(config.SEEDS) <= set(config.LEARNED)
    for budget in ("rl_budget", "scale_budget", "baseline_budget", "curve_budget", "placeto_episodes"):
        assert 0 < getattr(quick, budget) < getattr(full, budget), budget
    assert quick.table_per_family and not quick.real and max(quick.scale_ops) < max(full.scale_ops)
