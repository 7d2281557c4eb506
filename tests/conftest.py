"""Fixtures shared across the test packages: small graphs, clusters and timers.

pytest imports test modules with ``--import-mode=importlib``, so they cannot import each other;
helpers used by more than one module live here as fixtures (a builder function where a test
needs several variants). Clusters come from :mod:`gnplace.toy`.
"""

from __future__ import annotations

import importlib.util
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from types import ModuleType

import pytest

from gnplace.cluster import Cluster, load_cluster
from gnplace.graph import OpGraph
from gnplace.sim.simulator import Simulator
from gnplace.sim.timer import StepResult, StepTimer
from gnplace.toy import mlp_training_graph, toy_cluster

GiB = 2**30
ROOT = Path(__file__).resolve().parents[1]


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Tests marked ``heavy`` first, the others in their order.

    pytest-xdist hands each worker its next tests as it finishes the last ones: a heavy test near the end of
    the collection left one worker running it alone (the DDP test, 80 s, ended a run 63 s after the other
    worker had finished). Every worker sorts the same collection the same way, as xdist requires.
    """
    items.sort(key=lambda item: item.get_closest_marker("heavy") is None)


@pytest.fixture(scope="session", autouse=True)
def torch_on_one_thread() -> None:
    """The tests' own torch computes on one thread (the processes they start keep torch's default).

    Each xdist worker's torch took a thread per core, so ``make test``'s two workers ran four OpenMP threads on two
    cores, and every parallel region of one waited for a thread the other had: the policy's tiny tensors spent their
    time at OpenMP's barriers (tests/rl/test_imitation.py's 214 Adam steps on a 40-op graph, 0.72 s a step on two
    threads on a loaded 2-core VM, 0.02 s on one). A test of thread counts sets the count it starts from itself.
    """
    import torch

    torch.set_num_threads(1)


#: What rich reads of the environment to colour and size its output (rich.console): the runner's own must not
#: decide what a test's output holds.
CONSOLE_VARIABLES = ("FORCE_COLOR", "NO_COLOR", "TTY_COMPATIBLE", "TTY_INTERACTIVE", "COLUMNS", "LINES",
                     "JUPYTER_COLUMNS", "JUPYTER_LINES")


@pytest.fixture(autouse=True)
def console_as_piped(monkeypatch: pytest.MonkeyPatch) -> None:
    """Every test's output is as a pipe gets it, 80 columns and no colours, whatever the runner's environment says.

    ``FORCE_COLOR=1 COLUMNS=40`` in the runner's environment failed eight tests of ``tests/cli`` that read what a
    command printed (rich's colour codes between the words, names wrapped in a table); a test that wants a width
    or colours sets them itself.
    """
    for name in CONSOLE_VARIABLES:
        monkeypatch.delenv(name, raising=False)


def _script_loader(monkeypatch: pytest.MonkeyPatch) -> Callable[[str], ModuleType]:
    """A ``load(name)`` of ``scripts/NAME.py`` whose changes to ``sys.path`` and ``sys.modules`` ``monkeypatch`` undoes.

    A dotted name (``"benchmarks.zeroshot"``) imports that module of a package under ``scripts/``.
    Every module of ``scripts/`` the load imported leaves ``sys.modules`` after the test; the
    libraries it imported (torch, ...) stay, as they cannot be imported twice.
    """
    monkeypatch.syspath_prepend(str(ROOT / "scripts"))

    def load(name: str) -> ModuleType:
        before = set(sys.modules)
        if "." in name:
            module = importlib.import_module(name)
        else:
            spec = importlib.util.spec_from_file_location(f"{name}_script", ROOT / "scripts" / f"{name}.py")
            assert spec is not None and spec.loader is not None
            module = importlib.util.module_from_spec(spec)
            monkeypatch.setitem(sys.modules, spec.name, module)
            spec.loader.exec_module(module)
        scripts = ROOT / "scripts"
        for added in set(sys.modules) - before:
            where = getattr(sys.modules[added], "__file__", None)
            if where is not None and Path(where).resolve().is_relative_to(scripts):
                monkeypatch.setitem(sys.modules, added, sys.modules[added])  # undone: removed again
        return module

    return load


@pytest.fixture
def load_script(monkeypatch) -> Callable[[str], ModuleType]:
    """``load_script("place")``: ``scripts/place.py`` as a module, to call its functions in this process.

    ``scripts/`` goes on ``sys.path`` (``bench.py`` imports ``report.py`` beside it) and the module
    into ``sys.modules`` (dataclasses look their module up), both undone after the test.
    """
    return _script_loader(monkeypatch)


@pytest.fixture(scope="module")
def load_script_in_module() -> Iterator[Callable[[str], ModuleType]]:
    """:func:`load_script` for a whole test module, undone after the module."""
    with pytest.MonkeyPatch.context() as monkeypatch:
        yield _script_loader(monkeypatch)


class CountingSimulator(Simulator):
    """A simulator that counts the placements it scores and the size of each batch."""

    def __init__(self, mode="default") -> None:
        super().__init__(mode)
        self.evaluations = 0
        self.batches: list[int] = []

    def time(self, graph, cluster, placement, *, timeline=False):
        self.evaluations += 1
        self.batches.append(1)
        return super().time(graph, cluster, placement, timeline=timeline)

    def time_batch(self, graph, cluster, placements):
        self.evaluations += len(placements)
        self.batches.append(len(placements))
        return super().time_batch(graph, cluster, placements)


class TimeOnlyTimer(StepTimer):
    """A timer that implements only :meth:`time`, as a slow real-device timer would; counts its calls."""

    def __init__(self, mode="default") -> None:
        self.simulator = Simulator(mode)
        self.cost_model = self.simulator.cost_model
        self.calls = 0

    def time(self, graph, cluster, placement, *, timeline=False) -> StepResult:
        self.calls += 1
        return self.simulator.time(graph, cluster, placement, timeline=timeline)


def _two_chains(length: int = 4) -> OpGraph:
    """Two independent equal chains, ``a0 -> a1 -> ...`` then ``b0 -> b1 -> ...``."""
    edges = [(i, i + 1) for i in range(length - 1)] + [(length + i, length + i + 1) for i in range(length - 1)]
    names = [f"a{i}" for i in range(length)] + [f"b{i}" for i in range(length)]
    return OpGraph(names, edges, flops=[1e11] * 2 * length, out_bytes=[1000] * 2 * length)


def _heavy_groups(params_gib: list[float]) -> OpGraph:
    """A chain of one op per group, each holding ``params_gib`` GiB of parameters."""
    n = len(params_gib)
    return OpGraph(
        [f"l{i}" for i in range(n)], [(i, i + 1) for i in range(n - 1)], flops=[1e10] * n, out_bytes=[10**6] * n,
        param_bytes=[int(p * GiB) for p in params_gib], name="heavy",
    )


def _small_gpus(num_devices: int = 2, memory: float = 1 * GiB, name: str = "small") -> Cluster:
    """``num_devices`` K80s of ``memory`` bytes each, joined by 12 GB/s, 10 us links."""
    return toy_cluster(num_devices, memory=memory, name=name)


def _step_time(graph: OpGraph, cluster: Cluster, placement) -> float:
    """The simulated step time of ``placement`` (seconds)."""
    return Simulator().time(graph, cluster, placement).step_time


@pytest.fixture
def two_chains() -> Callable[..., OpGraph]:
    """Builds two independent equal chains: ``two_chains(length=4)``."""
    return _two_chains


@pytest.fixture
def heavy_groups() -> Callable[[list[float]], OpGraph]:
    """Builds a chain of one op per group with the given GiB of parameters each: ``heavy_groups([0.6, 0.3])``."""
    return _heavy_groups


@pytest.fixture
def small_gpus() -> Callable[..., Cluster]:
    """Builds a cluster of small K80s: ``small_gpus(num_devices=2, memory=1 GiB, name="small")``."""
    return _small_gpus


@pytest.fixture
def k80x2_written_out(tmp_path: Path) -> Path:
    """Writes the preset k80x2 as a cluster file that writes the k80's default memory out (``12 GiB``): its YAML path.

    Its fingerprint is the preset's; before 2026-12-04 (commit 32c87da) it was another
    (:meth:`~gnplace.cluster.Cluster.earlier_fingerprint`), which runs and placement files of then recorded.
    """
    written = tmp_path / "k80x2.yaml"
    written.write_text("name: k80x2\ndevices: [{name: gpu, count: 2, kind: k80, memory: 12 GiB, peak_flops: "
                       "2.8 TFLOP/s, flops_efficiency: 0.45}]\nlinks: {default: placeto}\n")
    return written


@pytest.fixture
def cpu_ranks(tmp_path_factory: pytest.TempPathFactory) -> Callable[[int], str]:
    """Writes a cluster of CPUs, as the distributed timer's gloo ranks are: ``cpu_ranks(2)`` is its YAML path."""

    def write(count: int) -> str:
        path = tmp_path_factory.mktemp("ranks") / f"ranks{count}.yaml"
        path.write_text(f"name: ranks{count}\ndevices:\n  - {{name: rank, count: {count}, kind: cpu, memory: 64 GiB}}\n"
                        "links:\n  default: pcie3\n")
        return str(path)

    return write


@pytest.fixture
def step_time() -> Callable[..., float]:
    """The simulated step time of a placement: ``step_time(graph, cluster, placement)``."""
    return _step_time


@pytest.fixture
def counting_simulator() -> CountingSimulator:
    """A new :class:`CountingSimulator`."""
    return CountingSimulator()


@pytest.fixture
def time_only_timer() -> TimeOnlyTimer:
    """A new :class:`TimeOnlyTimer` (the simulator behind a timer that has only ``time``)."""
    return TimeOnlyTimer()


@pytest.fixture
def only_fits_split() -> tuple[OpGraph, Cluster]:
    """An MLP on ``tight4`` that no single device holds: ``(graph, cluster)``."""
    return mlp_training_graph(layers=8, width=6144, batch=256), load_cluster("tight4")


@pytest.fixture
def short_ptb(monkeypatch: pytest.MonkeyPatch) -> None:
    """ptb graphs of 3 time steps (hundreds of ops where drawn ones have up to 5,000): a fifth of the drawing time.

    For tests of what datasets do with their graphs (files, manifests, resume), which no graph's size changes;
    the knobs stay seeded, so another seed still draws other graphs.
    """
    from gnplace.families import ptb

    drawn = ptb.random_knobs
    monkeypatch.setattr(ptb, "random_knobs", lambda rng: {**drawn(rng), "steps": 3})


@pytest.fixture(scope="session")
def tiny_config(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A pretraining YAML config over two tiny families of toy MLPs: seconds per run.

    The pretraining tests share it (``tests/test_pretrain*.py``): the files of its folder are read, never changed.
    """
    import yaml

    from gnplace.graph_io import save_graph

    base = tmp_path_factory.mktemp("tiny")
    for f, family in enumerate(("alpha", "beta")):
        for i in range(3):
            graph = mlp_training_graph(layers=2 + i, width=256 * (1 + f), batch=32)
            graph.meta["family"] = family
            save_graph(graph, base / "data" / family / f"{family}_{i}.gnpg")
    config = {
        "data": {"root": str(base / "data"), "families": ["alpha", "beta"], "val_per_family": 1,
                 "presets": ["k80x2"], "random_clusters": 1, "val_clusters": ["k80x2"], "max_nodes": 50},
        "schedule": {"iterations": 4, "pairs_per_step": 2, "steps_per_epoch": 2, "checkpoint_every_s": 60},
        "learner": {"samples": 4, "epochs": 2, "imitation_steps": 1, "hidden": 16, "head": 8, "layers": 2,
                    "elite": 1.0, "elite_target": "samples", "seed": 0},
    }
    path = base / "configs" / "tiny.yaml"
    path.parent.mkdir()
    path.write_text(yaml.safe_dump(config))
    return path


@pytest.fixture(scope="session")
def tiny_run(tiny_config: Path, tmp_path_factory: pytest.TempPathFactory) -> Callable[..., Path]:
    """``tiny_run(*overrides)``: the folder of a run of the tiny config with those overrides, trained once a session.

    Read it only: a test that resumes the run or changes its files takes a copy. Seven tests trained the same two
    runs (the config's 4 iterations, and 2) nine times; the same config and seed write the same files
    (``tests/test_pretrain.py``'s ``test_the_same_config_and_seed_give_the_same_policy``). Once a session (each
    xdist worker's), not a module: ``test_pretrain.py`` and ``test_pretrain_resume.py`` read the same runs.
    """
    from gnplace.pretrain import load_pretrain_config, pretrain  # (Lightning's import: only where a test runs one)

    made: dict[tuple[str, ...], Path] = {}

    def run(*overrides: str) -> Path:
        if overrides not in made:
            out = tmp_path_factory.mktemp("tiny_run") / "run"
            pretrain(load_pretrain_config(tiny_config, list(overrides)), out, progress=False)
            made[overrides] = out
        return made[overrides]

    return run


#: The revisions of ``auto``'s candidates (``auto`` declares none) that today's keys, digests and recipes carry:
#: m_etf and m_sct 2 since 2026-11-30 (the ETF fix), and since 2026-12-04 (the memory repair's last resort) 3, with
#: expert, heft and metis 1.
AUTO_USES = {"expert": "1", "heft": "1", "m_etf": "3", "m_sct": "3", "metis": "1"}


@pytest.fixture
def auto_uses() -> dict[str, str]:
    """:data:`AUTO_USES`, a fresh copy: the revisions ``PLACERS.revisions_used("auto")`` gives today."""
    return dict(AUTO_USES)


@pytest.fixture
def revisions_of_before(monkeypatch: pytest.MonkeyPatch) -> Callable[[], None]:
    """Call it to take every revision of ``auto``'s candidates away, as before 2026-11-30 when none declared one."""
    from gnplace.placers.registry import PLACERS

    def undeclare() -> None:
        for name in AUTO_USES:
            monkeypatch.setattr(PLACERS.resolve(name), "revision", "")

    return undeclare


@pytest.fixture
def metis_methods(monkeypatch: pytest.MonkeyPatch) -> list[bool | None]:
    """The ``recursive`` argument of each ``pymetis.part_graph`` call the test makes (``None``: left to pymetis)."""
    import pymetis

    seen: list[bool | None] = []
    real = pymetis.part_graph

    def recording(*args: object, **kwargs: object) -> object:
        seen.append(kwargs.get("recursive"))
        return real(*args, **kwargs)

    monkeypatch.setattr(pymetis, "part_graph", recording)
    return seen


@pytest.fixture
def disk_full_at(monkeypatch: pytest.MonkeyPatch) -> Callable[..., None]:
    """``disk_full_at(name=None)``: from then on, renaming a file into place fails as a full disk does.

    ``os.replace`` raises ``OSError(ENOSPC)`` for a destination named ``name`` (for every one without a name)
    and renames the others: the last step of an atomic write, after its ``.tmp`` is written.
    """
    import errno
    import os

    replace = os.replace

    def full(name: str | None = None) -> None:
        def replace_unless_full(src: str | os.PathLike[str], dst: str | os.PathLike[str]) -> None:
            if name is None or Path(dst).name == name:
                raise OSError(errno.ENOSPC, "No space left on device", str(dst))
            replace(src, dst)

        monkeypatch.setattr(os, "replace", replace_unless_full)

    return full


@pytest.fixture
def disk_fills_in(monkeypatch: pytest.MonkeyPatch) -> Callable[..., None]:
    """``disk_fills_in(path)``: from then on, the disk takes half of the next write into ``path``, then no more.

    ``os.write`` into the file at ``path`` writes the first half of its bytes, then raises ``OSError(ENOSPC)`` (a
    filled disk as an append meets it); writes into other files go through. ``monkeypatch.undo()`` ends it.
    """
    import errno
    import os

    write = os.write

    def fills(path: Path) -> None:
        def full(fd: int, data: bytes) -> int:
            if os.fstat(fd).st_ino != path.stat().st_ino:
                return write(fd, data)
            if len(data) > 1:
                return write(fd, bytes(data[:len(data) // 2]))
            raise OSError(errno.ENOSPC, "No space left on device")

        monkeypatch.setattr(os, "write", full)

    return fills


@pytest.fixture
def process_alive() -> Callable[..., bool]:
    """``process_alive(pid, within=0.0)``: whether process ``pid`` still runs (a zombie does not) after waiting up to
    ``within`` seconds for it to end."""
    import time

    def alive(pid: int, within: float = 0.0) -> bool:
        deadline = time.monotonic() + within
        while True:
            try:
                running = Path(f"/proc/{pid}/stat").read_text().split(")")[-1].split()[0] != "Z"
            except FileNotFoundError:
                running = False
            if not running or time.monotonic() >= deadline:
                return running
            time.sleep(0.2)

    return alive


OUTPUTS_DOC = ROOT / "docs" / "outputs.md"


def _documented_schemas() -> dict[str, set[str]]:
    """``{name: keys}`` of the table under each ``<!-- schema: NAME -->`` line of docs/outputs.md (to the next heading)."""
    import re

    schemas: dict[str, set[str]] = {}
    for name, body in re.findall(r"<!-- schema: ([\w-]+) -->\n(.*?)(?=\n#|\Z)", OUTPUTS_DOC.read_text(), flags=re.S):
        rows = [line for line in body.splitlines() if line.startswith("| `")]
        schemas[name] = {re.match(r"\| `([^`]+)`", row).group(1) for row in rows}  # type: ignore[union-attr]
    return schemas


def _written_keys(value: dict, documented: set[str], prefix: str = "") -> set[str]:
    """``value``'s keys, as docs/outputs.md writes them: an object or list of objects opened where it lists its keys."""
    keys = set()
    for key, item in value.items():
        path = f"{prefix}{key}"
        if isinstance(item, dict) and any(d.startswith(f"{path}.") for d in documented):
            keys |= _written_keys(item, documented, f"{path}.")
        elif isinstance(item, list) and any(d.startswith(f"{path}[].") for d in documented):
            for element in item:
                keys |= _written_keys(element, documented, f"{path}[].")
        else:
            keys.add(path)
    return keys


@pytest.fixture
def documented_keys() -> Callable[[str, dict], None]:
    """``documented_keys(name, output)``: assert that ``output`` (parsed JSON, a CSV row) holds the keys that
    docs/outputs.md lists under ``<!-- schema: name -->``, no more and no fewer."""

    def check(name: str, output: dict) -> None:
        documented = _documented_schemas()[name]
        written = _written_keys(output, documented)
        assert written == documented, (f"docs/outputs.md {name}: written but not documented "
                                       f"{sorted(written - documented)}, documented but not written "
                                       f"{sorted(documented - written)}")

    return check


@pytest.fixture
def figure_dpis(monkeypatch: pytest.MonkeyPatch) -> tuple[list[float], list[float]]:
    """The dpi each matplotlib figure is laid out at (``tight_layout``) and written at (``savefig``), as drawn."""
    import matplotlib.figure

    laid_out: list[float] = []
    written: list[float] = []
    real_layout, real_savefig = matplotlib.figure.Figure.tight_layout, matplotlib.figure.Figure.savefig
    monkeypatch.setattr(matplotlib.figure.Figure, "tight_layout",
                        lambda fig, *a, **kw: (laid_out.append(fig.dpi), real_layout(fig, *a, **kw))[1])
    monkeypatch.setattr(matplotlib.figure.Figure, "savefig",
                        lambda fig, target, **kw: (written.append(kw["dpi"]), real_savefig(fig, target, **kw))[1])
    return laid_out, written


@pytest.fixture()
def mlp_graph_folder(tmp_path: Path) -> Path:
    """A folder of two small MLP training graph files, ``mlp2.gnpg`` and ``mlp3.gnpg`` (2 and 3 layers)."""
    from gnplace.graph_io import save_graph

    folder = tmp_path / "graphs"
    for layers in (2, 3):
        save_graph(mlp_training_graph(layers=layers, width=512, batch=128, branches=2), folder / f"mlp{layers}.gnpg")
    return folder

