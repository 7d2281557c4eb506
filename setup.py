"""Build hook: a wheel carries the files gnplace ships beside its code (see :mod:`gnplace.shipped`).

The pretrained checkpoints live in ``checkpoints/`` and the pretraining config in ``configs/``, at the
repository's top level where the issues and the model card name them. A source checkout or an editable
install reads them there; a wheel has no repository, so the build copies them into
``gnplace/_shipped/`` and :func:`gnplace.shipped.shipped_path` finds them there. Every other setting of
the build is in ``pyproject.toml``.
"""

from __future__ import annotations

import shutil
from pathlib import Path

from setuptools import setup
from setuptools.command.build_py import build_py

#: Repository-relative files a wheel carries, as ``(folder, glob)``; MANIFEST.in lists the same for the sdist.
SHIPPED = (("checkpoints", "*.ckpt"), ("checkpoints", "README.md"), ("configs", "pretrain.yaml"))


class BuildPyWithShipped(build_py):
    """``build_py`` that also copies :data:`SHIPPED` into the build's ``gnplace/_shipped/``."""

    def run(self) -> None:
        """Build the package, then copy the shipped files beside it (an editable install needs no copies)."""
        super().run()
        if self.editable_mode:  # an editable install reads the checkout's own files
            return
        root = Path(__file__).resolve().parent
        target = Path(self.build_lib) / "gnplace" / "_shipped"
        for folder, pattern in SHIPPED:
            for source in sorted((root / folder).glob(pattern)):
                destination = target / folder / source.name
                destination.parent.mkdir(parents=True, exist_ok=True)
                shutil.copyfile(source, destination)


setup(cmdclass={"build_py": BuildPyWithShipped})
