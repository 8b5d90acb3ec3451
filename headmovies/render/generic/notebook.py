"""`headmovies.show(run)` in Jupyter: a run's movie or viewer inline, without a server
(docs/recording.md, "Jupyter"). The movie is embedded as a base64 `data:` video; the viewer as
an iframe whose `srcdoc` is the whole self-contained page.
"""

from __future__ import annotations

import base64
import html
import tempfile
from pathlib import Path

import numpy as np

from headmovies.errors import UserError
from headmovies.render.generic.movie import render_movie
from headmovies.render.generic.viewer import viewer_text

MAX_EMBED_BYTES = 64 * 2**20  # a movie bigger than this is linked by path, not embedded


class Shown:
    """What `show` returns: `html` (the markup); Jupyter displays it through `_repr_html_`."""

    def __init__(self, markup: str, what: str, path: Path):
        self.html, self.what, self.path = markup, what, path

    def _repr_html_(self) -> str:
        return self.html

    def __repr__(self) -> str:
        return f"<headmovies {self.what} of {self.path}>"


def movie_html(video: Path) -> str:
    """A <video> element playing `video` (mp4 or webm) from a base64 data URL."""
    data = video.read_bytes()
    if len(data) > MAX_EMBED_BYTES:
        return f"<p>{html.escape(str(video))} is {len(data) / 2**20:.0f} MB, too big to embed; open it directly.</p>"
    kind = "mp4" if video.suffix == ".mp4" else "webm"
    src = f"data:video/{kind};base64,{base64.b64encode(data).decode()}"
    return f'<video controls loop muted playsinline style="max-width: 100%" src="{src}"></video>'


def viewer_html(run_path: str | Path, height: int = 900, **kwargs) -> str:
    """An <iframe> whose srcdoc is the run's whole viewer page (no server, no file)."""
    text = viewer_text(run_path, **kwargs)
    return (
        f'<iframe srcdoc="{html.escape(text, quote=True)}" style="width: 100%; height: {height}px; border: 0" '
        'sandbox="allow-scripts"></iframe>'
    )


def show(
    run_path: str | Path,
    what: str = "movie",
    *,
    group_order: int | None = None,
    panels: list[str] | None = None,
    basis: dict[str, np.ndarray] | None = None,
    view: str | None = None,
) -> Shown:
    """The movie (`what="movie"`, rendered now to a temporary folder, WebM) or the viewer
    (`what="viewer"`) of the run file `run_path`, for display in Jupyter. UserError for another
    `what` or a bad `view`; RunFileError for a file that is not a run. `view`: "scores" (each
    head at its probe scores, the default for a run with them and no group), "axes" (planes) or None."""
    path = Path(run_path)
    if what == "viewer":
        return Shown(viewer_html(path, group_order=group_order, panels=panels, basis=basis, view=view), what, path)
    if what != "movie":
        raise UserError(f"show what={what!r}: expected 'movie' or 'viewer'")
    with tempfile.TemporaryDirectory(prefix="headmovies-show-") as tmp:
        result = render_movie(
            path,
            tmp,
            group_order=group_order,
            panels=panels,
            basis=basis,
            formats=("mp4",),
            progress=False,
            view=view,
        )
        return Shown(movie_html(result.paths["mp4"]), what, path)
