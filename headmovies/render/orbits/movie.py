"""The orbit movie (seed 000; docs/movie.md): run file -> circuits -> irrep coordinates ->
trailing-dot panels -> encoder.

Each frame is one snapshot; each dot one head at (Re X^(u,v), Im X^(u,v)) of its centred QK
circuit M_h or OV circuit R_h (`render.core.projections`; docs/math.md, "Irrep coordinates").
Heads of one verified orbit share a colour (`orbits.check` on the final snapshot, on the
full matrices). Snapshots are read in chunks as they are drawn, so memory does not grow
with the run.
"""
from __future__ import annotations

import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Iterator, Sequence

import numpy as np

from headmovies.errors import RunFileError, UserError
from headmovies.render.core.circuits import CIRCUIT_WEIGHTS, centre_ov, centre_qk, ov_circuit, qk_circuit
from headmovies.render.core.encode import FORMATS, EncodeResult, Quality, encode, parse_formats
from headmovies.render.core.outputs import prepare_out_dir
from headmovies.render.core.panels import TRAIL_EPOCHS, PanelFigure, frame_states
from headmovies.render.core.projections import Panel, irrep_coordinate, polygon_order
from headmovies.render.core.reader import Run
from headmovies.render.orbits.check import (CIRCUIT_NAMES, DEAD_TOL, TOL, OrbitReport, run_report,
                                           snapshot_circuits)
from headmovies.render.orbits.colours import (DEAD_COLOUR, ONE_COLOUR, OTHER_COLOUR, orbit_colour,
                                             shape_name)
from headmovies.render.orbits.panel_choice import resolve_panels


def require_group(run: Run) -> tuple[int, int]:
    """(n, m) of the run's symmetry group; RunFileError if the run has none."""
    if run.n is None or run.m is None:
        raise RunFileError(f"{run.path} ({run.experiment}) has no group data (n, m): irrep panels need "
                           "a run of a C_n-symmetric experiment such as orbits")
    return run.n, run.m


def check_panels(run: Run, panels: Sequence[Panel]) -> tuple[int, int]:
    """(n, m) of `run` after checking that every panel can be drawn from it: the run has group
    data, the weights of each panel's circuit, and token-indexed circuits of size n x n.
    Raises RunFileError / UserError with one line."""
    if not panels:
        raise UserError("no panels given")
    n, m = require_group(run)
    shapes = {name: run.f["snapshots"][name].shape[1:] for name in run.weight_names}
    for panel in panels:
        names = CIRCUIT_WEIGHTS[panel.circuit]
        missing = [w for w in names if w not in shapes]
        if missing:
            raise RunFileError(f"{run.path} ({run.experiment}) has no weights {missing}, so panel {panel} "
                               f"({panel.circuit.upper()} circuit) cannot be drawn")
        if shapes["W_E"][0] != n or (panel.circuit == "ov" and shapes["W_U"][-1] != n):
            raise RunFileError(f"{run.path}: panel {panel} needs {n} tokens and {n} output classes "
                               f"(C_{n}); W_E is {shapes['W_E']}, W_U is {shapes.get('W_U')}")
    return n, m


def panel_coordinates(run: Run, panels: Sequence[Panel], indices: np.ndarray | None = None,
                      chunk: int = 32) -> Iterator[tuple[int, np.ndarray]]:
    """(epoch, complex [P, H]) per snapshot: X^(u, v) of each head's centred circuit (the
    gauge-invariant part: centring leaves every coordinate with u, v != 0 unchanged)."""
    need = sorted({w for p in panels for w in CIRCUIT_WEIGHTS[p.circuit]})
    kinds = {p.circuit for p in panels}
    for epoch, w in run.iter_weights(need, chunk=chunk, indices=indices):
        circ = {}
        if "qk" in kinds:
            circ["qk"] = centre_qk(qk_circuit(w["W_E"], w["W_Q"], w["W_K"]))       # [H, n, n]
        if "ov" in kinds:
            circ["ov"] = centre_ov(ov_circuit(w["W_E"], w["W_V"], w["W_O"], w["W_U"]))  # [H, n, n]
        yield epoch, np.stack([irrep_coordinate(circ[p.circuit], p.u, p.v) for p in panels])


