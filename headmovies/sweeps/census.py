"""Census of orbit outcomes across seeds and recipes (docs/results/orbits.md, "Census").

Input: sweep folders of the orbit experiment (`headmovies sweep orbits --out DIR`), one per
recipe (the folder's name). For every finished run the run file is read once: the orbit
check runs on every snapshot (`stream.orbit_history`), and each live head's frequency ω (the
key frequency holding most of its centred QK power, `report.head_frequencies`) is read at a
few early "screen" epochs and at the end. One JSON row per run keeps what the tables and the
figure need, so they can be rebuilt from the rows alone (`--rows`) once the run files are gone.

The screen asks whether the frequency groups of the fit phase predict the orbits: an orbit at
frequency ω has N_ω = n / gcd(ω, n) heads (docs/results/orbits.md, "Why orbits are rare here"),
so a group of c heads at ω "fits" when c is a positive multiple of N_ω, and "has room" when
c >= N_ω.
"""
from __future__ import annotations

import json
import math
import os
from collections import Counter
from pathlib import Path
from typing import Callable, Iterable, Sequence

import numpy as np

from headmovies.errors import RunFileError, UserError
from headmovies.render.core.outputs import FIGURE_FORMATS, atomic, save_figure, write_text
from headmovies.runfile.reader import Run
from headmovies.sweeps.report import latest, read_rows as read_sweep_rows
from headmovies.render.orbits.check import CIRCUIT_NAMES, DEAD_TOL, TOL, check_orbits, group_of, sig6
from headmovies.render.orbits.stream import orbit_history
from headmovies.render.orbits.report import head_frequencies
from headmovies.render.core.circuits import circuits

SCREEN_EPOCHS = (250, 500, 1000, 1500, 2000, 3000)
ROW_VERSION = 4                 # 3: adds the bias-gauge outcome of the last snapshot; 4: worst errors to
                                # 6 significant digits, as `orbits check --json` (5 decimals rounded twice in tables)


def orbit_order(omega: int, n: int) -> int:
    """N_omega = n / gcd(omega, n): the heads of an orbit at frequency omega (its polygon's corners)."""
    return n // math.gcd(omega, n)


def groups_of(omegas: Sequence[int]) -> dict[int, int]:
    """{omega: live heads} from per-head frequencies (0 marks a dead head)."""
    return dict(sorted(Counter(int(w) for w in omegas if w).items()))


def fitting(groups: dict[int, int], n: int, rule: str = "fits") -> set[int]:
    """Frequencies whose group can be a union of orbits: rule "fits" (a positive multiple of
    N_omega heads) or "room" (at least N_omega heads)."""
    if rule == "fits":
        return {w for w, c in groups.items() if c >= orbit_order(w, n) and c % orbit_order(w, n) == 0}
    return {w for w, c in groups.items() if c >= orbit_order(w, n)}


# ---- one run -> one row ----

