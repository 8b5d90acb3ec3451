"""Shared commands of `headmovies` (one module each, found automatically). Commands of one
experiment live in its render package: `headmovies/render/<experiment>/command.py`."""
