"""Census of orbit outcomes across seeds and recipes (`headmovies orbits census`,
docs/results/orbits.md, "Census"; docs/sweeps.md): sweep folders of the orbit experiment, one
per recipe, become one row per finished run, then tables and a figure made from the rows alone.

    sweep folders -> `census_rows` (census.jsonl) -> `census_tables` (census.md)
                                                  -> `census_provenance` (census.md, "Provenance")
                                                  -> `census_figure` (census.{png,svg})
                                                  -> `census_gallery` (gallery.html)
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from headmovies.render.core.outputs import FIGURE_FORMATS, save_figure, write_text
from headmovies.sweeps.census_figure import census_figure
from headmovies.sweeps.census_gallery import write_gallery
from headmovies.sweeps.census_provenance import provenance_markdown
from headmovies.sweeps.census_rows import write_census_rows
from headmovies.sweeps.census_tables import census_markdown, complete_runs

if TYPE_CHECKING:
    from headmovies.sweeps.census_rows import Settings


def write_census(
    out: Path,
    rows: list[dict],
    settings: Settings,
    formats: Sequence[str] = FIGURE_FORMATS,
    write_jsonl: bool = True,
) -> list[Path]:
    """Write out/census.jsonl (unless rebuilding from it), census.md, census.{png,svg} and
    gallery.html (`census_gallery`: a tile per row, linked to viewers under out/viewers/); a
    figure of an earlier census that this one does not draw (another format, or a screen alone,
    which has no final outcomes) is removed, so the folder never pairs new tables with an old figure."""
    paths = [write_census_rows(out / "census.jsonl", rows)] if write_jsonl else []
    paths.append(write_text(out / "census.md", census_markdown(rows, settings) + "\n" + provenance_markdown(rows)))
    drawn = tuple(formats) if complete_runs(rows) else ()
    if drawn:
        paths += save_figure(census_figure(rows, settings), out, "census", drawn, dpi=110)
    for fmt in set(FIGURE_FORMATS) - set(drawn):
        (out / f"census.{fmt}").unlink(missing_ok=True)
    paths.append(write_gallery(out, rows))
    return paths
