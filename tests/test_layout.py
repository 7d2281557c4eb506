"""``tests/`` mirrors ``gnplace/`` (STYLE.md habit 1): every module has its test file."""

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
