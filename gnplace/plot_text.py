"""Text for the plots: labels and titles that fit their room, and names drawn with the installed fonts.

Fitting (:func:`row_names`, :func:`fitted`, :func:`fitted_labels`) shortens a label drawn wider than its room to its
start and end with ``…`` between, measured as Agg draws it at :data:`DPI` (:func:`text_width`). Drawing
(:func:`plain`, :func:`drawable`, :func:`fonts_for`) escapes what matplotlib would read as maths or no font has, and
adds an installed font for characters the default font lacks. :mod:`gnplace.viz` lays the figures out with them.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

__all__ = ["DPI", "ROW_NAME_CHARS", "ROW_LABEL_POINTS", "row_names", "fitted", "fitted_labels", "text_width",
           "longest_line", "plain", "drawable", "dollars", "fonts_for"]

DPI = 120
"""The resolution of the plots written (dots an inch), a PNG's and a vector file's raster of bars; each figure is
laid out at it (text measured at another resolution is another width: hinting)."""

ROW_NAME_CHARS = 48
"""The most characters of a device's name a timeline's row label shows (its start and end, ``…`` between)."""

ROW_LABEL_POINTS = 612.0
"""The widest a timeline's row label is drawn (points): 8.5 inches, 1,020 pixels of the figure's 1,440 at 120 dpi,
the rest for the axes and the legend. A label of :data:`ROW_NAME_CHARS` of the widest ASCII characters (``@``,
``W``, ``m``), numbered and out of memory (``#63 @@@… (out of memory)``, 1,001 pixels), fits: drawn as the cap on
characters alone drew it."""


def row_names(names: list[str], suffixes: list[str] | None = None) -> list[str]:
    """``names`` (the text drawn) shortened for the rows' labels, each still its own, ``suffixes`` left off.

    A name of more than :data:`ROW_NAME_CHARS` characters keeps its start and end with ``…`` between, and one whose
    label, the name and its ``suffixes`` (the widest text drawn after each name: ``" send"``, ``" (out of memory)"``;
    default none), is drawn wider than :data:`ROW_LABEL_POINTS` keeps the most characters that fit
    (:func:`fitted`). Where two names shorten alike, each is shown with its device's index first (``#3 …``). A
    name of 300 characters took the figure's width: tight_layout gave up ("Tight layout not applied") and the labels
    ran off the left edge; so did one of 48 wide characters (per-ten-thousand signs, 1,440 pixels).

    Examples:
        >>> row_names(["gpu0", "a" * 30 + "x" + "b" * 30])
        ['gpu0', 'aaaaaaaaaaaaaaaaaaaaaaa…bbbbbbbbbbbbbbbbbbbbbbbb']
        >>> row_names(["a" * 30 + "x" + "b" * 30, "a" * 30 + "y" + "b" * 30])[1]
        '#1 aaaaaaaaaaaaaaaaaaaaaaa…bbbbbbbbbbbbbbbbbbbbbbbb'
        >>> len(row_names(["\u2031" * 48])[0])
        34
    """
    import matplotlib
    from matplotlib.font_manager import FontProperties

    prop = FontProperties(size=matplotlib.rcParams["ytick.labelsize"])
    pixels = ROW_LABEL_POINTS * DPI / 72
    ends = suffixes or [""] * len(names)
    cut = [_middle_cut(n, ROW_NAME_CHARS) for n in names]
    short = [fitted(c, pixels, prop, suffix=e) for c, e in zip(cut, ends)]
    if len(set(short)) < len(short):
        return [fitted(c, pixels, prop, prefix=f"#{k} ", suffix=e) if s != n else s
                for k, (s, c, e, n) in enumerate(zip(short, cut, ends, names))]
    return short


def _middle_cut(text: str, chars: int) -> str:
    """``text`` if at most ``chars`` characters, else its start and end with ``…`` between, ``chars`` in all.

    Examples:
        >>> _middle_cut("abcdefgh", 8), _middle_cut("abcdefgh", 5), _middle_cut("abcdefgh", 1)
        ('abcdefgh', 'ab…gh', '…')
    """
    if len(text) <= chars:
        return text
    head = (chars - 1) // 2
    tail = chars - 1 - head
    return f"{text[:head]}…{text[len(text) - tail:]}"


def text_width(text: str, prop: Any) -> float:
    """The width (pixels at :data:`DPI`) of ``text`` drawn as it is (no maths) in font ``prop`` (a FontProperties).

    Measured as Agg draws it, as tight_layout measures text to lay a figure out.
    """
    from matplotlib.backends.backend_agg import RendererAgg

    return float(RendererAgg(1, 1, DPI).get_text_width_height_descent(text, prop, ismath=False)[0])


def fitted(text: str, pixels: float, prop: Any, prefix: str = "", suffix: str = "") -> str:
    """``prefix + text`` if drawn at most ``pixels`` wide, else ``prefix`` and the start and end of ``text``.

    The start and end have ``…`` between and are the most characters of ``text`` whose drawing in ``prop`` (a
    FontProperties), after ``prefix`` and before ``suffix`` (measured, not returned: drawn after it), is at most
    ``pixels`` wide at :data:`DPI` (:func:`text_width`).
    """
    if text_width(prefix + text + suffix, prop) <= pixels:
        return prefix + text
    lo, hi = 1, len(text) - 1  # characters kept, ``…`` counted: 1 (``…`` alone) always taken
    while lo < hi:  # the most that fit: a wider cut is (all but always) no narrower
        mid = (lo + hi + 1) // 2
        lo, hi = (mid, hi) if text_width(prefix + _middle_cut(text, mid) + suffix, prop) <= pixels else (lo, mid - 1)
    while lo > 1 and text_width(prefix + _middle_cut(text, lo) + suffix, prop) > pixels:
        lo -= 1
    return prefix + _middle_cut(text, lo)


def fitted_labels(texts: list[str], pixels: float, prop: Any) -> list[str]:
    """``texts`` each :func:`fitted` to ``pixels`` (at :data:`DPI`, drawn in ``prop``), each still its own.

    Where two shorten alike, each shortened one is shown with its index first (``#3 …``), as :func:`row_names` does.
    """
    short = [fitted(t, pixels, prop) for t in texts]
    if len(set(short)) < len(short):
        return [fitted(t, pixels, prop, prefix=f"#{k} ") if s != t else s
                for k, (s, t) in enumerate(zip(short, texts))]
    return short


def longest_line(text: str, prop: Any) -> float:
    """The width (pixels at :data:`DPI`) of the longest line of ``text`` drawn in ``prop`` (:func:`text_width`)."""
    return max(text_width(line, prop) for line in text.split("\n"))


def plain(name: str) -> str:
    """``name`` drawn as it is: matplotlib reads text between two ``$`` as maths (and fails on ``a$\\frac$``).

    A lone surrogate (a file name's byte that is not UTF-8, ``caf\\udce9``) is drawn escaped, as the
    text output prints it: the font engine refused it with a TypeError. Control characters and line breaks
    (a graph or device name's ``\\x1b``, newline) are drawn as the ``\\xNN`` escapes the text output prints
    (:func:`~gnplace.cli.common.printable_name`), a tab as ``\\x09``: no font has their glyphs, and matplotlib
    warned once per character and drawing ("Glyph 27 missing from font(s) DejaVu Sans"); a newline split a title.
    So is any other character that none of the fonts text is drawn in has (:func:`fonts_for` adds an installed
    font that has it), as Python escapes it (``\\u6a21``): a module named in Chinese (``模型``) was drawn as
    missing-glyph boxes, with a warning per character and drawing.
    """
    return dollars(drawable(name))


def drawable(name: str) -> str:
    """``name`` as :func:`plain` draws it, its ``$`` not yet escaped: the text drawn, to measure and shorten."""
    drawn = _drawn_codepoints()
    return "".join(c if ord(c) in drawn else _escaped(c) for c in _printable(name))


def dollars(text: str) -> str:
    """``text`` with each ``$`` escaped, drawn as a ``$``: matplotlib reads text between two ``$`` as maths."""
    return text.replace("$", r"\$")


def _printable(name: str) -> str:
    """``name`` with its control characters, line breaks, tabs and lone surrogates escaped (see :func:`plain`)."""
    from gnplace.cli.common import printable_name  # here: the CLI's module imports the placers

    return printable_name(str(name)).replace("\t", "\\x09").encode("utf-8", "backslashreplace").decode("utf-8")


def _escaped(char: str) -> str:
    """``char`` as Python's ``ascii`` writes it, without quotes: ``\\xe9``, ``\\u6a21``, ``\\U0001f600``."""
    return char.encode("ascii", "backslashreplace").decode("ascii")


_LAST_RESORT = "LastResort"
"""The start of the file name of matplotlib's Last Resort font (3.10 on): a box for every character, not a glyph."""


def _text_fonts(family: list[str] | None = None) -> list[str]:
    """The files of the fonts matplotlib draws text in for ``family`` (default: ``font.family``), in fallback order.

    matplotlib's Last Resort font, appended to every list by 3.10 on, is left out: its boxes name no character.
    """
    from matplotlib import font_manager
    from matplotlib.font_manager import FontProperties

    prop = FontProperties(family=family)
    find = getattr(font_manager.fontManager, "_find_fonts_by_props", None)  # 3.6 on: the fallback list
    paths = find(prop) if find is not None else [font_manager.findfont(prop)]
    return [str(p) for p in paths if not Path(str(p)).name.startswith(_LAST_RESORT)]


def _charmap(path: str) -> frozenset[int]:
    """The code points that the font in file ``path`` has a glyph for (read once a process)."""
    if path not in _CHARMAPS:
        from matplotlib import font_manager

        _CHARMAPS[path] = frozenset(font_manager.get_font(path).get_charmap())
    return _CHARMAPS[path]


_CHARMAPS: dict[str, frozenset[int]] = {}


def _drawn_codepoints() -> frozenset[int]:
    """The code points the fonts of matplotlib's ``font.family`` now draw (:func:`_text_fonts`)."""
    fonts = _text_fonts()
    return frozenset().union(*(_charmap(f) for f in fonts)) if fonts else frozenset()


def _fallback_families(texts: list[str]) -> list[str]:
    """Installed fonts' family names that draw the characters of ``texts`` that ``font.family``'s fonts lack.

    Each is the font that has the most characters still lacking (ties: by family name, then file), until none has
    any: the same fonts installed, the same families. A character none has is left out (:func:`plain` escapes it).
    """
    from matplotlib import font_manager

    lacking = {ord(c) for text in texts for c in _printable(text)} - _drawn_codepoints()
    if not lacking:
        return []
    ours = set(_text_fonts())
    candidates = sorted({(e.name, e.fname) for e in font_manager.fontManager.ttflist
                         if e.fname not in ours and not Path(e.fname).name.startswith(_LAST_RESORT)})
    families: list[str] = []
    while lacking:
        best = min(candidates, key=lambda c: (-len(lacking & _charmap(c[1])), c), default=None)
        if best is None or not lacking & _charmap(best[1]):
            break
        families.append(best[0])
        lacking -= _charmap(best[1])
        candidates = [c for c in candidates if c[0] != best[0]]
    return families


@contextmanager
def fonts_for(texts: list[str]) -> Iterator[None]:
    """A context in which text is drawn in ``font.family`` and, after it, the fonts :func:`_fallback_families` finds.

    matplotlib draws a character its first font lacks in the next one of the list that has it (3.6 on).
    """
    import matplotlib as mpl  # imported: gnplace.viz imports it first, MPLBACKEND set aside

    extra = _fallback_families(texts)
    if not extra:
        yield
        return
    with mpl.rc_context({"font.family": [*mpl.rcParams["font.family"], *extra]}):
        yield
