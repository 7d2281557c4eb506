"""Labels that fit their room and names drawn with the installed fonts (:mod:`gnplace.plot_text`): the text
functions alone, and the names the plots draw with them."""

from __future__ import annotations

from pathlib import Path

import pytest

from gnplace import plot_text
from gnplace.cluster import load_cluster
from gnplace.sim.simulator import Simulator
from gnplace.toy import mlp_training_graph
from gnplace.viz import plot_ratios, plot_timeline

PNG_MAGIC = b"\x89PNG\r\n\x1a\n"


def _prop(size: float = 10.0):
    from matplotlib.font_manager import FontProperties

    return FontProperties(size=size)


def test_a_text_that_fits_is_returned_as_it_is_else_its_start_and_end_fit():
    prop = _prop()
    width = plot_text.text_width("abcdefghij", prop)
    assert plot_text.fitted("abcdefghij", width, prop) == "abcdefghij"
    short = plot_text.fitted("abcdefghij", width - 1, prop)
    assert short.startswith("abc") and short.endswith("ghij") and "…" in short
    assert plot_text.text_width(short, prop) <= width - 1
    assert plot_text.fitted("abcdefghij", 0.0, prop) == "…"  # nothing fits: the ellipsis alone


def test_a_suffix_is_measured_not_returned_and_a_prefix_is_kept():
    prop = _prop()
    width = plot_text.text_width("#1 abcdefg send", prop)
    assert plot_text.fitted("abcdefg", width, prop, prefix="#1 ", suffix=" send") == "#1 abcdefg"
    short = plot_text.fitted("abcdefghij", width, prop, prefix="#1 ", suffix=" send")
    assert short.startswith("#1 a") and short.endswith("j") and "…" in short
    assert plot_text.text_width(short + " send", prop) <= width


def test_labels_that_shorten_alike_are_numbered_each_its_own():
    prop = _prop()
    texts = ["a" * 30 + "x" + "b" * 30, "a" * 30 + "y" + "b" * 30, "c"]
    pixels = plot_text.text_width("a" * 20, prop)
    fitted = plot_text.fitted_labels(texts, pixels, prop)
    assert fitted[0].startswith("#0 a") and fitted[1].startswith("#1 a") and fitted[2] == "c"
    assert len(set(fitted)) == 3 and all(plot_text.text_width(f, prop) <= pixels for f in fitted)


def test_a_shortened_label_unlike_the_others_is_not_numbered():
    """Only labels that shorten alike are numbered: one shortened label among others keeps its own text."""
    prop = _prop()
    pixels = plot_text.text_width("a" * 20, prop)
    fitted = plot_text.fitted_labels(["a" * 30 + "x" + "b" * 30, "c"], pixels, prop)
    assert fitted[0].startswith("aaa") and fitted[0].endswith("bbb") and "…" in fitted[0]
    assert fitted[1] == "c"


def test_a_text_keeps_the_most_characters_drawn_at_most_its_room_wide(monkeypatch):
    """A text or cut exactly as wide as its room fits: "at most ``pixels`` wide" (10 pixels a character here)."""
    monkeypatch.setattr(plot_text, "text_width", lambda text, prop: 10.0 * len(text))
    assert plot_text.fitted("abcde", 50.0, None) == "abcde"
    assert plot_text.fitted("abcdefghij", 50.0, None) == "ab…ij"
    assert plot_text.fitted("abcdefghij", 80.0, None, prefix="#1 ", suffix="!") == "#1 a…ij"  # 3 + 4 + 1 characters
    assert plot_text.fitted_labels(["abcdefghij", "abcdefghij"], 60.0, None) == ["#0 a…j", "#1 a…j"]


def test_a_row_label_of_wide_characters_fits_its_room_with_its_suffix():
    import matplotlib
    from matplotlib.font_manager import FontProperties

    prop = FontProperties(size=matplotlib.rcParams["ytick.labelsize"])
    (name,) = plot_text.row_names(["\u2031" * 48], [" (out of memory)"])
    assert "…" in name and plot_text.text_width(name + " (out of memory)", prop) <= (
        plot_text.ROW_LABEL_POINTS * plot_text.DPI / 72)


def test_the_longest_line_is_the_widest_line_of_the_text():
    prop = _prop()
    assert plot_text.longest_line("ab\nabcdef\nabc", prop) == plot_text.text_width("abcdef", prop)


