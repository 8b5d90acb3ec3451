"""One self-contained HTML page from the census gallery's parts (docs/sweeps.md, "Census gallery").

gallery.html names its parts as a browser would fetch them (one stylesheet link, one script
tag per script after the empty payload tag), as the viewer's page does; `page` inlines them
with `core.viewer_page.build.page` and puts the payload's JSON in the payload tag, so the page
opens from file:// with nothing fetched. The same parts and payload give the same page.
"""

from __future__ import annotations

from headmovies.render.core.viewer_page import build as core

PAGE = "gallery.html"


def part(name: str) -> str:
    """The text of one part of the page (package data beside this module, else the viewer's
    shared parts, render/core/viewer_page/: dom.js). FileNotFoundError if neither holds it."""
    return core.part(name, __package__)


def scripts() -> list[str]:
    """The scripts gallery.html names, in the order they run, e.g. ['dom.js', ..., 'main.js']."""
    return core.scripts(__package__, PAGE)


def page(payload: dict) -> str:
    """The gallery page with `payload` (JSON-able, no NaN) in its payload tag, every part
    inlined. ValueError if gallery.html lacks the payload tag or `payload` holds NaN or infinity."""
    return core.page(payload, __package__, PAGE)
