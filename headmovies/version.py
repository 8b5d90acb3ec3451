"""The package's version, one place (pyproject.toml reads it; run files store it). A leaf, so
that any layer may read it without importing the package's public face (`headmovies/__init__.py`)."""

__version__ = "0.2.0"