def test_names_are_drawable_as_they_are():
    assert plot_text.plain("a$b$") == r"a\$b\$" and plot_text.dollars("$") == r"\$"
    assert plot_text.drawable("x\x1b\ty\nz") == r"x\x1b\x09y\x0az"
    assert plot_text.drawable("caf\udce9") == r"caf\udce9"


def test_text_the_default_font_draws_adds_no_font():
    import matplotlib

    family = list(matplotlib.rcParams["font.family"])
    with plot_text.fonts_for(["gpu0", "k80x2 $x$"]):
        assert list(matplotlib.rcParams["font.family"]) == family


def test_names_with_dollar_signs_are_drawn_as_text_not_parsed_as_maths(tmp_path):
    """A graph, device, cluster or placer named with two ``$`` made matplotlib parse mathtext and fail to draw."""
    from gnplace.graph import OpGraph
    from gnplace.toy import toy_cluster

    g = OpGraph(["a", "b"], [(0, 1)], flops=[1e9, 1e9], out_bytes=[4e6, 0], name=r"net$\frac$")
    c = toy_cluster(2, prefix="gpu$x$")
    result = Simulator().time(g, c, [0, 1], timeline=True)
    assert plot_timeline(g, result, tmp_path / "t.png").read_bytes().startswith(PNG_MAGIC)
    summary = [{"family": "a", "cluster": "c$\\x$", "placer": "my$\\frac$", "vs_best": 1.0, "graphs": 1}]
    assert plot_ratios(summary, tmp_path / "r.svg").exists()


def test_control_characters_in_names_are_drawn_escaped_without_glyph_warnings(tmp_path, monkeypatch):
    """A graph, device, cluster or placer named with ESC, a tab or a newline made matplotlib warn "Glyph 27 missing
    from font(s) DejaVu Sans" once per character and drawing (14 warnings for these names); a newline split the
    title in two. They are drawn as the escapes the text output prints."""
    import warnings

    import gnplace.viz as viz
    from gnplace.graph import OpGraph
    from gnplace.toy import toy_cluster

    figures = []
    real_save = viz._save
    monkeypatch.setattr(viz, "_save", lambda fig, path: (figures.append(fig), real_save(fig, path))[1])
    g = OpGraph(["a", "b"], [(0, 1)], flops=[1e9, 1e9], out_bytes=[4e6, 0], name="net\x1b[2J\tx\ny\x85")
    c = toy_cluster(2, prefix="gpu\x01")
    result = Simulator().time(g, c, [0, 1], timeline=True)
    summary = [{"family": "a", "cluster": "c\x7f", "placer": "p\x02\t", "vs_best": 1.0, "graphs": 1}]
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        plot_timeline(g, result, tmp_path / "t.png")
        plot_timeline(g, result, tmp_path / "u.png", title="a\x1bb\tc\nd")
        plot_ratios(summary, tmp_path / "r.png")
    default, titled, ratios = (fig.axes[0] for fig in figures)
    assert default.get_title().startswith(r"net\x1b[2J\x09x\x0ay\x85: step ")
    assert titled.get_title() == r"a\x1bb\x09c\x0ad"
    assert [t.get_text() for t in default.get_yticklabels()] == [r"gpu\x010", r"gpu\x011", r"gpu\x010 send",
                                                                 r"gpu\x011 send"]
    assert ratios.get_title() == r"c\x7f" and [t.get_text() for t in ratios.get_xticklabels()] == [r"p\x02\x09"]


def test_a_name_with_a_byte_that_is_not_utf8_is_drawn_escaped(tmp_path):
    """A graph imported from ``caf\\xe9.onnx`` is named ``caf\\udce9``: the font engine's TypeError was a traceback."""
    g, c = mlp_training_graph(layers=2, width=8, batch=4, branches=2), load_cluster("k80x2")
    result = Simulator().time(g, c, [0 if i % 2 else 1 for i in range(g.num_ops)], timeline=True)
    assert plot_timeline(g, result, tmp_path / "t.png", title="caf\udce9").read_bytes().startswith(PNG_MAGIC)


