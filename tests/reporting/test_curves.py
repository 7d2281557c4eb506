"""``scripts/reporting/curves.py``: section 2's figure of learning curves."""

from __future__ import annotations


def test_a_placer_keeps_one_colour_whether_drawn_as_a_line_or_a_star(tmp_path, load_script, monkeypatch):
    import matplotlib.figure
    from matplotlib.colors import to_hex

    curves = load_script("reporting.curves")
    colours = {}
    real_savefig = matplotlib.figure.Figure.savefig

    def keep_colours(figure, *args, **kwargs):
        for ax in figure.axes:
            colours.update({line.get_label(): to_hex(line.get_color()) for line in ax.get_lines()
                            if not line.get_label().startswith("_")})
            colours.update({dots.get_label(): to_hex(dots.get_facecolor()[0]) for dots in ax.collections})
        return real_savefig(figure, *args, **kwargs)

    monkeypatch.setattr(matplotlib.figure.Figure, "savefig", keep_colours)
    rows = [dict(family=family, cluster="k80x4", name=f"{family}_002", placer=placer, history=history)
            for family in ("ptb", "nmt")
            for placer, history in (("finetune", [[1, 1.0], [60, 0.92]]), ("policy", [[80, 0.91]]),
                                    ("ppo", [[1, 1.0], [200, 0.9]]))]
    curves.plot_curves(rows, tmp_path / "curves.png", "k80x4")
    assert len(set(colours.values())) == 3  # the policy's star was drawn in finetune's colour


def test_the_curves_legend_hides_no_panel_and_names_every_placer(tmp_path, load_script, monkeypatch):
    """The legend sat over the last panel's upper right, where the seeds' curves run (ptb's in docs/figures)."""
    curves = load_script("reporting.curves")
    drawn = []
    monkeypatch.setattr(curves, "save_figure", lambda fig, path: drawn.append(fig))
    rows = [dict(family=family, cluster="k80x4", name=f"{family}_002", placer=placer, history=history)
            for family, placers in (("nmt", ("rnn_pg", "placeto")), ("ptb", ("rnn_pg", "spotlight")))
            for placer in placers for history in ([[1, 1.2], [20, 1.15], [64, 1.1]],)]
    curves.plot_curves(rows, tmp_path / "curves.png", "k80x4")
    from matplotlib.backends.backend_agg import FigureCanvasAgg

    (fig,) = drawn
    renderer = FigureCanvasAgg(fig).get_renderer()
    legends = [ax.get_legend() for ax in fig.axes if ax.get_legend() is not None]
    assert len(legends) == 1 and sorted(t.get_text() for t in legends[0].get_texts()) == [
        "placeto", "rnn_pg", "spotlight"]  # placeto is in the first panel alone
    box = legends[0].get_window_extent(renderer)
    assert not any(box.overlaps(ax.get_window_extent(renderer)) for ax in fig.axes)
    assert box.x1 <= fig.bbox.x1  # and inside the image


