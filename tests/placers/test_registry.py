"""Tests of the placer registry ``gnplace.placers.registry``: lazy entries, metadata, one lookup."""

from __future__ import annotations

import re
import subprocess
import sys

import pytest

from gnplace.cluster import load_cluster
from gnplace.exceptions import GnplaceError, InvalidArgument, MissingDependency, UnknownName
from gnplace.placers import PLACERS, Placer, PlacerRegistry, get_placer, make_placer, register_placer
from gnplace.placers.round_robin import RoundRobinPlacer
from gnplace.placers.single import SinglePlacer
from gnplace.sim.simulator import Simulator
from gnplace.toy import chain_graph

BUILT_IN = ["single", "round_robin", "expert", "metis", "heft", "m_etf", "m_sct", "random_search", "annealing", "exact"]


def test_registry_contents():
    assert PLACERS["single"] is SinglePlacer and PLACERS["round_robin"] is RoundRobinPlacer
    assert set(BUILT_IN) <= set(PLACERS)
    for name, cls in PLACERS.items():
        assert cls.name == name


def test_a_missing_name_is_a_missing_key_of_the_mapping():
    """PLACERS is a Mapping: PLACERS.get('nope') raised UnknownName (a ValueError) rather than return the default, and
    ``except KeyError`` let PLACERS['nope'] through; it is a KeyError and an UnknownName, its text the message alone."""
    assert PLACERS.get("nope") is None and PLACERS.get("nope", 5) == 5 and PLACERS.get(3) is None
    assert PLACERS.get("single") is SinglePlacer
    with pytest.raises(KeyError) as caught:
        PLACERS["nope"]
    assert isinstance(caught.value, UnknownName)
    assert str(caught.value).startswith("unknown placer 'nope' (choose one of: ")


