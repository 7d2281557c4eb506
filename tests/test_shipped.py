"""The shipped checkpoints and pretraining config: found in a checkout, and carried by the sdist and the wheel."""

from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
import tarfile
import tomllib
import zipfile
from pathlib import Path

import pytest
from packaging.version import Version

import gnplace
import gnplace.shipped as shipped
from gnplace.pretrain_config import DEFAULT_CONFIG
from gnplace.rl.zeroshot import SHIPPED_CHECKPOINT, SHIPPED_CONSTRUCTORS

ROOT = Path(__file__).resolve().parents[1]

#: What a wheel must carry, from the repository's top level (setup.py's SHIPPED, spelled out).
SHIPPED_FILES = sorted(
    [str(p.relative_to(ROOT)) for p in (ROOT / "checkpoints").glob("*.ckpt")]
    + ["checkpoints/README.md", "configs/pretrain.yaml"]
)


def _digest(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def test_a_checkout_reads_its_own_files():
    assert SHIPPED_CHECKPOINT == ROOT / "checkpoints" / "gnplace-base.ckpt"
    assert all(path.parent == ROOT / "checkpoints" and path.is_file() for path in SHIPPED_CONSTRUCTORS)
    assert DEFAULT_CONFIG == ROOT / "configs" / "pretrain.yaml"
    assert len(SHIPPED_FILES) == 5  # three checkpoints, the model card, the config


def test_the_packaged_copy_wins_over_the_folder_beside_the_package(tmp_path, monkeypatch):
    packaged, checkout = tmp_path / "pkg", tmp_path / "top"
    (packaged / "checkpoints").mkdir(parents=True)
    (checkout / "checkpoints").mkdir(parents=True)
    (packaged / "checkpoints" / "a.ckpt").write_bytes(b"packaged")
    (checkout / "checkpoints" / "b.ckpt").write_bytes(b"checkout")
    monkeypatch.setattr(shipped, "PACKAGED", packaged)
    monkeypatch.setattr(shipped, "CHECKOUT", checkout)
    assert shipped.shipped_path("checkpoints/a.ckpt") == packaged / "checkpoints" / "a.ckpt"
    assert shipped.shipped_path("checkpoints/b.ckpt") == checkout / "checkpoints" / "b.ckpt"
    assert shipped.shipped_path("checkpoints/c.ckpt") == checkout / "checkpoints" / "c.ckpt"  # missing: the caller says so


def _build(source: Path, kind: str, out: Path) -> Path:
    """``setuptools.build_meta.build_<kind>`` of ``source`` into ``out`` (what pip and ``python -m build`` call)."""
    out.mkdir(parents=True, exist_ok=True)
    code = f"from setuptools import build_meta; print(build_meta.build_{kind}({str(out)!r}))"
    done = subprocess.run([sys.executable, "-c", code], cwd=source, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    return out / done.stdout.strip().splitlines()[-1]


@pytest.mark.heavy
def test_sdist_and_wheel_carry_the_shipped_files_and_an_installed_wheel_places_with_them(tmp_path, capsys):
    """The route of ``python -m build`` (sdist, then the wheel from it) and ``pip install``, outside the checkout."""
    source = tmp_path / "src"
    source.mkdir()
    for name in ("pyproject.toml", "setup.py", "MANIFEST.in", "README.md", "LICENSE"):
        shutil.copy2(ROOT / name, source / name)
    (source / "tests").mkdir()  # setuptools' default put tests/test*.py in the sdist, without what they need
    shutil.copy2(ROOT / "tests" / "test_shipped.py", source / "tests" / "test_shipped.py")
    shutil.copytree(ROOT / "gnplace", source / "gnplace", ignore=shutil.ignore_patterns("__pycache__", "_shipped"))
    for relative in SHIPPED_FILES:
        (source / relative).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(ROOT / relative, source / relative)

    sdist = _build(source, "sdist", tmp_path / "sdist")
    with tarfile.open(sdist) as archive:
        archive.extractall(tmp_path / "unpacked", filter="data")
        top = tmp_path / "unpacked" / archive.getnames()[0].split("/")[0]
    assert all((top / relative).is_file() for relative in SHIPPED_FILES)
    assert (top / "LICENSE").is_file() and not (top / "tests").exists()  # the licence's text, not a stray test

    wheel = _build(top, "wheel", tmp_path / "wheel")
    assert wheel.name.startswith(f"gnplace-{gnplace.__version__}-")  # pyproject reads the package's version
    with zipfile.ZipFile(wheel) as archive:
        carried = {n.removeprefix("gnplace/_shipped/"): _digest(archive.read(n))
                   for n in archive.namelist() if n.startswith("gnplace/_shipped/")}
    assert carried == {relative: _digest((ROOT / relative).read_bytes()) for relative in SHIPPED_FILES}
    with zipfile.ZipFile(wheel) as archive:
        assert any(n.endswith(".dist-info/licenses/LICENSE") for n in archive.namelist())

    site = tmp_path / "site"
    with zipfile.ZipFile(wheel) as archive:  # what pip install does with a pure-Python wheel
        archive.extractall(site)
    work = tmp_path / "elsewhere"
    work.mkdir()
    # numba's compiled loops run as Python here: compiling the installed copy afresh took about 30 s of this
    # test's 50, and what this test checks is that the wheel's files are found (the step is compared below with
    # the checkout's, whose loops are compiled, so the two routes also agree)
    env = {**os.environ, "PYTHONPATH": str(site), "NUMBA_DISABLE_JIT": "1"}
    # one process finds the wheel's files, then places with them (as ``gnplace place``): the closing annealing
    # (policy.polish) times the step a few hundred times and reads no shipped file: left out, the placing took
    # 15 s where it took 41 s with the loops run as Python
    place = ["place", str(ROOT / "datasets" / "ptb" / "ptb_017.gnpg"), "-c", "k80x2", "-p", "policy",
             "-O", "policy.polish=0", "--json"]
    code = (
        "import json, sys, gnplace.rl.zeroshot as z, gnplace.pretrain_config as p\n"
        "print(json.dumps([str(z.SHIPPED_CHECKPOINT), [str(c) for c in z.SHIPPED_CONSTRUCTORS], str(p.DEFAULT_CONFIG),"
        " p.load_pretrain_config().digest() == p.load_pretrain_config(p.DEFAULT_CONFIG).digest()]))\n"
        "from gnplace.cli import main\n"
        "sys.exit(main(sys.argv[1:]))"
    )
    done = subprocess.run([sys.executable, "-c", code, *place], cwd=work, env=env, capture_output=True, text=True,
                          timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    found, placed = done.stdout.split("\n", 1)
    checkpoint, constructors, config, config_loads = json.loads(found)
    assert Path(checkpoint) == site / "gnplace" / "_shipped" / "checkpoints" / "gnplace-base.ckpt"
    assert all(Path(c).parent == Path(checkpoint).parent for c in constructors)
    assert Path(config) == site / "gnplace" / "_shipped" / "configs" / "pretrain.yaml" and config_loads
    from gnplace.cli import main

    capsys.readouterr()
    assert main(place) == 0  # the checkout's, in this process
    in_checkout = json.loads(capsys.readouterr().out)
    for key in ("devices", "step_time_s"):  # the same placement as the checkout's, from the wheel's copies
        assert json.loads(placed)[key] == in_checkout[key]


#: The lowest release of each dependency that the code runs with, and what broke below it: pip keeps a release
#: already installed that meets the declared floor, so a floor below these installs and then fails.
NEEDED_FLOORS = {
    "lightning": "2.6",  # Trainer.fit(weights_only=...) (gnplace.train, gnplace.pretrain): a TypeError before
    # --input-shape on a model with an op ONNX has no schema for (com.microsoft's FastGelu) was refused under 1.16:
    # inference lost the shape the file declares for its output (tests/importers/test_onnx.py)
    "onnx": "1.17",
    "tensorboardX": "2.6.1",  # 2.6 needs protobuf < 4, ortools >= 9.12 (CP-SAT) protobuf >= 5.29: never installable
    # the models extra: torch 2.13's torch.onnx.export(dynamo=True) imports onnxscript._framework_apis.torch_2_11
    "onnxscript": "0.6",
}


def _declared_floors() -> dict[str, str]:
    """``name: floor`` of each ``name>=floor`` in pyproject.toml's dependencies and its extras'."""
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    dependencies = project["dependencies"] + [d for extra in project["optional-dependencies"].values() for d in extra]
    return {m.group(1).lower(): m.group(2) for m in (re.fullmatch(r"([A-Za-z0-9_.-]+)>=([0-9.]+)", d) for d in
                                                     dependencies) if m}


def test_the_declared_floors_are_releases_the_code_runs_with():
    declared = _declared_floors()
    assert {"torch", "numpy", "pymetis", "transformers"} <= declared.keys()  # the parse found them
    low = {name: (declared.get(name.lower()), floor) for name, floor in NEEDED_FLOORS.items()
           if Version(declared.get(name.lower(), "0")) < Version(floor)}
    assert not low, f"pyproject.toml's floors below the releases the code needs (declared, needed): {low}"


def test_the_shipped_files_are_each_tops_checkpoints_card_and_config(tmp_path, monkeypatch):
    """``place -o`` refuses to write over any of them: the wheel's copies first, then the checkout's, that exist."""
    packaged, checkout = tmp_path / "pkg", tmp_path / "top"
    for relative in ("checkpoints/c.ckpt", "checkpoints/a.ckpt", "checkpoints/e.ckpt", "checkpoints/b.ckpt",
                     "checkpoints/README.md", "checkpoints/notes.txt", "configs/pretrain.yaml", "configs/constructor.yaml"):
        (packaged / relative).parent.mkdir(parents=True, exist_ok=True)
        (packaged / relative).write_text("x")
    (checkout / "checkpoints" / "c.ckpt").mkdir(parents=True)  # a folder: no file
    (checkout / "checkpoints" / "d.ckpt").write_text("x")
    monkeypatch.setattr(shipped, "PACKAGED", packaged)
    monkeypatch.setattr(shipped, "CHECKOUT", checkout)
    assert shipped.shipped_files() == [*(packaged / "checkpoints" / f"{name}.ckpt" for name in "abce"),
                                       packaged / "checkpoints" / "README.md", packaged / "configs" / "pretrain.yaml",
                                       checkout / "checkpoints" / "d.ckpt"]
    (packaged / "checkpoints" / "d.ckpt").mkdir()  # a folder of the name is no packaged copy
    assert shipped.shipped_path("checkpoints/d.ckpt") == checkout / "checkpoints" / "d.ckpt"


def test_the_checkout_and_the_wheels_folder_do_not_depend_on_the_working_directory(tmp_path):
    """setup.py copies the shipped files into the build's ``gnplace/_shipped``; the checkout is the package's parent."""
    code = "import gnplace.shipped as s; print(s.CHECKOUT); print(s.PACKAGED)"
    done = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, capture_output=True, text=True, timeout=60,
                          env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert done.stdout.split() == [str(ROOT), str(ROOT / "gnplace" / "_shipped")], done.stderr[-2000:]
