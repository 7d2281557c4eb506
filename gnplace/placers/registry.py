"""The one registry of placers: a name for every way gnplace places a graph, learned or not.

Each name maps to a class or to a ``"module:Class"`` string that is imported on first use, so that
``import gnplace`` stays light and placers that need heavy libraries (torch-geometric, Lightning,
OR-Tools) load only when asked for. What a placer is and which shared options it takes live on its
class, as class attributes read by :meth:`PlacerRegistry.info`:

``name`` (str)
    its registry name;
``learned`` (bool, default False)
    whether it learns (its results are compared with, never used as, the best non-learned reference);
``accepts`` (frozenset of str, default empty)
    which of the shared options :data:`SHARED_OPTIONS` its constructor takes: ``timer`` (any
    :class:`~gnplace.sim.timer.StepTimer`), ``budget`` (timer evaluations), ``checkpoint`` (a file);
``respects_memory`` (bool, default True)
    whether it never returns an out-of-memory placement when round robin fits;
``revision`` (str, default empty)
    changed when what the placer returns for the same options changes (new defaults), so that
    :func:`~gnplace.evaluate.evaluate` does not reuse rows saved before;
``uses`` (tuple of str, default empty)
    the registered placers whose results enter its own (``auto``'s candidates; ``"auto"`` for a search
    that starts from or is measured against ``auto``): their revisions are part of its rows' identity
    too (:meth:`PlacerRegistry.revisions_used`), so that a candidate's new revision is not answered
    with ``auto``'s old rows; ``"name@revision"`` pins the revision whose results it uses (it passes
    the options that give them back), so that a newer revision of ``name`` keeps its rows;
``default_checkpoint`` (str or Path, default none)
    the weights it loads when no ``checkpoint`` is given (the shipped one), whose content is part of
    a saved row's identity as well, so that a new checkpoint is not answered with old rows.
``checkpoint_format`` (str, default none)
    the ``"format"`` field of the checkpoint files it reads (``"gnplace-policy"``,
    ``"gnplace-placeto"``), so that one ``--checkpoint`` goes to the placers that can read it.

:func:`make_placer` is the one lookup the command line, evaluation and the demo call: it passes each
shared option only to the placers that accept it, and turns a bad option into one clear error.
"""

from __future__ import annotations

import importlib
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal, overload

from gnplace.exceptions import GnplaceError, InvalidArgument, MissingDependency, UnknownName, UnknownPlacer

if TYPE_CHECKING:  # the shipped placers' classes, for get_placer's and make_placer's overloads: never imported
    from gnplace.placers.annealing import AnnealingPlacer
    from gnplace.placers.auto import AutoPlacer
    from gnplace.placers.base import Placer
    from gnplace.placers.exact import ExactPlacer
    from gnplace.placers.expert import ExpertPlacer
    from gnplace.placers.heft import HeftPlacer
    from gnplace.placers.m_etf import METFPlacer
    from gnplace.placers.m_sct import MSCTPlacer
    from gnplace.placers.metis import MetisPlacer
    from gnplace.placers.random_search import RandomSearchPlacer
    from gnplace.placers.round_robin import RoundRobinPlacer
    from gnplace.placers.single import SinglePlacer
    from gnplace.rl.hierarchical import HierarchicalPlacer
    from gnplace.rl.placeto import PlacetoPlacer
    from gnplace.rl.post import PostPlacer
    from gnplace.rl.rnn_pg import RnnPGPlacer
    from gnplace.rl.search import FineTunePlacer, PPOSearchPlacer, ReinforceSearchPlacer
    from gnplace.rl.spotlight import SpotlightPlacer
    from gnplace.rl.zeroshot import PolicyPlacer

__all__ = ["SHARED_OPTIONS", "PlacerInfo", "UnknownPlacer", "PlacerRegistry", "PLACERS", "get_placer", "make_placer",
           "register_placer", "check_placer_options", "constructor_options"]

#: Options every placer that takes them takes under these names.
SHARED_OPTIONS: tuple[str, ...] = ("timer", "budget", "checkpoint")


