import json
import re

import numpy as np
import pytest

from gnplace.cluster import load_cluster
from gnplace.exceptions import InvalidArgument, InvalidCheckpoint
from gnplace.execute.base import RealStepTimer
from gnplace.execute.journal import JOURNAL_FORMAT, MeasurementJournal
from gnplace.sim.timer import StepResult

IDENTITY = {"graph": "g1", "timer": "local", "settings": {"repeats": 5, "devices": ["cpu", "cpu"]}}


class Counting(RealStepTimer):
    """A real timer whose steps are made-up numbers: 1 ms more for every placement run."""

    runs = 0

    def _measure(self, graph, cluster, placement):
        self.runs += 1
        n = cluster.num_devices
        busy = np.arange(n, dtype=np.float64) / 3.0  # not short decimals: they must read back bit for bit
        return StepResult(1e-3 * self.runs + 1e-17, busy, np.full(n, 2.5e9), cluster.memory, cluster.device_names)


@pytest.fixture(scope="module")
def step():
    from gnplace.execute.examples import tiny
    from gnplace.importers.torch import import_step

    return import_step(*tiny())


def _placements(graph, count):
    rng = np.random.default_rng(0)
    return [rng.integers(0, 2, graph.num_ops) for _ in range(count)]


def _journaled(step, path, placements):
    """A fresh timer's measurements of ``placements`` on k80x2, journaled in ``path`` (closed); the timer."""
    timer = Counting(step)
    timer.attach(MeasurementJournal(path, IDENTITY))
    for placement in placements:
        timer.time(step.graph, load_cluster("k80x2"), placement)
    timer.journal.close()
    return timer


def test_a_resumed_timer_answers_from_the_journal_with_the_same_numbers(step, tmp_path):
    graph, cluster, path = step.graph, load_cluster("k80x2"), tmp_path / "m.jsonl"
    first = Counting(step)
    first.attach(MeasurementJournal(path, IDENTITY))
    placements = _placements(graph, 3)
    measured = [first.time(graph, cluster, p) for p in placements]
    first.journal.close()
    assert first.runs == 3 and len(path.read_text().splitlines()) == 4  # the header and one line each

    again = Counting(step)
    journal = MeasurementJournal(path, IDENTITY, resume=True)
    assert len(journal) == 3
    again.attach(journal)
    for placement, before in zip(placements, measured):
        replayed = again.time(graph, cluster, placement)
        assert replayed.step_time == before.step_time  # exactly: a resumed search takes the same path
        for field in ("busy_time", "peak_memory", "memory_capacity"):
            assert np.array_equal(getattr(replayed, field), getattr(before, field))
        assert replayed.device_names == before.device_names
    assert again.runs == 0
    new = again.time(graph, cluster, [1] * graph.num_ops)  # one it never measured: run, and kept
    assert again.runs == 1 and new.step_time == pytest.approx(1e-3)
    journal.close()
    assert len(MeasurementJournal(path, IDENTITY, resume=True)) == 4


def test_a_line_a_kill_cut_short_is_dropped_and_overwritten(step, tmp_path):
    graph, cluster, path = step.graph, load_cluster("k80x2"), tmp_path / "m.jsonl"
    timer = Counting(step)
    timer.attach(MeasurementJournal(path, IDENTITY))
    a, b, c = _placements(graph, 3)
    timer.time(graph, cluster, a)
    timer.time(graph, cluster, b)
    timer.journal.close()
    text = path.read_bytes()
    path.write_bytes(text[:-20])  # b's line, cut short
    journal = MeasurementJournal(path, IDENTITY, resume=True)
    assert len(journal) == 1
    assert path.read_bytes() == text[:-20]  # reading changes nothing
    again = Counting(step)
    again.attach(journal)
    again.time(graph, cluster, b)
    again.time(graph, cluster, c)
    journal.close()
    lines = path.read_text().splitlines()
    assert len(lines) == 4 and all(json.loads(line) for line in lines)
    assert len(MeasurementJournal(path, IDENTITY, resume=True)) == 3


