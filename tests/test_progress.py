from __future__ import annotations

import sys

import pytest

from gnplace.cluster import load_cluster
from gnplace.placers.annealing import AnnealingPlacer
from gnplace.placers.random_search import RandomSearchPlacer
from gnplace.progress import ProgressLine, evaluation_bar
from gnplace.toy import mlp_training_graph


@pytest.fixture
def recorded_consoles(monkeypatch):
    """The rich consoles made while the test runs, each drawing as on a 100-column terminal and recording it."""
    import rich.console

    consoles = []

    class Recording(rich.console.Console):
        def __init__(self, **kwargs):
            super().__init__(**kwargs, force_terminal=True, record=True, width=100)
            consoles.append(self)

    monkeypatch.setattr(rich.console, "Console", Recording)
    monkeypatch.setenv("TERM", "xterm")  # rich draws no bar on a dumb terminal, whatever the runner's
    return consoles


@pytest.fixture
def line_clock(monkeypatch):
    """Progress lines (stderr no terminal) written to a buffer on every update, by a clock the test sets: ``(now, out)``
    where ``now[0]`` is the clock's reading in seconds and ``out`` the buffer."""
    import functools
    import io

    import gnplace.progress

    now = [0.0]
    out = io.StringIO()
    monkeypatch.setattr(gnplace.progress, "ProgressLine", functools.partial(
        ProgressLine, every_s=0.0, stream=out, clock=lambda: now[0]))
    monkeypatch.setattr(sys.stderr, "isatty", lambda: False, raising=False)
    return now, out


def test_a_disabled_bar_prints_nothing(capsys):
    with evaluation_bar("x", 10, enabled=False) as advance_to:
        advance_to(5)
    assert capsys.readouterr() == ("", "")


@pytest.mark.parametrize("placer", [AnnealingPlacer, RandomSearchPlacer])
def test_a_search_with_a_bar_keeps_stdout_clean_and_places_the_same(capsys, placer):
    """The bar goes to stderr (stdout may be ``--json``) and does not touch the search's random stream."""
    graph, cluster = mlp_training_graph(layers=3, width=256, batch=32), load_cluster("k80x2")
    shown = placer(budget=120, progress=True).place(graph, cluster, seed=3)
    assert capsys.readouterr().out == ""
    hidden = placer(budget=120, progress=False).place(graph, cluster, seed=3)
    assert (shown.devices == hidden.devices).all()


@pytest.mark.parametrize("name", ["net[v2]", "net[/]", "[bold]net"])
def test_a_label_is_shown_as_it_is_not_read_as_rich_markup(recorded_consoles, name):
    """A graph named ``net[/]`` stopped the search (rich's MarkupError) and ``net[v2]`` was shown as ``net``."""
    consoles = recorded_consoles
    with evaluation_bar(f"annealing {name}", 10, enabled=True) as advance_to:
        advance_to(5)
    assert f"annealing {name} " in consoles[0].export_text()


def test_where_stderr_is_not_a_terminal_a_search_writes_progress_lines_instead_of_a_bar(capsys, monkeypatch):
    """A log file gets a line every ``LINE_EVERY_S`` seconds (0 here: every evaluation); the search is the same."""
    import sys

    import gnplace.progress

    monkeypatch.setattr(gnplace.progress, "LINE_EVERY_S", 0.0)
    monkeypatch.setattr(sys.stderr, "isatty", lambda: False, raising=False)
    graph, cluster = mlp_training_graph(layers=3, width=256, batch=32), load_cluster("k80x2")
    logged = AnnealingPlacer(budget=120).place(graph, cluster, seed=3)
    out, err = capsys.readouterr()
    lines = err.splitlines()
    assert out == "" and lines and all(line.startswith(f"annealing {graph.name}: ") for line in lines)
    assert lines[-1].startswith(f"annealing {graph.name}: 120/120 evaluations (100%)")
    assert (logged.devices == AnnealingPlacer(budget=120, progress=False).place(graph, cluster, seed=3).devices).all()
    assert capsys.readouterr() == ("", "")  # progress=False: nothing at all