@dataclass(frozen=True)
class PlacerInfo:
    """What the registry knows of a placer, read from its class.

    Attributes:
        name (str): registry name.
        target (str): ``"module:Class"`` it resolves to.
        learned (bool): whether it learns.
        accepts (frozenset[str]): the shared options (:data:`SHARED_OPTIONS`) it takes.
        respects_memory (bool): whether it avoids out-of-memory placements when round robin fits.
        summary (str): first line of the class docstring.
        revision (str): changes when the placer's results under the same options change.
        uses (tuple[str, ...]): the registered placers whose results enter its own.
        default_checkpoint (str): the checkpoint file it loads when given none (empty: none).
        checkpoint_format (str): the ``"format"`` of the checkpoint files it reads (empty: it takes none).
        default_files (tuple[tuple[str, str], ...]): other files it loads by default, as ``(option, path)``
            pairs (an option that loads several files by default appears once per file), whose content its
            results depend on unless the option is given.
    """

    name: str
    target: str
    learned: bool
    accepts: frozenset[str]
    respects_memory: bool
    summary: str
    revision: str = ""
    uses: tuple[str, ...] = ()
    default_checkpoint: str = ""
    checkpoint_format: str = ""
    default_files: tuple[tuple[str, str], ...] = ()


class PlacerRegistry(Mapping[str, type]):
    """Placer classes by name; entries given as ``"module:Class"`` strings are imported on first use.

    A read-only :class:`~collections.abc.Mapping` from name to class: ``name in PLACERS`` and
    iteration never import anything, ``PLACERS[name]`` resolves the class.

    Args:
        entries (Mapping[str, type | str], optional): initial entries (default: none).

    Examples:
        >>> registry = PlacerRegistry({"single": "gnplace.placers.single:SinglePlacer"})
        >>> "single" in registry, registry["single"].__name__
        (True, 'SinglePlacer')
        >>> registry.info("single").accepts
        frozenset({'timer'})
    """

    def __init__(self, entries: Mapping[str, type | str] | None = None) -> None:
        self._entries: dict[str, type | str] = {}
        self._targets: dict[str, type | str] = {}  # as registered: a "module:Class" string stays one once imported
        for name, target in (entries or {}).items():
            self.register(name, target)

    def unregister(self, name: str) -> None:
        """Remove the entry ``name`` (a placer added for a while, in a test or a doctest).

        Raises:
            UnknownName: if nothing is registered as ``name``.
        """
        if name not in self._entries:
            raise UnknownName(f"unknown placer {name!r} (choose one of: {', '.join(sorted(self._entries))})")
        del self._entries[name], self._targets[name]

    def targets(self) -> dict[str, type | str]:
        """Every entry as it was registered (a class, or ``"module:Class"``), by name, in registration order."""
        return dict(self._targets)

    def register(self, name: str, target: type | str, *, replace: bool = False) -> None:
        """Register ``target`` (a class or ``"module:Class"``) as ``name``.

        Raises:
            InvalidArgument: if ``name`` is taken (and ``replace`` is false) or ``target`` is malformed.
        """
        if not isinstance(name, str) or not name or not name.replace("_", "").isalnum():
            raise InvalidArgument(f"placer name must be letters, digits and underscores, got {name!r}")
        if name in self._entries and not replace:
            raise InvalidArgument(f"a placer is already registered as {name!r} (pass replace=True to change it)")
        if isinstance(target, str) and (target.count(":") != 1 or not all(target.split(":"))):
            raise InvalidArgument(f"placer {name!r}: target must be 'module:Class', got {target!r}")
        if not isinstance(target, (str, type)):
            raise InvalidArgument(f"placer {name!r}: target must be a class or 'module:Class', got {target!r}")
        if isinstance(target, type) and not callable(getattr(target, "place", None)):  # as a 'module:Class' is
            raise InvalidArgument(f"placer {name!r}: {target.__name__} is not a placer class (it has no place method)")
        self._entries[name] = target
        self._targets[name] = target

    def __contains__(self, name: object) -> bool:
        return name in self._entries

    def __iter__(self) -> Iterator[str]:
        return iter(self._entries)

    def __len__(self) -> int:
        return len(self._entries)

    def __repr__(self) -> str:  # was object's: <...PlacerRegistry object at 0x7f...>, naming no placer
        return f"PlacerRegistry({sorted(self._entries)})"

    def __getitem__(self, name: str) -> type:
        if name not in self._entries:  # a Mapping's missing key: PLACERS.get(name) and `except KeyError` rely on it
            raise UnknownPlacer(f"unknown placer {name!r} (choose one of: {', '.join(sorted(self._entries))})")
        return self.resolve(name)

    def resolve(self, name: str, *, where: str = "") -> type:
        """The class registered as ``name``, importing its module on first use.

        ``where`` names the option that gave ``name`` (``"AutoPlacer: candidates"``), the start of an unknown name's
        line: a placer's option naming another placer said "unknown placer 'x'", and not which option did.

        Raises:
            UnknownName: if nothing is registered as ``name``; the message lists the choices.
            MissingDependency: if its module cannot be imported (a library it needs is missing).
        """
        target = self._entries.get(name) if isinstance(name, str) else None
        if target is None:
            raise UnknownName(f"{where}{': ' if where else ''}unknown placer {name!r} "
                              f"(choose one of: {', '.join(sorted(self._entries))})")
        if isinstance(target, type):
            return target
        module_name, class_name = target.split(":")
        try:
            module = importlib.import_module(module_name)
        except ImportError as err:
            raise MissingDependency(f"placer {name!r} needs {module_name} ({err}); install what it names") from err
        cls = getattr(module, class_name, None)
        if not isinstance(cls, type) or not callable(getattr(cls, "place", None)):
            raise UnknownName(f"placer {name!r}: {target} is not a placer class")
        self._entries[name] = cls
        return cls

    def info(self, name: str) -> PlacerInfo:
        """What the class registered as ``name`` declares about itself (resolves it).

        Raises:
            UnknownName: if nothing is registered as ``name``.
        """
        cls = self.resolve(name)
        accepts = frozenset(getattr(cls, "accepts", frozenset()))
        unknown = accepts - set(SHARED_OPTIONS)
        if unknown:
            raise InvalidArgument(f"placer {name!r} declares unknown shared options {sorted(unknown)}")
        doc = (cls.__doc__ or "").strip().splitlines()
        return PlacerInfo(
            name=name,
            target=f"{cls.__module__}:{cls.__qualname__}",
            learned=bool(getattr(cls, "learned", False)),
            accepts=accepts,
            respects_memory=bool(getattr(cls, "respects_memory", True)),
            summary=doc[0] if doc else "",
            revision=str(getattr(cls, "revision", "")),
            uses=tuple(str(n) for n in getattr(cls, "uses", ())),
            default_checkpoint=str(getattr(cls, "default_checkpoint", "") or ""),
            checkpoint_format=str(getattr(cls, "checkpoint_format", "") or ""),
            default_files=tuple((k, str(path)) for k, v in dict(getattr(cls, "default_files", {}) or {}).items()
                                for path in (v if isinstance(v, (tuple, list)) else (v,))),
        )

    def revisions_used(self, name: str) -> dict[str, str]:
        """The revisions of the placers ``name`` uses, directly or through others, that declare one.

        Empty while none declares a revision, so that identities made before :attr:`PlacerInfo.uses` stand.
        A placer that ``name`` uses as ``"used@revision"`` is given that revision, not its own.

        Raises:
            UnknownName: if ``name`` or a placer it uses is not registered.

        Examples:
            >>> PLACERS.revisions_used("single")
            {}
        """
        found: dict[str, str] = {}
        seen = {name}
        direct = [entry.partition("@") for entry in self.info(name).uses]
        todo = [used for used, _, _ in direct]
        while todo:
            used = todo.pop().partition("@")[0]
            if used in seen:  # a cycle, or a placer reached twice
                continue
            seen.add(used)
            info = self.info(used)
            if info.revision:
                found[used] = info.revision
            todo.extend(info.uses)
        found.update({used: pinned for used, _, pinned in direct if pinned})  # the revision it asks for
        return dict(sorted(found.items()))

    def names(self, *, learned: bool | None = None) -> list[str]:
        """Registered names in registration order; only learned (or non-learned) ones if ``learned`` is given.

        Filtering by ``learned`` resolves every placer.
        """
        if learned is None:
            return list(self._entries)
        return [n for n in self._entries if self.info(n).learned == learned]


