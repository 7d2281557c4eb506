import re
import warnings

import numpy as np
import pytest
import torch
from torch.overrides import TorchFunctionMode
from torch.utils._pytree import tree_flatten, tree_map

from gnplace.cluster import cluster_from_dict, load_cluster
from gnplace.exceptions import InvalidArgument
from gnplace.execute.device_map import (
    ACCELERATE_MODES,
    accelerate_device_map,
    compare_device_maps,
    cross_device_reads,
    device_map_values,
    from_device_map,
    module_paths,
    no_split_module_classes,
    require_parameters,
    to_device_map,
    transformers_device_map,
)
from gnplace.importers.torch import from_module
from gnplace.placement import Placement
from gnplace.sim.simulator import simulate


def _net():
    torch.manual_seed(0)
    return torch.nn.Sequential(*[torch.nn.Linear(16, 16) for _ in range(4)])


def _graph(net):
    return from_module(net, (torch.randn(4, 16),), loss=lambda y: y.sum())


def test_device_map_round_trips_a_module_level_placement():
    net = _net()
    graph = _graph(net)
    cluster = load_cluster("k80x2")
    wanted = {"0": 0, "1": 0, "2": 1, "3": 1}
    placement = from_device_map(graph, cluster, wanted)
    assert to_device_map(graph, placement) == wanted
    assert to_device_map(graph, Placement(np.zeros(graph.num_ops, dtype=np.int64), cluster)) == {"": 0}
    with pytest.raises(InvalidArgument, match="no device"):
        from_device_map(graph, cluster, {"": 5})


@pytest.mark.parametrize("device_map, message", [
    ({"4": 1, "": 0}, "key '4' names no module of graph"),  # a typo was ignored: every node on device 0
    ({"0.weigth": 1, "": 0}, "key '0.weigth' names no module"),
    ({"": True}, "value True is no device"),  # read as GPU 1
    ({"": 1.0}, "value 1.0 is no device"),
    ({"": "cuda:x"}, "value 'cuda:x' is no device"),  # a ValueError traceback
    ({}, "at least one, got {}"),  # every node on device 0
    ([("", 0)], "must be a mapping"),  # an AttributeError
])
def test_from_device_map_refuses_keys_and_values_it_cannot_read(device_map, message):
    graph = _graph(_net())
    with pytest.raises(InvalidArgument, match=re.escape(message)):
        from_device_map(graph, load_cluster("k80x2"), device_map)
    placed = from_device_map(graph, load_cluster("k80x2"), {"0.weight": "cuda:1", "": np.int64(0)})
    assert placed.devices.max() == 1


def test_from_device_map_reads_torch_devices_and_a_bare_cuda_as_accelerate_does():
    """torch.device("cuda:1") and "cuda", which accelerate's dispatch_model takes, were "no device of 'k80x2'"."""
    graph = _graph(_net())
    cluster = load_cluster("k80x2")
    want = from_device_map(graph, cluster, {"0": 0, "1": 1, "2": 1, "3": 0})
    for device_map in ({"0": "cuda", "1": torch.device("cuda:1"), "2": torch.device("cuda", 1), "3": 0},
                       {"0": torch.device("cuda"), "1": "cuda:1", "2": 1, "3": "cuda:0"}):
        assert from_device_map(graph, cluster, device_map) == want
    with pytest.raises(InvalidArgument, match=r"value 'cuda:2' is no device of 'k80x2'"):
        from_device_map(graph, cluster, {"": torch.device("cuda:2")})


def test_to_and_from_device_map_refuse_arguments_of_the_wrong_kind_in_one_line():
    """Each was an AttributeError or a TypeError from inside ('node_names', 'devices', 'int' + 'str', 'modules')."""
    graph = _graph(_net())
    cluster = load_cluster("k80x2")
    placement = Placement(np.zeros(graph.num_ops, dtype=np.int64), cluster)
    with pytest.raises(InvalidArgument, match=r"^graph must be an OpGraph"):
        to_device_map(None, placement)
    with pytest.raises(InvalidArgument, match=r"^to_device_map's root must be a submodule path \(a str, '' for the "
                                              r"module itself\), got 3$"):
        to_device_map(graph, placement, root=3)
    with pytest.raises(InvalidArgument, match=r"^to_device_map's root must be a submodule path .*, got None$"):
        to_device_map(graph, placement, root=None)
    with pytest.raises(InvalidArgument, match=r"^to_device_map's module must be the torch\.nn\.Module .*, got 'net'$"):
        to_device_map(graph, placement, module="net")
    with pytest.raises(InvalidArgument, match=r"^graph must be an OpGraph"):
        from_device_map(None, cluster, {"": 0})
    for given in (None, "k80x2"):
        with pytest.raises(InvalidArgument, match=r"^cluster must be a Cluster"):
            from_device_map(graph, given, {"": 0})


def test_a_module_other_than_the_graphs_is_refused_in_one_line():
    """Another model's module was taken as it was: its ``_no_split_modules`` were kept whole, or none of the graph's."""
    graph = _graph(_net())
    placement = Placement(np.zeros(graph.num_ops, dtype=np.int64), load_cluster("k80x2"))
    with pytest.raises(InvalidArgument, match=r"^to_device_map's module is not the one graph '\w+' was imported from: "
                                              r"\d+ of the graph's parameters are none of its own, e\.g\. '"):
        to_device_map(graph, placement, module=torch.nn.Linear(3, 3))
    assert to_device_map(graph, placement, module=_net()) == to_device_map(graph, placement)


def test_a_module_grown_since_the_import_is_refused_in_one_line():
    """A module holding trained parameters the graph lacks was taken: a no-split block only it holds was merged up to
    the root, putting the whole model on one device. Extra frozen parameters are not checked."""
    graph = _graph(_net())
    placement = Placement(np.zeros(graph.num_ops, dtype=np.int64), load_cluster("k80x2"))
    grown = _net().append(torch.nn.Linear(16, 2))
    with pytest.raises(InvalidArgument, match=r"^to_device_map's module is not the one graph '\w+' was imported from: "
                                              r"it holds 2 trained parameters the graph has none of, e\.g\. '4\.bias' "
                                              r"\(changed since the import\?\); import it again, or give the module"):
        to_device_map(graph, placement, module=grown)
    with pytest.raises(InvalidArgument, match=r"^compare_device_maps's module is not the one graph"):
        compare_device_maps(graph, placement.cluster, placement, module=grown)
    grown[4].requires_grad_(False)
    assert to_device_map(graph, placement, module=grown) == to_device_map(graph, placement)


class HasAnUpdateModule(torch.nn.Module):
    """A top-level module named ``update`` (a gate): its forward ops are ``update/addmm``, as update nodes are."""

    def __init__(self):
        super().__init__()
        self.update, self.out = torch.nn.Linear(8, 8), torch.nn.Linear(8, 1)
        self.scale = torch.nn.Parameter(torch.ones(8))

    def forward(self, x):
        return self.out(torch.sigmoid(self.update(x)) * self.scale).sum()


def test_a_module_named_update_is_no_parameter():
    """Its forward op update/addmm was read as a parameter 'addmm': a key of the map and a vote that sent the root's
    own 'scale' to device 0 while its update ran on 1; from_device_map ran update/addmm where 'addmm' said. (The root's
    own 'scale' is on the main device, 0, where accelerate's root hook moves it, in the map and its simulation alike.)"""
    torch.manual_seed(0)
    graph = from_module(HasAnUpdateModule(), (torch.randn(4, 8),))
    cluster = load_cluster("k80x2")
    names = graph.node_names
    devices = np.array([1 if n in ("update/scale", "out/addmm") or n.startswith("update/out.") else 0 for n in names])
    exported = to_device_map(graph, Placement(devices, cluster))
    assert "addmm" not in exported and exported["scale"] == 0
    assert from_device_map(graph, cluster, exported).devices[names.index("update/scale")] == 0
    placed = from_device_map(graph, cluster, {"out": 0, "update": 1, "scale": 0})
    assert placed.devices[names.index("update/addmm")] == 1


def test_accelerate_runs_a_cpu_entry_beside_a_gpu_on_the_gpu_and_never_trains_it():
    """What "cpu" means to ``dispatch_model`` (and so ``from_pretrained``): beside a GPU, an offload. On a CPU-only
    machine ``torch.device("cpu")`` plays the GPU (it is not the string "cpu" to accelerate, so it is the main
    device): module 1's hook runs it there, its weights kept in CPU memory (the model's on meta), and a training
    step leaves them as they were. Without a GPU in the map, "cpu" is where the module runs."""
    from accelerate import dispatch_model

    net = _net()
    before = net[1].weight.detach().clone()
    dispatch_model(net, {"0": torch.device("cpu"), "1": "cpu", "2": torch.device("cpu"), "3": torch.device("cpu")})
    hook = net[1]._hf_hook
    assert hook.offload and hook.execution_device == net._hf_hook.execution_device == torch.device("cpu")
    assert net[1].weight.device.type == "meta" and not net[0]._hf_hook.offload
    trained = [p for p in net.parameters() if p.device.type != "meta"]
    net(torch.randn(4, 16)).sum().backward()
    torch.optim.SGD(trained, lr=0.1).step()
    assert torch.equal(hook.weights_map["weight"], before) and net[1].weight.grad is None
    on_cpu = _net()
    dispatch_model(on_cpu, dict.fromkeys(("0", "1", "2", "3"), "cpu"), force_hooks=True)
    assert not on_cpu[1]._hf_hook.offload and on_cpu[1]._hf_hook.execution_device == "cpu"


