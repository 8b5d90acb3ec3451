"""`headmovies orbits check|movie|figures RUN`: the orbit experiment's outputs (source 000)."""

from __future__ import annotations

import argparse
import json
import math
import sys
import time
from pathlib import Path

from headmovies import disk
from headmovies.commands.orbits_help import CENSUS, CHECK, FIGURES, MOVIE, PANELS_HELP, VIEW, WATCH
from headmovies.errors import UserError, plural
from headmovies.render.core.encode import Quality
from headmovies.render.core.frame_layout import LAYOUTS, MIN_PANEL_PX, PANEL_PX
from headmovies.render.core.frame_states import TRAIL_EPOCHS
from headmovies.render.core.movie_options import add_movie_arguments, movie_arguments
from headmovies.render.core.outputs import FIGURE_FORMATS
from headmovies.render.core.projections import parse_panel
from headmovies.render.core.timeline import add_timeline_arguments, timeline_arguments
from headmovies.render.orbits.check import DEAD_TOL, GAUGES, TOL

NAME = "orbits"
HELP = "orbit experiment (source 000): orbit check, movie and figures of a run file"


def _tolerances(p: argparse.ArgumentParser) -> None:
    p.add_argument("--tol", type=float, default=TOL, help=f"relative match tolerance (default {TOL})")
    p.add_argument(
        "--dead-tol",
        type=float,
        default=DEAD_TOL,
        help=f"a head whose centred OV norm is below this fraction of the largest head's is dead (default {DEAD_TOL})",
    )


