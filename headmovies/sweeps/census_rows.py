"""The rows of the orbit census (`headmovies orbits census`, docs/sweeps.md): one JSON row per
finished run of the orbit sweeps, in DIR/census.jsonl.

Input: sweep folders of the orbit experiment (`headmovies sweep orbits --out DIR`), one per
recipe (the folder's name). For every finished run the run file is read once: the orbit
check runs on every snapshot (`stream.orbit_history`), and each live head's frequency ω (the
key frequency holding most of its centred QK power, `spectrum.head_frequencies`) is read at a
few early "screen" epochs and at the end. A row keeps what the tables (`census_tables`) and the
figure (`census_figure`) need, so they can be rebuilt from the rows alone (`--rows`) once the
run files are gone.
"""

from __future__ import annotations

import json
import os
from collections import Counter
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path

from headmovies.errors import RunFileError, UserError
from headmovies.render.core.circuits import circuits
from headmovies.render.core.outputs import atomic, write_text
from headmovies.render.orbits.check import DEAD_TOL, TOL, check_orbits, is_marginal, sig6
from headmovies.render.orbits.check_run import CIRCUIT_NAMES, group_of, score_scale_of
from headmovies.render.orbits.spectrum import FrequencyGroup, head_frequencies
from headmovies.render.orbits.stream import orbit_history
from headmovies.runfile.reader import Run
from headmovies.sweeps.census_coordinates import final_planes
from headmovies.sweeps.census_provenance import run_provenance, with_provenance
from headmovies.sweeps.sweep_rows import latest, read_sweep_rows

SCREEN_EPOCHS = (250, 500, 1000, 1500, 2000, 3000)
Settings = dict[str, dict | None]  # {recipe: its fixed settings (--set), None: not recorded}
ROW_VERSION = 6  # 3: adds the bias-gauge outcome of the last snapshot; 4: worst errors to
# 6 significant digits, as `orbits check --json` (5 decimals rounded twice in tables); 5: adds
# each orbit's "marginal", the near misses and the final frequency groups' orbit spectrum; 6: adds
# `final_planes` (census_coordinates; the gallery)
READ_VERSIONS = (4, 5, 6)  # versions whose rows still read (the tables and the gallery leave out what they lack)


