"""`headmovies recover RUN [--out CLEAN.h5]`: a clean, closed copy of a killed or live run file."""

from __future__ import annotations

import argparse
from pathlib import Path

from headmovies import disk
from headmovies.errors import RunFileError, UserError, plural

NAME = "recover"
HELP = "write a clean, closed copy of a killed or live run file (for h5ls, h5dump, a plain h5py.File)"
DESCRIPTION = """\
A run file stays open for write while training streams into it (HDF5's SWMR mode), and a run
killed or stopped by a full disk leaves that flag set: headmovies reads it, but h5ls, h5dump and
a plain h5py.File(path) refuse it ("file is already open for write"). This writes every complete
snapshot, metric and the split into a closed file that any HDF5 tool opens.

Without --out, RUN itself is replaced (atomically) by its clean copy; its checkpoint still
resumes it. With --out, RUN is left as it is, and may even be a live run (the copy then holds
the snapshots flushed so far). Damaged bytes in the snapshots' epochs (a failed checksum of
/snapshots/epoch): the copy, which then needs --out, keeps every snapshot whose epoch can still
be read. docs/run-file.md, "Faults"."""


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("run", type=Path, metavar="RUN", help="run file (.h5)")
    p.add_argument("--out", type=Path, metavar="CLEAN.h5", help="write the copy here instead of replacing RUN")
    p.add_argument("--force", action="store_true", help="replace an existing --out file")


def run(args: argparse.Namespace) -> int:
    from headmovies import runfile
    from headmovies.runfile.checkpoint import checkpoint_path
    from headmovies.runfile.lock import RunLock, holder
    from headmovies.runfile.schema import epochs_damaged, readable_epochs
    from headmovies.runfile.writer import clean_copy

    src, out = args.run, args.out
    with runfile.open_for_reading(src) as f:  # one line if missing or not a run file
        complete, experiment = runfile.is_complete(f), str(f.attrs["experiment"])
        count = runfile.snapshot_count(f)
        readable, _, lost = readable_epochs(f, count)  # damaged bytes in /snapshots/epoch
    in_place = out is None or out.resolve() == src.resolve()
    if lost and (in_place or not len(readable)):  # in place would drop snapshots: only into a copy
        raise RunFileError(epochs_damaged(src, lost, count, len(readable)))
    if in_place:
        if runfile.is_closed_cleanly(src):
            print(f"{src} is already closed cleanly: any HDF5 tool opens it")
            return 0
        with RunLock(src, hint="wait for it to finish, or write a copy with --out CLEAN.h5"):
            count = clean_copy(src, src)
        where = f"{src} (replaced in place)"
        then = (
            f"`Recorder({str(src)!r}, ..., resume=True)` continues it"
            if experiment == "recorded"
            else f"`headmovies train {experiment} --out {src} --resume` continues it"
        )
    else:
        if out.is_dir():
            example = out / src.name
            if example.resolve() == src.resolve():  # not the source itself
                example = out / f"{src.stem}.clean{src.suffix}"
            raise UserError(f"--out {out} is a folder; name the copy, e.g. {example}")
        disk.check_folder(out.parent, may_create=False)
        disk.check_file_kind(out, "--out")
        for suffix, what in ((".ckpt", "checkpoint"), (".lock", "lock")):
            owner = out.with_name(out.name.removesuffix(suffix))
            if out.name.endswith(suffix) and owner.exists():  # --force may not replace these
                raise UserError(
                    f"--out {out} is {owner}'s {what} file; name the copy e.g. {src.stem}.clean{src.suffix}"
                )
        if out.exists() and not args.force:
            raise UserError(f"{out} exists; pass --force to replace it")
        live = holder(src)
        count = clean_copy(src, out, skip_damaged_epochs=True)
        where = str(out) + (f" (of a live run: {live} is still writing {src})" if live else "")
        ckpt = " and its checkpoint" if checkpoint_path(src).exists() else ""
        then = f"training continues from {src}{ckpt}, not from the copy"
    print(
        f"{where}: {plural(count, 'snapshot')}, closed cleanly; the run is "
        + ("complete" if complete else f"incomplete ({then})")
    )
    return 0
