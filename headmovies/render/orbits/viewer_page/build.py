"""The orbit viewer's page from its parts (docs/viewer.md, "The page"): this package's
viewer.html and scripts with the shared parts of render/core/viewer_page/, inlined into one
file by `render.core.viewer_page.build`."""

from __future__ import annotations

from headmovies.render.core.viewer_page import build as core
from headmovies.render.core.viewer_page.build import PAGE, PAYLOAD_TAG, inline

__all__ = ["PAGE", "PAYLOAD_TAG", "inline", "page", "part", "scripts"]


def part(name: str) -> str:
    """The text of one part of the orbit viewer's page (this package's, else the core's)."""
    return core.part(name, __package__)


def scripts() -> list[str]:
    """The scripts viewer.html names, in the order they run, e.g. ['format.js', ..., 'main.js']."""
    return core.scripts(__package__)


def page(payload: dict) -> str:
    """The orbit viewer's page with `payload` in it (`core.page`)."""
    return core.page(payload, __package__)