#: Every placer gnplace ships, by name: the entries :data:`PLACERS` starts with.
SHIPPED_PLACERS: dict[str, str] = {
    "single": "gnplace.placers.single:SinglePlacer",
    "round_robin": "gnplace.placers.round_robin:RoundRobinPlacer",
    "expert": "gnplace.placers.expert:ExpertPlacer",
    "metis": "gnplace.placers.metis:MetisPlacer",
    "heft": "gnplace.placers.heft:HeftPlacer",
    "m_etf": "gnplace.placers.m_etf:METFPlacer",
    "m_sct": "gnplace.placers.m_sct:MSCTPlacer",
    "random_search": "gnplace.placers.random_search:RandomSearchPlacer",
    "annealing": "gnplace.placers.annealing:AnnealingPlacer",
    "exact": "gnplace.placers.exact:ExactPlacer",
    "auto": "gnplace.placers.auto:AutoPlacer",
    "ppo": "gnplace.rl.search:PPOSearchPlacer",
    "finetune": "gnplace.rl.search:FineTunePlacer",
    "reinforce": "gnplace.rl.search:ReinforceSearchPlacer",
    "policy": "gnplace.rl.zeroshot:PolicyPlacer",
    "rnn_pg": "gnplace.rl.rnn_pg:RnnPGPlacer",
    "hierarchical": "gnplace.rl.hierarchical:HierarchicalPlacer",
    "spotlight": "gnplace.rl.spotlight:SpotlightPlacer",
    "post": "gnplace.rl.post:PostPlacer",
    "placeto": "gnplace.rl.placeto:PlacetoPlacer",
}