def add_arguments(parser: argparse.ArgumentParser) -> None:
    sub = parser.add_subparsers(dest="action", required=True, metavar="ACTION")
    fmt = argparse.RawDescriptionHelpFormatter

    p = sub.add_parser(
        "check", help="which heads form orbits of C_n at one snapshot", description=CHECK, formatter_class=fmt
    )
    p.add_argument("run", type=Path, metavar="RUN", help="run file (.h5), e.g. data/orbits.h5")
    p.add_argument("--epoch", type=int, help="snapshot epoch to check (default: the last snapshot)")
    _tolerances(p)
    p.add_argument(
        "--gauge",
        choices=GAUGES,
        default="spec",
        help="spec (default): centre QK rows and OV columns; bias: also remove each head's "
        "key-independent OV part, which only enters the layer summed over heads",
    )
    p.add_argument("--json", action="store_true", help="print the report as JSON instead of text")
    p.set_defaults(_action=check)

    p = sub.add_parser(
        "movie", help="the orbit movie (MP4, WebM, GIF, poster, HTML snippet)", description=MOVIE, formatter_class=fmt
    )
    p.add_argument("run", type=Path, metavar="RUN", help="run file (.h5)")
    p.add_argument("--out", type=Path, required=True, metavar="DIR", help="output folder (created)")
    p.add_argument("--panels", nargs="+", metavar="PANEL", default=None, help=PANELS_HELP + " (default: default)")
    add_movie_arguments(p)
    add_timeline_arguments(p)
    p.add_argument("--no-timeline", action="store_true", help="no timeline strip under the panels")
    p.add_argument("--name", default="orbits", help="file name stem of the outputs (default orbits)")
    p.add_argument(
        "--layout",
        choices=LAYOUTS,
        default="wide",
        help="wide: landscape, the timeline right of the panels (default); tall: portrait, the timeline under them",
    )
    p.add_argument(
        "--panel-px",
        type=int,
        default=None,
        metavar="PX",
        help=f"side of each square panel in pixels, {MIN_PANEL_PX} to 2000 "
        f"(default {PANEL_PX['wide']} wide, {PANEL_PX['tall']} tall)",
    )
    p.add_argument(
        "--trail",
        type=float,
        default=TRAIL_EPOCHS,
        metavar="EPOCHS",
        help=f"trail length in epochs (default {TRAIL_EPOCHS:g})",
    )
    p.add_argument(
        "--crf", type=int, default=Quality.mp4_crf, help=f"H.264 quality, lower is better (default {Quality.mp4_crf})"
    )
    p.add_argument("--no-orbit-colours", action="store_true", help="draw every head in one colour")
    p.add_argument("--no-progress", action="store_true", help="no progress bar")
    p.set_defaults(_action=movie)

    p = sub.add_parser("figures", help="still figures for posts, PNG and SVG", description=FIGURES, formatter_class=fmt)
    p.add_argument("run", type=Path, metavar="RUN", help="run file (.h5), e.g. data/orbits.h5")
    p.add_argument("--out", type=Path, required=True, metavar="DIR", help="output folder (created)")
    p.add_argument("--panels", nargs="+", metavar="PANEL", default=None, help=PANELS_HELP + " (default: default)")
    _tolerances(p)
    p.add_argument("--formats", default=",".join(FIGURE_FORMATS), help="png,svg or one of them (default both)")
    p.add_argument(
        "--no-over-time",
        action="store_true",
        help="skip orbits_over_time and orbit_progress (they run the orbit check on every snapshot)",
    )
    p.add_argument("--no-progress", action="store_true", help="no progress bar")
    p.set_defaults(_action=figures)

    p = sub.add_parser(
        "view", help="the interactive viewer: one self-contained HTML page", description=VIEW, formatter_class=fmt
    )
    p.add_argument("run", type=Path, metavar="RUN", help="run file (.h5), e.g. data/orbits.h5")
    p.add_argument("--out", type=Path, required=True, metavar="DIR", help="output folder (created)")
    p.add_argument("--panels", nargs="+", metavar="PANEL", default=None, help=PANELS_HELP + " (default: default)")
    p.add_argument("--name", default="viewer", help="file name stem of the page (default viewer)")
    _tolerances(p)
    p.set_defaults(_action=view)

    p = sub.add_parser(
        "watch",
        help="live viewer of a run while it trains, served on 127.0.0.1",
        description=WATCH,
        formatter_class=fmt,
    )
    p.add_argument("run", type=Path, metavar="RUN", help="run file (.h5), e.g. data/orbits.h5")
    p.add_argument("--panels", nargs="+", metavar="PANEL", default=None, help=PANELS_HELP + " (default: default)")
    p.add_argument("--port", type=int, default=8765, help="port on 127.0.0.1 (default 8765; 0 picks a free one)")
    p.add_argument(
        "--interval", type=float, default=1.0, metavar="SECONDS", help="read the run file this often (default 1)"
    )
    p.add_argument("--open", action="store_true", help="open the page in the default browser")
    _tolerances(p)
    p.set_defaults(_action=watch)

    p = sub.add_parser(
        "census",
        help="orbit outcomes across the seeds of sweeps: tables, figure, rows",
        description=CENSUS,
        formatter_class=fmt,
    )
    p.add_argument("sweeps", type=Path, nargs="*", metavar="SWEEP_DIR", help="sweep folders, one per recipe")
    p.add_argument("--out", type=Path, required=True, metavar="DIR", help="output folder (created)")
    p.add_argument(
        "--rows",
        type=Path,
        metavar="FILE.jsonl",
        help="rebuild the tables and figure from these census rows (no run files needed)",
    )
    p.add_argument(
        "--screen-epochs",
        default="250,500,1000,1500,2000,3000",
        metavar="E1,E2",
        help="epochs at which to read the frequency groups (default 250,500,1000,1500,2000,3000)",
    )
    p.add_argument("--formats", default=",".join(FIGURE_FORMATS), help="png,svg or one of them (default both)")
    p.add_argument(
        "--viewers",
        action="store_true",
        help="also write the viewer of every run whose run file is present into --out/viewers/ "
        "(the gallery links each tile to its run's viewer; a few MB each)",
    )
    p.add_argument("--no-progress", action="store_true", help="no progress bar")
    p.set_defaults(_action=census)


def run(args: argparse.Namespace) -> int:
    return args._action(args)


def check(args: argparse.Namespace) -> int:
    from headmovies.render.orbits.check_run import run_report
    from headmovies.runfile.reader import Run

    with Run(args.run) as r:
        report = run_report(r, args.epoch, args.tol, args.dead_tol, args.gauge)
        print(report.to_json() if args.json else f"{r.path}\n{report.text()}")
    return 0