def test_a_progress_line_reads_count_share_elapsed_and_time_left():
    import io

    now = [100.0]
    out = io.StringIO()
    line = ProgressLine("run", None, "iterations", every_s=10, stream=out, clock=lambda: now[0])
    line.update(3)  # the start: no line
    now[0] = 3800.0
    line.update(50, note="best 0.9")
    line.update(51)  # within the interval
    assert out.getvalue() == "run: 50 iterations, 1:01:40 elapsed; best 0.9\n" and line.lines == 1
    line.update(51, force=True)
    assert out.getvalue().splitlines()[-1] == "run: 51 iterations, 1:01:40 elapsed"


def test_work_done_before_a_run_counts_towards_the_total_but_not_the_rate():
    import io

    now = [0.0]
    out = io.StringIO()
    line = ProgressLine("evaluate", 100, "rows", every_s=10, stream=out, clock=lambda: now[0])
    line.update(0)
    line.done_before(60)  # 60 rows saved by an earlier run
    now[0] = 20.0
    line.update(70)  # 10 rows in 20 s: 30 left take 60 s
    assert out.getvalue() == "evaluate: 70/100 rows (70%), 0:20 elapsed, about 1:00 left\n"


def test_a_searchs_time_left_leaves_out_the_stages_before_its_first_evaluation(line_clock):
    """``policy`` coarsens a large graph before it times anything (7 s of a 30 s run at 20,000 ops): a line after
    the coarsening and 4 of 478 evaluations extrapolated those seconds over all 474 left ("about 15:44 left" of what
    took 22 s). The elapsed time still counts them."""
    now, out = line_clock
    with evaluation_bar("policy big", 478) as advance_to:
        advance_to(0, "coarsening")
        now[0] = 30.0
        advance_to(0, "greedy decodes")
        now[0] = 31.0
        advance_to(0, "scoring the greedy decodes")
        now[0] = 33.0
        advance_to(4, "coarsening and auto")  # 4 evaluations in the 2 s since: 474 left take 237 s
        now[0] = 35.0
        advance_to(8, "auto")  # the rate stays measured from the scoring: 4 s for 8
    lines = out.getvalue().splitlines()
    assert lines[-2] == "policy big: 4/478 evaluations (1%), 0:33 elapsed, about 3:57 left; coarsening and auto"
    assert lines[-1] == "policy big: 8/478 evaluations (2%), 0:35 elapsed, about 3:55 left; auto"


def test_a_line_counting_from_its_first_update_keeps_the_rate_of_every_second(monkeypatch):
    """Without ``from_first_count`` (Lightning's lines, whose logged count may move in lumps) the rate is measured
    from the first update, as before."""
    import io

    now = [0.0]
    out = io.StringIO()
    line = ProgressLine("run", 100, "episodes", every_s=0.0, stream=out, clock=lambda: now[0])
    line.update(0)
    now[0] = 30.0
    line.update(0)
    now[0] = 40.0
    line.update(20)
    assert out.getvalue().splitlines()[-1] == "run: 20/100 episodes (20%), 0:40 elapsed, about 2:40 left"


def test_a_count_bar_on_a_terminal_counts_notes_above_itself_and_ends_full(capsys):
    from gnplace.progress import count_bar

    with count_bar("evaluate", 3, "rows", enabled=True) as bar:
        bar.done_before(1)
        bar.note("reusing 1 saved rows of [out]/results.csv")  # printed as it is, not as rich markup
        bar.advance("net[v2] k80x4 heft")
    assert bar.done == 2
    out = capsys.readouterr().out
    assert "reusing 1 saved rows of [out]/results.csv" in out and "3/3" in out  # finished: what was asked twice


