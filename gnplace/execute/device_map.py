"""Placements as ``device_map`` dicts, for transformers' ``from_pretrained`` and accelerate's ``dispatch_model``.

A ``device_map`` names, for module paths of a model, the device its parameters (and, under
accelerate's hooks, its forward) go to: an int for a GPU, ``"cpu"``. :func:`to_device_map` turns a
placement of a training graph imported from PyTorch into one: every parameter goes to the device of
its update node (where gnplace keeps it), a tied parameter (``lm_head.weight`` tied to the input
embedding) with the parameter it shares, a buffer or frozen parameter with its module's ops; a
module's own state (not its children's) stays on one device, that of most of its parameters, since
accelerate moves modules, not single tensors; and modules whose state all shares a device are merged
into their parent, so the map is as short as the placement allows and names every state-dict entry
(``from_pretrained`` refuses a map that misses one). accelerate hooks only the modules a map names, so
the own ops of a module above the keys run on their inputs where they are: a module whose own ops
would read tensors from two devices (:func:`cross_device_reads`; GPT-2's ``GPT2Block`` adds its
residual itself, ViT's embeddings add their own ``position_embeddings``) is put on one device whole, as
is every block the model lists in ``_no_split_modules``; where that module is the root, whose whole is the
model, what each such op reads is joined on one device first (nmt's projection of the decoder's output).

:func:`from_device_map` goes the other way, so that the simulator can score what a map does: each
node runs where the longest map key that prefixes its module path says. ``"cpu"`` runs on the CPU only in a
map without a GPU: beside one, ``dispatch_model`` (and so ``from_pretrained``) offloads a ``"cpu"`` module's
parameters to CPU memory and runs the module on its main device, the map's first GPU, copying them over on
each forward (``AlignDevicesHook(execution_device=main, offload=True)``), and a training step never updates
them (the model's parameters are left on ``meta``; their gradients are lost), so :func:`to_device_map` warns
where its map puts modules there. :func:`accelerate_device_map`
asks accelerate itself for the map its ``"auto"`` (also ``"balanced"``: memory spread evenly over the
GPUs, the model's no-split blocks kept whole) or ``"sequential"`` (fill each device in module order)
would make, for comparison.
"""

from __future__ import annotations

import reprlib
import warnings
from collections import defaultdict
from collections.abc import Mapping
from typing import Any

import numpy as np

from gnplace.cluster import Cluster
from gnplace.exceptions import InvalidArgument, MissingDependency, UnsupportedGraph, first_line
from gnplace.graph import PHASES, OpGraph, check_graph
from gnplace.placement import GraphKey, Placement, as_placement, check_cluster, check_graph_and_cluster
from gnplace.quiet import quietly

__all__ = [
    "to_device_map", "from_device_map", "accelerate_device_map", "device_map_values", "compare_device_maps",
    "module_paths", "require_parameters", "cross_device_reads", "no_split_module_classes", "ACCELERATE_MODES",
    "transformers_device_map",
]


def device_map_values(cluster: Cluster) -> list[int | str]:
    """The ``device_map`` value of each device of ``cluster``: ``"cpu"`` for CPUs, GPUs ``0, 1, ...`` in order.

    Examples:
        >>> from gnplace.cluster import load_cluster
        >>> device_map_values(load_cluster("cpu_gpu"))
        ['cpu', 0]
    """
    values: list[int | str] = []
    gpus = 0
    for dev in cluster.devices:
        if dev.is_cpu:
            values.append("cpu")
        else:
            values.append(gpus)
            gpus += 1
    return values


def _updated_parameters(graph: OpGraph) -> dict[int, str]:
    """The parameter each update node updates, by node: ``update/<parameter>`` nodes of the update phase.

    By the phase too: a forward op of a top-level module named ``update`` is ``update/addmm``, and it was read as
    a parameter ``addmm`` (a key of the map, and a vote on where the root's own state goes).
    """
    update = PHASES.index("update")
    return {i: name.removeprefix("update/") for i, name in enumerate(graph.node_names)
            if name.startswith("update/") and int(graph.phase[i]) == update}


def module_paths(graph: OpGraph) -> list[str]:
    """The module path each node belongs to: its ``module``, or for an update node its parameter's full name.

    A parameter's name (``"layer.weight"``) lies under its module's path, so a ``device_map`` key that
    prefixes one prefixes the other; a parameter of the root module is its own key.

    Raises:
        InvalidArgument: if ``graph`` is no :class:`~gnplace.graph.OpGraph` (None was an AttributeError).
    """
    check_graph(graph)
    updated = _updated_parameters(graph)
    return [updated.get(i, module) for i, module in enumerate(graph.module)]


def _parameter_devices(graph: OpGraph, devices: np.ndarray) -> dict[str, int]:
    return {name: int(devices[i]) for i, name in _updated_parameters(graph).items()}


def _module_device(graph: OpGraph, devices: np.ndarray, path: str) -> int:
    """The device most nodes of module ``path`` run on, else its nearest enclosing module's (ties: the lower index)."""
    while True:
        inside = np.array([not path or m == path or m.startswith(path + ".") for m in graph.module], dtype=bool)
        if inside.any():
            return int(np.bincount(devices[inside]).argmax())
        path = path.rpartition(".")[0]


def _state_devices(graph: OpGraph, devices: np.ndarray, per_param: dict[str, int]) -> dict[str, int]:
    """Devices of the state-dict entries without an update node, from the import's record (``graph.meta``).

    A tied parameter goes with the parameter it shares; a buffer or frozen parameter with the ops of
    its module. Graphs imported before gnplace recorded these (or from ONNX) have neither entry.
    """
    tied = _tied(graph)
    found = {name: _module_device(graph, devices, name.rpartition(".")[0]) for name in _untrained(graph)}
    for alias, name in tied.items():
        held = per_param.get(name, found.get(name))
        found[alias] = held if held is not None else _module_device(graph, devices, alias.rpartition(".")[0])
    return found


def _untrained(graph: OpGraph) -> list[str]:
    """The state-dict entries the import recorded as not trained (buffers, frozen parameters)."""
    untrained = graph.meta.get("untrained_state")
    return [str(k) for k in untrained] if isinstance(untrained, list) else []


def _untrained_readers(graph: OpGraph) -> dict[str, list[int]]:
    """The forward nodes that read each buffer or frozen parameter, from the import's record (``graph.meta``).

    Names the record gives that are no node of ``graph`` are skipped; a graph imported before gnplace recorded
    it (or from ONNX) has none.
    """
    record = graph.meta.get("untrained_readers")
    if not isinstance(record, dict):
        return {}
    node = {name: i for i, name in enumerate(graph.node_names)}
    return {str(state): [node[r] for r in readers if r in node]
            for state, readers in record.items() if isinstance(readers, list)}


def _tied(graph: OpGraph) -> dict[str, str]:
    """Each tied parameter's name and the name of the parameter it shares, from the import's record."""
    tied = graph.meta.get("tied_parameters")
    return {str(k): str(v) for k, v in tied.items()} if isinstance(tied, dict) else {}