def movie(args: argparse.Namespace) -> int:
    from headmovies.render.orbits.movie import make_movie

    panels = args.panels
    _check_panel_words(panels)
    formats, fps, hold = movie_arguments(args)
    event_hold = timeline_arguments(args)
    if args.panel_px is None:
        args.panel_px = PANEL_PX[args.layout]
    if not MIN_PANEL_PX <= args.panel_px <= 2000:
        why = (
            (
                f" (below {MIN_PANEL_PX} the text no longer fits; to show the movie smaller, give it a smaller width "
                "in the page)"
            )
            if args.panel_px < MIN_PANEL_PX
            else ""
        )
        raise UserError(f"--panel-px must be in {MIN_PANEL_PX}..2000{why}, got {args.panel_px}")
    if not math.isfinite(args.trail) or args.trail < 0:
        raise UserError(f"--trail must be a number of epochs >= 0, got {args.trail}")
    if not 0 <= args.crf <= 51:
        raise UserError(f"--crf must be in 0..51 (H.264), got {args.crf}")
    if not args.name or "/" in args.name or args.name.startswith("."):
        raise UserError(f"--name must be a plain file name stem, got {args.name!r}")
    t0 = time.perf_counter()
    result = make_movie(
        args.run,
        args.out,
        panels=panels,
        formats=formats,
        fps=fps,
        hold_s=hold,
        basename=args.name,
        panel_px=args.panel_px,
        quality=Quality(mp4_crf=args.crf),
        trail_epochs=args.trail,
        progress=not args.no_progress,
        colour_orbits=not args.no_orbit_colours,
        event_hold_s=event_hold,
        timeline=not args.no_timeline,
        layout=args.layout,
    )
    w, h = result.size
    print(f"{result.frames} frames, {w}x{h} px, {result.fps:g} fps, in {time.perf_counter() - t0:.1f} s:")
    for path in result.paths.values():
        print(f"  {path}  ({path.stat().st_size / 1e6:.2f} MB)")
    return 0


def figures(args: argparse.Namespace) -> int:
    from headmovies.render.orbits.figures import make_figures

    formats = _formats(args.formats)
    for path in make_figures(
        args.run,
        args.out,
        args.panels,
        args.tol,
        args.dead_tol,
        formats,
        over_time=not args.no_over_time,
        progress=not args.no_progress,
    ):
        print(path)
    return 0


def _progress(it, desc: str = "census"):
    from tqdm import tqdm

    return tqdm(it, desc=desc, unit="run")


def census(args: argparse.Namespace) -> int:
    from headmovies.render.core.outputs import check_out_dir, prepare_out_dir
    from headmovies.sweeps.census import write_census
    from headmovies.sweeps.census_rows import Settings, collect, read_census_rows, write_settings

    formats = _formats(args.formats)
    try:
        screen = sorted({int(e) for e in args.screen_epochs.split(",") if e.strip()})
    except ValueError:
        raise UserError(f"--screen-epochs must be epochs separated by commas, got {args.screen_epochs!r}") from None
    skipped: list[str] = []  # messages of unreadable run files left out
    if args.sweeps and args.rows:
        raise UserError("give sweep folders or --rows FILE.jsonl (to rebuild from saved rows), not both")
    if args.viewers and args.rows:
        raise UserError("--viewers needs the sweep folders (their run files), not --rows")
    if not args.sweeps and not args.rows:
        raise UserError(
            "give sweep folders (the --out of `headmovies sweep orbits`), or --rows FILE.jsonl "
            "to rebuild from saved rows"
        )
    if any(e < 1 for e in screen):
        raise UserError(f"--screen-epochs must be epochs >= 1, got {args.screen_epochs!r}")
    for folder in args.sweeps:
        if not folder.exists():
            raise UserError(f"sweep folder {folder} {disk.missing(folder)}")
        if not folder.is_dir():
            raise UserError(f"{folder} is a file; give the sweep's folder (the --out of `headmovies sweep`)")
    check_out_dir(args.out)  # before reading any run: a bad --out fails at once
    if args.rows:
        rows = read_census_rows(args.rows)
        if not rows:
            raise UserError(f"{args.rows} holds no census rows")
        settings: Settings = {r["recipe"]: None for r in rows}  # None: not recorded
        settings.update(
            json.loads(args.rows.with_suffix(".settings.json").read_text())
            if args.rows.with_suffix(".settings.json").is_file()
            else {}
        )
    else:
        old_path = args.out / "census.jsonl"
        old = read_census_rows(old_path, any_version=True) if old_path.is_file() else []  # other versions: recomputed
        settings_path = args.out / "census.settings.json"
        try:
            old_settings = json.loads(settings_path.read_text()) if old and settings_path.is_file() else {}
        except (OSError, ValueError) as exc:
            raise UserError(
                f"cannot read {settings_path} ({' '.join(str(exc).split())}); it names the recipes' "
                f"settings of {old_path}: restore it, or give another --out"
            ) from None

        rows, settings = collect(
            args.sweeps,
            old,
            screen,
            None if args.no_progress else _progress,
            old_settings,
            on_unreadable=lambda path, message: skipped.append(message),
        )
        if not rows:
            _say_skipped(skipped)
            raise UserError(
                "no finished run in " + ", ".join(map(str, args.sweeps)) + (" could be read" if skipped else "")
            )
    out = prepare_out_dir(args.out)
    if args.viewers:
        from headmovies.sweeps.census_gallery import write_viewers
        from headmovies.sweeps.census_rows import read_sweep

        files = {(f.name, r["run"]): f / r["file"] for f in args.sweeps for r in read_sweep(f)[0]}
        written = write_viewers(out, files, None if args.no_progress else lambda it: _progress(it, "viewers"))
        print(f"{len(written)} viewers written into {out / 'viewers'}", file=sys.stderr)
    paths = write_census(out, rows, settings, formats, write_jsonl=not args.rows)
    if not args.rows:
        paths.append(write_settings(out / "census.settings.json", settings))
    for path in paths:
        print(path)
    if skipped:
        _say_skipped(skipped)
        return 1
    return 0