def census_row(
    path: str | os.PathLike,
    sweep_row: dict,
    recipe: str,
    screen_epochs: Sequence[int] = SCREEN_EPOCHS,
    tol: float = TOL,
    dead_tol: float = DEAD_TOL,
) -> dict:
    """The census row of one finished run: final metrics (from the run file), every verified
    orbit of the last snapshot with its size, frequency omega (the most common omega of its
    heads), heads, worst error and lock-in epoch (from which it stays verified), and each live
    head's omega (0: dead) at the screen epochs the run has and at its last snapshot. Also the
    last snapshot's orbits in the bias gauge (`check.check_orbits(gauge="bias")`: each head's
    key-independent OV part set aside, which the loss cannot see; docs/results/orbits.md), and
    which code and machine trained it, when (`provenance`, census_provenance.run_provenance).
    Raises RunFileError for an unreadable run file."""
    path = Path(path)
    with Run(path) as run:
        n, m = group_of(run)
        hist = orbit_history(run, tol, dead_tol)
        epochs = [int(e) for e in run.epochs]
        wanted = sorted({e for e in screen_epochs if e in epochs} | {epochs[-1]})
        omega = {}
        for e in wanted:
            t = epochs.index(e)
            c = circuits(run.weights(t, list(CIRCUIT_NAMES)))
            w = head_frequencies(c["qk"])
            w[hist.dead[t]] = 0
            omega[str(e)] = [int(v) for v in w]
        bias = check_orbits(c["qk"], c["ov"], n, m, tol, dead_tol, gauge="bias")  # c: the last snapshot's
        last = check_orbits(c["qk"], c["ov"], n, m, tol, dead_tol, score_scale=score_scale_of(run))
        cfg = run.config
        complete = run.complete
        provenance = run_provenance(run)
        metrics = {k: float(v[-1]) for k, v in run.metrics().items() if k != "epoch" and len(v)}
    final = omega[str(epochs[-1])]
    orbits = []
    for size, heads, worst in hist.orbits[-1]:
        if size < 2:
            continue
        ws = Counter(final[h] for h in heads).most_common(1)[0][0]
        orbits.append(
            {
                "size": size,
                "omega": ws,
                "heads": list(heads),
                "worst": sig6(worst),
                "marginal": is_marginal(worst, tol),
                "locked_in": hist.locked_in(heads),
            }
        )
    bias_orbits = [
        {
            "size": o.size,
            "omega": Counter(final[h] for h in o.heads).most_common(1)[0][0],
            "heads": list(o.heads),
            "worst": sig6(o.worst_error),
        }
        for o in bias.orbits
        if o.size >= 2
    ]
    near = [
        {
            "size": o.size,
            "omega": Counter(final[h] for h in o.heads).most_common(1)[0][0],
            "heads": list(o.heads),
            "worst": sig6(o.worst_error),
        }
        for o in last.near_misses
        if o.size >= 2
    ]
    refine = int(cfg.get("refine_start", 0) or 0)
    return {
        "version": ROW_VERSION,
        "recipe": recipe,
        "seed": int(sweep_row["seed"]),
        "run": sweep_row["run"],
        "stopped": not complete,  # trained only through --stop-at (the file says so, not the row)
        "file_bytes": path.stat().st_size,
        "file_mtime_ns": path.stat().st_mtime_ns,
        "screen_epochs": sorted(int(e) for e in screen_epochs),
        "n": n,
        "m": m,
        "tol": tol,
        "dead_tol": dead_tol,
        "epochs": epochs[-1],
        "phase2_start": refine if 0 < refine < int(cfg.get("epochs", epochs[-1])) else None,
        "outcome": "+".join(str(o["size"]) for o in orbits) or "none",
        "orbits": orbits,
        "near_misses": near,  # orbits that miss the tolerance by less than a tenth of it
        "groups": [group_row(g) for g in last.groups],  # the final frequency groups' orbit spectrum
        "n_dead": int(hist.dead[-1].sum()),
        "outcome_bias_gauge": "+".join(str(o["size"]) for o in bias_orbits) or "none",
        "orbits_bias_gauge": bias_orbits,
        **{k: metrics.get(k) for k in ("train_acc", "heldout_acc", "eq_error_pooled", "eq_error_worst_input")},
        "seconds": sweep_row.get("seconds"),
        "omega": omega,
        "provenance": provenance,  # which code and machine made it, when (census_provenance)
        "final_planes": final_planes(c["qk"], c["ov"], final, orbits, epochs[-1]),  # the gallery's
    }


def group_row(g: FrequencyGroup) -> dict:
    """A frequency group in a census row: omega, order N, head count, spectrum |mu_k| / sum |rho|
    (k = 1..N-1), the heads' score amplitude r [min, max] and largest stabiliser-odd fractions
    (4 significant digits; `spectrum.orbit_spectrum`)."""
    d = g.to_dict()
    return {
        "omega": g.omega,
        "order": g.order,
        "n_heads": len(g.heads),
        "spectrum": d["spectrum"],
        "r": [min(d["r"]), max(d["r"])],
        "odd_qk": max(d["odd_qk"]),
        "odd_ov": max(d["odd_ov"]),
    }


