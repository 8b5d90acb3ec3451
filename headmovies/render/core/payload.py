"""Binary arrays in a viewer's payload (docs/viewer.md, "Payload and precision"): packed into
JSON-able text (`pack`) that the page unpacks with decode.js (render/core/viewer_page/), and
back (`unpack`, for tests and tools)."""

from __future__ import annotations

import base64
import zlib

import numpy as np


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
    """Inverse of `pack` (for tests and tools)."""
    raw = zlib.decompress(base64.b64decode(packed["blob"]))
    out = {}
    for name, dtype, shape, offset in packed["manifest"]:
        count = int(np.prod(shape)) if shape else 1
        out[name] = np.frombuffer(raw, dtype=np.dtype(dtype), count=count, offset=offset).reshape(shape)
    return out