def require_parameters(graph: OpGraph, root: str = "") -> None:
    """Refuse a graph with no ``update/<parameter>`` node (it has no modules to map), or a ``root`` not all of it.

    Args:
        graph (OpGraph): the graph.
        root (str, optional): the submodule a map's keys would be relative to (see :func:`to_device_map`).

    Raises:
        InvalidArgument: if the graph has no parameters (not imported from a PyTorch module or from an ONNX file
            with its weights), or
            ``root`` holds none of them, or some state lies outside ``root`` (a map of ``root`` could not place
            it). Which keys a map has does not depend on the placement, so this refuses before any placer runs;
            if ``graph`` is no :class:`~gnplace.graph.OpGraph` or ``root`` no ``str`` (3 was a TypeError).
    """
    check_graph(graph)
    if not isinstance(root, str):
        raise InvalidArgument(f"device_map root must be a submodule path (a str, '' for the module itself), "
                              f"got {reprlib.repr(root)}")
    params = list(_updated_parameters(graph).values())
    if not params:
        raise InvalidArgument(
            f"graph {graph.name!r} has no parameters: a device_map needs a model whose weights the graph holds "
            "(imported from PyTorch, or from an ONNX file with its initializers)"
        )
    if root and not any(p.startswith(root + ".") for p in params):
        tops = sorted({p.split(".")[0] for p in params})
        raise InvalidArgument(f"device_map root {root!r}: no parameter of graph {graph.name!r} lies under it "
                              f"(its top-level modules: {', '.join(tops[:8])})")
    if root:
        keys = [*params, *_untrained(graph), *_tied(graph)]
        outside = [key for key in keys if not key.startswith(root + ".")]
        if outside:
            raise InvalidArgument(f"device_map root {root!r}: {outside[0]!r} lies outside it, and a map of {root!r} "
                                  "cannot place it")


def to_device_map(
    graph: OpGraph, placement: Any, cluster: Cluster | None = None, *, root: str = "", module: Any = None
) -> dict[str, int | str]:
    """The module-level ``device_map`` of ``placement`` (see the module docstring).

    Args:
        graph (OpGraph): a training graph imported from PyTorch (it has an ``update/<parameter>`` node
            per parameter).
        placement (Placement or array-like): its placement.
        cluster (Cluster, optional): the cluster (default: the placement's).
        root (str, optional): a submodule path the keys are made relative to, for the model inside a
            wrapper that only computes the loss: with ``root="model"`` the key ``model.transformer.h.0``
            becomes ``transformer.h.0``, what ``from_pretrained`` of the inner model expects (default:
            ``""``, the imported module itself).
        module (torch.nn.Module, optional): the module ``graph`` was imported from; where given, every
            submodule whose class it names in ``_no_split_modules`` (:func:`no_split_module_classes`) is kept
            on one device, as accelerate's own maps keep it.

    A module no key names or lies under runs unhooked: accelerate moves no input of its own ops (GPT-2's
    ``GPT2Block`` adds ``residual + attn_output`` itself), so where such an op would read tensors from two
    devices (:func:`cross_device_reads`) the smallest module running it is put on one device whole, the
    device holding most of its parameter bytes, until none does (an op of the root's own forward first joins
    the modules and state it reads, on accelerate's main device where it reads the root's own state or an
    input there, and the model goes whole only where that cannot help); a placement whose map has no such op
    keeps its map. Where the map so made runs a device out of memory (its simulated step's peak bytes over the
    device's ``memory``), the modules are moved again, each to the first device, in that order, where the
    step keeps it within memory; where none does, the least over, and a warning names the devices over memory.
    The root's own state (nmt's ``projection``) is written on accelerate's main device, the map's first GPU,
    where ``dispatch_model``'s hook of the root moves it whatever its key says (:func:`from_device_map`).

    Raises:
        InvalidArgument: if the graph has no parameters (not imported from a PyTorch module or from an ONNX file
            with its weights), or
            ``root`` is given and holds none of them, or some state lies outside ``root``; if ``graph`` is no
            :class:`~gnplace.graph.OpGraph`, ``cluster`` no :class:`~gnplace.cluster.Cluster`, ``root`` no
            ``str`` or ``module`` no module, or a module lacking a parameter of the graph (another model's).
        InvalidPlacement: if ``placement`` does not place every op of ``graph`` on a device of the cluster.

    Warns:
        UserWarning: if the map's simulated step runs a device out of memory (saying whether the placement does).

    Examples:
        >>> import torch
        >>> from gnplace.cluster import load_cluster
        >>> from gnplace.importers.torch import from_module
        >>> net = torch.nn.Sequential(torch.nn.Linear(4, 4), torch.nn.Linear(4, 4), torch.nn.Linear(4, 1))
        >>> g = from_module(net, (torch.zeros(2, 4),), loss=lambda y: y.sum())
        >>> cluster = load_cluster("k80x2")
        >>> devices = [1 if "update/2" in n else 0 for n in g.node_names]
        >>> to_device_map(g, Placement(devices, cluster))
        {'0': 0, '1': 0, '2': 1}
    """
    check_graph(graph)  # None was an AttributeError ('node_names')
    _check_root(root, "to_device_map")
    _check_module_type(module, "to_device_map")
    cluster = cluster or getattr(placement, "cluster", None)
    if cluster is None:
        raise InvalidArgument("to_device_map needs the cluster (pass a Placement, or cluster=)")
    require_parameters(graph, root)
    _check_module_of(graph, module, "to_device_map")
    placed = as_placement(graph, cluster, placement)
    per_param = _parameter_devices(graph, placed.devices)
    # every state-dict entry needs a key: transformers and accelerate refuse a map that leaves one out
    per_key = per_param | _state_devices(graph, placed.devices, per_param)  # keys under root: require_parameters
    hosts = _hosts_of_modules_never_run(graph, per_key)
    held = {module.rpartition(".")[0] for module in per_key}
    for key in per_key:  # the state of a module never run, whose host holds none, goes where the host's ops run
        host = hosts.get(key.rpartition(".")[0])
        if host is not None and host not in held:
            per_key[key] = _module_device(graph, placed.devices, host)
    per_key = _modules_kept_whole(per_key, per_param, _tied(graph), hosts)
    whole = _kept_off_unhooked_ops(graph, cluster, per_key, root, module)
    peaks = _map_peaks(graph, cluster, whole, root)
    if _overflow(peaks, cluster) > 0:  # modules kept whole went where they do not fit: again, minding memory
        roomy = _kept_off_unhooked_ops(graph, cluster, per_key, root, module, within_memory=True)
        roomy_peaks = _map_peaks(graph, cluster, roomy, root)
        if _overflow(roomy_peaks, cluster) < _overflow(peaks, cluster):
            whole, peaks = roomy, roomy_peaks
        if _overflow(peaks, cluster) > 0:
            _warn_over_memory(graph, cluster, placed, peaks)
    values = device_map_values(cluster)
    main = values.index(_main_device(_walked(whole, values, root)))  # the root's own state: where its hook moves it
    chosen = _walked({key: main if key.rpartition(".")[0] == root else device for key, device in whole.items()},
                     values, root)
    first = _first_nodes(graph)
    ordered = sorted(chosen.items(), key=lambda kv: (first.get(kv[0], graph.num_ops), kv[0]))
    written = dict(ordered) if not root else \
        {("" if key == root else key.removeprefix(root + ".")): value for key, value in ordered}
    _warn_offloaded(graph, cluster, written)  # the keys as written: with root, 'model.transformer.h' was named
    return written


def _check_root(root: Any, caller: str) -> None:
    if not isinstance(root, str):  # 3 was a TypeError ('int' + 'str'), None a message about an empty device_map
        raise InvalidArgument(f"{caller}'s root must be a submodule path (a str, '' for the module itself), "
                              f"got {reprlib.repr(root)}")


def _check_module_type(module: Any, caller: str, optional: bool = True) -> None:
    """Refuse a ``module`` argument that is no module, nor None where ``optional`` (a str was an AttributeError)."""
    if module is None and optional:
        return
    if not callable(getattr(module, "modules", None)):
        either = "the torch.nn.Module the graph was imported from, or None" if optional else "a torch.nn.Module"
        raise InvalidArgument(f"{caller}'s module must be {either}, got {reprlib.repr(module)}")


