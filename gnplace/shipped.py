"""Files gnplace ships beside its code: the pretrained checkpoints and the pretraining config.

They live at the repository's top level, in ``checkpoints/`` (the policy ``policy`` and ``finetune``
start from, the constructors, the model card) and ``configs/pretrain.yaml`` (the config that made the
shipped checkpoint). A source checkout or an editable install reads them there. A wheel has no
repository: its build (``setup.py``) copies them into ``gnplace/_shipped/``, so that
``pip install gnplace`` followed by ``gnplace place G -c C -p policy`` works as it does in a checkout.
"""

from __future__ import annotations

from pathlib import Path

__all__ = ["CHECKOUT", "PACKAGED", "shipped_files", "shipped_path"]

#: Where a wheel's copies are (``gnplace/_shipped/``; absent in a source checkout).
PACKAGED = Path(__file__).resolve().parent / "_shipped"

#: The source checkout's top level (in a wheel install, the folder that holds the package).
CHECKOUT = Path(__file__).resolve().parent.parent


def shipped_path(relative: str) -> Path:
    """The installed copy of a shipped file, else the source checkout's.

    Args:
        relative (str): the file's path from the repository's top level, e.g. ``"checkpoints/gnplace-base.ckpt"``.

    Returns:
        Path: ``gnplace/_shipped/<relative>`` when a wheel carries it, else ``<checkout>/<relative>``
        (which may not exist; callers say so in one line).

    Examples:
        >>> shipped_path("checkpoints/gnplace-base.ckpt").name
        'gnplace-base.ckpt'
    """
    packaged = PACKAGED / relative
    return packaged if packaged.is_file() else CHECKOUT / relative


def shipped_files() -> list[Path]:
    """Every shipped file there is, the wheel's copies and the checkout's: checkpoints, model card, config.

    An output a command writes must never replace one of them (``gnplace place -o``).

    Examples:
        >>> any(p.name == "gnplace-base.ckpt" for p in shipped_files())
        True
    """
    found: list[Path] = []
    for top in (PACKAGED, CHECKOUT):
        found += sorted((top / "checkpoints").glob("*.ckpt"))
        found += [top / "checkpoints" / "README.md", top / "configs" / "pretrain.yaml"]
    return [path for path in found if path.is_file()]
