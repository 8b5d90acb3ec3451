"""The public API as tools see it: `headmovies.__all__`, `dir(headmovies)`, one constructor
(`headmovies.Recorder`), lazy loading (importing headmovies loads no torch) and PEP 561's
`py.typed` marker."""

from __future__ import annotations

import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

import headmovies

PACKAGE = Path(headmovies.__file__).parent


def test_all_and_dir_list_the_lazy_public_names():
    """`__all__` names Recorder, show and __version__; `dir(headmovies)` lists all three (IDEs
    and tab completion read it) beside the module's own names."""
    assert headmovies.__all__ == ["Recorder", "__version__", "show"]
    names = dir(headmovies)
    assert {"Recorder", "show", "__version__", "__all__"} <= set(names)
    assert names == sorted(names)


@pytest.mark.slow
def test_the_public_names_load_on_first_use_only():
    """In a fresh interpreter `import headmovies` and `dir(headmovies)` load no torch and no
    matplotlib; `headmovies.Recorder` then is the recorder's class (torch loaded now), the same
    object on a second access; `headmovies.record` is the package, not a constructor; an unknown
    name is an AttributeError naming it."""
    code = """
import sys
import headmovies
names = dir(headmovies)
print(sorted(m for m in ('torch', 'matplotlib', 'h5py') if m in sys.modules))
from headmovies.record.recorder import Recorder
assert headmovies.Recorder is Recorder is headmovies.Recorder
assert 'torch' in sys.modules
import headmovies.record
assert not callable(headmovies.record), 'headmovies.record is a package, not a second constructor'
assert not hasattr(headmovies.record, 'record')
try:
    headmovies.recorder
except AttributeError as exc:
    print(exc)
"""
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines() == ["[]", "module 'headmovies' has no attribute 'recorder'"]


def test_show_is_the_notebook_function():
    from headmovies.render.generic.notebook import show

    assert headmovies.show is show


def test_the_package_ships_its_type_hints():
    """`headmovies/py.typed` exists and setuptools packs it (pyproject.toml package-data), so that
    mypy and pyright read the package's hints in a user's code."""
    assert (PACKAGE / "py.typed").is_file()
    pyproject = tomllib.loads((PACKAGE.parent / "pyproject.toml").read_text(encoding="utf-8"))
    assert pyproject["tool"]["setuptools"]["package-data"]["headmovies"] == ["py.typed"]
