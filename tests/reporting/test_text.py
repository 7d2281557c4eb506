"""``scripts/reporting/text.py``: the report's Markdown, its tables and the seeds' claims measured."""

from __future__ import annotations


def test_a_claim_measured_at_100_percent_is_level_not_held(load_script):
    """Post at 99.96% of Spotlight's step printed "100.0% of Spotlight's ... The direction holds." (docs/RESULTS.md)."""
    markdown = load_script("reporting.text")
    rows = [dict(graph="g.gnpg", cluster="k80x4", placer=placer, name="g", step_s=step, oom=False, vs_auto=step,
                 history=[[64, step]], evaluations=64, updates=4)
            for placer, step in (("rnn_pg", 1.0), ("spotlight", 0.99), ("post", 0.99 * 0.9996))]
    text = "\n".join(markdown.claims(rows))
    assert "Spotlight's step time is 99.0% of rnn_pg's" in text and "The direction holds." in text
    assert "Post's step time is 100.0% of Spotlight's (1 pairs, equal budgets). Level" in text
    assert markdown.direction(1.0004) == markdown.direction(0.9996) and markdown.direction(1.01).endswith("not hold.")
    assert markdown.direction(float("nan")) == "No pair to compare."


def test_placeto_zero_shot_over_auto_leaves_out_placements_out_of_memory(load_script):
    """Section 3 averaged a Placeto zero-shot placement out of memory into its 'x auto's step time', which section 2's
    table (and the pairs counted beside it) leave out."""
    markdown = load_script("reporting.text")
    rows = [dict(graph=graph, cluster="tight4", placer=placer, name=graph, step_s=step, oom=oom, vs_auto=step,
                 vs_bound=2 * step, family="ptb", history=[[64, step]], evaluations=64, updates=4, seconds=1.0)
            for graph, placer, step, oom in (("a", "placeto", 1.0, False), ("a", "placeto_zs", 1.2, False),
                                             ("b", "placeto", 1.0, False), ("b", "placeto_zs", 0.3, True))]
    text = "\n".join(markdown.claims(rows))
    assert "test graphs is 1.200x auto's step time and 120.0% of Placeto trained on the graph itself" in text
    assert "(1 pairs)" in text
    table = "\n".join(markdown.learned_table(rows, ["placeto_zs"]))
    assert "| placeto_zs | 2 | 1.200 |" in table  # the same figure


def test_equal_budgets_leave_runs_out_of_memory_out_of_the_means_and_count_them(load_script):
    """The equal-budgets table averaged gnplace's placement over memory (and a comparator's run that never fit)."""
    markdown = load_script("reporting.text")

    def row(graph, placer, step, oom):
        return dict(graph=graph, cluster="tight4", placer=placer, name=graph, step_s=step, oom=oom, vs_auto=step,
                    family="ptb", history=[[8, step]], evaluations=8, updates=1, seconds=1.0)

    rows = [row("a", "policy", 0.9, False), row("b", "policy", 0.2, True),
            row("a", "spotlight", 1.0, False), row("b", "spotlight", 0.1, True)]
    (_, _, line) = markdown.equal_budgets(rows, ["spotlight"])
    assert line == "| ptb | policy | 8 | 0.900 (1 OOM) | 1.000 (1 OOM) | yes |"
