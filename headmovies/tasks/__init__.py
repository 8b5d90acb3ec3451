"""Torch-free facts of each task, shared by training and rendering.

One module per experiment family (`orbits`, `induction`, `ov_coherent`): its constants, numpy
samplers, exact enumerations and the names of the experiments it serves (`EXPERIMENTS`).
Training (`headmovies.train.<family>`) and rendering (`headmovies.render.<family>`) import
these facts from here, so neither side restates them. Adding an experiment family adds a module
here (listed in `FAMILIES`), a model module in `train/` and a package in `render/`
(docs/extending.md).
"""

from __future__ import annotations

from headmovies.tasks import induction, orbits, ov_coherent

# {family: its module}, in name order
FAMILIES = {"induction": induction, "orbits": orbits, "ov_coherent": ov_coherent}


def families() -> list[str]:
    """Names of the experiment families, e.g. ['induction', 'orbits', 'ov_coherent']."""
    return list(FAMILIES)


def experiments() -> dict[str, str]:
    """{experiment name: family}, e.g. {'induction-1l': 'induction', 'orbits': 'orbits', ...}."""
    return dict(sorted((name, family) for family, module in FAMILIES.items() for name in module.EXPERIMENTS))