@dataclass
class Colouring:
    colours: list            # per head
    legend: list             # [(label, colour)]
    draw_order: list[int]    # other heads first, the largest orbit on top
    note: str                # how heads were coloured, in words


def n_heads_of(run: Run) -> int:
    name = next(w for w in ("W_Q", "W_K", "W_V", "W_O") if w in run.weight_names)
    return int(run.f["snapshots"][name].shape[1])


def plain_colouring(n_heads: int, note: str) -> Colouring:
    return Colouring([ONE_COLOUR] * n_heads, [], list(range(n_heads)), note)


def orbit_colouring(report: OrbitReport, panels: Sequence[Panel], final: np.ndarray, n: int, m: int) -> Colouring:
    """Colours from the orbit report of the final snapshot (`colours`): one per orbit, grey for
    live heads in no orbit, light grey for dead heads.

    final: complex [P, H], the heads' coordinates in the panels at the final snapshot. Legend:
    per orbit, for each rotation frequency r of the panels, the polygon it draws there
    (n / gcd(r, n) vertices) or "at 0" when it sits at the origin in every panel of that r
    (within 1 % of the panel's largest radius); its stabiliser forces that whenever
    r * size is not a multiple of n."""
    H = report.n_heads
    orbits = sorted(report.orbits, key=lambda o: (-int(o.size), min(o.heads)))
    colours = [OTHER_COLOUR] * H
    legend, on_top = [], []
    rs = list(dict.fromkeys(p.r(n, m) for p in panels))
    scale = np.abs(final).max(axis=1, keepdims=True)                                        # [P, 1]
    shown = np.abs(final) > 0.01 * np.maximum(scale, 1e-300)                                # [P, H]
    for i, orbit in enumerate(orbits):
        col = orbit_colour(i)
        heads = [int(h) for h in orbit.heads]
        for h in heads:
            colours[h] = col
        size = int(orbit.size)
        at_r = {r: (r * size) % n == 0 and any(shown[p, heads].any() for p, pan in enumerate(panels)
                                                if pan.r(n, m) == r) for r in rs}
        shapes = ", ".join(f"{shape_name(polygon_order(r, n))} for r={r}" if at_r[r] else f"at 0 for r={r}"
                           for r in rs)
        count = f"{size} heads" if len(heads) == size else f"size {size}, {len(heads)} heads"
        legend.append((f"orbit of {count}: {shapes}", col))
        on_top = heads + on_top
    dead = set(report.dead)
    for h in dead:
        colours[h] = DEAD_COLOUR
    others = [h for h in range(H) if colours[h] == OTHER_COLOUR]
    if others:
        legend.append((f"{len(others)} heads in no orbit", OTHER_COLOUR))
    if dead:
        legend.append((f"{len(dead)} dead heads", DEAD_COLOUR))
    sizes = ", ".join(str(int(o.size)) for o in orbits)
    found = (f"{len(orbits)} verified orbit{'s' if len(orbits) > 1 else ''} (size {sizes})"
             if orbits else "no verified orbit")
    back = sorted(dead) + others
    return Colouring(colours, legend, back + [h for h in on_top if h not in back],
                     f"final snapshot: {found}, {len(others)} heads in none, {len(dead)} dead")


def final_report(run: Run, tol: float = TOL, dead_tol: float = DEAD_TOL):
    """(report, M, R) of the final snapshot, or (None, None, None) when the run lacks the
    weights or group data of a full orbit check (explicit panels can still be drawn)."""
    if any(w not in run.weight_names for w in CIRCUIT_NAMES):
        return None, None, None
    report = run_report(run, None, tol, dead_tol)
    M, R = snapshot_circuits(run, len(run) - 1)
    return report, M, R