def test_a_new_run_does_not_drop_measurements_and_starts_an_empty_journal_afresh(step, tmp_path):
    graph, cluster, path = step.graph, load_cluster("k80x2"), tmp_path / "m.jsonl"
    timer = _journaled(step, path, [[0] * graph.num_ops])
    saved = path.read_bytes()
    with pytest.raises(InvalidArgument, match=r"holds a run's measurements \(m.jsonl\): resume it \(--resume\), or use another -o"):
        MeasurementJournal(path, IDENTITY)
    assert path.read_bytes() == saved
    path.write_text(json.dumps({"format": JOURNAL_FORMAT, "identity": {"other": 1}}) + "\n")  # a header alone
    journal = MeasurementJournal(path, IDENTITY)
    assert len(journal) == 0
    journal.append((cluster.fingerprint(), np.zeros(graph.num_ops, dtype=np.int64).tobytes()),
                   timer.time(graph, cluster, [0] * graph.num_ops))
    journal.close()
    assert json.loads(path.read_text().splitlines()[0])["identity"] == IDENTITY


@pytest.mark.parametrize("damage, message", [
    (lambda text: b"not json\n" + text, "not a gnplace measurement journal"),
    (lambda text: text.replace(b'"devices": "', b'"devices": "!!', 1), "line 2 is damaged"),
    (lambda text: text.replace(b'"step_s"', b'"stop_s"', 1), "line 2 is damaged"),
    (lambda text: re.sub(rb'"devices": "[^"]*"', b'"devices": null', text, count=1), "line 2 is damaged"),
    (lambda text: re.sub(rb'"devices": "[^"]*"', b'"devices": 7', text, count=1), "line 2 is damaged"),
    (lambda text: text + b"[" * 200_000 + b"\n", "line 4 is damaged"),  # a RecursionError traceback
    (lambda text: b"[" * 200_000 + b"\n" + text, "not a gnplace measurement journal"),
])
def test_a_damaged_journal_is_one_clear_error_and_stays_as_it_was(step, tmp_path, damage, message):
    path = tmp_path / "m.jsonl"
    _journaled(step, path, _placements(step.graph, 2))
    path.write_bytes(damage(path.read_bytes()))
    saved = path.read_bytes()
    with pytest.raises(InvalidCheckpoint, match=message) as err:
        MeasurementJournal(path, IDENTITY, resume=True)
    assert "\n" not in str(err.value) and path.read_bytes() == saved


def test_another_runs_journal_is_refused_naming_what_differs(step, tmp_path):
    path = tmp_path / "m.jsonl"
    _journaled(step, path, [[0] * step.graph.num_ops])
    other = {**IDENTITY, "settings": {**IDENTITY["settings"], "repeats": 7}}
    with pytest.raises(InvalidCheckpoint, match=r"another run's measurements \(settings.repeats differ\)"):
        MeasurementJournal(path, other, resume=True)
    with pytest.raises(InvalidCheckpoint, match=r"\(graph differ\)"):
        MeasurementJournal(path, {**IDENTITY, "graph": "g2"}, resume=True)
    (tmp_path / "folder").mkdir()
    with pytest.raises(InvalidCheckpoint, match="not a measurement journal file"):
        MeasurementJournal(tmp_path / "folder", IDENTITY, resume=True)


def test_a_detached_journal_keeps_nothing_more(step, tmp_path):
    graph, cluster, path = step.graph, load_cluster("k80x2"), tmp_path / "m.jsonl"
    timer = Counting(step)
    journal = MeasurementJournal(path, IDENTITY)
    timer.attach(journal)
    a, b = _placements(graph, 2)
    timer.time(graph, cluster, a)
    timer.attach(None)
    timer.time(graph, cluster, b)
    timer.measure(graph, cluster, a)  # afresh, past the cache: not the search's measurement either
    journal.close()
    assert len(MeasurementJournal(path, IDENTITY, resume=True)) == 1 and timer.runs == 3


