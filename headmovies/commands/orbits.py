"""`headmovies orbits check|watch|census`: orbit analysis of the orbit experiment's runs (source
000). Its movie, figures and viewer are `headmovies movie|figures|view RUN` (commands/movie.py);
`orbits movie|figures|view` remain as deprecated spellings of those."""

from __future__ import annotations

import argparse
import json
import math
import sys
from pathlib import Path

from headmovies import disk
from headmovies.commands import figures as figures_command
from headmovies.commands import movie as movie_command
from headmovies.commands import view as view_command
from headmovies.commands.any_run import add_old_spelling, check_panel_words
from headmovies.commands.figures import figure_formats
from headmovies.commands.orbits_help import CENSUS, CHECK, PANELS_HELP, WATCH
from headmovies.commands.orbits_help import DESCRIPTION as DESCRIPTION
from headmovies.errors import UserError
from headmovies.render.core.outputs import FIGURE_FORMATS
from headmovies.render.orbits.check import DEAD_TOL, GAUGES, TOL

NAME = "orbits"
HELP = "orbit experiment (source 000): orbit check, live viewer and census of run files"


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

    for old in (movie_command, figures_command, view_command):
        add_old_spelling(sub, NAME, old)

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


def _progress(it, desc: str = "census"):
    from tqdm import tqdm

    return tqdm(it, desc=desc, unit="run")


def census(args: argparse.Namespace) -> int:
    from headmovies.render.core.outputs import check_out_dir, prepare_out_dir
    from headmovies.sweeps.census import write_census
    from headmovies.sweeps.census_rows import Settings, collect, read_census_rows, write_settings

    formats = figure_formats(args.formats)
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


def watch(args: argparse.Namespace) -> int:
    from headmovies.render.orbits.watch import watch as follow

    check_panel_words(args.panels)
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