def read_sweep(folder: Path) -> tuple[list[dict], dict]:
    """(latest rows of folder/sweep.jsonl that finished or stopped at --stop-at, settings of
    folder/sweep.json).
    UserError when the folder is not a sweep of the orbit experiment, or is a grid sweep (its
    runs differ in more than the seed, and a folder is one recipe)."""
    jsonl, meta = folder / "sweep.jsonl", folder / "sweep.json"
    if not meta.is_file():
        raise UserError(
            f"{folder} is not a sweep folder (no sweep.json): make one with `headmovies sweep orbits --out {folder}`"
        )
    try:
        info = json.loads(meta.read_text())
        if not isinstance(info, dict):
            raise ValueError("not a JSON object")
    except (OSError, ValueError) as exc:
        raise UserError(
            f"{meta} is unreadable ({' '.join(str(exc).split())}); remove it and rerun its sweep "
            "(the same command) to rewrite it"
        ) from None
    if info.get("experiment") != "orbits":
        raise UserError(f"{folder} is a sweep of {info.get('experiment')!r}; the census needs the orbits experiment")
    rows = latest(read_sweep_rows(jsonl))
    values: dict[str, set] = {}
    for r in rows:
        for k, v in (r.get("grid") or {}).items():
            values.setdefault(k, set()).add(json.dumps(v))
    varied = sorted(k for k, vs in values.items() if len(vs) > 1)
    if varied:
        raise UserError(
            f"{folder} is a grid sweep ({', '.join(varied)} {'varies' if len(varied) == 1 else 'vary'}), "
            "and the census names one recipe per folder: sweep each grid point into its own folder "
            f"(with {' '.join(f'--set {k}=VALUE' for k in varied)})"
        )
    return [r for r in rows if r["status"] in ("done", "stopped") and "file" in r], info.get("settings", {})


def collect(
    folders: Sequence[Path],
    old: Iterable[dict] = (),
    screen_epochs: Sequence[int] = SCREEN_EPOCHS,
    progress: Callable | None = None,
    old_settings: dict[str, dict] | None = None,
    on_unreadable: Callable[[Path, str], None] | None = None,
) -> tuple[list[dict], Settings]:
    """Census rows of every finished run in the sweep folders, plus the rows of `old` (an
    existing census.jsonl) that the folders do not list: runs counted on another machine or
    before their folder was deleted. So the committed rows survive the machine, and a census
    continued elsewhere (`--seeds 106-199` in fresh folders) adds to them. A row of `old` is
    reused for a listed run when its run file is unchanged (same recipe and run, file size and
    modification time, and screen epochs) or has been deleted since (a run without file or old
    row is left out). Returns (rows, {recipe: settings}).

    `old_settings` are the recipes' settings that `old` was made with (census.settings.json).
    UserError when an old row that no folder lists cannot stand beside the new ones: its recipe's
    folder now has other settings, or it was read at other screen epochs or by another row
    version (its run file, which would recompute it, is not here). A listed run file that cannot
    be read (cut off, corrupt) raises RunFileError; with `on_unreadable(path, message)` it is
    reported there instead, so one broken file does not stop a census of hundreds, and keeps its
    row of `old` if it has one (as a deleted file does), else is left out. A listed run with
    neither file nor old row is reported there too."""
    old = list(old)
    cache = {
        (r["recipe"], r["run"]): r for r in old if r.get("version") in READ_VERSIONS
    }  # older: recomputed when their file is here
    todo: list[tuple[Path, str, dict]] = []
    settings: Settings = {}
    listed: set[tuple[str, str]] = set()
    for folder in folders:
        recipe = folder.name
        if recipe in settings:
            raise UserError(f"two sweep folders are named {recipe!r}; the census names recipes by folder name")
        sweep_rows, settings[recipe] = read_sweep(folder)
        todo += [(folder, recipe, r) for r in sweep_rows]
        listed |= {(recipe, r["run"]) for r in sweep_rows}
    rows: list[dict] = []
    it = progress(todo) if progress else todo
    for folder, recipe, sweep_row in it:
        path = folder / sweep_row["file"]
        hit = cache.get((recipe, sweep_row["run"]))
        if hit is not None and hit["screen_epochs"] != sorted(screen_epochs):
            hit = None  # read at other screen epochs: not reused
        if hit is not None and not path.exists():
            rows.append(hit)  # the run file was deleted after it was counted: its row stands
        elif (
            hit is not None
            and hit["version"] == ROW_VERSION
            and (hit["file_bytes"], hit["file_mtime_ns"])
            == (
                path.stat().st_size,
                path.stat().st_mtime_ns,
            )
        ):
            rows.append(with_provenance(hit, path))  # a row counted before it carried provenance gains it
        elif path.exists():
            try:
                rows.append(census_row(path, sweep_row, recipe, screen_epochs))
            except RunFileError as exc:
                if on_unreadable is None:
                    raise
                reason = exc.problem  # without "--force": the sweep retrains its own runs
                if hit is not None:
                    rows.append(hit)  # counted before it was damaged: its row stands, as for a deleted file
                    on_unreadable(path, f"{reason} (its earlier row is kept)")
                else:
                    on_unreadable(path, f"{reason} (left out)")
        elif on_unreadable is not None:
            on_unreadable(
                path,
                f"{path} is listed as done in its sweep.jsonl but does not exist, and no "
                "earlier census row has it (left out)",
            )
    kept = [r for r in old if (r["recipe"], r["run"]) not in listed]
    old_settings = old_settings or {}
    for recipe in dict.fromkeys(r["recipe"] for r in kept):
        theirs = [r for r in kept if r["recipe"] == recipe]
        where = f"{len(theirs)} {recipe} rows of the existing census.jsonl (runs not in these folders)"
        if recipe in settings and old_settings.get(recipe) != settings[recipe]:
            raise UserError(
                f"{where} were made with settings {json.dumps(old_settings.get(recipe))}, the "
                f"{recipe} folder now has {json.dumps(settings[recipe])}: give another --out for a "
                "census of the new settings"
            )
        versions = {r["version"] for r in theirs} - set(READ_VERSIONS)
        if versions:
            raise UserError(
                f"{where} are of row version {min(versions)}, this headmovies reads "
                f"{', '.join(map(str, READ_VERSIONS))}, and their run files are not here to recompute "
                "them: run the census where the run files are, or give another --out"
            )
        epochs = {tuple(r["screen_epochs"]) for r in theirs} - {tuple(sorted(screen_epochs))}
        if epochs:
            e = ",".join(map(str, min(epochs)))
            raise UserError(f"{where} were read at screen epochs {e}: pass --screen-epochs {e}, or give another --out")
        settings.setdefault(recipe, old_settings.get(recipe))
    rows += kept
    rows.sort(key=lambda r: (list(settings).index(r["recipe"]), r["seed"]))
    return rows, settings


