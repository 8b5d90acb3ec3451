"""The post-ready HTML snippet of a movie (docs/movie.md, "The HTML snippet").

One `<figure>`: the `<video>` with the MP4 source first (Safari and iOS play only H.264 of
the two) and the WebM second, each with its codecs so that a browser skips what it cannot
decode; `controls` (motion longer than 5 s needs a way to pause: WCAG 2.2.2); the poster PNG;
and a `<figcaption>`, the movie's text alternative, generated from the run.

Reduced motion. The `<video>` carries no `autoplay` attribute. A small inline script right
after it (no external file, no CDN: it works from file://) starts it (muted, looping) unless
`matchMedia("(prefers-reduced-motion: reduce)")` matches; then the video stays paused at 0
with its poster shown until the reader presses play. Where scripts do not run (a feed reader,
a page that strips them), the video does not start by itself either: the poster and the
controls are what the reader gets, the safe side. Switching the preference on while the
movie plays pauses it.
"""

from __future__ import annotations

import html
import os
from collections.abc import Iterable
from pathlib import Path

# Starts the video just before this script unless the reader prefers reduced motion.
AUTOPLAY_SCRIPT = """\
<script>
(function (video) {
  var reduce = window.matchMedia ? window.matchMedia("(prefers-reduced-motion: reduce)") : null;
  function start() {
    if (reduce && reduce.matches) return;
    video.autoplay = true;
    var playing = video.play();
    if (playing && playing.catch) playing.catch(function () {});
  }
  start();
  if (reduce && reduce.addEventListener) reduce.addEventListener("change", function () {
    if (reduce.matches) video.pause(); else start();
  });
})(document.currentScript.previousElementSibling);
</script>"""


def mp4_codec(path: str | os.PathLike) -> str | None:
    """The RFC 6381 codecs string of an H.264 MP4 ('avc1.640028': profile, constraint flags and
    level from its avcC box), or None if the file has no avcC box."""
    data = Path(path).read_bytes()
    i = data.find(b"avcC")
    if i < 0 or i + 8 > len(data):
        return None
    profile, compat, level = data[i + 5], data[i + 6], data[i + 7]
    return f"avc1.{profile:02X}{compat:02X}{level:02X}"


def html_snippet(
    basename: str,
    size: tuple[int, int],
    sources: Iterable[str],
    poster: bool,
    caption: str = "",
    mp4_codecs: str | None = None,
) -> str:
    """The snippet's HTML (file names relative to it, so the folder can be copied next to a
    post as is). size: (width, height) of the movie in pixels; sources: the movie formats
    written (mp4 and/or webm); poster: the PNG poster exists; caption: the figcaption text
    (plain text, escaped here; none if empty); mp4_codecs: e.g. 'avc1.640028' (`mp4_codec`).
    The figure is never wider than the movie or its column, nor so wide that the movie's
    height leaves no room in the window: a 1280 x 900 window shows the whole frame."""
    w, h = size
    sources = set(sources)
    name = html.escape(basename, quote=True)
    attrs = f' poster="{name}.png"' if poster else ""
    # the whole frame on screen: no wider than the movie, the column, or what leaves the frame
    # and about 5 lines (controls, caption's start) within the window's height
    fit = f"min({w}px, 100%, calc((100vh - 7.5em) * {w / h:.4f}))"
    lines = [
        f'<figure class="headmovies-movie" style="margin: 1em auto; max-width: {fit};">',
        (
            f'<video controls muted loop playsinline preload="metadata" width="{w}" height="{h}"{attrs} '
            'style="display: block; width: 100%; height: auto;">'
        ),
    ]
    mp4_type = f'video/mp4; codecs="{mp4_codecs}"' if mp4_codecs else "video/mp4"
    types = {"mp4": mp4_type, "webm": 'video/webm; codecs="vp9"'}
    for ext in ("mp4", "webm"):
        if ext in sources:
            lines.append(f"  <source src=\"{name}.{ext}\" type='{types[ext]}'>")
    link = f'<a href="{name}.mp4">{name}.mp4</a>' if "mp4" in sources else f'<a href="{name}.webm">{name}.webm</a>'
    lines.append(f"  Your browser cannot play this video; download {link}.")
    lines.append("</video>")
    lines.append(AUTOPLAY_SCRIPT)
    if caption:
        lines.append(f'<figcaption style="font-size: 0.9em; line-height: 1.4;">{html.escape(caption)}</figcaption>')
    lines.append("</figure>")
    return "\n".join(lines) + "\n"