def test_a_cpu_entry_beside_a_gpu_runs_on_the_main_gpu_its_updates_on_the_cpu():
    """from_device_map ran a "cpu" module of a map with a GPU on the CPU; accelerate runs it on its main GPU,
    its parameters offloaded to the CPU (their update nodes stay there, so their bytes cross the link)."""
    graph = _graph(_net())
    cluster = load_cluster("cpu_gpu")  # device 0 the CPU, 1 the GPU ("cpu", 0 to accelerate)
    placed = from_device_map(graph, cluster, {"0": 0, "1": "cpu", "2": 0, "3": 0})
    names = graph.node_names
    assert {int(placed.devices[i]) for i, n in enumerate(names) if n.startswith("update/1.")} == {0}
    assert {int(d) for n, d in zip(names, placed.devices) if not n.startswith("update/1.")} == {1}
    first = from_device_map(graph, cluster, {"0": "cpu", "1": 0, "2": 0, "3": 0})  # the inputs too: on the GPU
    assert int(first.devices[names.index("input/0")]) == 1
    on_cpu = from_device_map(graph, cluster, {"0": "cpu", "1": "cpu", "2": "cpu", "3": "cpu"})
    assert set(on_cpu.devices.tolist()) == {0}  # no GPU in the map: "cpu" runs on the CPU
    on_gpu = simulate(graph, cluster, from_device_map(graph, cluster, {"": 0})).peak_memory
    offloaded = simulate(graph, cluster, placed).peak_memory
    assert offloaded[0] > 0 and offloaded[1] < on_gpu[1]  # module 1's parameters are held in the CPU's memory


def test_to_device_map_warns_of_a_cpu_entry_beside_a_gpu():
    """A placement running module 1 on cpu_gpu's CPU has no map accelerate runs as it does: its map says so."""
    graph = _graph(_net())
    cluster = load_cluster("cpu_gpu")
    devices = np.array([0 if module.startswith("1") else 1 for module in module_paths(graph)])
    with pytest.warns(UserWarning, match=r"puts 1 module\(s\) on \"cpu\" beside GPU 0 \(\['1'\]\).*never trained"):
        assert to_device_map(graph, Placement(devices, cluster)) == {"0": 0, "1": "cpu", "2": 0, "3": 0}
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert to_device_map(graph, Placement(np.zeros(graph.num_ops, dtype=np.int64), cluster)) == {"": "cpu"}


def test_the_cpu_entry_warning_names_the_keys_as_written_under_a_root():
    """With ``root``, the warning named ``'model.1'``, a key the map it warned of does not have (it has ``'1'``)."""
    wrapper = torch.nn.Module()
    wrapper.model = _net()
    wrapper.forward = lambda x: wrapper.model(x)  # type: ignore[method-assign]
    graph = from_module(wrapper, (torch.randn(4, 16),), loss=lambda y: y.sum())
    cluster = load_cluster("cpu_gpu")
    devices = np.array([0 if module.startswith("model.1") else 1 for module in module_paths(graph)])
    with pytest.warns(UserWarning, match=r"puts 1 module\(s\) on \"cpu\" beside GPU 0 \(\['1'\]\)"):
        assert to_device_map(graph, Placement(devices, cluster), root="model") == {"0": 0, "1": "cpu", "2": 0, "3": 0}


def test_compare_device_maps_refuses_another_models_module_with_a_map_given():
    """With ``device_map`` given, a str module was an AttributeError, another model's maps were timed on the graph,
    and a larger model's failed on "device_map key '3'", a key of no map the caller gave."""
    graph = _graph(_net())
    cluster = load_cluster("k80x2")
    placement = from_device_map(graph, cluster, {"0": 0, "1": 0, "2": 1, "3": 1})
    given = {"0": 0, "1": 0, "2": 1, "3": 1}
    other = torch.nn.Sequential(torch.nn.Linear(16, 16), torch.nn.Sequential(torch.nn.Linear(16, 16)))
    larger = torch.nn.Sequential(*[torch.nn.Linear(16, 16) for _ in range(5)])
    with pytest.raises(InvalidArgument, match="compare_device_maps's module must be the torch.nn.Module"):
        compare_device_maps(graph, cluster, placement, "net", device_map=given)
    with pytest.raises(InvalidArgument, match=r"compare_device_maps's module is not the one .* e\.g\. '1\.bias'"):
        compare_device_maps(graph, cluster, placement, other, device_map=given)
    for device_map in (None, given):  # refused before accelerate's map of it named a module the graph lacks
        with pytest.raises(InvalidArgument, match=r"module is not the one .*: it holds 2 trained parameters the graph "
                                                  r"has none of, e\.g\. '4\.bias'"):
            compare_device_maps(graph, cluster, placement, larger, device_map=device_map)
    pytest.importorskip("accelerate")
    larger[4].requires_grad_(False)  # frozen, so not refused as grown: accelerate's map of it names a module too many
    for device_map in (None, given):
        with pytest.raises(InvalidArgument, match=r"module is not the one .*accelerate_auto map of it, device_map key "
                                                  r"'4' names no module"):
            compare_device_maps(graph, cluster, placement, larger, device_map=device_map)


def test_compare_device_maps_refuses_what_is_no_timer():
    """timer="x" was an AttributeError ('str' object has no attribute 'time'), after the map was exported."""
    graph = _graph(_net())
    cluster = load_cluster("k80x2")
    placement = from_device_map(graph, cluster, {"0": 0, "1": 0, "2": 1, "3": 1})
    with pytest.raises(InvalidArgument, match=r"^compare_device_maps: timer must be a StepTimer .*, got 'x'$"):
        compare_device_maps(graph, cluster, placement, timer="x")


