"""``tests/`` mirrors ``gnplace/`` (STYLE.md habit 1): every module has its test file; and a test run depends on
nothing of its runner's (working folder, console settings) and leaves nothing behind."""

from __future__ import annotations

from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def mirrored_test(module: Path) -> Path:
    """``gnplace/<pkg>/<mod>.py`` -> ``tests/<pkg>/test_<mod>.py``, a leading underscore dropped."""
    relative = module.relative_to(ROOT / "gnplace")
    return ROOT / "tests" / relative.parent / f"test_{relative.stem.lstrip('_')}.py"


def test_every_module_has_its_mirrored_test_file():
    modules = [p for p in sorted((ROOT / "gnplace").rglob("*.py")) if p.name not in ("__init__.py", "__main__.py")]
    assert len(modules) > 40  # the walk found the package
    missing = [
        f"{m.relative_to(ROOT)} -> {mirrored_test(m).relative_to(ROOT)}"
        for m in modules
        if not mirrored_test(m).is_file()
    ]
    assert not missing, "modules without their mirrored test file:\n  " + "\n  ".join(missing)


def test_every_benchmark_module_has_its_test_file():
    """``scripts/benchmarks/<mod>.py`` -> ``tests/benchmarks/test_<mod>.py``."""
    modules = [p for p in sorted((ROOT / "scripts" / "benchmarks").glob("*.py")) if p.name != "__init__.py"]
    assert len(modules) >= 7
    missing = [m.name for m in modules if not (ROOT / "tests" / "benchmarks" / f"test_{m.stem}.py").is_file()]
    assert not missing, f"benchmark modules without tests/benchmarks/test_<name>.py: {missing}"


def test_every_reporting_module_has_its_test_file():
    """``scripts/reporting/<mod>.py`` (the benchmark report's jobs) -> ``tests/reporting/test_<mod>.py``."""
    modules = [p for p in sorted((ROOT / "scripts" / "reporting").glob("*.py")) if p.name != "__init__.py"]
    assert len(modules) >= 12
    missing = [m.name for m in modules if not (ROOT / "tests" / "reporting" / f"test_{m.stem}.py").is_file()]
    assert not missing, f"reporting modules without tests/reporting/test_<name>.py: {missing}"


