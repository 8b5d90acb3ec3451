"""headmovies: watch attention heads learn.

Data flows one way, and the package is laid out in that order:

    tasks/        torch-free facts of each task (constants, samplers, exact cases)
    train/        config, schedule, one model module per experiment, the training loop,
                  checkpoints, resume, forks                               (torch)
    runfile/      the run file's format at both ends: schema, writer, reader, lock, the
                  checkpoint file; the one contract between both sides    (numpy + h5py)
    disk.py       free disk space, checked before writing (both sides; standard library)
    errors.py, interrupts.py, parser.py, version.py   one-line user errors, Ctrl-C, the
                  command-line parser, the version (leaves: the standard library only)
    render/core/  reader -> circuits -> irrep projections -> trailing-dot panels -> encoder
    render/<experiment>/  analysis, figures, movie and report of one experiment
    record/       Recorder: a user's own training loop records its model (torch; uses train/)
    render/generic/  movie, figures, viewer and `show` of any run, a recorded one included
    commands/, cli.py     the `headmovies` command line

`render/` never imports torch or `train/`. docs/ holds the conventions (docs/math.md) and the
results; docs/extending.md says what a new experiment adds.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from headmovies.version import __version__

# The public API: `headmovies.Recorder(path, model, ...)` records a model (headmovies/record/),
# `headmovies.show(run)` shows a run in Jupyter (render/generic/notebook.py). Both load on first
# use, so that `import headmovies` (the CLI) loads no torch; type checkers and IDEs see them here.
if TYPE_CHECKING:
    from headmovies.record.recorder import Recorder
    from headmovies.render.generic.notebook import show

__all__ = ["Recorder", "__version__", "show"]
_LAZY = {"Recorder": "headmovies.record.recorder", "show": "headmovies.render.generic.notebook"}


def __getattr__(name: str):
    if name in _LAZY:
        import importlib

        value = getattr(importlib.import_module(_LAZY[name]), name)
        globals()[name] = value  # found directly from now on
        return value
    raise AttributeError(f"module 'headmovies' has no attribute {name!r}")


def __dir__() -> list[str]:
    """The module's names with the lazy public ones (`dir(headmovies)` lists `Recorder`)."""
    return sorted({*globals(), *__all__})
