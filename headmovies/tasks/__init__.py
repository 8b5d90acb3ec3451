"""Torch-free facts of each task, shared by training and rendering.

One module per experiment family (`orbits`, `induction`, `ov_coherent`): its constants, numpy
samplers, exact enumerations and the names of the experiments it serves (`EXPERIMENTS`).
Training (`headmovies.train.<family>`) and rendering (`headmovies.render.<family>`) import
these facts from here, so neither side restates them. Adding an experiment adds a module
here, a model module in `train/` and a package in `render/` (docs/extending.md).
"""
from __future__ import annotations

import importlib
import pkgutil


def families() -> list[str]:
    """Module names of the experiment families, e.g. ['induction', 'orbits', 'ov_coherent']."""
    return sorted(m.name for m in pkgutil.iter_modules(__path__))


def experiments() -> dict[str, str]:
    """{experiment name: family}, e.g. {'induction-1l': 'induction', 'orbits': 'orbits', ...}."""
    out = {}
    for family in families():
        for name in importlib.import_module(f"{__name__}.{family}").EXPERIMENTS:
            out[name] = family
    return dict(sorted(out.items()))
