import numpy as np
import pytest

from gnplace.execute.memory import DeviceOutOfMemory, Ledger


def test_a_storage_stays_while_any_value_sharing_it_is_held():
    """A view (or an in-place result) keeps the bytes of what it shows: freeing the maker first frees nothing."""
    ledger = Ledger(2)
    ledger.hold(0, 10)  # a parameter: all step
    ledger.make("x", 0, 100)
    ledger.share("t(x)", "x")
    ledger.share("t(t(x))", "t(x)")  # a view of a view shares the one storage
    ledger.make("copy of x", 1, 100)
    ledger.release("x")
    ledger.release("t(x)")
    assert ledger.live.tolist() == [110.0, 100.0]
    ledger.release("t(t(x))")
    ledger.release("copy of x")
    ledger.release("copy of x")  # released already: nothing
    assert ledger.live.tolist() == [10.0, 0.0] and ledger.peak.tolist() == [110.0, 100.0]


def test_sharing_what_is_not_counted_by_storage_adds_nothing():
    """A view of a parameter, a buffer or a constant: their bytes are held (or not counted) elsewhere."""
    ledger = Ledger(1)
    ledger.share("t(weight)", "weight")
    ledger.release("t(weight)")
    assert ledger.live.tolist() == [0.0] and ledger.peak.tolist() == [0.0]


def test_capacity_is_checked_as_bytes_arrive_or_on_demand():
    ledger = Ledger(2, capacity=np.array([100.0, 50.0]))
    ledger.hold(1, 60, check=False)  # the parameters: all counted first, then checked together
    with pytest.raises(DeviceOutOfMemory) as info:
        ledger.check()
    assert info.value.device == 1 and info.value.needed == 60
    ledger.make("x", 0, 100)  # exactly full is fine
    with pytest.raises(DeviceOutOfMemory, match="device 0 out of memory"):
        ledger.make("y", 0, 1)