def _check_module_of(graph: OpGraph, module: Any, caller: str) -> None:
    """Refuse a ``module`` that is not the one ``graph`` was imported from: another model's, or one grown since.

    It must hold every parameter of the graph, and the graph every trained parameter of it (``requires_grad``; by
    any of its names: a tied one is one parameter).
    """
    if module is not None and callable(getattr(module, "named_parameters", None)):
        # another model's module was taken as it was: its _no_split_modules were kept whole, or none of the graph's
        names: dict[int, list[str]] = defaultdict(list)  # each parameter's names, by identity
        trained: dict[int, bool] = {}
        for name, parameter in module.named_parameters(remove_duplicate=False):
            names[id(parameter)].append(name)
            trained[id(parameter)] = bool(getattr(parameter, "requires_grad", False))
        held = {name for found in names.values() for name in found}
        updated = set(_updated_parameters(graph).values())
        missing = sorted(updated - held)
        either = "give the module the graph was imported from, or None"
        if missing:
            raise InvalidArgument(
                f"{caller}'s module is not the one graph {graph.name!r} was imported from: {len(missing)} of "
                f"the graph's parameters are none of its own, e.g. {missing[0]!r}; {either}"
            )
        # one grown since the import: a no-split block only it has was merged up to the root, the model on one device
        known = updated | set(_tied(graph))
        extra = sorted(found[0] for key, found in names.items() if trained[key] and not known.intersection(found))
        if extra:
            raise InvalidArgument(
                f"{caller}'s module is not the one graph {graph.name!r} was imported from: it holds {len(extra)} "
                f"trained parameters the graph has none of, e.g. {extra[0]!r} (changed since the import?); import "
                f"it again, or {either}"
            )


def _warn_over_memory(graph: OpGraph, cluster: Cluster, placement: Placement, peaks: np.ndarray) -> None:
    """Warn that a ``device_map`` runs devices out of memory (simulated peak bytes) and whether its placement does."""
    from gnplace.sim.simulator import simulate
    from gnplace.units import format_bytes

    over = [f"{cluster.device_names[k]} {format_bytes(peaks[k])} of {format_bytes(cluster.memory[k])}"
            for k in np.flatnonzero(peaks > cluster.memory)]
    itself = "as the placement itself is" if simulate(graph, cluster, placement).is_oom else \
        "though the placement is not: no device holds the modules accelerate needs whole"
    warnings.warn(f"the device_map of {graph.name!r} on {cluster.name!r} is over memory ({', '.join(over)}; "
                  f"simulated peaks), {itself}", stacklevel=3)


def _offloaded(device_map: Mapping[str, Any]) -> list[str]:
    """The keys of ``device_map`` accelerate offloads: its ``"cpu"`` entries where it has a GPU (none without one).

    ``dispatch_model`` runs such a module on its main device (:func:`_main_device`), its parameters kept in CPU
    memory and copied over on each forward; in a map of ``"cpu"`` (and ``"disk"``) alone, ``"cpu"`` runs there.
    """
    if _main_device(device_map) == "cpu":
        return []
    return [key for key, value in device_map.items() if isinstance(value, str) and value == "cpu"]


def _warn_offloaded(graph: OpGraph, cluster: Cluster, device_map: Mapping[str, Any]) -> None:
    """Warn that ``device_map`` puts modules on ``"cpu"`` beside a GPU: accelerate runs them on the GPU, offloaded."""
    offloaded = _offloaded(device_map)
    if offloaded:
        warnings.warn(f"the device_map of {graph.name!r} on {cluster.name!r} puts {len(offloaded)} module(s) on "
                      f"\"cpu\" beside GPU {_main_device(device_map)} ({reprlib.repr(offloaded)}): accelerate runs "
                      "them on that GPU with their parameters offloaded to CPU memory, copied over each step and "
                      "never trained, not on the CPU as the placement does", stacklevel=3)


def _walked(per_key: dict[str, int], values: list[int | str], root: str) -> dict[str, int | str]:
    """The shortest map of ``per_key`` (device by state-dict entry) under ``root``, its keys as full paths."""
    # the map's values under every module path (a parameter's path and each prefix of it): by value, not by
    # device, so that a module over several CPUs, all "cpu" to accelerate, is one key
    under: dict[str, set[int | str]] = defaultdict(set)
    for param, dev in per_key.items():
        parts = param.split(".")
        for k in range(len(parts) + 1):  # every enclosing module, and the parameter itself
            under[".".join(parts[:k])].add(values[dev])
    chosen: dict[str, int | str] = {}
    # each module path's children, found once: a scan of every path for each module walked was quadratic (20 s
    # for a 28,000-op graph of 9,000 modules, minutes for 100,000 ops)
    kids: dict[str, list[str]] = defaultdict(list)
    for path in under:
        parent = path.rpartition(".")[0]
        if parent or (path and "." not in path):  # the root's children are the top-level modules
            kids[parent].append(path)

    def walk(prefix: str) -> None:
        if len(under[prefix]) == 1:  # everything below is on one device: one key
            chosen[prefix] = next(iter(under[prefix]))
            return
        for child in sorted(kids.get(prefix, ())):
            if child in per_key:  # a parameter (or buffer) held directly by a module that is split
                chosen[child] = values[per_key[child]]
            else:
                walk(child)

    walk(root)
    return chosen


