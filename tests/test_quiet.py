"""``gnplace.quiet``: loggers, warning filters and stdout silenced by overlapping uses come back as they were.

Overlapping uses (two threads, or two libraries' silencings one inside the other's span) are written here as the
interleavings a thread switch makes: in, in, out, out in crossed order.
"""

from __future__ import annotations

import logging
import sys
import threading
import warnings

import pytest

from gnplace.callbacks import quiet_lightning
from gnplace.quiet import ignored_warnings, logger_at_error, quietly, stdout_discarded


@pytest.fixture
def filters_kept():
    """The process's warning filters, put back after the test whatever it does."""
    with warnings.catch_warnings():
        yield


def test_a_logger_quieted_by_two_crossed_uses_ends_at_its_own_level():
    log = logging.getLogger("gnplace.test.quiet")
    log.setLevel(logging.INFO)
    first, second = logger_at_error("gnplace.test.quiet"), logger_at_error("gnplace.test.quiet")
    first.__enter__()
    second.__enter__()
    first.__exit__(None, None, None)
    assert log.level == logging.ERROR  # the second use is still inside
    second.__exit__(None, None, None)
    assert log.level == logging.INFO


def test_crossed_silencings_of_different_filters_leave_the_filter_list_as_it_was(filters_kept):
    # device_map's comparison (every warning ignored) and a placer's fit (Lightning's warnings) in two threads:
    # with saved and restored copies of the list, the one leaving last put back the other's filter for good
    before = list(warnings.filters)
    everything, lightning = quietly(), quiet_lightning()
    everything.__enter__()
    lightning.__enter__()
    everything.__exit__(None, None, None)
    with pytest.warns(UserWarning, match="still shown"):  # the first's ignore-all is out already
        warnings.warn("still shown", UserWarning, stacklevel=1)
    lightning.__exit__(None, None, None)
    assert warnings.filters == before


def test_a_filter_the_caller_had_before_is_kept(filters_kept):
    warnings.filterwarnings("ignore", message="the caller's own")
    before = list(warnings.filters)
    with ignored_warnings(message="the caller's own"):
        pass
    assert warnings.filters == before


def test_warnings_inside_are_ignored():
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        with ignored_warnings(message="quiet please"):
            warnings.warn("quiet please", UserWarning, stacklevel=1)
        warnings.warn("quiet please", UserWarning, stacklevel=1)
    assert [str(w.message) for w in caught] == ["quiet please"]  # the one after the block


def test_stdout_discarded_by_two_threads_at_once_comes_back():
    real = sys.stdout
    inside, leave = threading.Barrier(2), threading.Event()

    def use() -> None:
        with stdout_discarded():
            inside.wait()
            print("dropped")
            leave.wait()

    threads = [threading.Thread(target=use) for _ in range(2)]
    for t in threads:
        t.start()
    leave.set()
    for t in threads:
        t.join(timeout=30)
    assert sys.stdout is real


def test_stdout_moved_by_someone_else_meanwhile_is_left_where_they_put_it():
    real, theirs = sys.stdout, open(__file__)  # noqa: SIM115 - any object will do; never written to
    try:
        with stdout_discarded():
            sys.stdout = theirs
        assert sys.stdout is theirs
    finally:
        sys.stdout = real
        theirs.close()