def test_a_count_bar_draws_where_stdout_is_a_terminal_and_writes_lines_where_it_is_a_file(monkeypatch):
    """``gnplace evaluate > out.txt``: the file gets no bar drawn once at the end; stderr gets the lines."""
    import sys

    from gnplace.progress import count_bar

    monkeypatch.setattr(sys.stderr, "isatty", lambda: True, raising=False)
    monkeypatch.setenv("TERM", "xterm")  # a terminal that draws bars, whatever the runner's
    monkeypatch.setattr(sys.stdout, "isatty", lambda: False, raising=False)
    with count_bar("evaluate", 1, "rows") as bar:
        assert bar._bar is None and bar._line is not None
    monkeypatch.setattr(sys.stdout, "isatty", lambda: True, raising=False)
    with count_bar("evaluate", 1, "rows") as bar:
        assert bar._bar is not None


@pytest.mark.parametrize("term", ["dumb", "unknown", "DUMB"])
def test_a_dumb_terminal_gets_progress_lines_not_a_bar(monkeypatch, capsys, term):
    """``TERM=dumb`` (Emacs's shell): rich draws no bar there, and a search showed nothing but a blank line."""
    import sys

    import gnplace.progress
    from gnplace.progress import show_bar

    monkeypatch.setattr(sys.stderr, "isatty", lambda: True, raising=False)
    monkeypatch.setenv("TERM", "xterm-256color")
    assert show_bar()
    monkeypatch.setenv("TERM", term)
    assert not show_bar() and show_bar(True)
    monkeypatch.setattr(gnplace.progress, "LINE_EVERY_S", 0.0)
    graph, cluster = mlp_training_graph(layers=3, width=256, batch=32), load_cluster("k80x2")
    AnnealingPlacer(budget=40).place(graph, cluster, seed=3)
    err = capsys.readouterr().err
    assert err.splitlines()[-1].startswith(f"annealing {graph.name}: 40/40 evaluations (100%)")


def test_with_stderr_closed_progress_lines_go_nowhere_not_to_stdout(capsys, monkeypatch):
    monkeypatch.setattr("sys.stderr", None)  # `2>&-`: print(file=None) printed the lines on stdout
    line = ProgressLine("search", 10, "evaluations")
    line.update(0)
    line.update(5, force=True)
    assert capsys.readouterr().out == ""


def test_names_with_terminal_escapes_print_escaped_in_bars_lines_and_notes(recorded_consoles, capsys):
    """A graph named with ESC's sequences reached the terminal raw from a bar's text: rich's own console draws it."""
    import io

    from gnplace.progress import count_bar

    consoles = recorded_consoles
    name = "g\x1b]0;title\x07\nh"
    with evaluation_bar(f"annealing {name}", 10, enabled=True) as advance_to:
        advance_to(5)
    assert "annealing g\\x1b]0;title\\x07\\x0ah " in consoles[0].export_text()
    with count_bar("evaluate", 2, "rows", enabled=False) as bar:
        bar.note(f"reusing rows of {name}")
    assert capsys.readouterr().out == "reusing rows of g\\x1b]0;title\\x07\nh\n"  # a note keeps its newlines
    with count_bar("evaluate", 1, "rows", enabled=True) as bar:  # on rich's console of stdout
        bar.advance(name)
    out = capsys.readouterr().out
    assert "g\\x1b]0;title\\x07\\x0ah" in out and "\x07" not in out
    stream = io.StringIO()
    ProgressLine(f"annealing {name}", 10, "evaluations", stream=stream).update(5, note=name, force=True)
    assert stream.getvalue().count("\n") == 1 and "\x1b" not in stream.getvalue()


def test_a_note_names_the_stage_on_the_bar_and_ends_the_progress_line(recorded_consoles, capsys, monkeypatch):
    """Work in stages (``policy``: coarsening, greedy decodes, ...) shows which one runs, bar or line."""
    import sys

    import gnplace.progress

    with evaluation_bar("policy net", 10, enabled=True) as advance_to:
        advance_to(0, note="coarsening")
    assert "policy net: coarsening " in recorded_consoles[0].export_text()
    monkeypatch.setattr(gnplace.progress, "LINE_EVERY_S", 0.0)
    monkeypatch.setattr(sys.stderr, "isatty", lambda: False, raising=False)
    with evaluation_bar("policy net", 10) as advance_to:
        advance_to(4, note="polish")
    assert capsys.readouterr().err.splitlines()[-1].endswith("; polish")
    with evaluation_bar("policy net", 10, enabled=False) as advance_to:
        advance_to(4, note="polish")
    assert capsys.readouterr() == ("", "")