def test_a_line_whose_devices_inflate_past_the_limit_is_damaged_not_inflated(step, tmp_path, monkeypatch):
    """A shared journal's 2.8 MB line inflated to 2 GiB of device bytes: 4.4 GB and two minutes, then read."""
    import base64
    import zlib

    from gnplace.execute import journal

    monkeypatch.setattr(journal, "MAX_DEVICE_BYTES", 8 * 1000)  # the limit's 160 MB made small
    path = tmp_path / "m.jsonl"
    _journaled(step, path, _placements(step.graph, 1))
    for devices in (b"\0" * 8 * 1001, b"\0" * 8 * 1000):
        bomb = base64.b64encode(zlib.compress(devices)).decode()
        text = re.sub(rb'"devices": "[^"]*"', f'"devices": "{bomb}"'.encode(), path.read_bytes(), count=1)
        (tmp_path / "bomb.jsonl").write_bytes(text)
        if len(devices) > journal.MAX_DEVICE_BYTES:
            with pytest.raises(InvalidCheckpoint, match=r"line 2 is damaged \(ValueError\)"):
                MeasurementJournal(tmp_path / "bomb.jsonl", IDENTITY, resume=True)
        else:
            assert len(MeasurementJournal(tmp_path / "bomb.jsonl", IDENTITY, resume=True)) == 1
    cut = base64.b64encode(zlib.compress(b"\0" * 80)[:-6]).decode()  # deflated data cut short: damaged too
    (tmp_path / "cut.jsonl").write_bytes(re.sub(rb'"devices": "[^"]*"', f'"devices": "{cut}"'.encode(),
                                                path.read_bytes(), count=1))
    with pytest.raises(InvalidCheckpoint, match=r"line 2 is damaged"):
        MeasurementJournal(tmp_path / "cut.jsonl", IDENTITY, resume=True)


def test_a_line_the_disk_has_no_room_for_names_the_file_and_is_taken_back(step, tmp_path, monkeypatch):
    import errno
    import os

    from gnplace.execute import journal as journal_module

    graph, cluster, path = step.graph, load_cluster("k80x2"), tmp_path / "m.jsonl"
    timer = Counting(step)
    timer.attach(MeasurementJournal(path, IDENTITY))
    a, b, c = _placements(graph, 3)
    timer.time(graph, cluster, a)
    before = path.read_bytes()
    fsync = os.fsync

    def full(fd):
        raise OSError(errno.ENOSPC, "No space left on device")  # (a file's flush or sync names no file)

    monkeypatch.setattr(journal_module.os, "fsync", full)
    with pytest.raises(OSError) as caught:
        timer.time(graph, cluster, b)
    assert (caught.value.errno, caught.value.filename) == (errno.ENOSPC, str(path))
    assert path.read_bytes() == before  # b's line taken back
    monkeypatch.setattr(journal_module.os, "fsync", fsync)
    timer.time(graph, cluster, c)  # space freed: the run goes on from what was saved
    timer.journal.close()
    assert len(MeasurementJournal(path, IDENTITY, resume=True)) == 2


def test_a_cut_line_longer_than_the_next_one_is_dropped_whole(step, tmp_path):
    """The append after a resume cuts the file back to its whole lines before writing: a mutant that only wrote over
    the cut line left the rest of a longer one behind the new line (its next append then damaged the file)."""
    graph, cluster, path = step.graph, load_cluster("k80x2"), tmp_path / "m.jsonl"
    a, b = _placements(graph, 2)
    _journaled(step, path, [a])
    whole = path.read_bytes()
    path.write_bytes(whole + b'{"cluster": "' + b"x" * 2000)  # a kill in a line far longer than the next
    journal = MeasurementJournal(path, IDENTITY, resume=True)
    timer = Counting(step)
    timer.attach(journal)
    timer.time(graph, cluster, b)
    journal.close()
    text = path.read_bytes()
    assert text.startswith(whole) and text.endswith(b"\n") and text.count(b"\n") == 3


def test_a_journal_counts_and_hands_on_what_was_appended_to_it(step, tmp_path):
    """What a timer appended is the journal's too: another timer attached to it later answers from it (a mutant that
    wrote the line but kept no result passed)."""
    graph, cluster, path = step.graph, load_cluster("k80x2"), tmp_path / "m.jsonl"
    (a,) = _placements(graph, 1)
    journal = MeasurementJournal(path, IDENTITY)
    first = Counting(step)
    first.attach(journal)
    measured = first.time(graph, cluster, a)
    assert len(journal) == 1
    second = Counting(step)
    second.attach(journal)
    assert second.time(graph, cluster, a) is measured and second.runs == 0
    journal.close()