def test_curves_draw_what_a_history_holds_and_say_what_they_leave_out(tmp_path, load_script, monkeypatch):
    """A history of none was an IndexError (a 1-D array indexed [:, 0]); a nan point broke the line and hid the final
    value, a ratio below 0 was drawn as it was, and a point at 0 evaluations lay off the log axis. Each point that
    can be drawn now is; what is left out is written under the panel's title."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg

    curves = load_script("reporting.curves")
    drawn = []
    monkeypatch.setattr(curves, "save_figure", lambda fig, path: drawn.append(fig))
    base = dict(family="ptb", cluster="k80x4", name="ptb_002")
    rows = [dict(base, placer="ppo", history=[]), dict(base, placer="heft", history=[[1, 1.0], [5, 0.95]]),
            dict(base, placer="rnn_pg", history=[[1, -0.5], [10, float("nan")], [100, 0.8], [200, 0.7]]),
            dict(base, placer="policy", history=[[0, 0.9]])]
    curves.plot_curves(rows, tmp_path / "curves.png", "k80x4")
    (fig,) = drawn
    FigureCanvasAgg(fig).draw()
    (ax,) = fig.axes
    assert ax.get_title().splitlines() == ["ptb_002 on k80x4", "ppo: no points",
                                           "rnn_pg: 2 of 4 points left out (1 not finite, 1 ratio <= 0)"]
    lines = {line.get_label(): line.get_xydata().tolist() for line in ax.get_lines()
             if not line.get_label().startswith("_")}
    assert lines["rnn_pg"][-2:] == [[200.0, 0.7], [ax.get_xlim()[1], 0.7]]  # the final value, held to the edge
    assert min(y for _, y in lines["rnn_pg"]) == 0.7
    (star,) = ax.collections
    assert star.get_label() == "policy" and star.get_offsets().tolist() == [[0.0, 0.9]]
    assert ax.get_xscale() == "symlog" and ax.get_xlim()[0] == 0  # 0 evaluations drawn at the axis' start
    assert sorted(t.get_text() for t in ax.get_legend().get_texts()) == ["heft", "policy", "rnn_pg"]


def test_a_step_curve_holds_its_final_level_to_the_panels_right_edge(tmp_path, load_script, monkeypatch):
    """A curve of steps ended at its last point: ``post``'s final value, reached at its budget's last batch, showed as
    the foot of a drop alone, and ``finetune``'s, found 17 evaluations before the end of its run, as a level of one
    evaluation. Each line is held at its final value to the panel's right edge, the axes' limits as they were (a
    star stays a star)."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg

    curves = load_script("reporting.curves")
    drawn = []
    monkeypatch.setattr(curves, "save_figure", lambda fig, path: drawn.append(fig))
    base = dict(family="ptb", cluster="k80x4", name="ptb_002")
    rows = [dict(base, placer="post", history=[[16, 1.15], [48, 1.15], [64, 1.14]], evaluations=64),
            dict(base, placer="finetune", history=[[0, 1.0], [46, 0.9], [47, 0.9]], evaluations=64),
            dict(base, placer="policy", history=[[40, 0.95]], evaluations=40)]
    curves.plot_curves(rows, tmp_path / "curves.png", "k80x4")
    curves.plot_curves([dict(rows[0], history=[[1, 1.2], *rows[0]["history"]])], tmp_path / "curves.png", "k80x4")
    for fig in drawn:
        (ax,) = fig.axes
        FigureCanvasAgg(fig).draw()
        right = ax.get_xlim()[1]
        assert right > 64
        lines = {line.get_label(): line for line in ax.get_lines() if not line.get_label().startswith("_")}
        assert lines["post"].get_xydata()[-2:].tolist() == [[64.0, 1.14], [right, 1.14]]
        level = ax.transData.transform([[64.0, 1.14], [right, 1.14]])
        assert level[1, 0] - level[0, 0] > 10  # pixels: the final level reads
    assert drawn[0].axes[0].get_xlim()[0] == 0.0  # symlog from 0, as before
    finetune = drawn[0].axes[0].get_lines()[0].get_xydata().tolist()
    assert finetune[-1] == [drawn[0].axes[0].get_xlim()[1], 0.9] and {y for x, y in finetune if x >= 46} == {0.9}
    assert drawn[0].axes[0].collections[0].get_offsets().tolist() == [[40.0, 0.95]]


def test_curves_say_so_where_a_family_or_every_row_has_nothing_to_draw(tmp_path, load_script, monkeypatch):
    """A family with no run on the cluster drawn (an IndexError), and no row at all (a ValueError: 0 columns)."""
    curves = load_script("reporting.curves")
    drawn = []
    monkeypatch.setattr(curves, "save_figure", lambda fig, path: drawn.append(fig))
    rows = [dict(family="nmt", cluster="k80x4", name="nmt_002", placer="ppo", history=[[1, 1.0], [8, 0.9]]),
            dict(family="ptb", cluster="tight4", name="ptb_002", placer="ppo", history=[[1, 1.0]]),
            dict(family="yelp", cluster="k80x4", name="yelp_002", placer="ppo", history=[[1, float("inf")]])]
    curves.plot_curves(rows, tmp_path / "curves.png", "k80x4")
    curves.plot_curves([], tmp_path / "none.png", "k80x4")
    texts = [[t.get_text() for t in ax.texts] for fig in drawn for ax in fig.axes]
    assert texts == [[], ["no run of ptb on k80x4"], ["no point to draw:\nppo: no points (1 not finite)"],
                     ["no learned placer's run to draw"]]
    assert drawn[1].axes[0].get_legend() is None