def caption(run: Run) -> Callable[[int], str]:
    """Per-epoch text from the logged metrics (train / held-out accuracy, both equivariance
    errors: pooled and worst input, docs/math.md)."""
    met = run.metrics()
    if "epoch" not in met:
        return lambda epoch: ""
    index = {int(e): i for i, e in enumerate(met["epoch"])}
    parts = [("train_acc", "train {:.1%}"), ("heldout_acc", "held-out {:.1%}"),
             ("eq_error_pooled", "eq. error pooled {:.1e}"), ("eq_error_worst_input", "worst input {:.1e}")]
    parts = [(k, f) for k, f in parts if k in met]

    def caption(epoch: int) -> str:
        i = index.get(int(epoch))
        return "" if i is None else "   ".join(f.format(met[k][i]) for k, f in parts)
    return caption


def make_movie(run_path: str | Path, out_dir: str | Path, panels: Sequence[str] | None = None,
               formats: Sequence[str] | str = FORMATS, fps: float = 24.0, hold_s: float = 2.0,
               basename: str = "orbits", panel_px: int = 480, quality: Quality = Quality(),
               trail_epochs: float = TRAIL_EPOCHS, progress: bool = True, colour_orbits: bool = True,
               log: Callable[[str], None] = lambda s: print(s, file=sys.stderr)) -> EncodeResult:
    """Render the orbit movie of `run_path` into `out_dir/basename.{mp4,webm,gif,png,html}`.

    panels: `--panels` words (`panel_choice.resolve_panels`): None or ['default'] (the seed's
    four when the run's orbits show in them, else automatic), ['auto'], ['seed'], or
    CIRCUIT:U,V planes. The orbit check of the final snapshot runs once and serves both the
    panel choice and the colours. One frame per snapshot, then the last frame held `hold_s`
    seconds. Every check that can fail on user input (formats, run file, weights, output
    folder) runs before any frame is drawn; errors are UserError (one line).
    """
    formats = parse_formats(formats)
    out_dir = Path(out_dir)
    with Run(run_path) as run:
        n, m = require_group(run)
        report, M, R = final_report(run)
        chosen, note = resolve_panels(panels, report, M, R, n, m)
        n, m = check_panels(run, chosen)
        prepare_out_dir(out_dir)
        if colour_orbits and report is not None:
            final = next(panel_coordinates(run, chosen, indices=np.array([len(run) - 1])))[1]
            colouring = orbit_colouring(report, chosen, final, n, m)
        else:
            colouring = plain_colouring(n_heads_of(run), "one colour (orbit colours off)" if not colour_orbits
                                        else "one colour (the run lacks weights of the orbit check)")
        titles = [p.title(n, m) for p in chosen]
        header = (f"{run.experiment}  ·  {run.path.name}  ·  C_{n} shifts tokens by s, outputs by {m}s  ·  "
                  f"{len(colouring.colours)} heads")
        figure = PanelFigure(titles, colouring.colours, colouring.legend, header=header, panel_px=panel_px,
                             draw_order=colouring.draw_order, trail_epochs=trail_epochs)
        states = frame_states(panel_coordinates(run, chosen), trail_epochs=trail_epochs, caption=caption(run))
        frames = (figure.render(s, rgba=True) for s in states)
        total = len(run) + int(round(hold_s * fps))
        log(f"{run.path}: {len(run)} snapshots (epochs {run.epochs[0]}..{run.epochs[-1]}), "
            f"{note}: {' '.join(map(str, chosen))}; {colouring.note}")
        bar = _progress(total, progress)
        try:
            result = encode(frames, out_dir, basename, fps=fps, hold_s=hold_s, formats=formats, quality=quality,
                            on_frame=bar.update if bar else None,
                            on_stage=(lambda s: bar.set_postfix_str(s)) if bar else None)
        finally:
            if bar:
                bar.close()
            figure.close()
    return result


def _progress(total: int, enabled: bool):
    if not enabled:
        return None
    from tqdm import tqdm
    return tqdm(total=total, desc="movie", unit="frame", dynamic_ncols=True)
