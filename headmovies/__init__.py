"""headmovies: watch attention heads learn.

Data flows one way, and the package is laid out in that order:

    tasks/        torch-free facts of each task (constants, samplers, exact cases)
    train/        config, schedule, one model module per experiment, the training loop,
                  checkpoints, resume, forks                               (torch)
    runfile/      the run file's format at both ends: schema, writer, reader, lock, the
                  checkpoint file; the one contract between both sides    (numpy + h5py)
    disk.py       free disk space, checked before writing (both sides; standard library)
    render/core/  reader -> circuits -> irrep projections -> trailing-dot panels -> encoder
    render/<experiment>/  analysis, figures, movie and report of one experiment
    record/       Recorder: a user's own training loop records its model (torch; uses train/)
    render/generic/  movie, figures, viewer and `show` of any run, a recorded one included
    commands/, cli.py     the `headmovies` command line

`render/` never imports torch or `train/`. docs/ holds the conventions (docs/math.md) and the
results; docs/extending.md says what a new experiment adds.
"""

__version__ = "0.2.0"

# The public API, loaded on first use so that `import headmovies` (the CLI) loads no torch:
# headmovies.Recorder, headmovies.record (headmovies/record/), headmovies.show (render/generic/).
# `headmovies.record` is the package, callable: `headmovies.record(path, model)` is a Recorder.
_LAZY = {"Recorder": "headmovies.record", "show": "headmovies.render.generic.notebook"}


def __getattr__(name: str):
    import importlib

    if name == "record":
        return importlib.import_module("headmovies.record")
    if name in _LAZY:
        return getattr(importlib.import_module(_LAZY[name]), name)
    raise AttributeError(f"module 'headmovies' has no attribute {name!r}")