def census_row(path: str | os.PathLike, sweep_row: dict, recipe: str,
               screen_epochs: Sequence[int] = SCREEN_EPOCHS, tol: float = TOL, dead_tol: float = DEAD_TOL) -> dict:
    """The census row of one finished run: final metrics (from the run file), every verified
    orbit of the last snapshot with its size, frequency omega (the most common omega of its
    heads), heads, worst error and lock-in epoch (from which it stays verified), and each live
    head's omega (0: dead) at the screen epochs the run has and at its last snapshot. Also the
    last snapshot's orbits in the bias gauge (`check.check_orbits(gauge="bias")`: each head's
    key-independent OV part set aside, which the loss cannot see; docs/results/orbits.md).
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
        bias = check_orbits(c["qk"], c["ov"], n, m, tol, dead_tol, gauge="bias")   # c: the last snapshot's
        cfg = run.config
        complete = run.complete
        metrics = {k: float(v[-1]) for k, v in run.metrics().items() if k != "epoch" and len(v)}
    final = omega[str(epochs[-1])]
    orbits = []
    for size, heads, worst in hist.orbits[-1]:
        if size < 2:
            continue
        ws = Counter(final[h] for h in heads).most_common(1)[0][0]
        orbits.append({"size": size, "omega": ws, "heads": list(heads), "worst": sig6(worst),
                       "locked_in": hist.locked_in(heads)})
    bias_orbits = [{"size": o.size, "omega": Counter(final[h] for h in o.heads).most_common(1)[0][0],
                    "heads": list(o.heads), "worst": sig6(o.worst_error)} for o in bias.orbits if o.size >= 2]
    refine = int(cfg.get("refine_start", 0) or 0)
    return {
        "version": ROW_VERSION, "recipe": recipe, "seed": int(sweep_row["seed"]), "run": sweep_row["run"],
        "stopped": not complete,        # trained only through --stop-at (the file says so, not the row)
        "file_bytes": path.stat().st_size, "file_mtime_ns": path.stat().st_mtime_ns,
        "screen_epochs": sorted(int(e) for e in screen_epochs), "n": n, "m": m, "tol": tol, "dead_tol": dead_tol,
        "epochs": epochs[-1], "phase2_start": refine if 0 < refine < int(cfg.get("epochs", epochs[-1])) else None,
        "outcome": "+".join(str(o["size"]) for o in orbits) or "none",
        "orbits": orbits, "n_dead": int(hist.dead[-1].sum()),
        "outcome_bias_gauge": "+".join(str(o["size"]) for o in bias_orbits) or "none", "orbits_bias_gauge": bias_orbits,
        **{k: metrics.get(k) for k in ("train_acc", "heldout_acc", "eq_error_pooled", "eq_error_worst_input")},
        "seconds": sweep_row.get("seconds"),
        "omega": omega,
    }


def read_sweep(folder: Path) -> tuple[list[dict], dict]:
    """(latest rows of folder/sweep.jsonl that finished or stopped at --stop-at, settings of
    folder/sweep.json).
    UserError when the folder is not a sweep of the orbit experiment, or is a grid sweep (its
    runs differ in more than the seed, and a folder is one recipe)."""
    jsonl, meta = folder / "sweep.jsonl", folder / "sweep.json"
    if not meta.is_file():
        raise UserError(f"{folder} is not a sweep folder (no sweep.json): make one with "
                        f"`headmovies sweep orbits --out {folder}`")
    try:
        info = json.loads(meta.read_text())
        if not isinstance(info, dict):
            raise ValueError("not a JSON object")
    except (OSError, ValueError) as exc:
        raise UserError(f"{meta} is unreadable ({' '.join(str(exc).split())}); remove it and rerun its sweep "
                        "(the same command) to rewrite it") from None
    if info.get("experiment") != "orbits":
        raise UserError(f"{folder} is a sweep of {info.get('experiment')!r}; the census needs the orbits experiment")
    rows = latest(read_sweep_rows(jsonl))
    values: dict[str, set] = {}
    for r in rows:
        for k, v in (r.get("grid") or {}).items():
            values.setdefault(k, set()).add(json.dumps(v))
    varied = sorted(k for k, vs in values.items() if len(vs) > 1)
    if varied:
        raise UserError(f"{folder} is a grid sweep ({', '.join(varied)} {'varies' if len(varied) == 1 else 'vary'}), "
                        "and the census names one recipe per folder: sweep each grid point into its own folder "
                        f"(with {' '.join(f'--set {k}=VALUE' for k in varied)})")
    return [r for r in rows if r["status"] in ("done", "stopped") and "file" in r], info.get("settings", {})


def collect(folders: Sequence[Path], old: Iterable[dict] = (), screen_epochs: Sequence[int] = SCREEN_EPOCHS,
            progress: Callable | None = None, old_settings: dict[str, dict] | None = None,
            on_unreadable: Callable[[Path, str], None] | None = None
            ) -> tuple[list[dict], dict[str, dict]]:
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
    cache = {(r["recipe"], r["run"]): r for r in old if r.get("version") == ROW_VERSION}
    todo, settings, listed = [], {}, set()
    for folder in folders:
        recipe = folder.name
        if recipe in settings:
            raise UserError(f"two sweep folders are named {recipe!r}; the census names recipes by folder name")
        sweep_rows, settings[recipe] = read_sweep(folder)
        todo += [(folder, recipe, r) for r in sweep_rows]
        listed |= {(recipe, r["run"]) for r in sweep_rows}
    rows = []
    it = progress(todo) if progress else todo
    for folder, recipe, sweep_row in it:
        path = folder / sweep_row["file"]
        hit = cache.get((recipe, sweep_row["run"]))
        same_epochs = hit is not None and hit["screen_epochs"] == sorted(screen_epochs)
        if same_epochs and not path.exists():
            rows.append(hit)              # the run file was deleted after it was counted: its row stands
        elif same_epochs and (hit["file_bytes"], hit["file_mtime_ns"]) == (path.stat().st_size,
                                                                           path.stat().st_mtime_ns):
            rows.append(hit)
        elif path.exists():
            try:
                rows.append(census_row(path, sweep_row, recipe, screen_epochs))
            except RunFileError as exc:
                if on_unreadable is None:
                    raise
                reason = exc.problem          # without "--force": the sweep retrains its own runs
                if same_epochs:
                    rows.append(hit)      # counted before it was damaged: its row stands, as for a deleted file
                    on_unreadable(path, f"{reason} (its earlier row is kept)")
                else:
                    on_unreadable(path, f"{reason} (left out)")
        elif on_unreadable is not None:
            on_unreadable(path, f"{path} is listed as done in its sweep.jsonl but does not exist, and no "
                                "earlier census row has it (left out)")
    kept = [r for r in old if (r["recipe"], r["run"]) not in listed]
    old_settings = old_settings or {}
    for recipe in dict.fromkeys(r["recipe"] for r in kept):
        theirs = [r for r in kept if r["recipe"] == recipe]
        where = f"{len(theirs)} {recipe} rows of the existing census.jsonl (runs not in these folders)"
        if recipe in settings and old_settings.get(recipe) != settings[recipe]:
            raise UserError(f"{where} were made with settings {json.dumps(old_settings.get(recipe))}, the "
                            f"{recipe} folder now has {json.dumps(settings[recipe])}: give another --out for a "
                            "census of the new settings")
        versions = {r["version"] for r in theirs} - {ROW_VERSION}
        if versions:
            raise UserError(f"{where} are of row version {min(versions)}, this headmovies writes {ROW_VERSION}, "
                            "and their run files are not here to recompute them: run the census where the run "
                            "files are, or give another --out")
        epochs = {tuple(r["screen_epochs"]) for r in theirs} - {tuple(sorted(screen_epochs))}
        if epochs:
            e = ",".join(map(str, min(epochs)))
            raise UserError(f"{where} were read at screen epochs {e}: pass --screen-epochs {e}, or give another --out")
        settings.setdefault(recipe, old_settings.get(recipe))
    rows += kept
    rows.sort(key=lambda r: (list(settings).index(r["recipe"]), r["seed"]))
    return rows, settings


ROW_KEYS = {"version", "recipe", "seed", "run", "n", "epochs", "outcome", "orbits", "omega", "n_dead"}


def read_rows(path: Path, any_version: bool = False) -> list[dict]:
    """Census rows of a census.jsonl. UserError if unreadable or not census rows (e.g. a
    sweep.jsonl given by mistake), or rows of another ROW_VERSION unless `any_version` (the
    cache of `collect`, which recomputes them)."""
    try:
        text = path.read_text()
    except OSError as exc:
        raise UserError(f"cannot read census rows {path}: {exc.strerror or exc}") from None
    try:
        rows = [json.loads(line) for line in text.splitlines() if line.strip()]
    except ValueError as exc:
        raise UserError(f"{path} is not a census.jsonl (JSON lines written by `headmovies orbits census`): "
                        f"{' '.join(str(exc).split())}") from None
    for i, row in enumerate(rows, 1):
        if not isinstance(row, dict) or not ROW_KEYS <= row.keys():
            raise UserError(f"{path} line {i} is not a census row (written by `headmovies orbits census`, "
                            "census.jsonl; a sweep's sweep.jsonl is read through its folder)")
        if row["version"] != ROW_VERSION and not any_version:
            raise UserError(f"{path} holds census rows of version {row['version']}, this headmovies writes "
                            f"{ROW_VERSION}: rerun the census on the sweep folders")
    return rows


def write_rows(path: Path, rows: list[dict]) -> Path:
    with atomic(path) as tmp:
        tmp.write_text("".join(json.dumps(r, separators=(",", ":")) + "\n" for r in rows))
    return path


def write_settings(path: Path, settings: dict[str, dict]) -> Path:
    """The recipes' fixed settings beside the rows, so `--rows` can name them too."""
    return write_text(path, json.dumps(settings, indent=1) + "\n")