ROW_KEYS = {"version", "recipe", "seed", "run", "n", "epochs", "outcome", "orbits", "omega", "n_dead"}


def read_census_rows(path: Path, any_version: bool = False) -> list[dict]:
    """Census rows of a census.jsonl. UserError if unreadable or not census rows (e.g. a
    sweep.jsonl given by mistake), or rows of a version not in READ_VERSIONS unless `any_version`
    (the cache of `collect`, which recomputes them). Rows of an older readable version lack
    what later versions added (version 4: no spectrum, marginal or near misses); the tables say so."""
    try:
        text = path.read_text()
    except OSError as exc:
        raise UserError(f"cannot read census rows {path}: {exc.strerror or exc}") from None
    try:
        rows = [json.loads(line) for line in text.splitlines() if line.strip()]
    except ValueError as exc:
        raise UserError(
            f"{path} is not a census.jsonl (JSON lines written by `headmovies orbits census`): "
            f"{' '.join(str(exc).split())}"
        ) from None
    for i, row in enumerate(rows, 1):
        if not isinstance(row, dict) or not row.keys() >= ROW_KEYS:
            raise UserError(
                f"{path} line {i} is not a census row (written by `headmovies orbits census`, "
                "census.jsonl; a sweep's sweep.jsonl is read through its folder)"
            )
        if row["version"] not in READ_VERSIONS and not any_version:
            raise UserError(
                f"{path} holds census rows of version {row['version']}, this headmovies reads "
                f"{', '.join(map(str, READ_VERSIONS))}: rerun the census on the sweep folders"
            )
    return rows


def write_census_rows(path: Path, rows: list[dict]) -> Path:
    """Write the census rows to `path` (census.jsonl), one compact JSON object a line, atomically."""
    with atomic(path) as tmp:
        tmp.write_text("".join(json.dumps(r, separators=(",", ":")) + "\n" for r in rows))
    return path


def write_settings(path: Path, settings: Settings) -> Path:
    """The recipes' fixed settings beside the rows, so `--rows` can name them too."""
    return write_text(path, json.dumps(settings, indent=1) + "\n")
