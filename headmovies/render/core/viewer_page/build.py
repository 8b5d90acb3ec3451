"""One self-contained HTML page from a viewer's parts (docs/viewer.md, "The page").

Every viewer is a family of one engine: the markup (viewer.html), the stylesheet and the engine's
scripts live here, in render/core/viewer_page/; a family's package (render/<family>/viewer_page/)
holds family.js and may hold family.css and more scripts, named in order in its `SCRIPTS`
(default ["family.js"]), which take the place of viewer.html's family.js tag (`scripts`). A
part's name is looked up in the family's package first, then here (`part`).

viewer.html holds the markup and names its parts as a browser would fetch them: one
`<link rel="stylesheet" href="NAME.css">` per stylesheet and, after an empty
`<script id="payload" type="application/json"></script>`, one `<script src="NAME.js"></script>`
per script, in the order they run. `page` puts each part's text in place of its tag, in that
order, and the payload's JSON in the payload tag, so the page opens from file:// with nothing
fetched. The same parts always give the same page, byte for byte.

Binary arrays in a payload (docs/viewer.md, "Payload and precision") are packed into JSON-able
text (`pack`) that the page unpacks with decode.js, and back (`unpack`, for tests and tools).
"""

from __future__ import annotations

import base64
import importlib
import json
import re
import zlib
from importlib import resources

import numpy as np

PAGE = "viewer.html"
CORE = __package__
PAYLOAD_TAG = '<script id="payload" type="application/json"></script>'
_STYLESHEET = re.compile(r'<link rel="stylesheet" href="([\w.-]+\.css)">')
_SCRIPT = re.compile(r'<script src="([\w.-]+\.js)"></script>')
FAMILY_TAG = '<script src="family.js"></script>'


def part(name: str, package: str = CORE) -> str:
    """The text of one part of a page: package data of `package` (a family's viewer_page) if it
    holds `name`, else of this core package. FileNotFoundError if neither does."""
    for pkg in dict.fromkeys((package, CORE)):
        path = resources.files(pkg) / name
        if path.is_file():
            return path.read_text(encoding="utf-8")
    raise FileNotFoundError(f"no viewer part {name!r} in {package} or {CORE}")


def markup(package: str = CORE, name: str = PAGE) -> str:
    """The page `name` (package data of `package`, else of this core) with viewer.html's family.js
    tag replaced by one tag per script of the family's `SCRIPTS`."""
    html = part(name, package)
    names = getattr(importlib.import_module(package), "SCRIPTS", ["family.js"])
    return html.replace(FAMILY_TAG, "\n".join(f'<script src="{n}"></script>' for n in names))


def scripts(package: str = CORE, name: str = PAGE) -> list[str]:
    """The scripts of `package`'s page `name`, in the order they run, e.g. ['format.js', ...,
    'family.js', 'scatter_main.js']."""
    return _SCRIPT.findall(markup(package, name))


def inline(html: str, read=part) -> str:
    """`html` with each stylesheet link and script tag replaced by the text of the part it names
    (read(name) -> str); "</" that would close the element early is escaped. ValueError if a
    script holds "<!--" (HTML would misread what follows)."""

    def style(m: re.Match) -> str:
        return "<style>\n" + read(m.group(1)).replace("</style", "<\\/style") + "</style>"

    def script(m: re.Match) -> str:
        text = read(m.group(1))
        if "<!--" in text:
            raise ValueError(f"{m.group(1)} holds '<!--', which an inline script must not")
        return "<script>\n" + text.replace("</script", "<\\/script") + "</script>"

    return _SCRIPT.sub(script, _STYLESHEET.sub(style, html))


def page(payload: dict, package: str = CORE, name: str = PAGE) -> str:
    """The page `name` of `package` (a family's viewer_page) with `payload` (JSON-able, no NaN)
    in its payload tag: markup, stylesheet and scripts inlined, no external resource. ValueError
    if the page lacks the payload tag or `payload` holds NaN or infinity."""
    html = inline(markup(package, name), lambda part_name: part(part_name, package))
    if html.count(PAYLOAD_TAG) != 1:
        raise ValueError(f"{name} must hold one {PAYLOAD_TAG}")
    data = json.dumps(payload, allow_nan=False, separators=(",", ":")).replace("</", "<\\/")
    return html.replace(PAYLOAD_TAG, PAYLOAD_TAG.replace("></", f">{data}</"), 1)


def pack(arrays: dict[str, np.ndarray]) -> dict:
    """{'manifest': [[name, dtype, shape, byte offset]], 'blob': base64(zlib(bytes))}, each
    array little-endian and 8-byte aligned in the bytes."""
    manifest, parts, offset = [], [], 0
    for name, a in arrays.items():
        a = np.ascontiguousarray(a)
        if a.dtype.byteorder == ">":
            a = a.astype(a.dtype.newbyteorder("<"))
        manifest.append([name, a.dtype.str.lstrip("<|="), list(a.shape), offset])
        raw = a.tobytes()
        pad = (-len(raw)) % 8
        parts.append(raw + b"\0" * pad)
        offset += len(raw) + pad
    blob = zlib.compress(b"".join(parts), 6)
    return {"manifest": manifest, "blob": base64.b64encode(blob).decode("ascii")}


def unpack(packed: dict) -> dict[str, np.ndarray]:
    """Inverse of `pack`."""
    raw = zlib.decompress(base64.b64decode(packed["blob"]))
    out = {}
    for name, dtype, shape, offset in packed["manifest"]:
        count = int(np.prod(shape)) if shape else 1
        out[name] = np.frombuffer(raw, dtype=np.dtype(dtype), count=count, offset=offset).reshape(shape)
    return out
