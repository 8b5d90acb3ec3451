"""What the commands that render any run share (`movie`, `figures`, `view`): RUN, the run's
family, read from its `experiment` (orbits, induction, OV-coherent, or generic for a recorded
run or any other), each family's options in their own group of `--help`, and the refusal of an
option the run's family would ignore; and the old spellings of these commands under a family's
group (`add_old_spelling`)."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path

from headmovies import disk
from headmovies.errors import UserError

FAMILIES = ("orbits", "induction", "ov-coherent", "generic")
WORDS = {"orbits": "orbit", "induction": "induction", "ov-coherent": "ov-coherent", "generic": "recorded"}
PLANES = """\
An orbit run (`headmovies train orbits`) is drawn with the orbit look: panels from its orbit
structure (--panels default|auto|source or planes CIRCUIT:U,V), heads coloured by verified
orbit, the timeline strip and each frequency group's spectrum (docs/movie.md). An induction or
ov-coherent run is drawn as its family's report draws it (docs/experiments.md). Any other run
(a recorded one, or any run with --generic) is drawn generically: in score space when it holds
probe scores and no group, panels or basis is given (--view scores|axes chooses); else heads in
irrep planes when the tokens carry the cyclic group Z_p (a run recorded with group_order=p, or
--group-order P; --panels names planes such as qk:0,10), else in the planes of --basis, else in
principal axes fitted once on all snapshots (docs/recording.md, "Rendering")."""


def family_of(args: argparse.Namespace) -> str:
    """The family that renders RUN (FAMILIES): 'generic' with --generic, else from the run's
    `experiment`. UserError (one line) for a run that cannot be opened."""
    if getattr(args, "generic", False):
        return "generic"
    from headmovies.runfile.reader import Run

    with Run(args.run) as run:
        experiment = run.experiment
    if experiment == "orbits":
        return "orbits"
    if experiment.startswith("induction"):
        return "induction"
    return "ov-coherent" if experiment == "ov-coherent" else "generic"


def runs(families: Sequence[str]) -> str:
    """'orbit, ov-coherent and recorded runs (and --generic)': the runs of `families` in words."""
    words = [WORDS[f] for f in families]
    text = (", ".join(words[:-1]) + " and " if len(words) > 1 else "") + words[-1] + " runs"
    return text + (" (and --generic)" if "generic" in families else "")


def group(p: argparse.ArgumentParser, families: Sequence[str]) -> argparse._ArgumentGroup:
    """An argument group of `--help` titled with the families its options serve."""
    return p.add_argument_group(f"for {runs(families)}")


def add_run_argument(p: argparse.ArgumentParser) -> None:
    p.add_argument("run", type=Path, metavar="RUN", help="run file (.h5): built-in or recorded")
    p.add_argument(
        "--generic",
        action="store_true",
        help="draw the run as a recorded run's (irrep planes, a basis or principal axes), whatever its experiment",
    )


def add_generic_arguments(p: argparse.ArgumentParser, planes: bool = True) -> None:
    """--group-order; with `planes` also --basis (the commands that draw heads in planes)."""
    g = group(p, ["generic"])
    g.add_argument("--group-order", type=int, metavar="P", help="the tokens 0..P-1 carry Z_P (default: the run's)")
    if planes:
        g.add_argument(
            "--basis",
            type=Path,
            metavar="FILE.npz",
            help="arrays qk [K, n, n] and/or ov [K, n_out, n]: planes of basis matrices (0, 1), (2, 3), ...",
        )


def add_view_argument(p: argparse.ArgumentParser) -> None:
    """--view scores|axes (`movie`, `view`): score space or planes, for recorded and induction runs."""
    g = group(p, ["generic", "induction"])
    g.add_argument(
        "--view",
        choices=("scores", "axes"),
        help="scores: each head at its probe scores (previous-token, induction), one panel per layer (the default "
        "for a recorded run with probe scores and no group; induction runs record them too); axes: heads in "
        "irrep planes, a basis or principal axes",
    )


def refuse_others(args: argparse.Namespace, family: str, only: Mapping[str, Sequence[str]]) -> None:
    """UserError (one line) when an option given (not None, not False) serves other families than
    the run's: `only` maps each option's dest to the families it serves."""
    for dest, families in only.items():
        value = getattr(args, dest, None)
        if family not in families and value is not None and value is not False:
            option = "--" + dest.replace("_", "-")
            raise UserError(
                f"{option} is for {runs(families)}; {args.run} is drawn as a{'n' * (WORDS[family][0] in 'aeiou')} "
                f"{WORDS[family]} run (--help groups the options by family)"
            )


def plane_options(args: argparse.Namespace) -> dict:
    """{'group_order', 'panels', 'basis'} for the generic renderers; UserError for an unreadable basis."""
    basis = None
    if getattr(args, "basis", None) is not None:
        import zipfile

        import numpy as np

        disk.check_file_kind(args.basis, "the basis")  # a named pipe would block np.load forever
        if args.basis.is_file() and not zipfile.is_zipfile(args.basis):  # .npy, text, HDF5: np.load's own
            raise UserError(  # message would be about pickles or a traceback
                f"the basis {args.basis} is not an .npz archive: write one with numpy.savez(PATH, qk=..., ov=...)"
            )
        try:
            with np.load(args.basis) as f:
                basis = {k: f[k] for k in f.files}
        except (OSError, ValueError, zipfile.BadZipFile) as exc:
            raise UserError(f"cannot read the basis {args.basis}: {str(exc).splitlines()[0]}") from None
    if args.group_order is not None and args.group_order < 2:
        raise UserError(f"--group-order must be >= 2, got {args.group_order}")
    return {"group_order": args.group_order, "panels": getattr(args, "panels", None), "basis": basis}


def check_panel_words(panels: Sequence[str] | None) -> None:
    """A bad plane of --panels fails before the run is opened (the orbit family's words pass)."""
    from headmovies.render.core.projections import parse_panel
    from headmovies.render.orbits.panel_choice import OLD_PANEL_KEYWORDS, PANEL_KEYWORDS

    if panels and not {w.lower() for w in panels} & {*PANEL_KEYWORDS, *OLD_PANEL_KEYWORDS}:
        [parse_panel(p) for p in panels]


def check_name(name: str) -> None:
    if not name or "/" in name or name.startswith("."):
        raise UserError(f"--name must be a plain file name stem, got {name!r}")


def default_out(run: Path) -> Path:
    """The output folder when --out is not given: one per run beside it (data/a.h5 -> data/a/),
    so that two runs of one folder never overwrite each other's outputs."""
    return run.with_suffix("") if run.suffix else run.parent / f"{run.name}-out"


def add_old_spelling(sub, group: str, command) -> None:
    """`headmovies GROUP NAME ...`, a deprecated spelling of `headmovies NAME` (the command module
    `command`: movie, figures or view), not listed in GROUP's --help: the same arguments; it
    prints one line on stderr naming the new spelling, then runs the command."""
    p = sub.add_parser(
        command.NAME, description=command.DESCRIPTION, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    command.add_arguments(p)

    def run(args: argparse.Namespace) -> int:
        print(f"note: `headmovies {group} {command.NAME}` is now `headmovies {command.NAME}`", file=sys.stderr)
        return command.run(args)

    p.set_defaults(_action=run)