def test_a_count_past_its_total_grows_the_total_and_says_so_never_past_100_percent(line_clock, monkeypatch):
    """``policy`` planned 1,436 evaluations of graphs that took 2,582 on a memory-tight cluster: the lines read
    "2,582/1,436 evaluations (180%)" with no time left. The total grows to the count, and to a total the caller
    raises it to; once past the plan the line says by how much, and the time left is the rate's over what is left."""
    import rich.progress

    now, out = line_clock
    with evaluation_bar("policy g", 100) as advance_to:
        now[0] = 10.0
        advance_to(50, "auto")
        now[0] = 20.0
        advance_to(150, "memory repair")
        now[0] = 30.0
        advance_to(160, "polish", total=400)  # the caller knows 240 more are coming
        advance_to(170, "polish", total=300)  # a total never shrinks
    assert out.getvalue().splitlines()[-4:] == [
        "policy g: 50/100 evaluations (50%), 0:10 elapsed, about 0:10 left; auto",
        "policy g: 150/150 evaluations (100%), 0:20 elapsed; memory repair; 50 more than the 100 planned",
        "policy g: 160/400 evaluations (40%), 0:30 elapsed, about 0:45 left; polish; 300 more than the 100 planned",
        "policy g: 170/400 evaluations (42%), 0:30 elapsed, about 0:41 left; polish; 300 more than the 100 planned"]
    # the bar on a terminal: its task's total grows the same way
    updates = []
    update = rich.progress.Progress.update
    monkeypatch.setattr(rich.progress.Progress, "update",
                        lambda self, task, **kwargs: updates.append(kwargs) or update(self, task, **kwargs))
    with evaluation_bar("policy g", 100, enabled=True) as advance_to:
        for done, total in ((50, None), (150, None), (160, 400), (170, 300)):
            advance_to(done, "stage", total=total)
    assert [(u["completed"], u["total"]) for u in updates] == [(50, 100), (150, 150), (160, 400), (170, 400)]
    assert updates[-1]["description"] == "policy g: stage; 300 more than the 100 planned"


def test_a_count_bar_turned_off_writes_no_progress_line_however_long_it_runs(capsys, monkeypatch):
    """``enabled=False`` is no progress at all: not the lines a count bar writes every LINE_EVERY_S seconds off a
    terminal (here every update), only its notes."""
    import gnplace.progress
    from gnplace.progress import count_bar

    monkeypatch.setattr(gnplace.progress, "LINE_EVERY_S", 0.0)
    with count_bar("evaluate", 2, "rows") as bar:  # (stdout is no terminal here: lines on stderr)
        bar.advance("a")
    assert capsys.readouterr().err.startswith("evaluate: 1/2 rows (50%)")
    with count_bar("evaluate", 2, "rows", enabled=False) as bar:
        bar.advance("a")
        bar.advance("b")
        bar.note("a note")
    assert capsys.readouterr() == ("a note\n", "")


def test_a_line_of_no_work_at_all_reads_all_of_it_done():
    """A total of 0 (nothing to do) is all done: 100%, not 0% of nothing."""
    import io

    stream = io.StringIO()
    ProgressLine("evaluate", 0, "rows", stream=stream, clock=lambda: 0.0).update(0, force=True)
    assert stream.getvalue() == "evaluate: 0/0 rows (100%), 0:00 elapsed\n"


def test_work_done_before_a_run_keeps_the_time_elapsed_since_the_run_began():
    import io

    now = [0.0]
    out = io.StringIO()
    line = ProgressLine("evaluate", 100, "rows", every_s=10, stream=out, clock=lambda: now[0])
    line.update(0)
    now[0] = 5.0
    line.done_before(60)  # rows saved by an earlier run, found 5 s in
    now[0] = 25.0
    line.update(70)
    assert out.getvalue().startswith("evaluate: 70/100 rows (70%), 0:25 elapsed")