def test_import_gnplace_and_the_non_learned_placers_stay_light():
    """``import gnplace`` and every non-learned placer never import torch-geometric or Lightning (nor torch), and
    ``gnplace place`` of a graph file does not import onnx either (1.3 s: it did, for ``--input-shape``'s parser)."""
    import subprocess
    import sys

    code = (
        "import sys, tempfile, gnplace\n"
        "from gnplace.placers import PLACERS, make_placer\n"
        "from gnplace.toy import chain_graph, toy_cluster\n"
        "heavy = ('torch', 'torch_geometric', 'lightning', 'pytorch_lightning', 'onnx')\n"
        "assert not [m for m in heavy if m in sys.modules], 'import gnplace'\n"
        "for name in PLACERS.names(learned=False):\n"
        "    make_placer(name, budget=5).place(chain_graph(3), toy_cluster(2), seed=0)\n"
        "from gnplace.cli import main\n"
        "from gnplace.graph_io import save_graph\n"
        "with tempfile.TemporaryDirectory() as folder:\n"
        "    path = save_graph(chain_graph(3), folder + '/g.gnpg')\n"
        "    assert main(['place', str(path), '-c', 'k80x2', '-p', 'heft', '--json']) == 0\n"
        "print(sorted(m for m in heavy if m in sys.modules))\n"
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip().splitlines()[-1] == "[]"


def test_every_private_module_function_is_used():
    """A module-level ``_helper`` (function or class) is named somewhere in the package or scripts besides its def.

    ``limits._text_depth``, the YAML reader's bracket pre-check, stayed behind, called by nothing, once that reader
    left nesting to the parser's recursion limit and ``check_depth``. Methods are left out: a private method may
    be a framework's hook (Lightning's ``_get_train_description``).
    """
    import ast
    import collections
    import re

    sources = [*sorted((ROOT / "gnplace").rglob("*.py")), *sorted((ROOT / "scripts").rglob("*.py"))]
    words: collections.Counter[str] = collections.Counter()
    for path in sources:
        words.update(re.findall(r"\w+", path.read_text()))
    unused = [
        f"{path.relative_to(ROOT)}: {node.name}"
        for path in sorted((ROOT / "gnplace").rglob("*.py"))
        for node in ast.parse(path.read_text()).body
        if isinstance(node, ast.FunctionDef | ast.ClassDef) and node.name.startswith("_")
        and not node.name.startswith("__") and words[node.name] < 2
    ]
    assert not unused, "private helpers nothing uses:\n  " + "\n  ".join(unused)


def test_policy_never_imports_rl():
    """``rl/`` knows ``policy/``, not the other way (DESIGN.md): ``policy/checkpoint.py`` imported the dynamic features'
    names from ``rl/env.py`` (inside two functions, past the cycle), which now live with the other features' names
    in ``policy/features.py``."""
    import ast

    found = []
    for path in sorted((ROOT / "gnplace" / "policy").rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            names = [node.module or ""] if isinstance(node, ast.ImportFrom) else \
                [a.name for a in node.names] if isinstance(node, ast.Import) else []
            found += [f"{path.relative_to(ROOT)}:{node.lineno} {n}" for n in names if n.startswith("gnplace.rl")]
    assert not found, found


def test_a_test_run_leaves_nothing_in_its_working_folder(tmp_path):
    """pytest-benchmark, a dev dependency no test used, made an empty ``.benchmarks/`` in the working folder of
    every run (``.gitignore`` hid it in the repository; ``pytest /path/to/gnplace/tests`` left it elsewhere)."""
    import os
    import subprocess
    import sys

    (tmp_path / "test_one.py").write_text("def test_one():\n    assert True\n")
    result = subprocess.run([sys.executable, "-m", "pytest", "-c", str(ROOT / "pyproject.toml"), "-p", "no:cacheprovider",
                             "test_one.py"], capture_output=True, text=True, cwd=tmp_path, timeout=120,
                            env={**os.environ, "PYTHONDONTWRITEBYTECODE": "1"})  # Python's __pycache__, not a plugin's
    assert result.returncode == 0, result.stdout[-2000:] + result.stderr[-2000:]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["test_one.py"]


def test_the_runners_console_settings_change_no_tests_output(tmp_path):
    """``FORCE_COLOR=1 COLUMNS=40`` in the runner's environment (CI services and tox pass such settings on) failed
    eight tests of ``tests/cli`` that read what a command printed, ``COLUMNS=40`` alone two (rich's colour codes
    between the words, names wrapped in a table): ``conftest.py`` takes rich's settings out of every test's."""
    import os
    import subprocess
    import sys

    env = {**os.environ, "FORCE_COLOR": "1", "TTY_COMPATIBLE": "1", "COLUMNS": "40", "PYTHONDONTWRITEBYTECODE": "1"}
    names = "tests/cli/test_place.py::test_names_holding_line_breaks_print_on_one_line"
    result = subprocess.run([sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-p", "no:xdist",
                             f"--basetemp={tmp_path}", names],
                            capture_output=True, text=True, cwd=ROOT, env=env, timeout=300)
    assert result.returncode == 0, result.stdout[-3000:]


TRACKED_TOP_LEVEL = {".ci", ".gitignore", "LICENSE", "MANIFEST.in", "Makefile", "README.md", "checkpoints", "configs", "conftest.py",
                     "datasets", "docs", "gnplace", "pyproject.toml", "scripts", "setup.py", "tests"}


def test_the_repository_tracks_no_stray_top_level_entry():
    """A run folder committed by mistake (``zzz/``: a 896 KB ``last.ckpt`` and its logs, tracked for a stop) is caught:
    every top-level path git tracks is one the layout names."""
    import shutil
    import subprocess

    import pytest

    if shutil.which("git") is None or not (ROOT / ".git").exists():
        pytest.skip("not a git checkout")
    listed = subprocess.run(["git", "ls-files"], cwd=ROOT, capture_output=True, text=True, check=True).stdout
    top = {line.split("/", 1)[0] for line in listed.splitlines() if line}
    assert "gnplace" in top  # the listing is the repository's
    assert top <= TRACKED_TOP_LEVEL, f"tracked paths the layout does not name: {sorted(top - TRACKED_TOP_LEVEL)}"