#: The placers :func:`make_placer` knows: the shipped ones and those :func:`register_placer` adds.
PLACERS = PlacerRegistry(SHIPPED_PLACERS)


def added_placers() -> dict[str, type | str]:
    """The entries of :data:`PLACERS` that are not the shipped ones (added, or a shipped name given another class).

    Worker processes start with the shipped registry: :func:`~gnplace.evaluate.evaluate` hands them these
    (:func:`adopt_placers`), so that a placer registered at run time (under ``if __name__ == "__main__":``)
    is known there too.
    """
    return {name: target for name, target in PLACERS.targets().items() if SHIPPED_PLACERS.get(name) != target}


def adopt_placers(added: Mapping[str, type | str]) -> None:
    """Register ``added`` (from :func:`added_placers` of another process) in this process's :data:`PLACERS`."""
    for name, target in added.items():
        if PLACERS.targets().get(name) != target:
            PLACERS.register(name, target, replace=True)


def register_placer(name: str, target: type | str, *, replace: bool = False) -> None:
    """Add a placer to :data:`PLACERS` (a class, or ``"module:Class"`` imported on first use).

    Examples:
        >>> register_placer("my_single", "gnplace.placers.single:SinglePlacer")
        >>> make_placer("my_single")
        SinglePlacer()
        >>> PLACERS.unregister("my_single")  # tidy up
    """
    PLACERS.register(name, target, replace=replace)


def constructor_options(cls: type) -> tuple[str, ...] | None:
    """The keywords a placer class's constructor takes, in signature order; ``None`` where they cannot be told.

    A constructor's ``**kwargs`` are taken to go to its base class's constructor (as every comparator's and
    fine-tuning's do), whose keywords join; ``**kwargs`` that would reach :class:`object` are kept by the class
    itself, so its keywords cannot be told.

    Examples:
        >>> constructor_options(PLACERS["heft"])
        ('memory_aware', 'min_speed', 'timer')
        >>> constructor_options(PLACERS["round_robin"])
        ()
    """
    parameters = _constructor_parameters(cls)
    return None if parameters is None else tuple(parameters)


def _constructor_parameters(cls: type) -> dict[str, Any] | None:
    """The keyword parameters (:class:`inspect.Parameter`) of :func:`constructor_options`, by name.

    A keyword a subclass declares again is the subclass's (its default and annotation).
    """
    import inspect

    found: dict[str, inspect.Parameter] = {}
    for klass in cls.__mro__:
        init = klass.__dict__.get("__init__")
        if init is None:
            continue
        if klass is object:
            return found
        try:
            parameters = list(inspect.signature(init).parameters.values())[1:]  # past self
        except (TypeError, ValueError):
            return None
        for p in parameters:
            if p.kind in (inspect.Parameter.POSITIONAL_OR_KEYWORD, inspect.Parameter.KEYWORD_ONLY):
                found.setdefault(p.name, p)
        if not any(p.kind is inspect.Parameter.VAR_KEYWORD for p in parameters):
            return found
        if all("__init__" not in vars(base) or base is object for base in klass.__mro__[1:]):  # no base takes them
            return None
    return found