def cross_device_reads(graph: OpGraph, cluster: Cluster, device_map: Mapping[str, Any], root: str = "") -> list[int]:
    """Forward ops that accelerate runs unhooked and that read tensors from two devices under ``device_map``.

    ``dispatch_model`` hooks the modules a map names (``AlignDevicesHook`` moves their inputs and their
    state to their device), so an op of a module that no key names or lies under (at or below ``root``: the
    keys are full paths, as :func:`from_device_map` takes them) runs on its tensors where they are: one
    reading the outputs of two modules on two devices (a block's residual add, with its attention on
    another GPU), or an output and a parameter of its own module on another device (ViT's embeddings add
    their ``position_embeddings`` to the patch embeddings' output), fails on real devices, though on a CPU,
    where every device is ``"cpu"``, it runs. A ``"cpu"`` module of a map with a GPU is hooked to run on the main
    device (offloaded, :func:`from_device_map`), so its ops read there.

    An op reads its producers' outputs: a hooked module's on its device, an unhooked op's where its first
    tensor is. A user input (an ``input`` node, or with ``root`` a tensor made outside it) enters through the
    root's forward, whose hook moves every argument to accelerate's main device: an op of the root's own
    forward reads it there (an add of an input to the output of a child on another GPU reads two), and an op
    of any module below the root wherever that op needs it (a hooked module's hook moves it). A loss (an op
    of kind ``loss``, :mod:`gnplace.opkinds`) is the exception: the models that compute one in the root's own
    forward move its labels there (``labels.to(logits.device)``, as transformers' and gnplace's families do),
    which the import records as no op (the move is a no-op on one device), so a loss reads its labels where
    it needs them. It also reads the parameters first used in its module call (the import records which call
    that is, the group of the parameter's update node, not which op of the call; a later call reads one
    through its ``read`` node): each on the device the map gives it, but those of the dispatched model's root
    itself (``root``) on accelerate's main device (the map's first GPU), where the root's hook moves them.
    A parameter whose gradient reads no saved tensor (``x + b``, ``torch.cat([token, x])``) names no reader
    (:func:`_parameter_readers`): every forward op of its call is taken to read it, and one that does not
    (``y * 2`` beside ``x + b``, ``y`` on another device than ``b``) is listed too. The graph cannot tell them
    apart (where the caller adds the two outputs, both their gradients are one tensor of the caller's); the
    import knows the readers but records them nowhere, and a record would change the shipped graphs' meta.

    Buffers and frozen parameters have no gradient: an op reads one where the import recorded it
    (``graph.meta["untrained_readers"]``, :mod:`gnplace.importers.torch`; a graph imported before 2026-12-06
    or from ONNX has no record, and its reads of them go unchecked). The record leaves out ops reading no
    other tensor (their output's device is then :func:`from_device_map`'s) and ops of a module holding its
    trainable parameters itself and no state below it (a batch norm), which every map that keeps a module's
    own state together hooks. One of the root's own is read on the main device; another on the device of the
    longest key naming it or a module above it (``load_checkpoint_and_dispatch`` and ``from_pretrained`` load
    a state-dict entry to its own key's device, a hook moves a module's), and a non-persistent buffer (in no
    state dict) of a module no key names or lies above stays where the model was made, which no device of a
    map with two devices, one a GPU, is taken to be (a causal mask or position ids added in a split module's
    own forward). ``dispatch_model`` of a model already in memory moves no tensor that a key names by its own
    name: it stays where it was (accelerate warns that the key matches no submodule).

    Returns:
        list[int]: the node indices, in order (none for a map accelerate runs as the placement does).
    """
    placed = from_device_map(graph, cluster, device_map, root)
    values = device_map_values(cluster)
    main = _main_device(device_map)
    # a user input is where the unhooked op reading it needs it (None: any), but the root's own ops read it on
    # the main device, where the root's hook moves it (as it moves what a wrapper around ``root`` passes in)
    devices: list[int | str | None] = [None if kind == "input" else values[int(d)]
                                       for kind, d in zip(graph.op_types, placed.devices)]
    entering = [kind == "input" or not _inside(module, root) for kind, module in zip(graph.op_types, graph.module)]
    parameters: dict[int, list[int | str]] = defaultdict(list)  # the devices of the state each op reads
    for state, update, readers in _state_readers(graph):
        if update is None:  # a buffer or frozen parameter: where its key's device, or the root's, loads it
            held = _untrained_device(state, device_map, cluster, root, main)
        else:  # a trained parameter: its update node's device, but the root's own on the main device
            held = main if state.rpartition(".")[0] == root else values[int(placed.devices[update])]
        for v in readers:
            parameters[v].append(held)
    forward = PHASES.index("forward")
    in_ptr, in_src, _ = graph.in_csr
    hooked: dict[str, bool] = {}

    def unhooked(module: str) -> bool:
        if module not in hooked:
            hooked[module] = not _inside(module, root) or \
                any(key in device_map for key in _dotted_prefixes(module)) or "" in device_map
        return not hooked[module]

    found = []
    for v in graph.topological_order():
        module = graph.module[v]
        if int(graph.phase[v]) != forward or graph.op_types[v] == "input" or not unhooked(module):
            continue
        sources = in_src[in_ptr[v]:in_ptr[v + 1]]
        # an op of the root's own forward reads what enters the model on the main device, but for a loss: models
        # move their labels to the logits' device (transformers' do, and gnplace's families), a no-op at import
        own = module == root and graph.op_kinds[v] != "loss"
        read = [main if own and entering[s] else devices[s] for s in sources
                if devices[s] is not None or own and entering[s]] + parameters.get(int(v), [])
        if read:
            devices[v] = read[0]
        elif len(sources):
            devices[v] = None  # it reads user inputs only: where they are put
        if len(set(read)) > 1:
            found.append(int(v))
    return sorted(found)


_UNMOVED = "unmoved"
"""Where :func:`cross_device_reads` takes a tensor accelerate never moves to be: where the model was made."""


def _untrained_device(
    name: str, device_map: Mapping[str, Any], cluster: Cluster, root: str, main: int | str
) -> int | str:
    """Where a buffer or frozen parameter ``name`` is under ``device_map``, for the ops reading it.

    One of the root's own is on the main device (the root's hook moves it there); another on the device of the
    longest key naming it or a module above it (a module's hook moves it there; the map places a state-dict
    entry named by its own key there). With no such key (a non-persistent buffer, in no state dict, of a module
    the map splits), nothing moves it: it stays where the model was made, ``"unmoved"``, but in a map without a
    GPU, where that is the CPU, and in a map of one device, to which ``dispatch_model`` moves the whole model.
    """
    if name.rpartition(".")[0] == root:
        return main
    values = device_map_values(cluster)
    key = next((k for k in _dotted_prefixes(name) if k in device_map), "" if "" in device_map else None)
    if key is not None:
        return values[_device_index(device_map[key], cluster, values)]
    used = {values[_device_index(value, cluster, values)] for value in device_map.values()}
    return next(iter(used)) if len(used) == 1 else _UNMOVED if main != "cpu" else "cpu"


def _inside(module: str, root: str) -> bool:
    """Whether ``module`` is ``root`` or lies below it (every module lies inside the root ``""``)."""
    return not root or module == root or module.startswith(root + ".")


def _main_device(device_map: Mapping[str, Any]) -> int | str:
    """Accelerate's main device for ``device_map``: its first GPU, or ``"cpu"`` with none.

    ``dispatch_model`` takes the first of the map's values other than ``"cpu"`` and ``"disk"`` (of GPU
    indices, the lowest) and hooks the model's root there, moving the root's own tensors to it.
    """
    gpus = sorted({int(value[5:]) if isinstance(value, str) and value.startswith("cuda:") else value
                   for value in device_map.values() if not isinstance(value, str) or value.startswith("cuda:")})
    return gpus[0] if gpus else "cpu"


def _parameter_readers(graph: OpGraph) -> dict[int, list[int]]:
    """The forward ops that read each parameter where it is held, by update node: ``{update: [readers]}``.

    The import puts a parameter's update node in the group (the module call) of its first forward reader (a
    later call reads it through a ``read`` node) but records no edge from the parameter to that reader. Its
    gradient tells more: walking back from the update node through the call's backward ops, the first ones
    that read forward tensors compute the gradient from what the reader saved (``x`` of ``x * w``, ``h`` of
    ``h @ w``), so the readers are the call's forward ops among those tensors or reading one. A gradient
    computed from no saved tensor (``x + w``: the output's gradient, summed) names none, nor does one whose
    forward tensors are no op of the call's nor read by one (``x + w`` summed by the caller: the sum's gradient,
    ``ones_like``, is recorded as a forward op of the caller), and then every forward op of the call may read
    it: an over-count where the call has ops that do not (a call returning ``a(x) + w, b(x) * 2`` lists ``mul``
    as reading ``w``). A parameter of a module the forward never calls, whose update node reads no gradient, is
    read by no op.
    """
    in_ptr, in_src, _ = graph.in_csr
    out_ptr, out_dst, _ = graph.out_csr
    forward, backward = PHASES.index("forward"), PHASES.index("backward")
    group = graph.group
    in_call: dict[int, list[int]] = defaultdict(list)  # each call's forward ops
    for v in np.flatnonzero(graph.phase == forward):
        if graph.op_types[v] != "input":
            in_call[int(group[v])].append(int(v))
    found: dict[int, list[int]] = {}
    ran = {""} | {prefix for module in {m for m, phase in zip(graph.module, graph.phase) if int(phase) == forward}
                  for prefix in _prefixes(module)}
    for up, name in _updated_parameters(graph).items():
        if in_ptr[up + 1] == in_ptr[up] and name.rpartition(".")[0] not in ran:  # no gradient, no call: an unused
            found[up] = []  # head, whose update node sits in the root's call, whose every op was taken to read it
            continue
        call = int(group[up])
        saved: set[int] = set()
        seen = {up}
        stack = [up]
        while stack:
            u = stack.pop()
            sources = [int(s) for s in in_src[in_ptr[u]:in_ptr[u + 1]]]
            kept = [s for s in sources if int(graph.phase[s]) == forward]
            if kept and u != up:
                saved.update(kept)  # a gradient formula: the tensors it reads are the reader's
                continue
            for s in sources:
                if s not in seen and int(graph.phase[s]) == backward and int(group[s]) == call:
                    seen.add(s)
                    stack.append(s)
        members = set(in_call.get(call, ()))
        readers = {s for s in saved if s in members}
        readers.update(int(d) for s in saved for d in out_dst[out_ptr[s]:out_ptr[s + 1]] if int(d) in members)
        found[up] = sorted(readers or members)
    return found


