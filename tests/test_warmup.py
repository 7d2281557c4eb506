"""``python -m gnplace.warmup``: it compiles the kernel signatures that placing with auto and the policy use."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]

#: In a process of its own (a dispatcher's signatures are per process): the signatures each numba kernel has after
#: the warm-up, then those that ``gnplace place`` with ``auto`` and ``policy`` added on a shipped graph.
_CHECK = """
import json, sys
import numba
import gnplace.coarsen, gnplace.placers._listsched_kernel, gnplace.rl._schedule, gnplace.sim._kernel
from gnplace.cli import main
from gnplace.warmup import main as warm_up_main

modules = [gnplace.coarsen, gnplace.placers._listsched_kernel, gnplace.rl._schedule, gnplace.sim._kernel]
kernels = {f"{m.__name__}.{n}": f for m in modules for n, f in vars(m).items()
           if isinstance(f, numba.core.dispatcher.Dispatcher)}
assert warm_up_main() == 0
before = {name: set(map(str, f.signatures)) for name, f in kernels.items()}
graph = sys.argv[1]
for placer in ("auto", "policy"):
    assert main(["place", graph, "-c", "k80x4", "-p", placer, "--json"]) == 0
added = {name: sorted(set(map(str, f.signatures)) - before[name]) for name, f in kernels.items()}
print(json.dumps({"compiled": sorted(n for n, s in before.items() if s),
                  "added": {n: s for n, s in added.items() if s}}))
"""


@pytest.mark.heavy
def test_after_the_warm_up_placing_with_auto_and_the_policy_compiles_nothing():
    graph = str(ROOT / "datasets" / "ptb" / "ptb_017.gnpg")
    done = subprocess.run([sys.executable, "-c", _CHECK, graph], capture_output=True, text=True, cwd=ROOT, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    report = json.loads(done.stdout.strip().splitlines()[-1])
    said = next(line for line in done.stderr.splitlines() if line.startswith("gnplace: compiled"))
    assert said.startswith("gnplace: compiled and cached the numba kernels of simulate, bound, heft, m_etf, m_sct, "
                           "coarsen, policy in ") and said.endswith(" s")
    assert {"gnplace.sim._kernel.simulate_step", "gnplace.sim._kernel.simulate_many",
            "gnplace.placers._listsched_kernel.heft_kernel", "gnplace.rl._schedule.decision_features",
            "gnplace.coarsen._acyclic_kernel", "gnplace.coarsen._match_kernel", "gnplace.coarsen._relabel_kernel",
            "gnplace.coarsen._join_kernel"} <= set(report["compiled"])
    assert report["added"] == {}  # nothing left for the first command to compile


def test_import_gnplace_leaves_the_warm_up_module_to_python_m():
    """``python -m gnplace.warmup`` (make install) warned "'gnplace.warmup' found in sys.modules after import of
    package 'gnplace'": the package imported it at its own import."""
    done = subprocess.run([sys.executable, "-c", "import sys, gnplace; print('gnplace.warmup' in sys.modules)"],
                          capture_output=True, text=True, cwd=ROOT, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.strip() == "False"


def _stopped_in_a_kernel() -> list[str]:
    """A Ctrl-C as numba's compiled loops hand it back: a SystemError caused by the KeyboardInterrupt."""
    try:
        raise KeyboardInterrupt
    except KeyboardInterrupt as err:
        raise SystemError("CPUDispatcher(simulate_many) returned a result with an exception set") from err


def test_a_ctrl_c_during_the_warm_up_is_one_line_and_130(monkeypatch, capsys):
    """Ctrl-C during make install's compile printed the traceback of the kernel it stopped."""
    import gnplace.warmup

    monkeypatch.setattr(gnplace.warmup, "warm_up", _stopped_in_a_kernel)
    assert gnplace.warmup.main() == 130
    assert capsys.readouterr() == ("", "gnplace: interrupted\n")