@pytest.fixture
def shipped_fonts(monkeypatch):
    """Only the fonts matplotlib ships (none with CJK glyphs) installed, whatever this machine holds.

    Read from matplotlib's own folder, not filtered out of its font cache: a cache written with fewer fonts (31,
    DejaVu's alone, in this machine's ~/.cache/matplotlib one day) left STIX out, and the test of a fallback
    to it failed.
    """
    from matplotlib import font_manager

    shipped = Path(font_manager.__file__).parent / "mpl-data" / "fonts" / "ttf"
    monkeypatch.setattr(font_manager.fontManager, "ttflist",
                        [font_manager.ttfFontProperty(font_manager.get_font(str(path)))
                         for path in sorted(shipped.glob("*.ttf"))])


def test_characters_no_font_has_are_drawn_as_code_points_without_glyph_warnings(tmp_path, monkeypatch, shipped_fonts):
    """A graph (an ONNX model, a module named in Chinese), device, cluster or placer named in CJK was drawn as
    missing-glyph boxes, with a warning "Glyph 27169 (\\N{CJK UNIFIED IDEOGRAPH-6A21}) missing from font(s) DejaVu
    Sans" per character and drawing (50 for these names). Without a font that has them, they are Python's escapes."""
    import warnings

    import gnplace.viz as viz
    from gnplace.graph import OpGraph
    from gnplace.toy import toy_cluster

    figures = []
    real_save = viz._save
    monkeypatch.setattr(viz, "_save", lambda fig, path: (figures.append(fig), real_save(fig, path))[1])
    g = OpGraph(["a", "b"], [(0, 1)], flops=[1e9, 1e9], out_bytes=[4e6, 0], name="模型_net")
    result = Simulator().time(g, toy_cluster(2, prefix="显卡"), [0, 1], timeline=True)
    summary = [{"family": "a", "cluster": "集群", "placer": "放置", "vs_best": 1.0, "graphs": 1}]
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        first = plot_timeline(g, result, tmp_path / "t.png").read_bytes()
        plot_timeline(g, result, tmp_path / "t.svg")
        plot_ratios(summary, tmp_path / "r.png")
    timeline, _, ratios = (fig.axes[0] for fig in figures)
    assert timeline.get_title().startswith(r"\u6a21\u578b_net: step ")
    assert [t.get_text() for t in timeline.get_yticklabels()][:2] == [r"\u663e\u53610", r"\u663e\u53611"]
    assert ratios.get_title() == r"\u96c6\u7fa4" and [t.get_text() for t in ratios.get_xticklabels()] == [
        r"\u653e\u7f6e"]
    assert plot_timeline(g, result, tmp_path / "again.png").read_bytes() == first  # the same file


def test_a_character_the_default_font_lacks_is_drawn_in_an_installed_font_that_has_it(tmp_path, monkeypatch,
                                                                                     shipped_fonts):
    """DejaVu Sans has no script g (U+210A); STIX, shipped with matplotlib, has: it is drawn in it, as it is."""
    import warnings

    import matplotlib
    from matplotlib import font_manager

    import gnplace.viz as viz
    from gnplace.graph import OpGraph
    from gnplace.toy import toy_cluster

    figures = []
    real_save = viz._save
    monkeypatch.setattr(viz, "_save", lambda fig, path: (figures.append(fig), real_save(fig, path))[1])
    g = OpGraph(["a", "b"], [(0, 1)], flops=[1e9, 1e9], out_bytes=[4e6, 0], name="net\u210a")
    result = Simulator().time(g, toy_cluster(2), [0, 1], timeline=True)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        plot_timeline(g, result, tmp_path / "t.png")
    title = figures[0].axes[0].title
    assert title.get_text().startswith("net\u210a: step ")
    *default, fallback = title.get_fontfamily()
    assert default == list(matplotlib.rcParams["font.family"]) and fallback.startswith("STIX")
    assert ord("\u210a") in font_manager.get_font(font_manager.findfont(fallback)).get_charmap()


def test_no_font_is_added_for_characters_no_installed_font_has(shipped_fonts):
    """A font is added only for the characters it has: none of matplotlib's own fonts has CJK, so none is added for
    them, and one STIX face for the script g (U+210A) DejaVu Sans lacks."""
    assert plot_text._fallback_families(["模型_net"]) == []
    (family,) = plot_text._fallback_families(["模型_net\u210a"])
    assert family.startswith("STIX")