def _kept_off_unhooked_ops(
    graph: OpGraph, cluster: Cluster, per_key: dict[str, int], root: str, module: Any = None,
    within_memory: bool = False,
) -> dict[str, int]:
    """``per_key`` with modules moved whole to one device until no unhooked op reads two (:func:`cross_device_reads`).

    First the blocks ``module`` names as no-split, then, round by round, the smallest modules whose own ops
    read two devices: each goes where most of its parameter bytes are, with the parameters tied to its own.
    Where only the root's own ops read two, the state each reads (:func:`_read_keys`) is joined instead,
    on the main device where one reads it there, and the root goes whole where no join moves anything.
    Keys moved together stay together, so every round joins some and it ends (at worst with one device).
    With ``within_memory``, each goes to the first device, in that order then by its bytes there, where the
    simulated step of the map so far keeps that device within its memory, or, where none does, the one that
    leaves the fewest bytes over the devices' memories (:func:`_overflow`).
    """
    tied = _tied(graph)
    partners: dict[str, list[str]] = defaultdict(list)
    for alias, name in tied.items():
        partners[alias].append(name)
        partners[name].append(alias)
    weight = {name: float(graph.param_bytes[i]) for i, name in _updated_parameters(graph).items()}
    joined = {key: key for key in per_key}

    def find(key: str) -> str:
        while joined[key] != key:
            joined[key] = joined[joined[key]]
            key = joined[key]
        return key

    kept = dict(per_key)

    def merge(path: str) -> bool:
        """Put ``path`` (or, holding no state, the nearest module above it that does) on one device; False: it was."""
        while True:
            keys = [key for key in kept if not path or key.startswith(path + ".")]
            if keys or not path:
                break
            path = path.rpartition(".")[0]
        return join(keys)

    def join(keys: list[str], to: int | None = None) -> bool:
        """Put the state ``keys`` name, and what is joined to it, on one device (``to``, where given); False: it was."""
        keys = keys + [other for key in keys for other in partners.get(key, ()) if other in kept]
        if len({find(key) for key in keys}) < 2 and len({kept[key] for key in keys} | ({to} - {None})) < 2:
            return False
        for key in keys:
            joined[find(key)] = find(keys[0])
        top = find(keys[0])
        group = [key for key in kept if find(key) == top]
        bytes_on = np.zeros(cluster.num_devices)
        for key in group:
            bytes_on[kept[key]] += weight.get(key, 0.0)
        device = int(bytes_on.argmax()) if bytes_on.any() else int(np.bincount([kept[k] for k in group]).argmax())
        if to is not None:
            device = to
        elif within_memory:
            device = _roomiest(graph, cluster, kept, group, [device, *np.argsort(-bytes_on, kind="stable")], root)
        kept.update(dict.fromkeys(group, device))
        return True

    if module is not None:
        blocks = set(no_split_module_classes(module))
        for path, sub in module.named_modules(remove_duplicate=False):
            if type(sub).__name__ in blocks and (not root or path.startswith(root + ".")):
                merge(path)
    values = device_map_values(cluster)
    reads = _state_reads(graph)
    joins_left = len(kept)
    while True:
        walked = _walked(kept, values, root)
        bad = cross_device_reads(graph, cluster, walked, root)
        if not bad:
            return kept
        modules = {graph.module[v] for v in bad}
        smallest = [path for path in sorted(modules)  # one with a module below it that reads two devices waits
                    if not any(other != path and (not path or other.startswith(path + ".")) for other in modules)]
        if smallest == [root] and joins_left > 0:  # the root's own ops: join what each reads, before the whole model
            joins_left -= 1  # a join to the main device may undo one before it: a bound, so that the rounds end
            main = values.index(_main_device(walked))
            joins = [_read_keys(graph, v, walked, kept, reads, root) for v in bad]
            if any([join(found[0], main if found[1] else None) for found in joins if found]):
                continue
        if not any([merge(path) for path in smallest]) and not merge(root):  # else all of it on one device
            return kept  # one device already: no op reads two


def _state_readers(graph: OpGraph) -> list[tuple[str, int | None, list[int]]]:
    """Each state-dict entry forward ops read: ``(name, update node, readers)``, the trained parameters first.

    A trained parameter's readers are :func:`_parameter_readers`'; a buffer's or frozen parameter's (update node
    None) the import's record (:func:`_untrained_readers`).
    """
    names = _updated_parameters(graph)
    found: list[tuple[str, int | None, list[int]]] = [
        (names[update], update, readers) for update, readers in _parameter_readers(graph).items()]
    found += [(state, None, readers) for state, readers in _untrained_readers(graph).items()]
    return found


def _state_reads(graph: OpGraph) -> dict[int, list[str]]:
    """The state-dict entries each forward op reads (:func:`_state_readers` by op)."""
    reads: dict[int, list[str]] = defaultdict(list)
    for state, _, readers in _state_readers(graph):
        for v in readers:
            reads[v].append(state)
    return reads


def _read_keys(
    graph: OpGraph, v: int, walked: Mapping[str, Any], kept: Mapping[str, int], reads: Mapping[int, list[str]],
    root: str,
) -> tuple[list[str], bool] | None:
    """The state beside which op ``v`` of the root's own forward reads, and whether it reads on the main device.

    A producer in a module the map ``walked`` hooks puts its output on that module's key's device, and a
    parameter of a module below the root is on its own key's: joining the state under those keys puts all
    of them on one device. What the root's hook moves to accelerate's main device (an input, the root's own
    state) is read there, so where the op reads one the rest must go there too (``True``), the root's state
    read with them. An unhooked producer's output is where its own first tensor was, which no join names: None.
    """
    in_ptr, in_src, _ = graph.in_csr
    covering: list[str] = []
    main = False
    for s in in_src[in_ptr[v]:in_ptr[v + 1]]:
        module = graph.module[s]
        if graph.op_types[s] == "input" or not _inside(module, root):
            main = main or graph.op_kinds[v] != "loss"  # a loss reads its labels where it needs them
        elif module == root:
            return None
        else:
            covering.append(module)
    keys: list[str] = []
    for name in reads.get(int(v), ()):
        if name.rpartition(".")[0] == root:  # the root's own state: moved to the main device, joined there
            main = True
            keys += [name] if name in kept else []
        else:
            covering.append(name)
    for path in covering:
        key = next((k for k in _dotted_prefixes(path) if k in walked and k != root), None)
        if key is None:
            return None  # an unhooked module's producer
        keys += [k for k in kept if k == key or k.startswith(key + ".")]
    return (list(dict.fromkeys(keys)), main) if keys else None


def _map_peaks(graph: OpGraph, cluster: Cluster, per_key: dict[str, int], root: str) -> np.ndarray:
    """Simulated peak bytes on each device of the map ``per_key`` makes, ``[num_devices]``."""
    from gnplace.sim.simulator import simulate

    device_map = _walked(per_key, device_map_values(cluster), root)
    return np.asarray(simulate(graph, cluster, from_device_map(graph, cluster, device_map, root)).peak_memory,
                      dtype=float)


def _overflow(peaks: np.ndarray, cluster: Cluster) -> float:
    """Bytes over memory, summed over the devices (0 where the map fits)."""
    return float(np.maximum(peaks - cluster.memory, 0.0).sum())