def test_entries_resolve_on_first_use():
    # a fresh interpreter: importing gnplace and asking what is registered imports no placer module
    code = (
        "import sys, gnplace; from gnplace.placers import PLACERS; names = list(PLACERS); "
        "assert 'exact' in PLACERS; "
        "print(sorted(m for m in sys.modules if m.startswith('gnplace.placers.') and m not in "
        "('gnplace.placers.base', 'gnplace.placers.registry')))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"


def test_a_string_entry_is_imported_on_first_use_and_cached():
    registry = PlacerRegistry({"rr": "gnplace.placers.round_robin:RoundRobinPlacer"})
    assert registry._entries["rr"] == "gnplace.placers.round_robin:RoundRobinPlacer"
    assert registry["rr"] is RoundRobinPlacer
    assert registry._entries["rr"] is RoundRobinPlacer


def test_metadata_is_read_from_the_class():
    info = PLACERS.info("annealing")
    assert info.accepts == frozenset({"timer", "budget"}) and not info.learned and info.respects_memory
    assert info.target == "gnplace.placers.annealing:AnnealingPlacer"
    assert info.summary.startswith("Simulated annealing")
    assert PLACERS.info("round_robin").accepts == frozenset()
    assert not PLACERS.info("single").respects_memory
    assert PLACERS.names(learned=False)[: len(BUILT_IN)] == BUILT_IN


def test_a_learned_placer_is_told_apart():
    class Learner(SinglePlacer):
        name = "learner"
        learned = True
        accepts = frozenset({"timer", "checkpoint"})

        def __init__(self, checkpoint=None, timer=None):
            super().__init__(timer=timer)
            self.checkpoint = checkpoint

    registry = PlacerRegistry({"single": SinglePlacer, "learner": Learner})
    assert registry.names(learned=True) == ["learner"] and registry.names(learned=False) == ["single"]


@pytest.mark.parametrize("name, cls, text", [("single", SinglePlacer, "SinglePlacer()"), ("round_robin", RoundRobinPlacer, "RoundRobinPlacer()")])
def test_get_placer(name, cls, text):
    placer = get_placer(name)
    assert type(placer) is cls
    assert repr(placer) == text
    assert isinstance(placer, Placer)
    assert get_placer(name) is not placer  # a new one every time


@pytest.mark.parametrize("name", ["nope", "Single", "round-robin", ""])
def test_unknown_placer_lists_choices(name):
    choices = ", ".join(sorted(PLACERS))
    with pytest.raises(UnknownName, match=rf"^unknown placer {name!r} \(choose one of: {choices}\)$"):
        get_placer(name)


def test_unknown_name_is_a_gnplace_error():
    assert issubclass(UnknownName, GnplaceError) and issubclass(UnknownName, ValueError)


def test_options_are_passed_to_the_placer():
    sim = Simulator("placeto")
    assert get_placer("single", timer=sim).timer is sim


def test_make_placer_passes_shared_options_only_to_placers_that_accept_them():
    sim = Simulator("placeto")
    annealing = make_placer("annealing", timer=sim, budget=7, checkpoint="ignored.ckpt")
    assert annealing.timer is sim and annealing.budget == 7
    assert make_placer("heft", timer=sim, budget=7).timer is sim
    assert repr(make_placer("round_robin", timer=sim, budget=7, checkpoint="x")) == "RoundRobinPlacer()"
    assert make_placer("annealing", budget=None).budget == 2000  # None: the placer's default


def test_unknown_option_is_one_clear_error():
    with pytest.raises(InvalidArgument, match="placer 'round_robin' does not take these options"):
        get_placer("round_robin", temperature=1.0)
    with pytest.raises(InvalidArgument, match=r"^AnnealingPlacer needs initial_temperature to be a finite number, got 'abc'"):
        get_placer("annealing", initial_temperature="abc")
    from gnplace.placers.annealing import AnnealingPlacer

    class Unchecked(AnnealingPlacer):  # a constructor that lets Python's TypeError out
        def __init__(self, **options):
            raise TypeError("'<=' not supported between instances of 'float' and 'str'")

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(PLACERS, "resolve", lambda name: Unchecked)
        with pytest.raises(InvalidArgument, match=r"placer 'annealing': an option value of the wrong type "
                                                  r"\(initial_temperature='abc'\)"):
            get_placer("annealing", initial_temperature="abc")


@pytest.mark.parametrize("name, options", [("annealing", {"budget": 0}), ("random_search", {"batch": 0}),
                                           ("expert", {"strategy": "magic"}), ("exact", {"select": "best"})])
def test_bad_option_values_are_invalid_arguments(name, options):
    with pytest.raises(InvalidArgument, match=name.split("_")[0].capitalize() if name != "random_search" else "RandomSearch"):
        make_placer(name, **options)


@pytest.mark.parametrize("name, options, message", [
    ("m_etf", {"min_speed": 5.0}, r"m_etf: min_speed must be a number in \[0, 1\], got 5\.0"),  # used to loop forever
    ("m_sct", {"min_speed": float("nan")}, "m_sct: min_speed"),
    ("heft", {"min_speed": float("inf")}, "heft: min_speed"),
    ("metis", {"min_speed": "abc"}, "metis: min_speed"),
    ("heft", {"memory_aware": "maybe"}, "heft: memory_aware must be true or false"),
    ("expert", {"memory_aware": 1}, "expert: memory_aware"),
    ("policy", {"subsets": None}, "policy: subsets must be true or false, got None"),  # bool(None): subsets off
    # flags of a base class, reached through **kwargs, were taken with bool(): "no" turned memo on
    ("finetune", {"memo": "no"}, "finetune: memo must be true or false, got 'no'"),
    ("spotlight", {"progress": "maybe"}, "spotlight: progress must be true or false"),
    ("annealing", {"start": 5}, "start must be a placer's name or a placer"),
    ("annealing", {"batch": 1.5}, "integers budget >= 1 and batch >= 1"),
    ("annealing", {"batch": True}, "integers budget"),
    ("spotlight", {"epochs": 0}, "epochs must be a whole number >= 1"),
    ("post", {"clip": -1.0}, "clip must be > 0"),
    ("rnn_pg", {"clip": -1.0}, "clip must be > 0"),
    ("rnn_pg", {"decay": 1.0}, r"decay must be in \[0, 1\)"),
    ("hierarchical", {"groups": -1}, "groups must be a whole number >= 1"),
    ("hierarchical", {"noise": -0.5}, "noise must be >= 0"),
])
def test_option_values_of_the_wrong_type_or_range_are_one_clear_error(name, options, message):
    """Checked when the placer is made, before any work: not a hang, a numpy error or a silent default."""
    with pytest.raises(InvalidArgument, match=message):
        make_placer(name, **options)


def test_register_and_resolve_errors():
    registry = PlacerRegistry()
    registry.register("mine", "gnplace.placers.single:SinglePlacer")
    with pytest.raises(InvalidArgument, match="already registered"):
        registry.register("mine", SinglePlacer)
    registry.register("mine", SinglePlacer, replace=True)
    for bad in ("no_colon", "a:b:c", ":Class"):
        with pytest.raises(InvalidArgument, match="module:Class"):
            registry.register("x", bad)
    with pytest.raises(InvalidArgument, match="letters"):
        registry.register("has space", SinglePlacer)
    registry.register("missing", "gnplace_no_such_module:Placer")
    with pytest.raises(MissingDependency, match="placer 'missing' needs gnplace_no_such_module"):
        registry["missing"]
    registry.register("not_a_placer", "gnplace.toy:chain_graph")
    with pytest.raises(UnknownName, match="not a placer class"):
        registry["not_a_placer"]

    class NoPlace:
        """A class without ``place``: accepted as a class (where ``module:Class`` was refused), an AttributeError
        when it placed."""

    with pytest.raises(InvalidArgument, match=r"placer 'no_place': NoPlace is not a placer class \(it has no place"):
        registry.register("no_place", NoPlace)
    assert "no_place" not in registry


def test_register_placer_adds_to_the_one_registry():
    register_placer("test_only_single", "gnplace.placers.single:SinglePlacer")
    try:
        assert "test_only_single" in PLACERS
        assert type(make_placer("test_only_single")) is SinglePlacer
    finally:
        PLACERS.unregister("test_only_single")


@pytest.mark.parametrize("name", BUILT_IN)
def test_every_placer_places_every_op(name):
    g, c = chain_graph(6), load_cluster("k80x4")
    p = get_placer(name).place(g, c, seed=0)
    p.check(g)
    assert not p.splits_groups(g)


def test_non_placer_is_not_a_placer():
    assert not isinstance(object(), Placer)


@pytest.mark.parametrize("value", ["maybe", 3, "banana"])
def test_a_flag_option_takes_true_or_false_only(value):
    """Placers read flags with bool(), under which any text is true."""
    with pytest.raises(InvalidArgument, match=f"ppo: modules must be true or false, got {value!r}"):
        get_placer("ppo", modules=value)
    assert get_placer("ppo", modules=False).modules is False
    import numpy as np

    assert get_placer("metis", memory_aware=np.False_).memory_aware is False  # numpy's flags are flags too


@pytest.mark.parametrize("name", [[], [1], {"a": 1}, 3])
def test_a_name_that_is_not_a_string_is_an_unknown_placer(name):
    """A list from ``-O random_search.start=[]`` was looked up as a key: a TypeError, not one line."""
    with pytest.raises(UnknownName, match="unknown placer"):
        PLACERS.resolve(name)


@pytest.mark.parametrize("name, options, option", [("annealing", {"start": "hetf"}, "AnnealingPlacer: start"),
                                                   ("random_search", {"start": "hetf"}, "RandomSearchPlacer: start"),
                                                   ("auto", {"candidates": ["heft", "hetf"]}, "AutoPlacer: candidates")])
def test_a_misspelt_placer_name_in_an_option_is_refused_when_the_placer_is_made(name, options, option):
    """Not after a run began: evaluate builds every placer before it replaces saved rows. The line names the option
    (``-O annealing.start=hetf`` said "unknown placer 'hetf'", as if ``-p hetf`` had been given)."""
    with pytest.raises(UnknownName, match=rf"^{option}: unknown placer 'hetf' \(choose one of: "):
        make_placer(name, **options)


def test_the_revisions_used_are_found_through_the_placers_used(monkeypatch, auto_uses):
    from gnplace.placers.m_sct import MSCTPlacer

    assert PLACERS.revisions_used("heft") == {}
    assert PLACERS.revisions_used("annealing") == auto_uses  # through auto (2026-11-30: the ETF fix; 2026-12-04: repair)
    monkeypatch.setattr(MSCTPlacer, "revision", "7", raising=False)
    assert PLACERS.revisions_used("auto") == {**auto_uses, "m_sct": "7"}
    assert PLACERS.revisions_used("annealing") == {**auto_uses, "m_sct": "7"}  # through auto
    assert PLACERS.info("auto").uses == ("single", "expert", "metis", "heft", "m_etf", "m_sct")


def declared(uses: tuple[str, ...], revision: str) -> type:
    """A placer class that declares the placers it uses and its revision (never placed)."""

    def place(self, graph, cluster, *, seed=None):  # pragma: no cover - never placed
        raise AssertionError

    return type("Declared", (), {"uses": uses, "revision": revision, "place": place})


def test_a_placer_can_pin_the_revision_of_a_placer_it_uses(monkeypatch, auto_uses):
    from gnplace.rl.zeroshot import PolicyPlacer

    registry = PlacerRegistry({"a": declared(("b@3", "c"), "1"), "b": declared(("c",), "5"), "c": declared((), "2")})
    assert registry.revisions_used("a") == {"b": "3", "c": "2"}  # b's own revision 5 is not what a uses
    assert registry.revisions_used("b") == {"c": "2"}
    # finetune keeps policy 13's zero-shot candidates whatever policy's revision (it passes their options)
    assert PLACERS.info("finetune").uses == ("auto", "policy@13")
    monkeypatch.setattr(PolicyPlacer, "revision", "99")
    assert PLACERS.revisions_used("finetune") == {**auto_uses, "policy": "13"}


def test_a_cycle_of_placers_used_ends():
    registry = PlacerRegistry({"a": declared(("b",), "1"), "b": declared(("a",), "2")})
    assert registry.revisions_used("a") == {"b": "2"}


def test_an_option_a_placer_does_not_take_is_named_with_the_options_it_takes():
    """It was Python's ``ListSchedulingPlacer.__init__() got an unexpected keyword argument 'algo'``."""
    from gnplace.placers.registry import check_placer_options

    with pytest.raises(InvalidArgument, match=r"^placer 'm_etf' does not take these options: algo; it takes: "
                                              r"memory_aware, min_speed \(shared: timer\)$"):
        make_placer("m_etf", timer=Simulator(), algo="reinforce")
    with pytest.raises(InvalidArgument, match=r"^placer 'round_robin' does not take these options: colour, algo "
                                              r"\(--algo\); it takes none$"):
        check_placer_options("round_robin", {"colour": "red", "algo": "ppo"}, {"algo": "--algo"})
    with pytest.raises(InvalidArgument, match=r"^placer 'single' does not take these options: budget; it takes no "
                                              r"options of its own \(shared: timer\)$"):
        get_placer("single", budget=5)
    check_placer_options("ppo", {"algo": "reinforce", "samples": 4})  # taken: nothing said


def test_options_passed_on_through_kwargs_are_taken_and_others_refused():
    """A comparator's ``**kwargs`` go to its base class: its own and the base's keywords are the options it takes."""
    from gnplace.placers.registry import check_placer_options, constructor_options

    post = constructor_options(PLACERS["post"])
    assert post is not None and post[:2] == ("elite_fraction", "cross_entropy") and {"beta", "samples"} <= set(post)
    assert "algo" in constructor_options(PLACERS["finetune"])  # PPOSearchPlacer's, through FineTunePlacer's kwargs
    check_placer_options("post", {"beta": 2.0, "samples": 4})
    with pytest.raises(InvalidArgument, match=r"placer 'rnn_pg' does not take these options: bogus; it takes: decay, "
                                              r"clip, samples, .*\(shared: timer, budget\)$"):
        check_placer_options("rnn_pg", {"bogus": 1, "decay": 0.5})

    class KeepsItsKwargs:
        def __init__(self, **options):
            self.options = options

    assert constructor_options(KeepsItsKwargs) is None  # cannot be told: the constructor decides


@pytest.mark.parametrize("name", ["heft", "annealing", "single"])
@pytest.mark.parametrize("timer", ["sim", 3, object()])
def test_a_timer_that_is_no_step_timer_is_refused_when_the_placer_is_made(name, timer):
    """``timer="sim"`` was taken, then failed in ``place`` as ``'str' object has no attribute 'cost_model'``."""
    with pytest.raises(InvalidArgument, match=f"placer '{name}': timer must be a StepTimer"):
        get_placer(name, timer=timer)
    with pytest.raises(InvalidArgument, match="timer must be a StepTimer"):
        make_placer(name, timer=timer)


def test_the_registry_prints_its_placers_names():
    """``gnplace.PLACERS`` printed as ``<gnplace.placers.registry.PlacerRegistry object at 0x7f...>``."""
    assert repr(PLACERS) == f"PlacerRegistry({sorted(PLACERS)})" and "'single'" in repr(PLACERS)
    assert repr(PlacerRegistry()) == "PlacerRegistry([])"


def test_a_placer_is_typed_as_the_placer_protocol():
    """``get_placer`` and ``make_placer`` return a ``Placer`` to a type checker, not ``Any``.

    With ``Any``, ``mypy --strict`` refused a user's ``def f(...) -> Placement: return
    get_placer(name).place(graph, cluster)`` (returning Any), and passed ``get_placer(name).plce(...)``.
    """
    import typing

    for function in (get_placer, make_placer):
        hints = typing.get_type_hints(function, localns={"Placer": Placer})
        assert hints["return"] is Placer, function.__name__
    assert isinstance(get_placer("round_robin"), Placer)


def test_each_shipped_name_types_its_placer_as_its_own_class():
    """``get_placer("exact")`` and ``make_placer("exact")`` were typed as the ``Placer`` protocol alone, so
    ``mypy --strict`` refused README's ``exact``'s ``last_status`` and ``last_gap`` ("Placer" has no attribute
    "last_status"): one overload a shipped name returns the class it is registered as, other names ``Placer``."""
    import typing

    from gnplace.placers.registry import SHIPPED_PLACERS

    for function in (get_placer, make_placer):
        typed = {}
        for overload in typing.get_overloads(function):
            annotations = overload.__annotations__  # strings: the classes are imported for a type checker alone
            literal = re.fullmatch(r"Literal\[['\"](\w+)['\"]\]", annotations["name"])
            typed[literal.group(1) if literal else annotations["name"]] = annotations["return"]
        assert typed.pop("str") == "Placer", function.__name__
        assert typed == {name: target.partition(":")[2] for name, target in SHIPPED_PLACERS.items()}, function.__name__
    # and each class is imported for the type checker from the module it is registered in
    import ast
    import inspect

    import gnplace.placers.registry as registry

    checked = next(node for node in ast.parse(inspect.getsource(registry)).body
                   if isinstance(node, ast.If) and getattr(node.test, "id", "") == "TYPE_CHECKING")
    imported = {f"{node.module}:{alias.name}" for node in checked.body if isinstance(node, ast.ImportFrom)
                for alias in node.names}
    assert set(SHIPPED_PLACERS.values()) <= imported