def test_a_module_the_forward_never_calls_does_not_make_the_model_whole():
    """An unused Linear's parameters (no gradient) were taken as read by every op of the root's call, its update
    nodes' group: on another device than the output, the root's ``sum`` read two devices and the map went whole."""

    class _Unused(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.a, self.b, self.unused = torch.nn.Linear(16, 16), torch.nn.Linear(16, 16), torch.nn.Linear(16, 16)

        def forward(self, x):
            return self.b(self.a(x)).sum()

    graph = from_module(_Unused(), (torch.randn(4, 16),))
    cluster = load_cluster("k80x2")
    wanted = {"a": 0, "b": 1, "unused": 0}
    assert cross_device_reads(graph, cluster, wanted) == []
    assert to_device_map(graph, from_device_map(graph, cluster, wanted)) == wanted


def test_the_public_helpers_refuse_what_is_no_module_cluster_or_graph_in_one_line():
    """Each was an AttributeError or TypeError from deep inside (a preset's name for the cluster, a str module)."""
    graph = _graph(_net())
    cluster = load_cluster("k80x2")
    with pytest.raises(InvalidArgument, match=r"^no_split_module_classes's module must be a torch\.nn\.Module"):
        no_split_module_classes("x")
    with pytest.raises(InvalidArgument, match="graph must be an OpGraph"):
        module_paths(None)
    with pytest.raises(InvalidArgument, match="graph must be an OpGraph"):
        require_parameters(None)
    with pytest.raises(InvalidArgument, match=r"^device_map root must be a submodule path .*, got 3$"):
        require_parameters(graph, 3)
    pytest.importorskip("accelerate")
    with pytest.raises(InvalidArgument, match=r"^accelerate_device_map's module must be a torch\.nn\.Module, got 'x'$"):
        accelerate_device_map("x", cluster)
    with pytest.raises(InvalidArgument, match="cluster must be a Cluster"):
        accelerate_device_map(_net(), "k80x2")
    pytest.importorskip("transformers")
    with pytest.raises(InvalidArgument, match=r"^transformers_device_map's module must be a torch\.nn\.Module"):
        transformers_device_map("x", cluster)
    with pytest.raises(InvalidArgument, match="cluster must be a Cluster"):
        transformers_device_map(_net(), "k80x2")


def test_a_module_over_several_cpus_is_one_key():
    """cpu0 and cpu1 are both "cpu" to accelerate: the map named every module apart, 4 keys where one does."""
    net = _net()
    graph = _graph(net)
    cpus = cluster_from_dict({"name": "cpus", "devices": [{"name": "cpu", "count": 2, "kind": "cpu"}],
                              "links": {"default": "pcie3"}})
    devices = np.array([int(name.startswith("update/2")) for name in graph.node_names])
    assert to_device_map(graph, Placement(devices, cpus)) == {"": "cpu"}


def test_exported_map_dispatches_with_accelerate_on_cpu_devices():
    from accelerate import dispatch_model

    net = _net()
    graph = _graph(net)
    cpus = cluster_from_dict({"name": "cpus", "devices": [{"name": "cpu", "count": 2, "kind": "cpu"}],
                              "links": {"default": "pcie3"}})
    assert device_map_values(cpus) == ["cpu", "cpu"]
    assert to_device_map(graph, Placement((graph.group % 2).astype(np.int64), cpus)) == {"": "cpu"}  # one "cpu"
    # the split map of two GPUs, each key on the CPU: accelerate dispatches every key the export names
    split = to_device_map(graph, Placement((graph.group % 2).astype(np.int64), load_cluster("k80x2")))
    assert len(split) > 1
    device_map = {key: "cpu" for key in split}
    x = torch.randn(4, 16)
    with torch.no_grad():
        want = net(x)
        dispatched = dispatch_model(net, device_map=device_map)
        torch.testing.assert_close(dispatched(x), want)


def test_accelerate_maps_are_valid_placements():
    net = _net()
    graph = _graph(net)
    cluster = load_cluster("k80x4")
    for mode in ACCELERATE_MODES:
        found = accelerate_device_map(net, cluster, mode)
        placement = from_device_map(graph, cluster, found)
        assert placement.devices.shape == (graph.num_ops,)
    with pytest.raises(InvalidArgument, match="mode"):
        accelerate_device_map(net, cluster, "fill")


class _Block(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.fc1, self.fc2 = torch.nn.Linear(64, 64), torch.nn.Linear(64, 64)

    def forward(self, x):
        return x + self.fc2(torch.relu(self.fc1(x)))


class _Inner(torch.nn.Module):
    """A model that names its no-split blocks, as a transformers model does (GPT-2's ``GPT2Block``)."""

    _no_split_modules = ["_Block"]

    def __init__(self):
        super().__init__()
        self.blocks = torch.nn.Sequential(*[_Block() for _ in range(3)])

    def forward(self, x):
        return self.blocks(x)


class _Wrapper(torch.nn.Module):
    """A ``module:factory``'s loss wrapper around the model: it names no blocks of its own."""

    def __init__(self):
        super().__init__()
        self.model = _Inner()

    def forward(self, x):
        return self.model(x).sum()


def test_accelerate_auto_is_balanced_and_keeps_the_models_no_split_blocks_whole():
    """What from_pretrained(device_map="auto") makes: memory balanced over the GPUs, blocks never split."""
    net, cluster = _Wrapper(), load_cluster("k80x4")
    assert no_split_module_classes(net) == ["_Block"]
    auto = accelerate_device_map(net, cluster, "auto")
    assert auto == accelerate_device_map(net, cluster, "balanced")
    assert len(set(auto.values())) > 1  # balanced: the model fits GPU 0, yet is spread
    assert all(key.count(".") <= 2 for key in auto)  # model.blocks.K, never inside a block
    split = accelerate_device_map(net, cluster, "auto", no_split=[])
    assert any(key.endswith((".fc1", ".fc2")) for key in split)
    assert accelerate_device_map(net, cluster, "sequential") == {"model": 0}  # the plain fill: all on GPU 0
    assert 0 not in accelerate_device_map(net, cluster, "balanced_low_0").values()


def test_accelerate_maps_that_offload_to_disk_are_left_out_of_the_comparison():
    """A model larger than the cluster's memory: accelerate offloads to "disk", which no cluster device is."""
    from gnplace.execute.device_map import compare_device_maps

    net = torch.nn.Sequential(*[torch.nn.Linear(256, 256) for _ in range(4)])
    graph = from_module(net, (torch.randn(4, 256),), loss=lambda y: y.sum())
    small = cluster_from_dict({"name": "small", "devices": [{"name": "gpu", "count": 2, "kind": "k80",
                                                             "memory": "300KiB"}], "links": {"default": "pcie3"}})
    assert "disk" in accelerate_device_map(net, small, "auto").values()
    with pytest.warns(UserWarning, match="is over memory .* as the placement itself is"):
        found = compare_device_maps(graph, small, Placement((graph.group % 2).astype(np.int64), small), net)
    assert set(found) == {"placement", "device_map"} and all(v > 0 for v in found.values())


class _Scale(torch.nn.Module):
    """A module whose only state is a persistent buffer."""

    def __init__(self):
        super().__init__()
        self.register_buffer("factor", torch.full((8,), 0.5))

    def forward(self, x):
        return x * self.factor


class _TiedNet(torch.nn.Module):
    """Tied input and output embeddings (as GPT-2's ``lm_head``), batch norm buffers, a buffer-only and a frozen module."""

    def __init__(self):
        super().__init__()
        torch.manual_seed(0)
        self.embed = torch.nn.Embedding(10, 8)
        self.body = torch.nn.Sequential(torch.nn.Linear(8, 8), torch.nn.BatchNorm1d(8))
        self.scale = _Scale()
        self.frozen = torch.nn.Linear(8, 8).requires_grad_(False)
        self.head = torch.nn.Linear(8, 10, bias=False)
        self.head.weight = self.embed.weight

    def forward(self, ids):
        return self.head(self.frozen(self.scale(self.body(self.embed(ids)))))


def test_a_split_map_names_tied_parameters_buffers_and_frozen_state_as_accelerate_requires():
    from accelerate import dispatch_model
    from accelerate.utils import check_device_map

    net = _TiedNet()
    ids = torch.tensor([1, 2, 3, 4])
    graph = from_module(net, (ids,), loss=lambda y: y.sum())
    assert graph.meta["tied_parameters"] == {"head.weight": "embed.weight"}
    # batch norm's running statistics go with its weight and bias under its one key, so they are not listed
    assert graph.meta["untrained_state"] == ["scale.factor", "frozen.weight", "frozen.bias"]
    assert "update/head.weight" not in graph.node_names and "update/frozen.weight" not in graph.node_names
    on_one = [1 if module.startswith(("body", "scale")) else 0 for module in graph.module]
    device_map = to_device_map(graph, Placement(on_one, load_cluster("k80x2")))
    # the tied head goes with the embedding it shares, the buffer-only module with its ops
    assert device_map == {"embed": 0, "body": 1, "scale": 1, "frozen": 0, "head": 0}
    check_device_map(net, device_map)  # every state-dict entry has a device (it refused lm_head-like keys before)

    cpus = cluster_from_dict({"name": "cpus", "devices": [{"name": "cpu", "count": 2, "kind": "cpu"}],
                              "links": {"default": "pcie3"}})
    assert to_device_map(graph, Placement(on_one, cpus)) == {"": "cpu"}  # two CPUs are one "cpu" to accelerate
    on_cpus = {key: "cpu" for key in device_map}  # the split map's keys, each on the CPU
    net.eval()
    with torch.no_grad():
        want = net(ids)
        torch.testing.assert_close(dispatch_model(net, device_map=on_cpus)(ids), want)


class _Scaled(torch.nn.Module):
    """A module with its own trained parameter and buffer beside split children (as CLIP's ``logit_scale``)."""

    def __init__(self):
        super().__init__()
        torch.manual_seed(0)
        self.a, self.b = torch.nn.Linear(8, 8), torch.nn.Linear(8, 8)
        self.logit_scale = torch.nn.Parameter(torch.ones(()))
        self.register_buffer("center", torch.zeros(8))

    def forward(self, x):
        return (self.b(self.a(x)) - self.center) * self.logit_scale


def test_a_split_module_keeps_its_own_state_on_one_device_and_names_its_buffers():
    from accelerate.utils import check_device_map

    net = _Scaled()
    graph = from_module(net, (torch.zeros(4, 8),), loss=lambda y: y.sum())
    assert graph.meta["untrained_state"] == ["center"]
    on_a = [0 if module.startswith("b") or "logit_scale" in name else 1
            for name, module in zip(graph.node_names, graph.module)]
    device_map = to_device_map(graph, Placement(on_a, load_cluster("k80x2")))
    assert device_map == {"a": 1, "b": 0, "center": 0, "logit_scale": 0}  # the buffer goes with the root's parameter
    # with b and the root's state on GPU 1, dispatch_model would still move the root's own tensors to its main
    # device, GPU 0, and the root's ``* logit_scale`` would read b's output from GPU 1: b and the root's state
    # join a on the main device, GPU 0, and the model goes there whole
    on_b = [1 - device for device in on_a]
    assert to_device_map(graph, Placement(on_b, load_cluster("k80x2"))) == {"": 0}
    # it refused the map without "center" before; it warns of tensor keys, which accelerate's own maps also hold
    with pytest.warns(UserWarning, match="do not match any submodules"):
        check_device_map(net, device_map)

    seq = _net()
    graph = _graph(seq)
    bias_alone = [1 if name == "update/1.bias" else 0 for name in graph.node_names]  # an op-level placement
    # accelerate hooks modules: weight and bias of one Linear on two devices would never be acted on
    assert to_device_map(graph, Placement(bias_alone, load_cluster("k80x2"))) == {"": 0}


def test_graphs_without_the_import_record_map_their_parameters_as_before():
    net = _net()
    graph = _graph(net)
    assert "tied_parameters" not in graph.meta and "untrained_state" not in graph.meta  # nothing to record
    graph.meta["tied_parameters"] = "not a mapping"  # a hand-edited file's meta is read leniently
    placement = from_device_map(graph, load_cluster("k80x2"), {"0": 0, "1": 0, "2": 1, "3": 1})
    assert to_device_map(graph, placement) == {"0": 0, "1": 0, "2": 1, "3": 1}


def test_a_split_gpt2_map_loads_with_from_pretrained(tmp_path):
    """transformers' own loader takes the exported map of a model whose ``lm_head`` is tied (where transformers is
    installed: ``pip install -e '.[models]'``); one device stands for the other as ``"disk"``, the one other place
    a CPU-only machine offers."""
    transformers = pytest.importorskip("transformers")
    torch.manual_seed(0)
    config = transformers.GPT2Config(n_layer=2, n_embd=32, n_head=2, vocab_size=100, n_positions=16)
    model = transformers.GPT2LMHeadModel(config)
    model.save_pretrained(tmp_path / "tiny")
    ids = torch.randint(0, 100, (2, 8))
    graph = from_module(model, (ids,), loss=lambda out: out.logits.mean())
    assert graph.meta["tied_parameters"] == {"lm_head.weight": "transformer.wte.weight"}
    second = [1 if module.startswith(("transformer.h.1", "transformer.ln_f")) else 0 for module in graph.module]
    with pytest.warns(UserWarning, match="offloaded to CPU memory"):  # on a GPU, "cpu" would mean offloaded
        device_map = to_device_map(graph, Placement(second, load_cluster("cpu_gpu")))
    assert device_map["lm_head"] == device_map["transformer.wte"] == "cpu" and device_map["transformer.h.1"] == 0
    loaded = transformers.AutoModelForCausalLM.from_pretrained(
        tmp_path / "tiny", device_map={k: "cpu" if v == "cpu" else "disk" for k, v in device_map.items()},
        offload_folder=tmp_path / "offload",
    )
    model.eval()
    with torch.no_grad():
        torch.testing.assert_close(loaded(ids).logits, model(ids).logits)


def test_from_pretrained_map_of_a_wrapped_gpt2_keeps_its_blocks_whole_and_is_compared():
    """transformers' map (its own balancing) of the model inside a loss wrapper, keyed from the wrapper."""
    transformers = pytest.importorskip("transformers")
    from accelerate.utils import check_device_map

    from gnplace.execute.device_map import compare_device_maps, transformers_device_map

    torch.manual_seed(0)
    config = transformers.GPT2Config(n_layer=4, n_embd=64, n_head=4, vocab_size=2000, n_positions=16,
                                     bos_token_id=0, eos_token_id=0)

    class Wrapper(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.model = transformers.GPT2LMHeadModel(config)

        def forward(self, ids):
            return self.model(ids, labels=ids).loss

    net, cluster = Wrapper(), load_cluster("k80x4")
    found = transformers_device_map(net, cluster, "auto")
    assert found is not None and all(key.startswith("model.") for key in found)
    assert len(set(found.values())) > 1 and not any(".h.0." in key for key in found)  # GPT2Block kept whole
    check_device_map(net, found)  # every state-dict entry has a device
    assert transformers_device_map(_net(), cluster) is None  # no transformers model in it
    ids = torch.randint(0, 2000, (2, 8))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the trace's notes on transformers' internals
        graph = from_module(net, (ids,))
    compared = compare_device_maps(graph, cluster, Placement(np.zeros(graph.num_ops, dtype=np.int64), cluster), net)
    assert set(compared) == {"placement", "device_map", "accelerate_auto", "accelerate_sequential", "transformers_auto"}


def test_a_map_relative_to_a_submodule_strips_its_prefix_and_refuses_state_outside_it():
    class Wrapper(torch.nn.Module):
        def __init__(self, scaled):
            super().__init__()
            self.model = _TiedNet()
            if scaled:
                self.temperature = torch.nn.Parameter(torch.ones(()))

        def forward(self, ids):
            logits = self.model(ids)
            return (logits * self.temperature if hasattr(self, "temperature") else logits).sum()

    ids = torch.tensor([1, 2, 3, 4])
    graph = from_module(Wrapper(scaled=False), (ids,))
    on_one = [1 if module.startswith(("model.body", "model.scale")) else 0 for module in graph.module]
    placement = Placement(on_one, load_cluster("k80x2"))
    assert to_device_map(graph, placement, root="model") == {"embed": 0, "body": 1, "scale": 1, "frozen": 0, "head": 0}
    assert to_device_map(graph, Placement(np.zeros(graph.num_ops, dtype=np.int64), load_cluster("k80x2")),
                         root="model") == {"": 0}
    with pytest.raises(InvalidArgument, match="root 'model.embed.weight': no parameter"):
        to_device_map(graph, placement, root="model.embed.weight")
    scaled = from_module(Wrapper(scaled=True), (ids,))
    with pytest.raises(InvalidArgument, match="root 'model': 'temperature' lies outside it"):
        to_device_map(scaled, Placement(np.zeros(scaled.num_ops, dtype=np.int64), load_cluster("k80x2")), root="model")


class _TiedWithBias(torch.nn.Module):
    """An output layer with its own bias whose weight is the embedding's (BERT's MLM decoder, T5-like heads)."""

    def __init__(self):
        super().__init__()
        torch.manual_seed(0)
        self.embed = torch.nn.Embedding(10, 8)
        self.body = torch.nn.Linear(8, 8)
        self.head = torch.nn.Linear(8, 10)
        self.head.weight = self.embed.weight

    def forward(self, ids):
        return self.head(torch.tanh(self.body(self.embed(ids))))


def test_a_tied_parameter_stays_on_the_device_of_the_parameter_it_shares_when_its_module_holds_more():
    from accelerate import dispatch_model

    net = _TiedWithBias()
    ids = torch.tensor([1, 2, 3, 4])
    graph = from_module(net, (ids,), loss=lambda y: y.sum())
    assert graph.meta["tied_parameters"] == {"head.weight": "embed.weight"}
    # the head's bias trains on device 1, the embedding it shares its weight with on device 0
    on_bias = [1 if name == "update/head.bias" or module.startswith("body") else 0
               for name, module in zip(graph.node_names, graph.module)]
    device_map = to_device_map(graph, Placement(on_bias, load_cluster("k80x2")))

    def device_of(key):
        return next(v for k, v in device_map.items() if k == "" or key == k or key.startswith(k + "."))

    assert device_of("head.weight") == device_of("embed.weight")  # one tensor: it cannot live on two devices
    assert device_of("head.bias") == device_of("head.weight")  # accelerate moves whole modules
    cpus = cluster_from_dict({"name": "cpus", "devices": [{"name": "cpu", "count": 2, "kind": "cpu"}],
                              "links": {"default": "pcie3"}})
    with torch.no_grad():
        want = net(ids)
        torch.testing.assert_close(dispatch_model(net, device_map=to_device_map(graph, Placement(on_bias, cpus)))(ids),
                                   want)


def test_a_placement_from_a_device_map_is_made_for_its_graph():
    from gnplace.placement import GraphKey

    net = _net()
    graph = _graph(net)
    placement = from_device_map(graph, load_cluster("k80x2"), {"0": 0, "1": 0, "2": 1, "3": 1})
    assert placement.made_for is not None and placement.made_for.digest == GraphKey.of(graph).digest


def test_from_pretrained_maps_private_function_is_called_by_the_names_its_signature_has():
    """transformers' _get_device_map is private: a version taking a dtype made the positional call a TypeError."""
    from gnplace.execute.device_map import _device_map_arguments

    def newer(model, device_map, max_memory, hf_quantizer, dtype):
        return {}

    def current(model, device_map, max_memory, hf_quantizer):
        return {}

    net = _net()
    given = _device_map_arguments(newer, net, "auto", {0: 1})
    assert given == {"model": net, "device_map": "auto", "max_memory": {0: 1}, "hf_quantizer": None,
                     "dtype": torch.float32}
    assert set(_device_map_arguments(current, net, "auto", {0: 1})) == {"model", "device_map", "max_memory",
                                                                         "hf_quantizer"}


class _RegisteredTwice(torch.nn.Module):
    """One layer under two names (``self.b = self.a``) beside a nested list."""

    def __init__(self):
        super().__init__()
        self.a = torch.nn.Linear(4, 4)
        self.b = self.a
        self.c = torch.nn.ModuleList([torch.nn.Linear(4, 4), torch.nn.ModuleList([torch.nn.Linear(4, 4)])])

    def forward(self, x):
        return self.c[1][0](self.c[0](self.b(self.a(x)))).square().mean()


def test_a_module_registered_twice_dispatches_and_accelerates_failure_to_map_it_is_a_warning():
    """The comparison with accelerate's maps was accelerate's IndexError traceback (infer_auto_device_map fails on
    such a module); the export names both names, as dispatch_model requires (it wants a device for ``b.weight``)."""
    from accelerate import dispatch_model

    from gnplace.exceptions import UnsupportedGraph
    from gnplace.execute.device_map import compare_device_maps

    torch.manual_seed(0)
    net, x = _RegisteredTwice(), torch.randn(3, 4)
    graph = from_module(net, (x,))
    cluster = load_cluster("k80x2")
    placement = Placement((graph.group % 2).astype(np.int64), cluster)
    exported = to_device_map(graph, placement)
    assert exported["a"] == exported["b"] and len(set(exported.values())) == 2
    with torch.no_grad(), warnings.catch_warnings():
        warnings.filterwarnings("ignore", message="The following device_map keys do not match any submodules")
        want = net(x)  # (the recording left the module as it was: "Couldn't swap Linear.weight" here)
        torch.testing.assert_close(dispatch_model(net, device_map={k: "cpu" for k in exported})(x), want)
    with pytest.raises(UnsupportedGraph, match=r"^accelerate cannot make a device_map='auto' of this module "
                                                r"\(IndexError in infer_auto_device_map"):
        accelerate_device_map(net, cluster, "auto")
    with pytest.warns(UserWarning, match="left out of the comparison"):
        compared = compare_device_maps(graph, cluster, placement, net)
    assert set(compared) == {"placement", "device_map"}


def _blocks(k):
    """A graph of ``k`` modules ``block{i}.linear``, a forward op and a parameter update each."""
    from gnplace.graph import OpGraph

    names = [f"block{i}.linear" for i in range(k)] + [f"update/block{i}.linear.weight" for i in range(k)]
    return OpGraph(names, [(i, i + 1) for i in range(2 * k - 1)], module=[f"block{i}.linear" for i in range(k)] * 2,
                   phase=["forward"] * k + ["update"] * k, name=f"blocks{k}")


def test_device_maps_of_many_modules_are_made_and_read_back_module_by_module():
    """to_device_map scanned every module path for each module it walked, and sorted its keys by a scan of the
    nodes each; from_device_map tested every key for each node: 20 s for a 28,000-op graph of 9,000 modules, more
    than 3 minutes for 100,000 ops (``gnplace place --device-map``). Each is a lookup by path now; the map and the
    placement read back are those of before: one key per module, in module order, each on its device. (Its speed
    is a benchmark's to measure, not a unit test's.)"""
    cluster = load_cluster("k80x2")
    for k in (4, 2400):  # (an even k: block i's update is on its forward's device)
        graph = _blocks(k)
        placement = Placement(np.arange(2 * k) % 2, cluster)
        device_map = to_device_map(graph, placement)
        assert list(device_map.items()) == [(f"block{i}", i % 2) for i in range(k)]
        assert from_device_map(graph, cluster, device_map).devices.tolist() == placement.devices.tolist()


def test_the_comparison_skips_keys_of_accelerates_map_that_name_stateless_modules_without_ops():
    """ResNet-50's ``nn.Identity`` shortcuts: accelerate names them, the graph has no node of them (the comparison
    raised on them since from_device_map refuses unknown keys; ``bench.py device-map`` failed on resnet50)."""
    torch.manual_seed(0)
    net = torch.nn.Sequential(torch.nn.Linear(16, 16), torch.nn.Identity(), torch.nn.Linear(16, 16),
                              torch.nn.Identity(), torch.nn.Linear(16, 16))
    graph = _graph(net)
    cluster = load_cluster("k80x4")
    auto = accelerate_device_map(net, cluster, "auto")
    assert "1" in auto and "1" not in module_paths(graph)  # a key the graph has no node of
    with pytest.raises(InvalidArgument, match="names no module"):
        from_device_map(graph, cluster, auto)  # still refused when given by hand
    placement = Placement(np.zeros(graph.num_ops, dtype=np.int64), cluster)
    found = compare_device_maps(graph, cluster, placement, net)
    assert {"accelerate_auto", "accelerate_sequential"} <= set(found)
    want = from_device_map(graph, cluster, {k: v for k, v in auto.items() if k not in ("1", "3")})
    from gnplace.sim.simulator import Simulator
    assert found["accelerate_auto"] == Simulator().time(graph, cluster, want).step_time


class _Attention(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.attn = torch.nn.MultiheadAttention(8, 2, batch_first=True)
        self.head = torch.nn.Linear(8, 1)

    def forward(self, x):
        return self.head(self.attn(x, x, x)[0])


def test_a_module_whose_forward_never_runs_stays_with_the_module_that_reads_its_state(tmp_path):
    """``nn.MultiheadAttention`` reads ``out_proj.weight`` itself: ``out_proj`` apart was a key no hook acts on."""
    from accelerate import dispatch_model

    torch.manual_seed(0)
    net = _Attention().eval()
    x = torch.randn(2, 3, 8)
    graph = from_module(net, (x,), loss=lambda y: y.sum())
    assert not any(m.startswith("attn.out_proj") for m, name in zip(graph.module, graph.node_names)
                   if not name.startswith("update/"))  # only its update nodes: the import saw no forward
    cluster = load_cluster("k80x2")
    out_proj_on_1 = to_device_map(graph, Placement([int(n.startswith("update/attn.out_proj.")) for n in graph.node_names],
                                                   cluster))
    # was {"attn.in_proj_weight": 0, "attn.in_proj_bias": 0, "head": 0, "attn.out_proj": 1}
    assert out_proj_on_1 == {"": 0}
    assert to_device_map(graph, Placement([int(m.startswith("attn")) for m in graph.module], cluster)) == {
        "attn": 1, "head": 0}
    with torch.no_grad():
        want = net(x)
        # "cpu" for GPU 0, "disk" for GPU 1, the one other place a CPU-only machine offers: out_proj on "disk"
        # was left on the meta device (no hook of its own runs), a RuntimeError in attn's forward
        cpu_map = {key: "disk" if value else "cpu" for key, value in out_proj_on_1.items()}
        torch.testing.assert_close(dispatch_model(net, cpu_map, offload_dir=str(tmp_path))(x), want)


class _Residual(torch.nn.Module):
    """A residual block: its own forward adds the input to its children's outputs (GPT2Block's ``residual + attn``)."""

    def __init__(self):
        super().__init__()
        self.attn = torch.nn.Linear(16, 16)
        self.mlp = torch.nn.Linear(16, 16)

    def forward(self, x):
        x = x + self.attn(x)
        return x + self.mlp(x)


def _residual_blocks():
    torch.manual_seed(0)
    net = torch.nn.Sequential(_Residual(), _Residual(), _Residual())
    return net, _graph(net)


def test_cross_device_reads_lists_the_ops_of_an_unhooked_block_that_read_two_devices():
    """accelerate hooks only the modules a map names: a block split between its children runs its own adds on
    tensors from two devices (a device mismatch on GPUs, though on a CPU every device is ``"cpu"``)."""
    net, graph = _residual_blocks()
    cluster = load_cluster("k80x2")
    split = {"0": 0, "1.attn": 0, "1.mlp": 1, "2": 1}
    bad = cross_device_reads(graph, cluster, split)
    assert [graph.node_names[v] for v in bad] == ["1/add_1"]  # x (GPU 0) + mlp(x) (GPU 1); x + attn(x) is on GPU 0
    assert cross_device_reads(graph, cluster, {"0": 0, "1": 0, "2": 1}) == []  # whole blocks: hooked, moved
    apart = cross_device_reads(graph, cluster, {"0": 0, "1.attn": 1, "1.mlp": 1, "2": 1})
    assert graph.node_names[apart[0]] == "1/add"  # block 0's output (GPU 0) + attn(x) (GPU 1)
    assert cross_device_reads(graph, cluster, {"": 0}) == []
    # on CPUs every device is "cpu": nothing reads two
    cpus = cluster_from_dict({"name": "cpus", "devices": [{"name": "cpu", "count": 2, "kind": "cpu"}],
                              "links": {"default": "pcie3"}})
    assert cross_device_reads(graph, cpus, {"0": "cpu", "1.attn": "cpu", "1.mlp": "cpu", "2": "cpu"}) == []


def test_a_block_split_between_its_children_is_exported_whole_and_whole_blocks_keep_their_map():
    net, graph = _residual_blocks()
    cluster = load_cluster("k80x2")
    on_mlp = [1 if module.startswith("1.mlp") else 0 for module in graph.module]  # block 1's mlp apart
    device_map = to_device_map(graph, Placement(on_mlp, cluster))
    assert device_map == {"": 0}  # block 1 (its attention's bytes tie with its mlp's: GPU 0) whole, then all agree
    assert cross_device_reads(graph, cluster, device_map) == []
    # a placement of whole blocks: the map it always had
    whole = [1 if module.startswith("2") else 0 for module in graph.module]
    assert to_device_map(graph, Placement(whole, cluster)) == {"0": 0, "1": 0, "2": 1}


def test_random_placements_of_the_examples_export_maps_without_ops_reading_two_devices():
    from gnplace.execute import examples

    cluster = load_cluster("k80x4")
    rng = np.random.default_rng(0)
    for name in ("tiny", "mlp", "convnet", "branchy", "transformer"):
        net, inputs = getattr(examples, name)()
        graph = from_module(net, inputs)
        for module_level in (False, True):
            for _ in range(4):
                if module_level:  # whole modules at random: maps that keep more keys
                    modules = sorted(set(graph.module))
                    pick = dict(zip(modules, rng.integers(0, 4, len(modules))))
                    devices = np.array([pick[m] for m in graph.module])
                else:
                    devices = rng.integers(0, 4, graph.num_ops)
                device_map = to_device_map(graph, Placement(devices, cluster), module=net)
                assert cross_device_reads(graph, cluster, device_map) == [], (name, device_map)


def test_a_gpt2_map_keeps_its_no_split_blocks_whole_and_dispatches_on_cpu():
    """GPT-2's blocks add their residuals in ``GPT2Block.forward``: split placements export them whole (its
    ``_no_split_modules``, and without the module too, from the ops), and the map dispatches."""
    transformers = pytest.importorskip("transformers")
    from accelerate import dispatch_model

    torch.manual_seed(0)
    config = transformers.GPT2Config(n_layer=3, n_embd=32, n_head=2, vocab_size=100, n_positions=16)
    model = transformers.GPT2LMHeadModel(config)
    model.eval()
    ids = torch.randint(0, 100, (2, 8))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the trace's notes on transformers' internals
        graph = from_module(model, (ids,), loss=lambda out: out.logits.mean())
    cluster = load_cluster("k80x4")
    rng = np.random.default_rng(1)
    modules = sorted(set(graph.module))
    with torch.no_grad():
        want = model(ids).logits
    for trial in range(6):
        if trial % 2:
            pick = dict(zip(modules, rng.integers(0, 4, len(modules))))
            devices = np.array([pick[m] for m in graph.module])
        else:
            devices = rng.integers(0, 4, graph.num_ops)
        for module in (model, None):
            device_map = to_device_map(graph, Placement(devices, cluster), module=module)
            assert cross_device_reads(graph, cluster, device_map) == [], device_map
            assert not any(re.search(r"\.h\.\d+\.", key) for key in device_map), device_map  # GPT2Block whole
        with torch.no_grad():
            dispatched = dispatch_model(model, device_map={key: "cpu" for key in device_map})
            torch.testing.assert_close(dispatched(ids).logits, want)
        from accelerate.hooks import remove_hook_from_submodules

        remove_hook_from_submodules(model)


class _Embeddings(torch.nn.Module):
    """ViT's embeddings: its own forward adds its position parameter to its child's output."""

    def __init__(self):
        super().__init__()
        self.patches = torch.nn.Linear(16, 16)
        self.position = torch.nn.Parameter(torch.randn(16))

    def forward(self, x):
        return self.patches(x) + self.position


def test_an_unhooked_op_reading_its_modules_parameter_and_an_input_from_another_device_reads_two():
    """``0/add`` reads the patches' output (GPU 1) and ``0.position`` (GPU 0): accelerate hooks neither ``0`` nor
    anything above it, so the add sees both where they are (a device mismatch on GPUs)."""
    torch.manual_seed(0)
    net = torch.nn.Sequential(_Embeddings(), torch.nn.Linear(16, 16))
    graph = _graph(net)
    cluster = load_cluster("k80x2")
    split = {"0.patches": 1, "0.position": 0, "1": 0}
    assert [graph.node_names[v] for v in cross_device_reads(graph, cluster, split)] == ["0/add"]
    assert cross_device_reads(graph, cluster, {"0.patches": 1, "0.position": 1, "1": 0}) == []
    assert cross_device_reads(graph, cluster, {"0": 1, "1": 0}) == []  # hooked: moved to GPU 1
    # the placement behind ``split``: the embeddings go whole where most of their parameter bytes are
    devices = [1 if module.startswith("0.patches") else 0 for module in module_paths(graph)]
    device_map = to_device_map(graph, Placement(devices, cluster), module=net)
    assert device_map == {"0": 1, "1": 0}
    assert cross_device_reads(graph, cluster, device_map) == []


class _Scaled2(torch.nn.Module):
    """A root holding a parameter its own forward reads: accelerate's root hook moves it to the main device."""

    def __init__(self):
        super().__init__()
        self.body = torch.nn.Linear(16, 16)
        self.head = torch.nn.Linear(16, 16)
        self.scale = torch.nn.Parameter(torch.ones(16))

    def forward(self, x):
        return self.head(self.body(x) * self.scale)


def test_the_roots_own_parameters_are_read_on_accelerates_main_device():
    torch.manual_seed(0)
    graph = _graph(_Scaled2())
    cluster = load_cluster("k80x2")
    # the map puts ``scale`` with ``body`` on GPU 1, but dispatch_model moves the root's own tensors to GPU 0
    bad = cross_device_reads(graph, cluster, {"body": 1, "scale": 1, "head": 0})
    assert [graph.node_names[v] for v in bad] == ["root/mul"]
    assert cross_device_reads(graph, cluster, {"body": 0, "scale": 1, "head": 1}) == []
    # the order of a map's keys changes nothing: a top-level module's key is no state of the root
    assert cross_device_reads(graph, cluster, {"head": 0, "scale": 0, "body": 0}) == []


def test_vits_embeddings_read_their_position_embeddings_beside_the_patch_embeddings_output():
    """The shipped ViT-Base graph: ``ViTEmbeddings`` concatenates its ``cls_token`` to, and adds its
    ``position_embeddings`` to, its patch embeddings' output, in its own forward."""
    from gnplace.graph_io import load_graph
    from gnplace.shipped import shipped_path

    graph = load_graph(shipped_path("datasets/real/vit_base.gnpg"))
    cluster = load_cluster("k80x2")
    e = "model.vit.embeddings."
    split = {e + "patch_embeddings": 1, e + "cls_token": 0, e + "position_embeddings": 0, "model.vit.layers": 0,
             "model.vit.layernorm": 0, "model.classifier": 0}
    bad = cross_device_reads(graph, cluster, split)
    assert [graph.node_names[v] for v in bad] == [e[:-1] + "/cat", e[:-1] + "/add"]
    assert cross_device_reads(graph, cluster, {**split, e + "patch_embeddings": 0}) == []
    devices = from_device_map(graph, cluster, split).devices
    device_map = to_device_map(graph, Placement(devices, cluster))
    assert e + "patch_embeddings" not in device_map and cross_device_reads(graph, cluster, device_map) == []


def _two_gpus(*memory):
    """Two K80s with ``memory`` bytes each (per device)."""
    return cluster_from_dict({"name": "small", "devices": [{"name": f"gpu{k}", "count": 1, "kind": "k80",
                                                              "memory": int(m)} for k, m in enumerate(memory)],
                              "links": {"default": "pcie3"}})


def test_a_module_kept_whole_goes_to_a_device_it_fits_on():
    """Block 1, split between its children, goes whole: on GPU 0, where most of its bytes are, the step peaks at
    9,412 bytes, over an 8,500-byte GPU; on GPU 1 both devices keep within memory (6,724 and 4,288 bytes)."""
    from gnplace.sim.simulator import simulate

    net, graph = _residual_blocks()
    on_mlp = [1 if module.startswith("1.mlp") else 0 for module in graph.module]
    roomy = _two_gpus(10**9, 10**9)
    assert to_device_map(graph, Placement(on_mlp, roomy)) == {"": 0}  # within memory: the map it always had
    tight = _two_gpus(8500, 8500)
    assert not simulate(graph, tight, Placement(on_mlp, tight)).is_oom
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # it fits: no warning
        device_map = to_device_map(graph, Placement(on_mlp, tight))
    assert device_map == {"0": 0, "1": 1, "2": 0}
    assert cross_device_reads(graph, tight, device_map) == []
    assert not simulate(graph, tight, from_device_map(graph, tight, device_map)).is_oom
    # where no device holds it, the map says so
    tighter = _two_gpus(8100, 4000)
    assert not simulate(graph, tighter, Placement(on_mlp, tighter)).is_oom
    with pytest.warns(UserWarning, match=r"over memory \(\S+ 4\.\d+ KiB of 3\.\d+ KiB.*though the placement is not"):
        device_map = to_device_map(graph, Placement(on_mlp, tighter))
    assert cross_device_reads(graph, tighter, device_map) == []


class _AddsInput(torch.nn.Module):
    """A root whose own forward adds a user input to its head's output, as a loss in the root reads the labels."""

    def __init__(self):
        super().__init__()
        self.body = torch.nn.Linear(16, 16)
        self.head = torch.nn.Linear(16, 16)

    def forward(self, x, y):
        return self.head(self.body(x)) + y


class _PassesInput(torch.nn.Module):
    """A wrapper around ``_AddsInput`` that passes it a tensor of its own making."""

    def __init__(self):
        super().__init__()
        self.model = _AddsInput()

    def forward(self, x, y):
        return self.model(x, y * 2)


def test_a_user_input_read_by_the_roots_own_forward_is_on_the_main_device():
    """dispatch_model's root hook moves every input to its main device (GPU 0), where the root's own add reads it
    beside the head's output: a device mismatch with the head on GPU 1, whoever puts ``y`` where."""
    torch.manual_seed(0)
    graph = from_module(_AddsInput(), (torch.randn(4, 16), torch.randn(4, 16)), loss=lambda y: y.sum())
    cluster = load_cluster("k80x2")
    for split in ({"body": 0, "head": 1}, {"head": 1, "body": 0}):  # the main device is the lowest GPU, in any order
        assert [graph.node_names[v] for v in cross_device_reads(graph, cluster, split)] == ["root/add"]
    # the body reads ``x`` in its own hooked call, moved to GPU 1: fine; the head on the main device: fine
    assert cross_device_reads(graph, cluster, {"body": 1, "head": 0}) == []
    assert cross_device_reads(graph, cluster, {"body": 1, "head": 1}) == []
    on_head = [1 if module.startswith("head") else 0 for module in module_paths(graph)]
    device_map = to_device_map(graph, Placement(on_head, cluster))
    assert len(set(device_map.values())) == 1 and cross_device_reads(graph, cluster, device_map) == []
    # a map of a submodule: what the wrapper passes it enters through its root's hook too
    graph = from_module(_PassesInput(), (torch.randn(4, 16), torch.randn(4, 16)), loss=lambda y: y.sum())
    bad = cross_device_reads(graph, cluster, {"model.body": 0, "model.head": 1}, root="model")
    assert [graph.node_names[v] for v in bad] == ["model/add"]
    assert cross_device_reads(graph, cluster, {"model.body": 1, "model.head": 0}, root="model") == []


class _LossInRoot(torch.nn.Module):
    """A root computing its loss itself, moving the labels to the logits' device first, as transformers' models do."""

    def __init__(self):
        super().__init__()
        self.body = torch.nn.Linear(16, 16)
        self.head = torch.nn.Linear(16, 5)

    def forward(self, x, labels):
        logits = self.head(self.body(x))
        return torch.nn.functional.cross_entropy(logits, labels.to(logits.device))


def test_a_loss_in_the_root_reads_its_labels_where_the_logits_are():
    """The labels' move (a no-op on one device) is no op of the graph: a loss is taken to make it, so a head off the
    main device is no cross-device read (accelerate runs such a model), and the map keeps the split."""
    torch.manual_seed(0)
    graph = from_module(_LossInRoot(), (torch.randn(4, 16), torch.tensor([0, 1, 2, 3])))
    cluster = load_cluster("k80x2")
    assert cross_device_reads(graph, cluster, {"body": 0, "head": 1}) == []
    on_head = [1 if module.startswith("head") else 0 for module in module_paths(graph)]
    assert to_device_map(graph, Placement(on_head, cluster)) == {"body": 0, "head": 1}
    # an add of an input in the root, beside the loss, is no loss: it reads the input on the main device
    graph = from_module(_AddsInput(), (torch.randn(4, 16), torch.randn(4, 16)), loss=lambda y: y.sum())
    assert [graph.node_names[v] for v in cross_device_reads(graph, cluster, {"body": 0, "head": 1})] == ["root/add"]


def test_accelerates_root_hook_moves_the_inputs_to_its_main_device():
    """What the test above models, with accelerate on CPU and meta devices: with the head on "meta" and the main
    device "cpu", the root's add fails wherever the caller puts ``y`` (on "meta", the root's hook copies it off)."""
    from accelerate import dispatch_model

    split = {"body": "cpu", "head": "meta"}
    x, y = torch.randn(4, 16), torch.randn(4, 16)
    with pytest.raises(RuntimeError, match="expected device meta"):
        dispatch_model(_AddsInput(), device_map=split, main_device="cpu")(x, y)
    with pytest.raises(NotImplementedError, match="Cannot copy out of meta tensor"):
        dispatch_model(_AddsInput(), device_map=split, main_device="cpu")(x, y.to("meta"))
    # the same map with the head's device as the main one runs
    out = dispatch_model(_AddsInput(), device_map=split, main_device="meta")(x.to("meta"), y.to("meta"))
    assert out.device.type == "meta" and out.shape == (4, 16)


class _DeviceLog(TorchFunctionMode):
    """The ops that read tensors of two devices, by name; each then runs on "meta", and a copy off "meta" is zeros."""

    def __init__(self):
        super().__init__()
        self.mixed = []

    def __torch_function__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        name = getattr(func, "__name__", "")
        if name == "to" and args[0].device.type == "meta" and "cpu" in map(str, (*args[1:], *kwargs.values())):
            return torch.zeros(args[0].shape, dtype=args[0].dtype)  # accelerate moving a result back to the CPU
        tensors = [x for x in tree_flatten((args, kwargs))[0] if isinstance(x, torch.Tensor) and x.dim()]
        if len({x.device.type for x in tensors}) > 1:
            self.mixed.append(name)
            args, kwargs = tree_map(lambda x: x.to("meta") if isinstance(x, torch.Tensor) else x, (args, kwargs))
        return func(*args, **kwargs)


def _ops_reading_two_devices(net, device_map, x, tmp_path):
    """What accelerate runs of ``device_map`` (GPU 0 as "cpu", GPU 1 as "meta"): the names of the ops that read two.

    As ``load_checkpoint_and_dispatch`` does, each state-dict entry is loaded to its longest key's device first.
    """
    from accelerate import dispatch_model
    from accelerate.utils import load_checkpoint_in_model

    on = {key: "cpu" if value == 0 else "meta" for key, value in device_map.items()}
    torch.save(net.state_dict(), tmp_path / "state.pt")
    load_checkpoint_in_model(net, str(tmp_path / "state.pt"), device_map=on)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # keys naming a tensor: "do not match any submodules"
        dispatch_model(net, device_map=on, main_device="cpu")
    with _DeviceLog() as log:
        net(x)
    return log.mixed


class _Shifted(torch.nn.Module):
    """A module whose own forward adds its parameter to its child's output."""

    def __init__(self):
        super().__init__()
        self.a = torch.nn.Linear(16, 16)
        self.shift = torch.nn.Parameter(torch.zeros(16))

    def forward(self, x):
        return self.a(x) + self.shift


class _SumsShifted(torch.nn.Module):
    def __init__(self):
        super().__init__()
        torch.manual_seed(0)
        self.body = torch.nn.Linear(16, 16)
        self.out = _Shifted()

    def forward(self, x):
        return self.out(self.body(x)).sum()


def test_a_parameter_whose_gradient_reads_only_its_callers_tensors_is_read_by_the_ops_of_its_call(tmp_path):
    """``shift``'s gradient sums the loss's gradient, ``ones_like``, a forward op of the root, not of ``out``'s call:
    no op of the call was taken to read ``shift``, and ``out/add`` read ``a``'s output and ``shift`` unlisted."""
    pytest.importorskip("accelerate")
    graph = from_module(_SumsShifted(), (torch.randn(4, 16),))
    cluster = load_cluster("k80x2")
    split = {"body": 0, "out.a": 1, "out.shift": 0}
    assert [graph.node_names[v] for v in cross_device_reads(graph, cluster, split)] == ["out/add"]
    assert _ops_reading_two_devices(_SumsShifted(), split, torch.randn(4, 16), tmp_path) == ["add"]
    together = {"body": 0, "out.a": 1, "out.shift": 1}
    assert cross_device_reads(graph, cluster, together) == []
    assert _ops_reading_two_devices(_SumsShifted(), together, torch.randn(4, 16), tmp_path) == []


class _TwoOutputs(torch.nn.Module):
    def __init__(self):
        super().__init__()
        torch.manual_seed(0)
        self.a, self.b = torch.nn.Linear(16, 16), torch.nn.Linear(16, 16)
        self.bias = torch.nn.Parameter(torch.zeros(16))

    def forward(self, x):
        return self.a(x) + self.bias, self.b(x) * 2


class _Joins(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = torch.nn.Linear(16, 1)

    def forward(self, pair):
        return self.lin(pair[0] + pair[1])


def test_a_parameter_added_in_its_modules_forward_is_taken_to_be_read_by_every_op_of_its_call(tmp_path):
    """The limit :func:`cross_device_reads` documents: ``bias``'s gradient reads no saved tensor, so ``mul``, which
    reads ``b``'s output alone (GPU 1), is listed as reading ``bias`` (GPU 0) too, though accelerate runs the map."""
    pytest.importorskip("accelerate")
    graph = _graph(torch.nn.Sequential(_TwoOutputs(), _Joins()))
    split = {"0.a": 0, "0.bias": 0, "0.b": 1, "1": 1}
    assert [graph.node_names[v] for v in cross_device_reads(graph, load_cluster("k80x2"), split)] == ["0/mul"]
    net = torch.nn.Sequential(_TwoOutputs(), _Joins())
    assert _ops_reading_two_devices(net, split, torch.randn(4, 16), tmp_path) == []


class _Positioned(torch.nn.Module):
    """Adds its ``pos`` to its child's output in its own forward: a buffer, a frozen parameter, or a buffer in
    no state dict (``persistent=False``, as transformers' position ids and causal masks)."""

    def __init__(self, kind):
        super().__init__()
        torch.manual_seed(0)
        self.a, self.b = torch.nn.Linear(16, 16), torch.nn.Linear(16, 16)
        if kind == "frozen":
            self.pos = torch.nn.Parameter(torch.randn(16), requires_grad=False)
        else:
            self.register_buffer("pos", torch.randn(16), persistent=kind == "buffer")

    def forward(self, x):
        return self.b(self.a(x) + self.pos)


@pytest.mark.parametrize("kind", ["buffer", "frozen", "non-persistent"])
def test_an_unhooked_op_reading_its_modules_buffer_and_an_output_from_another_device_reads_two(kind, tmp_path):
    """``0/add`` reads ``pos`` where the map loads it (or, in no state dict, where the model was made: nothing
    moves it) and ``a``'s output: buffers have no gradient, so only the import's record tells who reads them."""
    pytest.importorskip("accelerate")

    def net():
        return torch.nn.Sequential(_Positioned(kind), torch.nn.Linear(16, 1))

    graph = _graph(net())
    assert graph.meta["untrained_readers"] == {"0.pos": ["0/add"]}
    cluster = load_cluster("k80x2")
    x = torch.randn(4, 16)
    if kind == "non-persistent":  # where the model was made (the CPU, GPU 0 here): read beside "a" on GPU 1
        split = {"0.a": 1, "0.b": 1, "1": 0}
        assert [graph.node_names[v] for v in cross_device_reads(graph, cluster, split)] == ["0/add"]
        assert _ops_reading_two_devices(net(), split, x, tmp_path) == ["add"]
    else:
        split = {"0.a": 0, "0.pos": 1, "0.b": 1, "1": 1}
        assert [graph.node_names[v] for v in cross_device_reads(graph, cluster, split)] == ["0/add"]
        assert _ops_reading_two_devices(net(), split, x, tmp_path) == ["add"]
        together = {"0.a": 1, "0.pos": 1, "0.b": 1, "1": 0}
        assert cross_device_reads(graph, cluster, together) == []
        assert _ops_reading_two_devices(net(), together, x, tmp_path) == []
    # a placement splitting module 0 so: it goes whole (hooked: its hook moves ``pos`` and its input), to GPU 0,
    # where ``a`` holds as many parameter bytes as ``b`` on GPU 1
    devices = [0 if module.startswith("0.a") else 1 for module in module_paths(graph)]
    device_map = to_device_map(graph, Placement(devices, cluster))
    assert device_map == {"0": 0, "1": 1} and cross_device_reads(graph, cluster, device_map) == []


class _Projected(torch.nn.Module):
    """nmt's shape: a chain of children, then the root's own ``mm`` of the last one's output by a root parameter."""

    def __init__(self):
        super().__init__()
        torch.manual_seed(0)
        self.a, self.b, self.c = torch.nn.Linear(16, 16), torch.nn.Linear(16, 16), torch.nn.Linear(16, 16)
        self.projection = torch.nn.Parameter(torch.randn(16, 16))

    def forward(self, x):
        return torch.mm(self.c(self.b(self.a(x))), self.projection).sum()


class _TiedHead(torch.nn.Module):
    """ptb's shape: the root's own ``mm`` reads its last child's output and the first child's weight (a tied head)."""

    def __init__(self):
        super().__init__()
        torch.manual_seed(0)
        self.a, self.b, self.c = torch.nn.Linear(16, 16), torch.nn.Linear(16, 16), torch.nn.Linear(16, 16)

    def forward(self, x):
        return torch.mm(self.c(self.b(self.a(x))), self.a.weight.t()).sum()


def _by_module(graph, devices):
    """A placement putting each node on ``devices`` of its module's first path part (its update node too; ``""``: the root's)."""
    return [devices[path.partition(".")[0]] for path in module_paths(graph)]


def test_a_root_op_reading_two_devices_joins_what_it_reads_on_the_main_device_not_the_whole_model(tmp_path):
    """The root's ``mm`` reads ``c``'s output (GPU 1) and the root's ``projection``, which dispatch_model moves to
    the main device (GPU 0): ``c`` and ``projection`` join on GPU 0, ``b`` stays on GPU 1. Before, the whole model
    went to one device (nmt's module-level maps on v100x8 came out as ``"sequential"``'s)."""
    pytest.importorskip("accelerate")
    graph = from_module(_Projected(), (torch.randn(4, 16),))
    cluster = load_cluster("k80x2")
    placement = Placement(_by_module(graph, {"a": 0, "b": 1, "c": 1, "projection": 1, "": 1}), cluster)
    assert cross_device_reads(graph, cluster, {"a": 0, "b": 1, "c": 1, "projection": 1}) != []
    device_map = to_device_map(graph, placement)
    assert device_map == {"a": 0, "b": 1, "c": 0, "projection": 0}
    assert cross_device_reads(graph, cluster, device_map) == []
    assert _ops_reading_two_devices(_Projected(), device_map, torch.randn(4, 16), tmp_path) == []


class _Wrapped(torch.nn.Module):
    """A wrapper holding :class:`_Projected` as ``model``, as a transformers model comes wrapped."""

    def __init__(self):
        super().__init__()
        self.model = _Projected()

    def forward(self, x):
        return self.model(x)


def test_the_roots_own_parameters_are_updated_and_written_on_accelerates_main_device():
    """dispatch_model's hook of the root moves the root's own tensors to the main device (GPU 0 here), whatever a
    key says: ``"projection": 1`` was simulated with its update on GPU 1 (nmt's maps of ``auto`` on k80x4 wrote
    ``"projection": 3`` beside main device 0) and written so."""
    graph = from_module(_Projected(), (torch.randn(4, 16),))
    cluster = load_cluster("k80x2")
    update = graph.node_names.index("update/projection")
    assert from_device_map(graph, cluster, {"a": 0, "b": 1, "c": 0, "projection": 1}).devices[update] == 0
    assert from_device_map(graph, cluster, {"a": 1, "b": 1, "c": 1, "projection": 1}).devices[update] == 1  # main
    placement = Placement(_by_module(graph, {"a": 0, "b": 1, "c": 0, "projection": 1, "": 0}), cluster)
    assert to_device_map(graph, placement) == {"a": 0, "b": 1, "c": 0, "projection": 0}
    wrapped = from_module(_Wrapped(), (torch.randn(4, 16),))  # dispatched on ``model``: its own parameters count
    update = wrapped.node_names.index("update/model.projection")
    split = {"model.a": 0, "model.b": 1, "model.c": 0, "model.projection": 1}
    assert from_device_map(wrapped, cluster, split, root="model").devices[update] == 0
    assert from_device_map(wrapped, cluster, split).devices[update] == 1  # the wrapper's own: none
    devices = [int(path.startswith("model.b") or path == "model.projection") for path in module_paths(wrapped)]
    assert to_device_map(wrapped, Placement(devices, cluster), root="model") == {"a": 0, "b": 1, "c": 0,
                                                                                  "projection": 0}
    with pytest.raises(InvalidArgument, match="from_device_map's root must be a submodule path"):
        from_device_map(graph, cluster, {"": 0}, root=None)
    with pytest.raises(InvalidArgument, match="compare_device_maps's root must be a submodule path"):
        compare_device_maps(graph, cluster, placement, root=3)


def test_a_root_op_reading_a_childs_weight_joins_that_child_with_the_one_whose_output_it_reads(tmp_path):
    """The tied head reads ``c``'s output (GPU 1) and ``a.weight`` (GPU 0): ``c`` joins ``a`` (their bytes tie:
    the lower GPU), ``b`` keeps GPU 1."""
    pytest.importorskip("accelerate")
    graph = from_module(_TiedHead(), (torch.randn(4, 16),))
    cluster = load_cluster("k80x2")
    device_map = to_device_map(graph, Placement(_by_module(graph, {"a": 0, "b": 1, "c": 1, "": 1}), cluster))
    assert device_map == {"a": 0, "b": 1, "c": 0}
    assert cross_device_reads(graph, cluster, device_map) == []
    assert _ops_reading_two_devices(_TiedHead(), device_map, torch.randn(4, 16), tmp_path) == []


def test_accelerates_max_memory_gives_the_cpus_memory_summed():
    """Every CPU of a cluster is accelerate's one ``"cpu"``: its ``max_memory`` is theirs together, each GPU its own
    (a mutant keeping the last CPU's alone passed)."""
    from gnplace.execute.device_map import _max_memory

    cluster = cluster_from_dict({"name": "mixed", "links": {"default": "pcie3"}, "devices": [
        {"name": "cpu", "count": 2, "kind": "cpu", "memory": "1GiB"},
        {"name": "gpu", "count": 2, "kind": "p100", "memory": "3GiB"}]})
    assert _max_memory(cluster) == {"cpu": 2 << 30, 0: 3 << 30, 1: 3 << 30}


class _OwnState(torch.nn.Module):
    """A module holding a trained parameter and two buffers itself, beside a child."""

    def __init__(self):
        super().__init__()
        self.a = torch.nn.Linear(4, 4)
        self.scale = torch.nn.Parameter(torch.ones(()))
        self.register_buffer("c1", torch.zeros(4))
        self.register_buffer("c2", torch.ones(4))

    def forward(self, x):
        return self.a(x * self.scale + self.c1 + self.c2)


def test_a_modules_own_state_goes_where_its_trained_parameters_are_updated():
    """``scale`` updated on device 1, the buffers' module's ops all on device 0: the module's own state goes with its
    trained parameter (a mutant letting the two buffers outvote it passed). The module is a child: the root's own
    state goes to accelerate's main device whatever its parameters' updates do."""
    g = from_module(torch.nn.Sequential(_OwnState()), (torch.zeros(2, 4),), loss=lambda y: y.sum())
    assert g.meta["untrained_state"] == ["0.c1", "0.c2"]
    devices = [1 if n == "update/0.scale" else 0 for n in g.node_names]
    assert to_device_map(g, Placement(devices, load_cluster("k80x2"))) == {"0.a": 0, "0.c1": 1, "0.c2": 1,
                                                                           "0.scale": 1}
    root = from_module(_OwnState(), (torch.zeros(2, 4),), loss=lambda y: y.sum())
    devices = [1 if n == "update/scale" else 0 for n in root.node_names]
    assert to_device_map(root, Placement(devices, load_cluster("k80x2"))) == {"": 0}


def test_a_node_of_no_mapped_module_runs_where_its_first_producer_does():
    """The root's loss reads layer 2's output on device 1 and runs there; the input, produced by nothing, goes where
    the map's first key does (a mutant putting every such node there passed)."""
    net = torch.nn.Sequential(torch.nn.Linear(4, 4), torch.nn.Linear(4, 4), torch.nn.Linear(4, 1))
    g = from_module(net, (torch.zeros(2, 4),), loss=lambda y: y.sum())
    placed = from_device_map(g, load_cluster("k80x2"), {"0": 0, "1": 0, "2": 1})
    unmapped = {name: int(d) for name, d, path in zip(g.node_names, placed.devices, module_paths(g)) if not path}
    assert unmapped == {"root/sum": 1, "root/ones_like": 1, "input/0": 0}
