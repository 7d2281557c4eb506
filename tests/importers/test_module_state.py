"""What a recording does with the module's own state (:mod:`gnplace.importers.module_state`)."""

from __future__ import annotations

import pytest
import torch

from gnplace.exceptions import UnsupportedGraph
from gnplace.importers.module_state import (
    carry_reassigned_buffers,
    memory_of,
    refuse_state_read_from_outside,
    restore_attributes,
    saved_attributes,
    state_names,
)
from gnplace.importers.torch import import_step


class _Tied(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.a = torch.nn.Linear(3, 3)
        self.b = self.a  # one module under two names: its parameters are tied
        self.norm = torch.nn.BatchNorm1d(3)
        self.frozen = torch.nn.Linear(3, 3)
        self.frozen.requires_grad_(False)  # wholly: a leaf with a trained parameter keeps the rest under its key


def test_state_names_name_the_tied_parameters_and_the_state_no_update_writes():
    tied, untrained = state_names(_Tied())
    assert tied == {"b.weight": "a.weight", "b.bias": "a.bias"}
    assert untrained[:2] == ["frozen.weight", "frozen.bias"] and not {"a.weight", "b.weight"} & set(untrained)
    assert "norm.running_mean" not in untrained  # batch norm's statistics go with its weight, under its one key


def test_saved_attributes_are_put_back_exactly_and_what_recording_added_is_dropped():
    net = torch.nn.Linear(2, 2)
    net.last = None
    net.plain = plain = torch.zeros(1)  # a plain tensor attribute (spectral_norm's weight): gets its tensor back
    saved = saved_attributes(net)
    weight = net.weight
    net.plain = torch.ones(1)
    net.last = torch.zeros(1)  # set to a tensor while recording: gets its None back
    net.extra = torch.ones(1)  # a tensor attribute the recording added: dropped
    net._parameters["weight"] = torch.nn.Parameter(torch.zeros(2, 2))
    net.register_buffer("made", torch.zeros(1))
    restore_attributes(saved)
    assert net.last is None and not hasattr(net, "extra") and net.weight is weight and "made" not in net._buffers
    assert net.plain is plain


def test_memory_of_names_a_tensors_storage_and_none_for_a_sparse_one():
    x = torch.zeros(4)
    assert memory_of(x) == memory_of(x.view(2, 2)) and memory_of(x) != memory_of(x.clone())
    assert memory_of(torch.zeros(2, 2).to_sparse()) is None


def test_a_buffer_the_forward_replaces_is_carried_in_place_and_one_of_another_shape_is_refused():
    net = torch.nn.Module()
    net.register_buffer("ema", torch.zeros(3))
    fake = net.ema
    net.ema = torch.ones(3)
    carry_reassigned_buffers(net, {"ema": fake})
    assert torch.equal(fake, torch.ones(3))
    net.ema = torch.ones(4)
    with pytest.raises(UnsupportedGraph, match=r"replaces buffer 'ema' \(\[3\] torch.float32\) with shape \[4\]"):
        carry_reassigned_buffers(net, {"ema": fake})


def test_a_parameter_read_from_outside_the_call_is_refused_naming_it():
    net = torch.nn.Linear(3, 1)
    held = net.weight
    with pytest.raises(UnsupportedGraph, match=r"read its parameter 'weight' as a tensor held from outside"):
        import_step(net, (torch.randn(2, 3),), loss=lambda out: out.sum() + held.square().sum())
    refuse_state_read_from_outside(net, [], {"weight": net.weight})  # no op read it: nothing to refuse


def test_a_buffer_replaced_by_one_of_another_dtype_is_refused_not_cast():
    """A float64 value of the same shape would be cast into the float32 buffer by copy_, silently."""
    net = torch.nn.Module()
    net.register_buffer("ema", torch.zeros(3))
    fake = net.ema
    net.ema = torch.ones(3, dtype=torch.float64)
    with pytest.raises(UnsupportedGraph, match=r"replaces buffer 'ema' \(\[3\] torch.float32\) with shape \[3\] "
                                               r"torch.float64"):
        carry_reassigned_buffers(net, {"ema": fake})
    assert torch.equal(fake, torch.zeros(3))


class _OwnAndChildren(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.scale = torch.nn.Parameter(torch.ones(3))  # a trainable parameter of a module with children
        self.register_buffer("count", torch.zeros(1))
        self.fc = torch.nn.Linear(3, 3)


def test_the_buffers_of_a_module_with_children_and_a_parameter_of_its_own_are_listed():
    """Only a leaf keeps its buffers under its parameter's key: a module with children may be split."""
    tied, untrained = state_names(_OwnAndChildren())
    assert tied == {} and untrained == ["count"]