def test_a_learning_curve_hidden_under_another_is_said_so_under_the_title(tmp_path, load_script, monkeypatch):
    """Curves of the same steps (PPO and the policy gradient flat at auto's, or two stars at one point) were drawn one
    over another: the legend named a placer whose curve no one could see. Each hidden one is said so."""
    curves = load_script("reporting.curves")
    drawn = []
    monkeypatch.setattr(curves, "save_figure", lambda fig, path: drawn.append(fig))
    base = dict(family="ptb", cluster="k80x4", name="ptb_002")
    rows = [dict(base, placer="ppo", history=[[1, 1.0], [64, 1.0]]),
            dict(base, placer="rnn_pg", history=[[1, 1.0], [16, 1.0], [64, 1.0]]),
            dict(base, placer="heft", history=[[1, 1.0], [8, 0.9], [64, 0.9]]),
            dict(base, placer="finetune", history=[[16, 0.95]]), dict(base, placer="policy", history=[[16, 0.95]])]
    curves.plot_curves(rows, tmp_path / "curves.png", "k80x4")
    assert drawn[0].axes[0].get_title().splitlines() == ["ptb_002 on k80x4", "finetune: hidden under policy",
                                                         "heft: under rnn_pg over 1-8 evaluations",
                                                         "ppo: hidden under rnn_pg"]


def test_a_learning_curve_under_another_over_a_stretch_is_said_so_under_the_title(tmp_path, load_script, monkeypatch):
    """Fine-tuning and PPO flat at auto's step until their first better placements (60 and 200 evaluations), and the
    seeds' first batches timed alike, were drawn one over another with nothing said: fine-tuning's curve seemed to
    start at 60, post's at 32. Each stretch under a later curve is said so; a curve hidden wholly, as before."""
    curves = load_script("reporting.curves")
    drawn = []
    monkeypatch.setattr(curves, "save_figure", lambda fig, path: drawn.append(fig))
    base = dict(family="ptb", cluster="k80x4", name="ptb_002")
    rows = [dict(base, placer="annealing", history=[[1, 1.0], [60, 0.95], [300, 0.9], [1000, 0.9]]),
            dict(base, placer="finetune", history=[[1, 1.0], [60, 0.95], [1000, 0.95]]),
            dict(base, placer="ppo", history=[[1, 1.0], [200, 0.9], [1000, 0.88]]),
            dict(base, placer="post", history=[[16, 1.15], [32, 1.12], [500, 1.1], [1000, 1.1]]),
            dict(base, placer="rnn_pg", history=[[16, 1.15], [1000, 1.15]]),
            dict(base, placer="spotlight", history=[[16, 1.15], [48, 1.13], [500, 1.1], [1000, 1.1]])]
    curves.plot_curves(rows, tmp_path / "curves.png", "k80x4")
    assert drawn[0].axes[0].get_title().splitlines() == [
        "ptb_002 on k80x4", "annealing: under ppo over 1-60, 300-1,000 evaluations",
        "annealing: under finetune over 60-300 evaluations",
        "finetune: under ppo over 1-60 evaluations", "post: under spotlight over 16-32, 500-1,000 evaluations",
        "rnn_pg: under spotlight over 16-48 evaluations"]


def test_the_curves_notes_leave_the_axes_their_height(tmp_path, load_script, monkeypatch):
    """Seven lines of notes over a panel (curves hidden under another) left its axes half the height of a panel
    without notes. The figure grows by the notes' lines; one without notes is as it was, 3.6 inches high."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg

    curves = load_script("reporting.curves")
    drawn = []
    monkeypatch.setattr(curves, "save_figure", lambda fig, path: drawn.append(fig))
    base = dict(family="ptb", cluster="k80x4", name="ptb_002")
    placers = ("a2c", "annealing", "finetune", "hierarchical", "placeto", "post", "ppo", "rnn_pg")
    curves.plot_curves([dict(base, placer=p, history=[[1, 1.0 + k / 10], [64, 1.0 + k / 10]])
                        for k, p in enumerate(placers)], tmp_path / "curves.png", "k80x4")
    curves.plot_curves([dict(base, placer=p, history=[[1, 1.0], [64, 1.0]]) for p in placers], tmp_path / "c.png",
                       "k80x4")
    heights = []
    for fig in drawn:
        FigureCanvasAgg(fig).draw()
        heights.append(fig.axes[0].get_window_extent().height)
    assert drawn[0].get_figheight() == 3.6 and drawn[1].axes[0].get_title().count("\n") == 7
    assert heights[1] >= 0.95 * heights[0]
