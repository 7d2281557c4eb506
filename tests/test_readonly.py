"""Graphs, clusters and placements keep their arrays read-only through pickling (as a worker process gets them)."""

from __future__ import annotations

import pickle

import numpy as np
import pytest

from gnplace.cluster import load_cluster
from gnplace.placement import Placement
from gnplace.readonly import ReadOnlyArrays, ReadOnlyAttributes, read_only
from gnplace.toy import layered_graph


def _arrays(value, path="") -> dict[str, np.ndarray]:
    """Every array held in ``vars(value)``, directly or in a tuple, by its path."""
    found: dict[str, np.ndarray] = {}
    items = vars(value).items() if hasattr(value, "__dict__") else enumerate(value)
    for key, item in items:
        if isinstance(item, np.ndarray):
            found[f"{path}{key}"] = item
        elif isinstance(item, tuple):
            found |= _arrays(item, f"{path}{key}.")
        elif key == "cost_s":  # a graph's measured seconds, by device kind
            found |= {f"{path}{key}.{kind}": array for kind, array in item.items()}
    return found


def test_an_unpickled_graph_cluster_and_placement_hold_only_read_only_arrays():
    graph, cluster = layered_graph(12, width=3, seed=1), load_cluster("k80x2")
    graph = graph.replace(cost_s={"k80": np.full(12, 1e-3)})  # (came back writable)
    graph.out_csr, graph.in_csr, graph.topological_order()  # cached arrays travel with the graph
    placement = Placement(np.arange(12) % 2, cluster)
    for value in (graph, cluster, placement):
        before = _arrays(value)
        assert before and not any(a.flags.writeable for a in before.values())
        again = pickle.loads(pickle.dumps(value))
        after = _arrays(again)
        assert after.keys() == before.keys()
        writable = [path for path, array in after.items() if array.flags.writeable]
        assert not writable, f"{type(value).__name__}: {writable} came back writable"
        with pytest.raises(ValueError, match="read-only"):
            next(iter(after.values()))[0] = 0


def test_a_read_only_dict_refuses_changes_and_pickles_and_copies_as_one():
    import copy

    from gnplace.readonly import ReadOnlyDict

    values = ReadOnlyDict({"a": np.zeros(2)})
    with pytest.raises(TypeError, match="this mapping is read-only"):
        values["b"] = np.zeros(2)
    with pytest.raises(TypeError, match="read-only"):
        values |= {"b": 1}
    for again in (pickle.loads(pickle.dumps(values)), copy.deepcopy(values)):
        assert type(again) is ReadOnlyDict and list(again) == ["a"]
        with pytest.raises(TypeError, match="read-only"):
            again.popitem()
    assert copy.copy(values) is values


def test_read_only_reaches_arrays_in_tuples_and_lists_and_leaves_dicts_alone():
    inner, listed, kept = np.zeros(2), np.zeros(2), np.zeros(2)
    read_only((inner, [listed], {"meta": kept}, 3))
    assert not inner.flags.writeable and not listed.flags.writeable and kept.flags.writeable


class Holder(ReadOnlyArrays):
    """A class of its own that mixes :class:`ReadOnlyArrays` in (module level: pickle finds it by name)."""

    def __init__(self) -> None:
        self.name, self.values, self.meta = "h", read_only(np.arange(3)), {"a": 1}


def test_the_mixin_restores_every_attribute():
    again = pickle.loads(pickle.dumps(Holder()))
    assert again.name == "h" and again.meta == {"a": 1} and again.values.tolist() == [0, 1, 2]


class Fields(ReadOnlyAttributes):
    """A class of its own that mixes :class:`ReadOnlyAttributes` in."""

    _fields = ("a", "b")

    def __init__(self) -> None:
        self.a = 1
        self._cache = 0  # private: set whenever
        self.b = 2


def test_read_only_attributes_are_bound_once_and_private_ones_whenever():
    value = Fields()
    value._cache = 5
    del value._cache
    for name in ("a", "b", "c"):
        with pytest.raises(AttributeError, match=rf"^Fields's {name} is read-only$"):
            setattr(value, name, 3)
        with pytest.raises(AttributeError, match=rf"^Fields's {name} is read-only$"):
            delattr(value, name)
    assert (value.a, value.b) == (1, 2)