def check_placer_options(name: str, options: Mapping[str, Any], given_as: Mapping[str, str] | None = None) -> None:
    """Refuse options the placer registered as ``name`` does not take, in one line that lists those it takes.

    :func:`get_placer` (so :func:`make_placer`, ``gnplace place`` and evaluation) checks every option
    here; a command checks its flags before reading any input, naming each by ``given_as`` (``{"algo": "--algo"}``).

    Raises:
        UnknownName: if nothing is registered as ``name``.
        InvalidArgument: naming the options it does not take, the placer, and the options it takes (its
            own, then the shared ones of its ``accepts``).

    Examples:
        >>> check_placer_options("heft", {"memory_aware": False})
        >>> try:
        ...     check_placer_options("m_etf", {"algo": "reinforce"}, {"algo": "--algo"})
        ... except InvalidArgument as err:
        ...     print(err)
        placer 'm_etf' does not take these options: algo (--algo); it takes: memory_aware, min_speed (shared: timer)
    """
    takes = constructor_options(PLACERS.resolve(name))
    unknown = [key for key in options if takes is not None and key not in takes]
    if not unknown:
        return
    shown = ", ".join(f"{key} ({given_as[key]})" if given_as and key in given_as else key for key in unknown)
    own = [key for key in takes or () if key not in SHARED_OPTIONS]
    shared = [key for key in SHARED_OPTIONS if key in PLACERS.info(name).accepts]
    listed = f": {', '.join(own)}" if own else (" no options of its own" if shared else " none")
    listed += f" (shared: {', '.join(shared)})" if shared else ""
    raise InvalidArgument(f"placer {name!r} does not take these options: {shown}; it takes{listed}")


# one overload a shipped name (SHIPPED_PLACERS), so that get_placer("exact").last_status type-checks; the classes
# are imported for the type checker alone (TYPE_CHECKING), the registry stays lazy
@overload
def get_placer(name: Literal["single"], **options: Any) -> SinglePlacer: ...
@overload
def get_placer(name: Literal["round_robin"], **options: Any) -> RoundRobinPlacer: ...
@overload
def get_placer(name: Literal["expert"], **options: Any) -> ExpertPlacer: ...
@overload
def get_placer(name: Literal["metis"], **options: Any) -> MetisPlacer: ...
@overload
def get_placer(name: Literal["heft"], **options: Any) -> HeftPlacer: ...
@overload
def get_placer(name: Literal["m_etf"], **options: Any) -> METFPlacer: ...
@overload
def get_placer(name: Literal["m_sct"], **options: Any) -> MSCTPlacer: ...
@overload
def get_placer(name: Literal["random_search"], **options: Any) -> RandomSearchPlacer: ...
@overload
def get_placer(name: Literal["annealing"], **options: Any) -> AnnealingPlacer: ...
@overload
def get_placer(name: Literal["exact"], **options: Any) -> ExactPlacer: ...
@overload
def get_placer(name: Literal["auto"], **options: Any) -> AutoPlacer: ...
@overload
def get_placer(name: Literal["ppo"], **options: Any) -> PPOSearchPlacer: ...
@overload
def get_placer(name: Literal["finetune"], **options: Any) -> FineTunePlacer: ...
@overload
def get_placer(name: Literal["reinforce"], **options: Any) -> ReinforceSearchPlacer: ...
@overload
def get_placer(name: Literal["policy"], **options: Any) -> PolicyPlacer: ...
@overload
def get_placer(name: Literal["rnn_pg"], **options: Any) -> RnnPGPlacer: ...
@overload
def get_placer(name: Literal["hierarchical"], **options: Any) -> HierarchicalPlacer: ...
@overload
def get_placer(name: Literal["spotlight"], **options: Any) -> SpotlightPlacer: ...
@overload
def get_placer(name: Literal["post"], **options: Any) -> PostPlacer: ...
@overload
def get_placer(name: Literal["placeto"], **options: Any) -> PlacetoPlacer: ...
@overload
def get_placer(name: str, **options: Any) -> Placer: ...


