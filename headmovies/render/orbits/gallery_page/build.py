"""One self-contained HTML page from the census gallery's parts (docs/sweeps.md, "Census gallery").

gallery.html names its parts as a browser would fetch them (one stylesheet link, one script
tag per script after the empty payload tag), as the viewer's page does; `page` inlines them
with `viewer_page.build.inline` and puts the payload's JSON in the payload tag, so the page
opens from file:// with nothing fetched. The same parts and payload give the same page.
"""

from __future__ import annotations

import json
import re
from importlib import resources

from headmovies.render.core.viewer_page.build import PAYLOAD_TAG, inline

PAGE = "gallery.html"
_SCRIPT = re.compile(r'<script src="([\w.-]+\.js)"></script>')


def part(name: str) -> str:
    """The text of one part of the page (package data beside this module). FileNotFoundError
    if the package lacks it."""
    return (resources.files(__package__) / name).read_text(encoding="utf-8")


def scripts() -> list[str]:
    """The scripts gallery.html names, in the order they run, e.g. ['filters.js', ..., 'main.js']."""
    return _SCRIPT.findall(part(PAGE))


def page(payload: dict) -> str:
    """The gallery page with `payload` (JSON-able, no NaN) in its payload tag, every part
    inlined. ValueError if gallery.html lacks the payload tag or `payload` holds NaN or infinity."""
    html = inline(part(PAGE), part)
    if html.count(PAYLOAD_TAG) != 1:
        raise ValueError(f"{PAGE} must hold one {PAYLOAD_TAG}")
    data = json.dumps(payload, allow_nan=False, separators=(",", ":")).replace("</", "<\\/")
    return html.replace(PAYLOAD_TAG, PAYLOAD_TAG.replace("></", f">{data}</"), 1)
