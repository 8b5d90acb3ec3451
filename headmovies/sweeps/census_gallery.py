"""The census gallery (docs/sweeps.md, "Census gallery"): one offline HTML page, gallery.html
beside census.md, with a small multiple per census row, grouped and filtered by recipe and
outcome in the page.

Each tile draws the run's last snapshot from its row alone (`final_planes`,
`census_coordinates`): every head's dot in the QK plane (0, ω), or the OV plane (ω, -ω), of
the run's largest frequency groups, verified orbits in the movie's colours (`colours`, passed
in the page's data), and under them, for each group drawn, its orbit spectrum in brief
(`spectrum_brief`: docs/math.md, "Orbit spectrum"; the census table's max over k <= 3 and
k >= 4 and largest r). Rows of versions 4 and 5, made before rows carried coordinates, show their
outcome and orbits as text. A tile links to out/viewers/RECIPE/RUN.html when that viewer
exists (`write_viewers`, `headmovies orbits census --viewers`, writes it for every run whose
run file is present). The page (render/orbits/gallery_page) is built like the viewer's:
markup, stylesheet and scripts inlined with the payload, nothing fetched.

Payload: {'version', 'about', 'recipes': [names], 'colours': {'orbits': [hex], 'other',
'dead', 'dead_edge'}, 'runs': [`gallery_run`]}. Size: about 2.6 kB a run with coordinates
(32 heads, 3 groups, both circuits), under 5 MB for 200 runs (tests/integration/test_census_gallery.py).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from pathlib import Path
from urllib.parse import quote

from matplotlib.colors import to_hex

from headmovies.render.core.outputs import write_text
from headmovies.render.orbits.colours import DEAD_COLOUR, DEAD_EDGE, ORBIT_COLOURS, OTHER_COLOUR, orbit_colour
from headmovies.render.orbits.gallery_page.build import page
from headmovies.render.orbits.spectrum import low_high
from headmovies.render.orbits.viewer import make_viewer

PAYLOAD_VERSION = 1
VIEWERS = "viewers"  # out/viewers/RECIPE/RUN.html


def viewer_path(out: Path, recipe: str, run: str) -> Path:
    """Where the viewer of one census run lives: out/viewers/RECIPE/RUN.html."""
    return out / VIEWERS / recipe / f"{run}.html"


def gallery_run(row: dict, viewer: str | None = None) -> dict:
    """A census row as the page draws it: recipe, seed, run, outcome, stopped, epochs, heads (H),
    n_dead, heldout_acc, orbits [[size, ω]], planes (the row's `final_planes`, None for rows
    without them), spectrum (`spectrum_brief`: one per drawn group, [] for rows before version 6)
    and viewer (a link relative to the gallery, or None)."""
    final = row["omega"][str(row["epochs"])]
    return {
        "recipe": row["recipe"],
        "seed": row["seed"],
        "run": row["run"],
        "outcome": row["outcome"],
        "stopped": bool(row.get("stopped")),
        "epochs": row["epochs"],
        "heads": len(final),
        "n_dead": row["n_dead"],
        "heldout_acc": row.get("heldout_acc"),
        "orbits": [[o["size"], o["omega"]] for o in row["orbits"]],
        "planes": row.get("final_planes"),
        "spectrum": spectrum_brief(row),
        "viewer": viewer,
    }


def sig3(x: float | None) -> float | None:
    """x to 3 significant digits; None stays None."""
    return None if x is None else float(f"{x:.3g}")


def spectrum_brief(row: dict) -> list[dict]:
    """The orbit spectrum (docs/math.md, "Orbit spectrum") of each frequency group a tile draws
    (the row's `final_planes` groups, in their order), from the row's `groups`: [{'omega',
    'heads' (live heads at ω), 'low' (max |mu_k| / sum |rho| over k <= 3), 'high' (over k >= 4,
    None when N_ω <= 4), 'r_max' (the group's largest score amplitude r)}], 3 significant digits,
    as census.md's "Orbit spectrum of the final frequency groups" (`spectrum.low_high`).
    [] for rows without `groups` or `final_planes` (versions 4 and 5); a drawn group missing
    from `groups` is left out."""
    groups = {g["omega"]: g for g in row.get("groups") or []}
    out = []
    for plane in (row.get("final_planes") or {}).get("groups", []):
        g = groups.get(plane["omega"])
        if g is None:
            continue
        low, high = low_high(g["spectrum"])
        out.append(
            {"omega": g["omega"], "heads": g["n_heads"], "low": sig3(low), "high": sig3(high), "r_max": sig3(g["r"][1])}
        )
    return out


def colours() -> dict:
    """The movie's colours (render/orbits/colours.py) as hex, for the page: orbit i (largest
    first) in orbits[i], live heads in no orbit `other`, dead heads `dead` outlined `dead_edge`."""
    return {
        "orbits": [to_hex(orbit_colour(i)) for i in range(len(ORBIT_COLOURS))],
        "other": to_hex(OTHER_COLOUR),
        "dead": to_hex(DEAD_COLOUR),
        "dead_edge": to_hex(DEAD_EDGE),
    }


def gallery_payload(rows: Sequence[dict], out: Path | None = None) -> dict:
    """The page's data for census rows; runs whose viewer exists under `out` link to it."""
    recipes = list(dict.fromkeys(r["recipe"] for r in rows))
    runs = []
    for r in rows:
        link = None
        if out is not None and viewer_path(out, r["recipe"], r["run"]).is_file():
            link = f"{VIEWERS}/{quote(r['recipe'])}/{quote(r['run'])}.html"
        runs.append(gallery_run(r, link))
    drawn = sum(1 for r in runs if r["planes"])
    about = (
        f"{len(runs)} runs of {len(recipes)} recipe{'s' if len(recipes) != 1 else ''} (census.jsonl). "
        "Each tile is one run's last snapshot: every head's dot in the QK plane (0, ω), or the OV plane "
        "(ω, −ω), of its largest frequency groups (the orbits' first), scaled to the orbit there, else "
        "to the group's largest head (heads farther out sit on the edge); verified orbits in the movie's colours. "
        "Under them, each drawn group's orbit spectrum in brief: the largest |μ̂_k|/Σ|ρ| over k ≤ 3 and over "
        "k ≥ 4 (– where the orbit has no k ≥ 4) and the group's largest score amplitude r. "
        + (
            f"{len(runs) - drawn} older rows carry no coordinates and show their outcome as text. "
            if drawn < len(runs)
            else ""
        )
        + "A tile links to its run's viewer where the census wrote one (headmovies orbits census --viewers)."
    )
    return {"version": PAYLOAD_VERSION, "about": about, "recipes": recipes, "colours": colours(), "runs": runs}


def write_gallery(out: Path, rows: Sequence[dict]) -> Path:
    """Write out/gallery.html (atomically) for the census rows; returns its path."""
    return write_text(out / "gallery.html", page(gallery_payload(rows, out)))


def write_viewers(
    out: Path, files: dict[tuple[str, str], Path], progress: Callable[[Iterable], Iterable] | None = None
) -> list[Path]:
    """The viewer (`render.orbits.viewer.make_viewer`) of every census run whose run file is
    present, files: {(recipe, run): run file}, into out/viewers/RECIPE/RUN.html; one newer than
    its run file is kept. Returns the paths written. UserError / RunFileError as make_viewer."""
    written = []
    todo = [(key, path) for key, path in files.items() if path.is_file()]
    for (recipe, run), path in progress(todo) if progress else todo:
        target = viewer_path(out, recipe, run)
        if target.is_file() and target.stat().st_mtime_ns >= path.stat().st_mtime_ns:
            continue
        written.append(make_viewer(path, target.parent, name=run).path)
    return written