def _roomiest(
    graph: OpGraph, cluster: Cluster, kept: dict[str, int], group: list[str], order: list[Any], root: str
) -> int:
    """The first device of ``order`` on which the keys ``group`` keep it within memory, else the least over memory.

    Each candidate is judged by the simulated step of the whole map with ``group`` moved there: the device
    must stay within its memory (bytes); where none does, the one with the fewest bytes over all the
    devices' memories wins (ties: the earlier in ``order``).
    """
    best, least = int(order[0]), np.inf
    for device in dict.fromkeys(int(d) for d in order):  # in order, each once
        peaks = _map_peaks(graph, cluster, {**kept, **dict.fromkeys(group, device)}, root)
        if peaks[device] <= cluster.memory[device]:
            return device
        over = _overflow(peaks, cluster)
        if over < least:
            best, least = device, over
    return best


def _hosts_of_modules_never_run(graph: OpGraph, keys: Any) -> dict[str, str]:
    """Modules holding state-dict ``keys`` whose forward never runs, each with the nearest module above it that runs.

    ``nn.MultiheadAttention`` reads ``out_proj.weight`` in its own forward and never calls ``out_proj``, so
    the import records no forward node under ``out_proj``: a map that put ``out_proj`` apart from its host
    would leave its weight where no hook of accelerate's fetches it (``dispatch_model`` failed on "disk",
    a tensor on device meta; on two GPUs the host's ops would read it from the other one).
    """
    forward = PHASES.index("forward")
    ran = {""} | {prefix for module in {m for m, phase in zip(graph.module, graph.phase) if int(phase) == forward}
                  for prefix in _prefixes(module)}
    hosts: dict[str, str] = {}
    for key in keys:
        module = key.rpartition(".")[0]
        if module not in ran:
            hosts[module] = next((p for p in _dotted_prefixes(module) if p in ran), "")
    return hosts


def _modules_kept_whole(
    per_key: dict[str, int], per_param: dict[str, int], tied: dict[str, str] | None = None,
    hosts: dict[str, str] | None = None,
) -> dict[str, int]:
    """``per_key`` with the state each module holds directly (not its children's) moved to one device.

    accelerate's ``dispatch_model`` hooks modules, not tensors: a key per parameter of one module
    (``1.weight`` on one device, ``1.bias`` on another), as an op-level placement may ask for, is never
    acted on, and ``from_pretrained`` would load the two on different devices and fail in the forward.
    A module's direct state goes where most of its trainable parameters' updates run (ties: the lower
    device index), or, with none, where most of its buffers and frozen parameters go. Modules that
    share a tied parameter (``tied``: alias -> the name it shares) hold one tensor, so they are kept on
    one device together, chosen over the state of them all; so is a module never run with the module
    above it that reads its state (``hosts``: see :func:`_hosts_of_modules_never_run`).
    """
    direct: dict[str, list[str]] = defaultdict(list)
    for key in per_key:
        direct[key.rpartition(".")[0]].append(key)
    joined = {module: module for module in direct}

    def find(module: str) -> str:
        while joined[module] != module:
            module = joined[module]
        return module

    for alias, name in (tied or {}).items():
        ends = [key.rpartition(".")[0] for key in (alias, name)]
        if all(end in joined for end in ends):
            joined[find(ends[0])] = find(ends[1])
    for module, host in (hosts or {}).items():
        if module in joined and host in joined and find(module) != find(host):
            joined[find(module)] = find(host)
    groups: dict[str, list[str]] = defaultdict(list)
    for module, keys in direct.items():
        groups[find(module)].extend(keys)
    kept = dict(per_key)
    for keys in groups.values():
        trained = [per_key[k] for k in keys if k in per_param] or [per_key[k] for k in keys]
        device = int(np.bincount(trained).argmax())
        kept.update(dict.fromkeys(keys, device))
    return kept


def _first_nodes(graph: OpGraph) -> dict[str, int]:
    """The first node of each module path and of each path a node's module lies under (``a`` and ``a.b`` of ``a.b.c``).

    The keys of a map are sorted by it (module order), then by name; a key no node lies under goes last.
    """
    first: dict[str, int] = {}
    for i, module in enumerate(graph.module):
        if module in first:  # and every path it lies under, with a node as early
            continue
        first[module] = i
        for j, char in enumerate(module):
            if char == ".":
                first.setdefault(module[:j], i)
    return first


def _dotted_prefixes(path: str) -> list[str]:
    """``path`` and every key it lies under (``key + "."`` starts it), longest first: ``a.b.c``, ``a.b``, ``a``."""
    return [path] + [path[:j] for j in range(len(path) - 1, -1, -1) if path[j] == "."]


def _prefixes(path: str) -> list[str]:
    """``"a.b.c"``'s module and those above it: ``["a", "a.b", "a.b.c"]``."""
    parts = path.split(".")
    return [".".join(parts[:k]) for k in range(1, len(parts) + 1)] if path else []


def _known_paths(graph: OpGraph, paths: list[str] | None = None) -> set[str]:
    """The keys a ``device_map`` of ``graph`` may have: ``""``, its nodes' modules and every module above them.

    Also the state-dict entries the import recorded without a node (buffers, tied parameters). ``paths``:
    the graph's :func:`module_paths`, where the caller has them.
    """
    named = [*(module_paths(graph) if paths is None else paths), *_untrained(graph), *_tied(graph)]
    return {""} | {prefix for path in named for prefix in _prefixes(path)}


def _without_stateless_modules(device_map: Mapping[str, Any], module: Any, graph: OpGraph) -> dict[str, Any]:
    """``device_map`` (accelerate's, of ``module``) less keys of modules with no state and no op in ``graph``.

    accelerate's map names every module in order, a parameterless one too (ResNet-50's ``nn.Identity``
    shortcuts), which has no node in the graph: it places nothing, and :func:`from_device_map`, which
    refuses a key naming no module of the graph, made the whole comparison fail on it.
    """
    known = _known_paths(graph)

    def stateless(key: str) -> bool:
        try:
            sub = module.get_submodule(key)
        except AttributeError:  # a parameter's name, or no module of ``module``: from_device_map judges it
            return False
        return next(iter(sub.parameters()), None) is None and next(iter(sub.buffers()), None) is None

    return {key: value for key, value in device_map.items() if key in known or not stateless(key)}