def _say_skipped(skipped: list[str]) -> None:
    for message in skipped:
        print(f"census: {message}", file=sys.stderr)
    if skipped:
        print(
            f"{len(skipped)} run file{'s' if len(skipped) > 1 else ''} missing or unreadable: rerun the sweep "
            "(it retrains such runs), then this census",
            file=sys.stderr,
        )


def _formats(text: str) -> tuple[str, ...]:
    formats = tuple(dict.fromkeys(f.strip().lower() for f in text.split(",") if f.strip()))
    if not formats or any(f not in FIGURE_FORMATS for f in formats):
        raise UserError(f"--formats must be png, svg or png,svg; got {text!r}")
    return formats


def _check_panel_words(panels) -> None:
    from headmovies.render.orbits.panel_choice import OLD_PANEL_KEYWORDS, PANEL_KEYWORDS  # h5py: on use

    if panels and not {w.lower() for w in panels} & {*PANEL_KEYWORDS, *OLD_PANEL_KEYWORDS}:
        [parse_panel(p) for p in panels]  # a bad plane fails before the run is opened


def view(args: argparse.Namespace) -> int:
    from headmovies.render.orbits.viewer import MAX_MB, make_viewer

    _check_panel_words(args.panels)
    if not args.name or "/" in args.name or args.name.startswith("."):
        raise UserError(f"--name must be a plain file name stem, got {args.name!r}")
    result = make_viewer(args.run, args.out, panels=args.panels, tol=args.tol, dead_tol=args.dead_tol, name=args.name)
    mb = result.bytes / 1e6
    print(
        f"{result.path}  ({mb:.2f} MB, {plural(result.snapshots, 'snapshot')}, panels "
        f"{' '.join(map(str, result.panels))}, built in {result.seconds:.1f} s)"
        + (f"; larger than {MAX_MB:g} MB: browsers may be slow to open it" if mb > MAX_MB else "")
    )
    return 0


def watch(args: argparse.Namespace) -> int:
    from headmovies.render.orbits.watch import watch as follow

    _check_panel_words(args.panels)
    if not 0 <= args.port <= 65535:
        raise UserError(f"--port must be in 0..65535, got {args.port}")
    if not math.isfinite(args.interval) or not 0.05 <= args.interval <= 60:
        raise UserError(f"--interval must be in 0.05..60 seconds, got {args.interval}")
    try:
        follow(
            args.run,
            panels=args.panels,
            port=args.port,
            interval=args.interval,
            tol=args.tol,
            dead_tol=args.dead_tol,
            open_browser=args.open,
            log=lambda s: print(s, flush=True),
        )
    except KeyboardInterrupt:
        print("stopped", flush=True)
    return 0