# ---- tables ----

def by_recipe(rows: list[dict]) -> dict[str, list[dict]]:
    out: dict[str, list[dict]] = {}
    for r in rows:
        out.setdefault(r["recipe"], []).append(r)
    return out


def _pct(k: int, total: int) -> str:
    return f"{k} ({100 * k / total:.0f} %)" if total else "0"


def wilson_interval(k: int, total: int, z: float = 1.96) -> tuple[float, float]:
    """95 % Wilson score interval (z = 1.96) for a share k / total of seeds: (low, high), as
    fractions. Unlike k/total +- z*SE it stays inside [0, 1] and is not empty at k = 0 or
    k = total, where small censuses live. Source: E. B. Wilson, JASA 22 (1927) 209-212."""
    if total <= 0:
        raise ValueError("total must be positive")
    p, z2 = k / total, z * z
    centre = (p + z2 / (2 * total)) / (1 + z2 / total)
    half = z * math.sqrt(p * (1 - p) / total + z2 / (4 * total * total)) / (1 + z2 / total)
    return max(0.0, centre - half), min(1.0, centre + half)


def _rate(k: int, total: int) -> str:
    """k (share %; its 95 % Wilson interval)."""
    if not total:
        return "0"
    lo, hi = wilson_interval(k, total)
    return f"{k} ({100 * k / total:.0f} %; {100 * lo:.0f}–{100 * hi:.0f} %)"