def from_device_map(graph: OpGraph, cluster: Cluster, device_map: Mapping[str, Any], root: str = "") -> Placement:
    """The placement a ``device_map`` gives ``graph``: each node where the longest key prefixing its module says.

    Nodes of no mapped module (inputs, the loss) run where their first producer runs, or, with
    none, where the map's first module does. In a map with a GPU, ``"cpu"`` means offloaded, as
    ``dispatch_model`` runs it: the module's ops run on accelerate's main device (the map's first GPU),
    and only the update nodes of its parameters stay on the CPU, standing for the parameters kept
    there: their gradients cross the link each step, as many bytes as the weights accelerate copies
    over (the other way) before each forward, and the parameters and their optimizer state are
    counted in the CPU's memory. It is a floor: the bytes cross once and after the backward, where other
    work may hide them, where accelerate copies the weights before each call of the module, on the step's
    critical path; and accelerate does not train an offloaded parameter (the step's gradient of it is
    lost), so the CPU's update, which runs beside the GPU's work, is the approximation's own: a map that
    offloads may be scored a little faster than one keeping it all on the GPU.

    The parameters of the dispatched model's root itself (``root``, a module path of ``graph``; its keys are full
    paths all the same) are updated on accelerate's main device whatever their keys say: ``dispatch_model`` hooks
    the root there and its hook moves the root's own tensors to that device (nmt's ``projection``, an
    ``nn.Parameter`` of the model itself; a key ``"projection": 3`` beside a main device 0 leaves it on 0).

    Raises:
        InvalidArgument: if ``device_map`` is no mapping or an empty one, a value names no device of
            ``cluster`` (``True`` and ``1.0`` were read as GPU 1, ``"cuda:x"`` was a ValueError), or a key
            names no module of ``graph`` (a typo, or a path missing the wrapper's prefix, was ignored); if
            ``graph`` is no :class:`~gnplace.graph.OpGraph`, ``cluster`` no :class:`~gnplace.cluster.Cluster` or
            ``root`` no ``str``.
    """
    check_graph_and_cluster(graph, cluster)  # None was an AttributeError ('node_names', 'devices')
    _check_root(root, "from_device_map")
    if not isinstance(device_map, Mapping) or not device_map:
        raise InvalidArgument(f"device_map must be a mapping of module path to device, at least one, "
                              f"got {reprlib.repr(device_map)}")
    values = device_map_values(cluster)
    device_map = {key: _as_accelerate_reads(value) for key, value in device_map.items()}

    def index(value: Any) -> int:
        return _device_index(value, cluster, values)

    paths = module_paths(graph)
    known = _known_paths(graph, paths)
    unknown = [key for key in device_map if key not in known]
    if unknown:
        raise InvalidArgument(f"device_map key {reprlib.repr(unknown[0])} names no module of graph {graph.name!r} "
                              f"(its top modules: {sorted(p for p in known if p and '.' not in p)})")
    first = index(next(iter(device_map.values())))
    devices = np.full(graph.num_ops, -1, dtype=np.int64)
    # each node's longest key, looked up by the paths it lies under: a test of every key for each node was
    # O(nodes x keys), minutes for a 100,000-op graph's map of thousands of modules
    device_of: dict[str, int] = {}  # a key's device, read once
    for i, path in enumerate(paths):
        key = next((k for k in _dotted_prefixes(path) if k in device_map), "" if "" in device_map else None)
        if key is not None:
            if key not in device_of:
                device_of[key] = index(device_map[key])
            devices[i] = device_of[key]
    in_ptr, in_src, _ = graph.in_csr
    for v in graph.topological_order():
        if devices[v] < 0:
            sources = in_src[in_ptr[v]:in_ptr[v + 1]]
            devices[v] = devices[sources[0]] if len(sources) and devices[sources[0]] >= 0 else first
    if _offloaded(device_map):  # nothing runs on the CPU: its modules run on the main GPU, their updates stay
        on_cpu = np.array([value == "cpu" for value in values], dtype=bool)[devices]
        on_cpu[list(_updated_parameters(graph))] = False
        devices[on_cpu] = index(_main_device(device_map))
    main = index(_main_device(device_map))  # the root's own parameters: where its hook moves them (the docstring)
    for update, name in _updated_parameters(graph).items():
        if name.rpartition(".")[0] == root:
            devices[update] = main
    return Placement(devices, cluster, GraphKey.of(graph))


def _as_accelerate_reads(value: Any) -> Any:
    """A ``device_map`` value as accelerate reads it; anything but the two cases below as it is.

    A ``torch.device`` by its name, a bare ``"cuda"`` as ``"cuda:0"`` (the current device, unless a process set
    another). Both were "no device of" the cluster here, though ``dispatch_model`` takes them.
    """
    if type(value).__name__ == "device" and type(value).__module__ == "torch":  # no torch import for the check
        value = str(value)
    return "cuda:0" if value == "cuda" else value


def _device_index(value: Any, cluster: Cluster, values: list[int | str]) -> int:
    """The device of ``cluster`` that a ``device_map`` value names (``values``: :func:`device_map_values`).

    Raises:
        InvalidArgument: if it names none (``True`` and ``1.0`` were read as GPU 1, ``"cuda:x"`` was a ValueError).
    """
    given = value
    if isinstance(value, str) and value.startswith("cuda:") and value[5:].isdecimal():
        value = int(value[5:])
    if not isinstance(value, bool | float) and value in values:
        return values.index(value)
    raise InvalidArgument(f"device_map value {reprlib.repr(given)} is no device of {cluster.name!r} (have {values})")


ACCELERATE_MODES = ("auto", "balanced", "balanced_low_0", "sequential")
"""The ``device_map`` strings ``accelerate.load_checkpoint_and_dispatch`` and ``from_pretrained`` accept."""


def no_split_module_classes(module: Any) -> list[str]:
    """Class names of the blocks kept on one device: ``_no_split_modules`` of ``module`` and its submodules.

    A transformers model lists them in ``_no_split_modules`` (GPT-2's ``GPT2Block``), and its
    ``post_init`` gathers those of its children, which a wrapper around the model (a ``module:factory``
    returning the loss) does not: every submodule's list is read here, so a wrapped model gets the
    classes ``from_pretrained`` of the inner model would pass to accelerate.

    Raises:
        InvalidArgument: if ``module`` is no module (a str was an AttributeError).

    Examples:
        >>> import torch
        >>> no_split_module_classes(torch.nn.Linear(2, 2))
        []
    """
    _check_module_type(module, "no_split_module_classes", optional=False)
    found: set[str] = set()
    for sub in module.modules():
        found.update(getattr(sub, "_no_split_modules", None) or ())
    return sorted(found)


def accelerate_device_map(
    module: Any, cluster: Cluster, mode: str = "auto", no_split: list[str] | None = None
) -> dict[str, Any]:
    """Accelerate's own ``device_map`` for ``module`` on ``cluster``'s devices and memories.

    Made as ``accelerate.load_checkpoint_and_dispatch(device_map=mode)`` and transformers'
    ``from_pretrained(device_map=mode)`` make it (accelerate 1.x, transformers 5.x): ``infer_auto_device_map``
    fills the devices in module order, never splitting a block of ``no_split``; under ``"auto"``,
    ``"balanced"`` and ``"balanced_low_0"`` each GPU's ``max_memory`` is first cut to an even share of
    the model's bytes plus a margin (``get_balanced_memory``; ``"balanced_low_0"`` leaves GPU 0 as
    little as it can), so ``"auto"`` and ``"balanced"`` are one map; ``"sequential"`` fills each device
    up to its whole memory (often everything on the first GPU).

    Args:
        module (torch.nn.Module): the model.
        cluster (Cluster): the devices (their memory, bytes, is accelerate's ``max_memory``).
        mode (str, optional): one of :data:`ACCELERATE_MODES` (default: ``"auto"``).
        no_split (list[str], optional): class names of blocks kept whole (default: those the model
            names, :func:`no_split_module_classes`; ``[]`` splits anywhere).

    Raises:
        InvalidArgument: an unknown ``mode``, or ``module`` no module or ``cluster`` no
            :class:`~gnplace.cluster.Cluster` (a str was an AttributeError).
        MissingDependency: without accelerate (``pip install accelerate``).
        UnsupportedGraph: if accelerate fails on the module (accelerate 1.x raises an ``IndexError`` on a
            submodule registered under two names, ``self.b = self.a``).
    """
    try:
        from accelerate import infer_auto_device_map
        from accelerate.utils import get_balanced_memory
    except ImportError as err:
        raise MissingDependency(
            "comparing with accelerate's device_map needs accelerate: pip install accelerate"
        ) from err
    _check_mode(mode)
    _check_module_type(module, "accelerate_device_map", optional=False)
    check_cluster(cluster)
    blocks = no_split_module_classes(module) if no_split is None else list(no_split)
    memory = _max_memory(cluster)
    with quietly("accelerate"):
        if mode != "sequential":
            balanced = get_balanced_memory(module, max_memory=dict(memory), no_split_module_classes=blocks,
                                           low_zero=mode == "balanced_low_0")
            memory = {k: int(v) for k, v in balanced.items() if k in memory}
        try:
            return dict(infer_auto_device_map(module, max_memory=memory, no_split_module_classes=blocks))
        except Exception as err:  # noqa: BLE001 - accelerate's own failure, e.g. on a module under two names
            raise UnsupportedGraph(f"accelerate cannot make a device_map={mode!r} of this module "
                                   f"({type(err).__name__} in infer_auto_device_map: {first_line(err)})") from err


