"""Options shared by the commands that render any run (`movie`, `figures`, `view`;
render/generic/, docs/recording.md): RUN, --group-order, --panels and --basis."""

from __future__ import annotations

import argparse
from pathlib import Path

from headmovies import disk
from headmovies.errors import UserError

PLANES = """\
Heads are drawn in irrep planes when the tokens carry the cyclic group Z_p (a run recorded with
group_order=p, a built-in orbit run, or --group-order P; --panels names planes such as qk:0,10),
else in the planes of --basis, else in principal axes fitted once on all snapshots."""


def add_run_arguments(p: argparse.ArgumentParser, planes: bool = True) -> None:
    """RUN and --group-order; with `planes` also --panels and --basis (the commands that draw
    heads in planes: movie, view)."""
    p.add_argument("run", type=Path, metavar="RUN", help="run file (.h5): recorded or built-in")
    p.add_argument("--group-order", type=int, metavar="P", help="the tokens 0..P-1 carry Z_P (default: the run's)")
    if not planes:
        return
    p.add_argument("--panels", nargs="+", metavar="PLANE", help="irrep planes, e.g. qk:0,10 ov:4,-4 (needs a group)")
    p.add_argument(
        "--basis",
        type=Path,
        metavar="FILE.npz",
        help="arrays qk [K, n, n] and/or ov [K, n_out, n]: planes of basis matrices (0, 1), (2, 3), ...",
    )


def plane_options(args: argparse.Namespace) -> dict:
    """{'group_order', 'panels', 'basis'} for the renderers; UserError for an unreadable basis."""
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


def default_out(run: Path) -> Path:
    """The output folder when --out is not given: one per run beside it (data/a.h5 -> data/a/),
    so that two runs of one folder never overwrite each other's outputs."""
    return run.with_suffix("") if run.suffix else run.parent / f"{run.name}-out"