def _spread(values: list, fmt: str) -> str:
    v = [x for x in values if x is not None]
    if not v:
        return "–"
    return f"{format(float(np.median(v)), fmt)} [{format(min(v), fmt)}, {format(max(v), fmt)}]"


def outcome_table(rows: list[dict]) -> str:
    """One line per recipe: seeds, outcome counts (default gauge, then bias gauge), accuracy and
    errors (median [min, max])."""
    out = ["| recipe | seeds | outcomes (seeds) | any orbit | any orbit at 100 % train | bias gauge: outcomes "
           "| bias gauge: any orbit | train acc | held-out acc | eq error pooled | eq error worst input | dead heads |",
           "|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for recipe, rs in by_recipe(rows).items():
        counts = Counter(r["outcome"] for r in rs).most_common()
        any_orbit = [r for r in rs if r["orbits"]]
        full = [r for r in any_orbit if (r["train_acc"] or 0) >= 1.0]
        bias = Counter(r["outcome_bias_gauge"] for r in rs).most_common()
        bias_any = sum(r["outcome_bias_gauge"] != "none" for r in rs)
        out.append(f"| {recipe} | {len(rs)} | " + ", ".join(f"{o} ×{k}" for o, k in counts)
                   + f" | {_rate(len(any_orbit), len(rs))} | {_rate(len(full), len(rs))}"
                   + " | " + ", ".join(f"{o} ×{k}" for o, k in bias) + f" | {_rate(bias_any, len(rs))}"
                   f" | {_spread([100 * r['train_acc'] for r in rs if r['train_acc'] is not None], '.1f')} %"
                   f" | {_spread([100 * r['heldout_acc'] for r in rs if r['heldout_acc'] is not None], '.1f')} %"
                   f" | {_spread([r['eq_error_pooled'] for r in rs], '.1e')}"
                   f" | {_spread([r['eq_error_worst_input'] for r in rs], '.1e')}"
                   f" | {_spread([r['n_dead'] for r in rs], '.0f')} |")
    return "\n".join(out)


def structure_table(rows: list[dict]) -> str:
    """Every verified orbit by recipe, size and frequency: how many, on which seeds, their
    worst errors and lock-in epochs."""
    out = ["| recipe | orbit size | ω (r) | orbits | seeds | worst error | locked in at epoch | train acc of those seeds |",
           "|---|---|---|---|---|---|---|---|"]
    for recipe, rs in by_recipe(rows).items():
        kinds: dict[tuple[int, int], list[tuple[dict, dict]]] = {}
        for r in rs:
            for o in r["orbits"]:
                kinds.setdefault((o["size"], o["omega"]), []).append((r, o))
        if not kinds:
            out.append(f"| {recipe} | none | | 0 | | | | |")
        for (size, w), items in sorted(kinds.items(), key=lambda kv: (-kv[0][0], kv[0][1])):
            seeds = sorted({r["seed"] for r, _ in items})
            out.append(f"| {recipe} | {size} | {w} | {len(items)} | {', '.join(map(str, seeds))} "
                       f"| {_spread([100 * o['worst'] for _, o in items], '.2f')} % "
                       f"| {_spread([o['locked_in'] for _, o in items], '.0f')} "
                       f"| {_spread([100 * r['train_acc'] for r, _ in items], '.1f')} % |")
    return "\n".join(out)


def agreement_table(rows: list[dict]) -> str:
    """For every pair of recipes sharing seeds: how many seeds end with the same orbit
    structure (sizes), and the seeds that differ."""
    groups = by_recipe(rows)
    names = list(groups)
    out = ["| recipe A | recipe B | seeds in both | same outcome | differ (seed: A vs B) |", "|---|---|---|---|---|"]
    for i, a in enumerate(names):
        for b in names[i + 1:]:
            A = {r["seed"]: r["outcome"] for r in groups[a]}
            B = {r["seed"]: r["outcome"] for r in groups[b]}
            both = sorted(set(A) & set(B))
            if not both:
                continue
            diff = [s for s in both if A[s] != B[s]]
            out.append(f"| {a} | {b} | {len(both)} | {_pct(len(both) - len(diff), len(both))} | "
                       + (", ".join(f"{s}: {A[s]} vs {B[s]}" for s in diff) or "none") + " |")
    return "\n".join(out) if len(out) > 2 else ""


def screen_stats(rows: list[dict], epoch: int, rule: str = "fits") -> dict:
    """How well the frequency groups at `epoch` predict the final orbits, over runs that have
    a snapshot there: heads live at both with an unchanged omega (fraction), final orbits whose
    omega group qualified at `epoch` under `rule` (recall), qualifying groups that ended as an
    orbit at that omega (precision), and seeds flagged (a qualifying group) vs seeds with an orbit."""
    key = str(epoch)
    same = live = 0
    orbits = orbits_hit = flagged_groups = flagged_hit = 0
    seeds = flagged_seeds = orbit_seeds = both = 0
    for r in rows:
        if key not in r["omega"] or int(key) == r["epochs"]:
            continue
        seeds += 1
        early, final = r["omega"][key], r["omega"][str(r["epochs"])]
        pairs = [(a, b) for a, b in zip(early, final) if a and b]
        live += len(pairs)
        same += sum(a == b for a, b in pairs)
        fit = fitting(groups_of(early), r["n"], rule)
        formed = {o["omega"] for o in r["orbits"]}
        orbits += len(r["orbits"])
        orbits_hit += sum(o["omega"] in fit for o in r["orbits"])
        flagged_groups += len(fit)
        flagged_hit += len(fit & formed)
        flagged_seeds += bool(fit)
        orbit_seeds += bool(formed)
        both += bool(fit) and bool(formed)
    return {"epoch": epoch, "runs": seeds, "omega_kept": same / live if live else None,
            "orbits": orbits, "recall": orbits_hit / orbits if orbits else None,
            "groups_flagged": flagged_groups, "precision": flagged_hit / flagged_groups if flagged_groups else None,
            "seeds_flagged": flagged_seeds, "seeds_with_orbit": orbit_seeds, "seeds_both": both}


def screen_epochs_of(rows: list[dict]) -> list[int]:
    return sorted({int(e) for r in rows for e in r["omega"] if int(e) != r["epochs"]})


def screen_table(rows: list[dict]) -> str:
    """Per recipe and screen epoch: `screen_stats` under both rules."""
    out = ["| recipe | epoch | runs | heads keeping their ω to the end | final orbits whose group fits (has room) "
           "| fitting groups that became an orbit | seeds flagged / with an orbit / both |",
           "|---|---|---|---|---|---|---|"]

    def f(x):
        return "–" if x is None else f"{100 * x:.0f} %"
    for recipe, rs in by_recipe(rows).items():
        for e in screen_epochs_of(rs):
            s, room = screen_stats(rs, e, "fits"), screen_stats(rs, e, "room")
            recall = f"{f(s['recall'])} ({f(room['recall'])}) of {s['orbits']}" if s["orbits"] else "no orbit"
            out.append(f"| {recipe} | {e:,} | {s['runs']} | {f(s['omega_kept'])} | {recall} | {f(s['precision'])} of "
                       f"{s['groups_flagged']} | {s['seeds_flagged']} / {s['seeds_with_orbit']} / {s['seeds_both']} |")
    return "\n".join(out)


def largest_groups(rows: list[dict]) -> str:
    """Per recipe: the largest final frequency group among the omegas whose orbits have n/2
    heads (the seed's 12-orbit: omega 2 or 10 when n = 24), as a count of seeds per group size."""
    out = []
    for recipe, rs in by_recipe(rows).items():
        best = []
        for r in rs:
            g = groups_of(r["omega"][str(r["epochs"])])
            best.append(max([c for w, c in g.items() if orbit_order(w, r["n"]) == r["n"] // 2] or [0]))
        hist = Counter(best)
        out.append(f"- {recipe}: " + ", ".join(f"{k} heads: {hist[k]}" for k in sorted(hist, reverse=True)))
    return "\n".join(out)


def finished(rows: list[dict]) -> list[dict]:
    """Rows of runs trained to their last epoch (not stopped at --stop-at)."""
    return [r for r in rows if not r.get("stopped")]


def screened_table(rows: list[dict]) -> str:
    """Runs stopped early (`headmovies sweep --stop-at`): per recipe, the seeds whose groups at
    the stop epoch fit an orbit, by orbit order, largest first; the rest in one count."""
    out = []
    for recipe, rs in by_recipe([r for r in rows if r.get("stopped")]).items():
        by_order: dict[int, list[str]] = {}
        for r in rs:
            g = groups_of(r["omega"][str(r["epochs"])])
            for w in sorted(fitting(g, r["n"])):
                by_order.setdefault(orbit_order(w, r["n"]), []).append(f"{r['seed']} (ω {w}: {g[w]})")
        epochs = sorted({r["epochs"] for r in rs})
        out.append(f"- **{recipe}**: {len(rs)} runs stopped at epoch {', '.join(map(str, epochs))}; "
                   f"{sum(not fitting(groups_of(r['omega'][str(r['epochs'])]), r['n']) for r in rs)} without a fitting group")
        for order in sorted(by_order, reverse=True):
            out.append(f"  - a group fits {order}-orbits: seeds {', '.join(by_order[order])}")
    return "\n".join(out)


def census_markdown(rows: list[dict], settings: dict[str, dict]) -> str:
    screened = screened_table(rows)
    rows_all, rows = rows, finished(rows)
    parts = ["# Orbit census", "",
             "Made by `headmovies orbits census` from the sweeps below (one row per run in `census.jsonl`). "
             "Outcome: sizes of the verified orbits (2 % tolerance, default gauge) of the last snapshot; "
             "bias gauge: the same check with each head's key-independent OV part set aside (`--gauge bias`); "
             "ω (r): the orbit's frequency. Values: median [min, max] over seeds. Shares of seeds come with "
             "their 95 % Wilson score interval (how far the share over all seeds may lie from this sample's).", "",
             "## Recipes", ""]
    for recipe, s in settings.items():
        parts.append(f"- **{recipe}**: " + ("settings unknown (no census.settings.json beside the rows)" if s is None
                                            else " ".join(f"{k}={v}" for k, v in s.items())
                                            or "the defaults of the headmovies that trained it"))
    if rows:
        parts += ["", "## Outcomes", "", outcome_table(rows), "", "## Orbits", "", structure_table(rows), ""]
        agree = agreement_table(rows)
        if agree:
            parts += ["## Recipes compared seed by seed", "", agree, ""]
        half = sorted({r["n"] for r in rows})
        omegas = ", ".join(f"ω ∈ {{{', '.join(str(w) for w in range(1, n // 2 + 1) if orbit_order(w, n) == n // 2)}}}"
                           f" for C_{n}" for n in half)
        parts += ["## Early screen: do the frequency groups predict the orbits?", "",
                  "A group of c live heads at ω fits when c is a multiple of N_ω = n / gcd(ω, n) (has room: c ≥ N_ω).",
                  "", screen_table(rows) if screen_epochs_of(rows) else
                  "No run has a snapshot at the screen epochs (`--screen-epochs`) before its last one.", "",
                  f"## Largest final group at an ω whose orbits have n/2 heads (the seed's 12-orbit; {omegas}), "
                  "seeds per size", "", largest_groups(rows), ""]
    if screened:
        parts += ["## Screened runs (stopped early), candidates for the full schedule", "",
                  "Continue candidates with the sweep's own command without --stop-at (its settings as "
                  "recorded; a sweep refuses others):", ""]
        for recipe in sorted({r["recipe"] for r in rows_all if r.get("stopped")}):
            sets = "".join(f" --set {k}={v}" for k, v in (settings.get(recipe) or {}).items())
            parts += [f"    headmovies sweep orbits --out PATH/TO/{recipe} --seeds SEEDS{sets}", ""]
        parts += [screened, ""]
    return "\n".join(parts)


# ---- figure ----

def census_figure(rows: list[dict], settings: dict[str, dict]):
    """Four panels: outcome shares per recipe (default gauge; bias gauge below); train accuracy against the pooled equivariance
    error per run; each verified orbit's lock-in epoch; and the early screen (heads keeping
    their omega, orbits whose group fitted) against the screen epoch."""
    from matplotlib.figure import Figure
    from headmovies.render.orbits.colours import orbit_colour
    rows = finished(rows)
    groups = by_recipe(rows)
    names = list(groups)
    outcomes = [o for o, _ in Counter([r["outcome"] for r in rows]
                                      + [r["outcome_bias_gauge"] for r in rows]).most_common()]
    outcomes = ["none"] + [o for o in outcomes if o != "none"] if "none" in outcomes else outcomes
    # one colour per orbit size in every panel; an outcome of one size takes that size's colour
    sizes = sorted({o["size"] for r in rows for o in r["orbits"] + r["orbits_bias_gauge"]}, reverse=True)
    size_colour = {k: orbit_colour(i) for i, k in enumerate(sizes)}
    combos = [o for o in outcomes if o != "none" and "+" in o]
    colour = {o: size_colour[int(o)] for o in outcomes if o != "none" and "+" not in o}
    colour.update({o: orbit_colour(len(sizes) + i) for i, o in enumerate(combos)})
    colour["none"] = "0.82"
    markers = "os^Dvp"
    fig = Figure(figsize=(12, 9.4), layout="constrained")
    (a, b), (c, d) = fig.subplots(2, 2)

    y = np.arange(len(names))[::-1]
    # thick bar: the default gauge (what the census counts); thin hatched bar below: bias gauge
    for key, dy, height, hatch, size in (("outcome", 0.14, 0.52, None, 8), ("outcome_bias_gauge", -0.3, 0.3, "///", 7)):
        left = np.zeros(len(names))
        for o in outcomes:
            share = np.array([sum(r[key] == o for r in groups[k]) / len(groups[k]) for k in names])
            bars = a.barh(y + dy, share, height=height, left=left, color=colour[o], edgecolor="white", hatch=hatch,
                          label=o if key == "outcome" else None)
            for bar, s, k in zip(bars, share, names):
                if s >= 0.04:
                    a.text(bar.get_x() + bar.get_width() / 2, bar.get_y() + bar.get_height() / 2,
                           str(sum(r[key] == o for r in groups[k])), ha="center", va="center", fontsize=size,
                           bbox=dict(facecolor="white", edgecolor="none", pad=0.6, alpha=0.85) if hatch else None)
            left += share
        for yk, k in zip(y + dy + height / 2, names):   # on the bar's top edge, clear of the counts
            n_any = sum(r[key] != "none" for r in groups[k])
            lo, hi = wilson_interval(n_any, len(groups[k]))
            a.errorbar([1 - n_any / len(groups[k])], [yk], xerr=[[hi - n_any / len(groups[k])],
                       [n_any / len(groups[k]) - lo]], color="black", lw=1.2, capsize=2.5, zorder=4)
    a.set_yticks(y, [f"{k}\n({len(groups[k])} seeds)" for k in names], fontsize=8)
    a.set_xlim(0, 1)
    a.set_xlabel("fraction of seeds (numbers: seeds)")
    a.set_title("verified orbit structure at the last snapshot\n(lower, hatched bars: the same check in the bias gauge;"
                "\nwhiskers: 95 % interval of the share of seeds with any orbit)",
                fontsize=10, pad=14 + 15 * (1 + -(-len(outcomes) // 8)))      # room for the legend's rows
    a.legend(title="orbit sizes", fontsize=8, title_fontsize=8, loc="lower left", bbox_to_anchor=(0, 1.0),
             ncol=min(len(outcomes), 8), frameon=False, columnspacing=1.0, handlelength=1.6)

    for i, k in enumerate(names):
        rs = groups[k]
        for o in outcomes:
            sel = [r for r in rs if r["outcome"] == o and r["eq_error_pooled"] and r["train_acc"] is not None]
            if sel:
                b.scatter([r["eq_error_pooled"] for r in sel], [100 * r["train_acc"] for r in sel],
                          marker=markers[i % len(markers)], s=22 if o == "none" else 48, color=colour[o],
                          edgecolor="0.3" if o != "none" else "none", linewidth=0.5, zorder=3 if o != "none" else 2)
        b.scatter([], [], marker=markers[i % len(markers)], color="0.5", label=k)
    b.set_xscale("log")
    b.set_xlabel("equivariance error, pooled (last snapshot)")
    b.set_ylabel("train accuracy (%)")
    b.set_title("each run: accuracy against equivariance (colour: orbit sizes)")
    b.legend(fontsize=8, title="recipe (marker)", frameon=False)
    b.grid(alpha=0.3)

    for i, k in enumerate(names):
        rs = groups[k]
        starts = {r["phase2_start"] for r in rs if r["phase2_start"]}
        for s in starts:
            c.plot([s, s], [y[i] - 0.4, y[i] + 0.4], color="0.4", lw=1, ls="--")
        ends = {r["epochs"] for r in rs}
        for e in ends:
            c.plot([e, e], [y[i] - 0.4, y[i] + 0.4], color="0.2", lw=1.5)
        pts = [(o["locked_in"], o["size"]) for r in rs for o in r["orbits"] if o["locked_in"] is not None]
        if pts:
            rng = np.random.default_rng(i)
            ep = np.array([p[0] for p in pts], float)
            sz = np.array([p[1] for p in pts])
            jitter = rng.uniform(-0.3, 0.3, len(pts))
            for size in sorted(set(sz)):
                sel = sz == size
                c.scatter(ep[sel], y[i] + jitter[sel], s=14 + 8 * size, alpha=0.8, color=size_colour[size],
                          edgecolor="0.2", linewidth=0.4)
    for size in sizes:
        c.scatter([], [], s=14 + 8 * size, color=size_colour[size], edgecolor="0.2", linewidth=0.4,
                  label=f"{size}-orbit")
    c.plot([], [], color="0.4", ls="--", label="phase 2 starts")
    c.plot([], [], color="0.2", lw=1.5, label="last epoch")
    c.set_yticks(y, names, fontsize=8)
    c.set_xlabel("epoch")
    c.set_title("when each final orbit locks in (verified at every later snapshot)")
    c.legend(fontsize=8, frameon=False, loc="upper center", bbox_to_anchor=(0.5, -0.12), ncol=len(sizes) + 2)
    if not sizes:
        c.text(0.5, 0.5, "no verified orbit", transform=c.transAxes, ha="center", va="center", color="0.4")
    c.grid(axis="x", alpha=0.3)

    for i, k in enumerate(names):
        rs = groups[k]
        eps = screen_epochs_of(rs)
        if not eps:
            continue
        stats = [screen_stats(rs, e) for e in eps]
        line, = d.plot(eps, [100 * (s["omega_kept"] or 0) for s in stats], marker=markers[i % len(markers)],
                       label=f"{k}: heads keeping their ω")
        orbits = max(s["orbits"] for s in stats)
        if orbits:                      # few orbits make a coarse line: the label says how few
            d.plot(eps, [100 * (s["recall"] or 0) for s in stats], marker=markers[i % len(markers)], ls="--",
                   color=line.get_color(), label=f"{k}: final orbits whose group fits (of {orbits})")
    d.set_ylim(0, 102)
    d.set_xlabel("screen epoch")
    d.set_ylabel("%")
    d.set_title("early screen: frequency groups at an early epoch vs the end")
    if d.get_legend_handles_labels()[0]:
        d.legend(fontsize=6.5, frameon=False, loc="upper center", bbox_to_anchor=(0.5, -0.12), ncol=2)
    else:
        d.text(0.5, 0.5, "no snapshot at the screen epochs\n(--screen-epochs)", transform=d.transAxes,
               ha="center", va="center", color="0.4")
    d.grid(alpha=0.3)
    return fig


def write_census(out: Path, rows: list[dict], settings: dict[str, dict],
                 formats: Sequence[str] = FIGURE_FORMATS, write_jsonl: bool = True) -> list[Path]:
    """Write out/census.jsonl (unless rebuilding from it), census.md and census.{png,svg}; a
    figure of an earlier census that this one does not draw (another format, or a screen alone,
    which has no final outcomes) is removed, so the folder never pairs new tables with an old figure."""
    paths = [write_rows(out / "census.jsonl", rows)] if write_jsonl else []
    paths.append(write_text(out / "census.md", census_markdown(rows, settings)))
    drawn = tuple(formats) if finished(rows) else ()
    if drawn:
        paths += save_figure(census_figure(rows, settings), out, "census", drawn, dpi=110)
    for fmt in set(FIGURE_FORMATS) - set(drawn):
        (out / f"census.{fmt}").unlink(missing_ok=True)
    return paths
