"""The build backend: setuptools' (Debian's python3-setuptools builds it offline), run on a
copy of the source tree in a temporary directory, so that ``pip install ./sdk/python`` or
``pip wheel`` leaves nothing behind in the checkout (setuptools writes ``build/`` and
``src/*.egg-info`` where it builds). An editable install needs the tree itself and builds there."""

from __future__ import annotations

import contextlib
import os
import shutil
import tempfile
from typing import Any, Iterator

from setuptools import build_meta as _setuptools

__all__ = ["build_wheel", "build_sdist", "prepare_metadata_for_build_wheel",
           "get_requires_for_build_wheel", "get_requires_for_build_sdist", "build_editable",
           "get_requires_for_build_editable", "prepare_metadata_for_build_editable"]


@contextlib.contextmanager
def _elsewhere() -> Iterator[None]:
    here = os.getcwd()
    with tempfile.TemporaryDirectory(prefix="station-sandbox-build-") as tmp:
        tree = os.path.join(tmp, "tree")
        shutil.copytree(here, tree, ignore=shutil.ignore_patterns(
            "build", "*.egg-info", "__pycache__", ".pytest_cache"))
        os.chdir(tree)
        try:
            yield
        finally:
            os.chdir(here)


def build_wheel(wheel_directory: str, config_settings: Any = None,
                metadata_directory: Any = None) -> str:
    with _elsewhere():
        return _setuptools.build_wheel(os.path.abspath(wheel_directory), config_settings,
                                       metadata_directory)


def build_sdist(sdist_directory: str, config_settings: Any = None) -> str:
    with _elsewhere():
        return _setuptools.build_sdist(os.path.abspath(sdist_directory), config_settings)


def prepare_metadata_for_build_wheel(metadata_directory: str, config_settings: Any = None) -> str:
    with _elsewhere():
        return _setuptools.prepare_metadata_for_build_wheel(os.path.abspath(metadata_directory),
                                                            config_settings)


def get_requires_for_build_wheel(config_settings: Any = None) -> list[str]:
    with _elsewhere():
        return _setuptools.get_requires_for_build_wheel(config_settings)  # type: ignore[no-any-return]


def get_requires_for_build_sdist(config_settings: Any = None) -> list[str]:
    with _elsewhere():
        return _setuptools.get_requires_for_build_sdist(config_settings)  # type: ignore[no-any-return]


build_editable = _setuptools.build_editable
get_requires_for_build_editable = _setuptools.get_requires_for_build_editable
prepare_metadata_for_build_editable = _setuptools.prepare_metadata_for_build_editable