def get_placer(name: str, **options: Any) -> Placer:
    """A new placer registered as ``name``, built with ``options``.

    Args:
        name (str): a registered name (``gnplace.placers.PLACERS.names()``: ``single``, ``auto``, ``policy``, ...).
        **options: the keyword arguments of the placer's class, each documented in its docstring
            (``help(get_placer("annealing"))``; on the command line ``-O annealing.start=heft``). ``timer``
            (a :class:`~gnplace.sim.timer.StepTimer`) and ``budget`` (timer evaluations) are shared by the placers
            that take them; a placer refuses an option it does not take. The seed is ``place``'s.

    Returns:
        Placer: call ``.place(graph, cluster, seed=...)`` for a :class:`~gnplace.placement.Placement`. A
        shipped name's placer is typed as its class (``get_placer("exact")`` as
        :class:`gnplace.placers.exact.ExactPlacer`, with its ``last_status``); any other name's as the
        :class:`~gnplace.placers.base.Placer` protocol.

    Raises:
        UnknownName: if no placer is registered under ``name``; the message lists the choices.
        InvalidArgument: if the placer does not take an option (:func:`check_placer_options`) or rejects
            its value.

    Examples:
        >>> get_placer("round_robin")
        RoundRobinPlacer()
    """
    cls = PLACERS.resolve(name)
    check_placer_options(name, options)
    _check_flags(name, cls, options)
    _check_timer(name, options.get("timer"))
    try:
        return cls(**options)
    except TypeError as err:
        if "unexpected keyword argument" in str(err):  # a constructor whose keywords could not be told
            raise InvalidArgument(f"placer {name!r} does not take these options: {err}") from err
        given = ", ".join(f"{k}={v!r}" for k, v in options.items() if k != "timer" and v is not None)
        raise InvalidArgument(f"placer {name!r}: an option value of the wrong type ({given}): {err}") from err
    except ValueError as err:
        if isinstance(err, GnplaceError):  # already one clear error (a bad checkpoint, a bad value)
            raise
        raise InvalidArgument(f"placer {name!r}: {err}") from err


def _check_timer(name: str, timer: Any) -> None:
    """Refuse a ``timer`` that is no :class:`~gnplace.sim.timer.StepTimer` (``timer="sim"``).

    It failed only when placing, as an AttributeError.

    Raises:
        InvalidArgument: naming the placer and the value.
    """
    from gnplace.sim.timer import StepTimer

    if timer is not None and not isinstance(timer, StepTimer):
        raise InvalidArgument(f"placer {name!r}: timer must be a StepTimer (a Simulator, a real-device timer, ...), "
                              f"got {timer!r}")


def _check_flags(name: str, cls: Any, options: dict[str, Any]) -> None:
    """Refuse a value other than true or false for an option the placer declares ``bool``.

    Placers read flags with ``bool(value)``, under which any non-empty text (``maybe``) or number is true.

    Raises:
        InvalidArgument: naming the option and the value.
    """
    from gnplace.placers.base import check_flag

    parameters = _constructor_parameters(cls) or {}  # a base's flags too, reached through **kwargs
    for key, value in options.items():
        parameter = parameters.get(key)
        if parameter is None:
            continue
        annotation = parameter.annotation
        text = annotation if isinstance(annotation, str) else getattr(annotation, "__name__", str(annotation))
        kinds = {part.strip() for part in text.split("|")}
        # null: the default where the option takes None too, else refused (bool(None) turned subsets off)
        if kinds <= {"bool", "None"} and (value is not None or "None" not in kinds):
            check_flag(name, key, value)


@overload
def make_placer(name: Literal["single"], *, timer: Any = None, budget: int | None = None,
                checkpoint: str | None = None, **options: Any) -> SinglePlacer: ...
@overload
def make_placer(name: Literal["round_robin"], *, timer: Any = None, budget: int | None = None,
                checkpoint: str | None = None, **options: Any) -> RoundRobinPlacer: ...
@overload
def make_placer(name: Literal["expert"], *, timer: Any = None, budget: int | None = None,
                checkpoint: str | None = None, **options: Any) -> ExpertPlacer: ...