def _check_mode(mode: str) -> None:
    """Refuse a ``device_map`` string that is none of :data:`ACCELERATE_MODES` (:class:`InvalidArgument`)."""
    if mode not in ACCELERATE_MODES:
        raise InvalidArgument(f"mode must be one of {', '.join(map(repr, ACCELERATE_MODES))}, got {mode!r}")


def _max_memory(cluster: Cluster) -> dict[int | str, int]:
    """``cluster``'s ``max_memory`` as accelerate takes it: bytes by ``device_map`` value, the CPUs' summed."""
    memory: dict[int | str, int] = {}
    for value, dev in zip(device_map_values(cluster), cluster.devices):
        memory[value] = memory.get(value, 0) + int(dev.memory)
    return memory


def transformers_device_map(module: Any, cluster: Cluster, mode: str = "auto") -> dict[str, Any] | None:
    """The ``device_map`` transformers' ``from_pretrained(device_map=mode)`` makes for the model in ``module``.

    Transformers computes it with its own copy of accelerate's balancing (transformers 5.x,
    ``transformers.integrations.accelerate``), which reserves the largest single tensor (often the
    embedding) where accelerate reserves the mean layer, so it can differ from
    :func:`accelerate_device_map`'s. ``module`` may wrap the model (a ``module:factory`` returning the
    loss): the outermost ``PreTrainedModel`` in it is mapped and the keys are given from ``module``.

    Args:
        module (torch.nn.Module): the model, or a module holding it.
        cluster (Cluster): the devices (their memory, bytes, is ``max_memory``).
        mode (str, optional): one of :data:`ACCELERATE_MODES` (default: ``"auto"``).

    Returns:
        dict[str, Any] | None: the map, or None where ``module`` holds no transformers model.

    Raises:
        InvalidArgument: an unknown ``mode``, or ``module`` no module or ``cluster`` no
            :class:`~gnplace.cluster.Cluster` (a str was an AttributeError).
        MissingDependency: without transformers 5 (``pip install transformers``).
    """
    _check_mode(mode)
    _check_module_type(module, "transformers_device_map", optional=False)
    check_cluster(cluster)
    try:
        from transformers import PreTrainedModel
        from transformers.integrations.accelerate import _get_device_map  # what from_pretrained calls
    except ImportError as err:
        raise MissingDependency(
            "comparing with from_pretrained's device_map needs transformers 5: pip install transformers"
        ) from err
    found = next(((path, sub) for path, sub in module.named_modules() if isinstance(sub, PreTrainedModel)), None)
    if found is None:
        return None
    path, model = found
    with quietly("accelerate", "transformers"):
        try:
            inner = dict(_get_device_map(**_device_map_arguments(_get_device_map, model, mode, _max_memory(cluster))))
        except (TypeError, AttributeError) as err:  # a private function: another transformers may take other ones
            raise MissingDependency(f"this transformers' from_pretrained map could not be made ({err}); the "
                                    "comparison uses transformers 5.24") from err
    if not path:
        return inner
    return {(f"{path}.{key}" if key else path): value for key, value in inner.items()}


def _device_map_arguments(function: Any, model: Any, mode: str, memory: dict[int | str, int]) -> dict[str, Any]:
    """Keyword arguments of transformers' private ``_get_device_map`` by the names its signature has.

    transformers 5.24 takes ``(model, device_map, max_memory, hf_quantizer)``; other versions add a
    ``dtype`` (the model's own here) or name it ``torch_dtype``.
    """
    import inspect

    names = inspect.signature(function).parameters
    dtype = next((p.dtype for p in model.parameters()), None)
    given = {"model": model, "device_map": mode, "max_memory": memory, "hf_quantizer": None, "dtype": dtype,
             "torch_dtype": dtype}
    return {name: value for name, value in given.items() if name in names}


def compare_device_maps(
    graph: OpGraph, cluster: Cluster, placement: Any, module: Any = None, timer: Any = None,
    device_map: Mapping[str, Any] | None = None, root: str = "",
) -> dict[str, float]:
    """Simulated step seconds of ``placement``, of its ``device_map``, and of accelerate's maps (given ``module``).

    ``device_map`` is the map as exported, its keys full module paths of ``graph`` (default:
    ``to_device_map(graph, placement, cluster, root=root, module=module)``); its step is that of the placement
    :func:`from_device_map` reads from it, dispatched on the submodule ``root`` (accelerate's maps: on ``module``).

    Returns:
        dict[str, float]: ``"placement"``, ``"device_map"`` (the placement at module granularity, what
        accelerate would run) and, with ``module`` and accelerate installed, ``"accelerate_auto"`` (the
        map ``accelerate.load_checkpoint_and_dispatch(device_map="auto")`` makes, its ``"balanced"``
        one too) and ``"accelerate_sequential"`` (the plain fill), and where ``module`` holds a
        transformers model, ``"transformers_auto"`` (``from_pretrained``'s, :func:`transformers_device_map`).
        A map that offloads modules to ``"disk"`` (the model does not fit the cluster's memory) has
        no device of the cluster to simulate and is left out, as is one accelerate fails to make (with
        a warning naming the failure). Keys of theirs naming a module with no state and no node in
        ``graph`` (an ``nn.Identity``) place nothing and are skipped. A map putting modules on ``"cpu"``
        beside a GPU (an offload) is timed as :func:`from_device_map` reads it, its weights crossing the link
        once a step: a floor on what accelerate's copies before each call cost.

    Raises:
        InvalidArgument: if ``module`` is no module, or not the one ``graph`` was imported from (it lacks a
            parameter of the graph, or accelerate's map of it names a module the graph does not have), if ``timer``
            is no :class:`~gnplace.sim.timer.StepTimer`, or as
            :func:`to_device_map` and :func:`from_device_map` refuse their arguments.
    """
    from gnplace.sim.simulator import Simulator

    check_graph(graph)
    _check_root(root, "compare_device_maps")
    _check_module_type(module, "compare_device_maps")  # with device_map given, a str was an AttributeError
    _check_module_of(graph, module, "compare_device_maps")  # another model's maps were timed on this graph
    from gnplace.sim.timer import StepTimer

    if timer is not None and not isinstance(timer, StepTimer):  # "x" was an AttributeError ('time') after the export
        raise InvalidArgument(f"compare_device_maps: timer must be a StepTimer (a Simulator, a real-device timer, "
                              f"...), got {reprlib.repr(timer)}")
    timer = timer or Simulator()
    if device_map is None:  # to_device_map's keys are relative to root: full paths again
        written = to_device_map(graph, placement, cluster, root=root, module=module)
        device_map = {(f"{root}.{key}" if key else root) if root else key: value for key, value in written.items()}
    found = {
        "placement": timer.time(graph, cluster, placement).step_time,
        "device_map": timer.time(graph, cluster, from_device_map(graph, cluster, device_map, root)).step_time,
    }
    if module is not None:
        maps: dict[str, dict[str, Any] | None] = {}
        for mode in ("auto", "sequential"):
            try:
                maps[f"accelerate_{mode}"] = accelerate_device_map(module, cluster, mode)
            except UnsupportedGraph as err:  # the comparison goes on without it, saying why
                warnings.warn(f"{err}: left out of the comparison", stacklevel=2)
        try:
            maps["transformers_auto"] = transformers_device_map(module, cluster, "auto")
        except MissingDependency:
            pass
        for name, their_map in maps.items():
            if their_map is None or "disk" in their_map.values():
                continue
            try:
                theirs = from_device_map(graph, cluster, _without_stateless_modules(their_map, module, graph))
            except InvalidArgument as err:  # a module holding more than the graph
                raise InvalidArgument(f"compare_device_maps's module is not the one graph {graph.name!r} was imported "
                                      f"from: in the {name} map of it, {err}") from err
            found[name] = timer.time(graph, cluster, theirs).step_time
    return found