@overload
def make_placer(name: Literal["metis"], *, timer: Any = None, budget: int | None = None,
                checkpoint: str | None = None, **options: Any) -> MetisPlacer: ...
@overload
def make_placer(name: Literal["heft"], *, timer: Any = None, budget: int | None = None,
                checkpoint: str | None = None, **options: Any) -> HeftPlacer: ...
@overload
def make_placer(name: Literal["m_etf"], *, timer: Any = None, budget: int | None = None,
                checkpoint: str | None = None, **options: Any) -> METFPlacer: ...
@overload
def make_placer(name: Literal["m_sct"], *, timer: Any = None, budget: int | None = None,
                checkpoint: str | None = None, **options: Any) -> MSCTPlacer: ...
@overload
def make_placer(name: Literal["random_search"], *, timer: Any = None, budget: int | None = None,
                checkpoint: str | None = None, **options: Any) -> RandomSearchPlacer: ...
@overload
def make_placer(name: Literal["annealing"], *, timer: Any = None, budget: int | None = None,
                checkpoint: str | None = None, **options: Any) -> AnnealingPlacer: ...
@overload
def make_placer(name: Literal["exact"], *, timer: Any = None, budget: int | None = None,
                checkpoint: str | None = None, **options: Any) -> ExactPlacer: ...
@overload
def make_placer(name: Literal["auto"], *, timer: Any = None, budget: int | None = None,
                checkpoint: str | None = None, **options: Any) -> AutoPlacer: ...
@overload
def make_placer(name: Literal["ppo"], *, timer: Any = None, budget: int | None = None,
                checkpoint: str | None = None, **options: Any) -> PPOSearchPlacer: ...
@overload
def make_placer(name: Literal["finetune"], *, timer: Any = None, budget: int | None = None,
                checkpoint: str | None = None, **options: Any) -> FineTunePlacer: ...
@overload
def make_placer(name: Literal["reinforce"], *, timer: Any = None, budget: int | None = None,
                checkpoint: str | None = None, **options: Any) -> ReinforceSearchPlacer: ...
@overload
def make_placer(name: Literal["policy"], *, timer: Any = None, budget: int | None = None,
                checkpoint: str | None = None, **options: Any) -> PolicyPlacer: ...
@overload
def make_placer(name: Literal["rnn_pg"], *, timer: Any = None, budget: int | None = None,
                checkpoint: str | None = None, **options: Any) -> RnnPGPlacer: ...
@overload
def make_placer(name: Literal["hierarchical"], *, timer: Any = None, budget: int | None = None,
                checkpoint: str | None = None, **options: Any) -> HierarchicalPlacer: ...
@overload
def make_placer(name: Literal["spotlight"], *, timer: Any = None, budget: int | None = None,
                checkpoint: str | None = None, **options: Any) -> SpotlightPlacer: ...
@overload
def make_placer(name: Literal["post"], *, timer: Any = None, budget: int | None = None,
                checkpoint: str | None = None, **options: Any) -> PostPlacer: ...
@overload
def make_placer(name: Literal["placeto"], *, timer: Any = None, budget: int | None = None,
                checkpoint: str | None = None, **options: Any) -> PlacetoPlacer: ...
@overload
def make_placer(
    name: str, *, timer: Any = None, budget: int | None = None, checkpoint: str | None = None, **options: Any
) -> Placer: ...


def make_placer(
    name: str, *, timer: Any = None, budget: int | None = None, checkpoint: str | None = None, **options: Any
) -> Placer:
    """Like :func:`get_placer`, but passes the shared options only to placers that accept them.

    The command line and evaluation use this so that one ``--budget``, timer or checkpoint applies
    to every placer that declares the option in its ``accepts`` and is ignored by the others.
    ``None`` means "the placer's default".

    Raises:
        UnknownName: if no placer is registered under ``name``; the message lists the choices.
        InvalidArgument: as :func:`get_placer`, for an option the placer does not take or a value it rejects.

    Examples:
        >>> make_placer("round_robin", budget=10)
        RoundRobinPlacer()
        >>> make_placer("annealing", budget=10).budget
        10
    """
    accepts = PLACERS.info(name).accepts
    for key, value in (("timer", timer), ("budget", budget), ("checkpoint", checkpoint)):
        if value is not None and key in accepts:
            options[key] = value
    return get_placer(name, **options)
