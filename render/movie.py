"""The orbit movie (seed 000, SPEC §1): run file -> circuits -> irrep coordinates -> trailing-dot
panels -> encoder.

Each frame is one snapshot; each dot one head at (Re X^(u,v), Im X^(u,v)) of its centred QK
circuit M_h or OV circuit R_h (`render.projections`). Heads of one verified orbit share a
colour when `render.orbits.check_orbits` is available (checked on the final snapshot, on the
full matrices); otherwise every head has one colour. Snapshots are read in chunks as they are
drawn, so memory does not grow with the run.
"""
from __future__ import annotations

import math
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Iterator, Sequence

import numpy as np

from render.circuits import CIRCUIT_WEIGHTS, centre_ov, centre_qk, ov_circuit, qk_circuit
from render.encode import DEFAULT_FORMATS, EncodeResult, Quality, encode, parse_formats, prepare_out_dir
from render.panels import PanelFigure, frame_states
from render.projections import SEED_PANELS, Panel, irrep_coordinate, parse_panel, polygon_order
from render.reader import Run
from runfile import RunFileError, UserError

ORBIT_COLOURS = ("C0", "C1", "C2", "C3", "C4", "C5", "C6", "C8", "C9")   # blue, orange, ...; C7 is grey
OTHER_COLOUR = "#a0a0a0"
ONE_COLOUR = "C0"
SHAPES = {1: "point", 2: "pair", 3: "triangle", 4: "square"}


def check_panels(run: Run, panels: Sequence[Panel]) -> tuple[int, int]:
    """(n, m) of `run` after checking that every panel can be drawn from it: the run has group
    data, the weights of each panel's circuit, and token-indexed circuits of size n x n.
    Raises RunFileError / UserError with one line."""
    if not panels:
        raise UserError("no panels given")
    if run.n is None or run.m is None:
        raise RunFileError(f"{run.path} ({run.experiment}) has no group data (n, m): irrep panels need "
                           "a run of a C_n-symmetric experiment such as orbits")
    n, m = run.n, run.m
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


def _n_heads(run: Run) -> int:
    name = next(w for w in ("W_Q", "W_K", "W_V", "W_O") if w in run.weight_names)
    return int(run.f["snapshots"][name].shape[1])


def plain_colouring(n_heads: int, note: str) -> Colouring:
    return Colouring([ONE_COLOUR] * n_heads, [], list(range(n_heads)), note)


def _shape(k: int) -> str:
    return SHAPES.get(k, f"{k}-gon")


def orbit_colouring(run: Run, panels: Sequence[Panel], n: int, m: int,
                    warn: Callable[[str], None] = lambda s: print(s, file=sys.stderr)) -> Colouring:
    """Colours from the orbit check on the final snapshot: largest orbit blue, next orange,
    then the default cycle; heads in no orbit grey. One colour if `render.orbits` is absent
    or the run lacks the weights of a full check. Uses `report.orbits[i].heads/.size` and
    `report.dead`.

    Legend: per orbit, for each rotation frequency r of the panels, the polygon it draws
    there (n / gcd(r, n) vertices) or "at 0" when it sits at the origin in every panel of
    that r on the final snapshot (within 1 % of the panel's largest radius); its stabiliser
    forces that whenever r * size is not a multiple of n."""
    n_heads = _n_heads(run)
    plain = plain_colouring(n_heads, "one colour (no orbit check)")
    try:
        from render.orbits import check_orbits
    except ImportError:
        return plain
    names = ("W_E", "W_Q", "W_K", "W_V", "W_O", "W_U")
    if any(w not in run.weight_names for w in names):
        return plain
    w = run.weights(-1, list(names))
    M = qk_circuit(w["W_E"], w["W_Q"], w["W_K"])
    R = ov_circuit(w["W_E"], w["W_V"], w["W_O"], w["W_U"])
    try:
        report = check_orbits(M, R, n, m, tol=0.02)
        orbits = sorted(report.orbits, key=lambda o: (-int(o.size), min(o.heads)))
    except Exception as exc:  # a colouring problem must not cost the movie
        warn(f"warning: orbit check failed ({type(exc).__name__}: {exc}); heads drawn in one colour")
        return plain
    colours = [OTHER_COLOUR] * n_heads
    legend, on_top = [], []
    rs = list(dict.fromkeys(p.r(n, m) for p in panels))
    final = next(panel_coordinates(run, panels, indices=np.array([len(run) - 1])))[1]        # [P, H]
    scale = np.abs(final).max(axis=1, keepdims=True)                                        # [P, 1]
    shown = np.abs(final) > 0.01 * np.maximum(scale, 1e-300)                                # [P, H]
    for i, orbit in enumerate(orbits):
        col = ORBIT_COLOURS[i % len(ORBIT_COLOURS)]
        heads = [int(h) for h in orbit.heads]
        for h in heads:
            colours[h] = col
        size = int(orbit.size)
        at_r = {r: (r * size) % n == 0 and any(shown[p, heads].any() for p, pan in enumerate(panels)
                                                if pan.r(n, m) == r) for r in rs}
        shapes = ", ".join(f"{_shape(polygon_order(r, n))} for r={r}" if at_r[r] else f"at 0 for r={r}" for r in rs)
        count = f"{size} heads" if len(heads) == size else f"size {size}, {len(heads)} heads"
        legend.append((f"orbit of {count}: {shapes}", col))
        on_top = heads + on_top
    others = [h for h in range(n_heads) if colours[h] == OTHER_COLOUR]
    dead = set(getattr(report, "dead", []))
    n_dead = sum(h in dead for h in others)
    if others:
        legend.append((f"{len(others)} heads in no orbit" + (f" ({n_dead} dead)" if n_dead else ""), OTHER_COLOUR))
    sizes = ", ".join(str(int(o.size)) for o in orbits)
    found = (f"{len(orbits)} verified orbit{'s' if len(orbits) > 1 else ''} (size {sizes})"
             if orbits else "no verified orbit")
    return Colouring(colours, legend, others + [h for h in on_top if h not in others],
                     f"final snapshot: {found}, {len(others) - n_dead} heads in none, {n_dead} dead")


def choose_panels(run: Run, words: Sequence[str] | None) -> tuple[list[Panel], str]:
    """Panels from `--panels` words: CIRCUIT:U,V planes, or one of seed, auto, default
    (`render.panel_choice`: the seed's four when the run's orbits show in them, else the planes
    where its orbits carry the most power). None means the seed's four. Returns (panels, note)."""
    if words is None:
        return list(SEED_PANELS), "seed panels"
    keywords = {w.strip().lower() for w in words} & {"seed", "auto", "default"}
    if not keywords:
        return [parse_panel(w) for w in words], "panels as given"
    try:
        from render.panel_choice import panels_for_run
    except ImportError:
        if keywords == {"seed"} and len(words) == 1:
            return list(SEED_PANELS), "seed panels"
        raise UserError("--panels auto/default needs render/panel_choice.py; give planes such as qk:0,10") from None
    if keywords != {"seed"} and any(w not in run.weight_names for w in ("W_E", "W_Q", "W_K", "W_V", "W_O", "W_U")):
        raise RunFileError(f"{run.path} ({run.experiment}) lacks weights of the orbit check that --panels "
                           f"{' '.join(words)} needs; give planes such as qk:0,10")
    panels, note = panels_for_run(run, list(words))
    return list(panels), note


def _caption(run: Run) -> Callable[[int], str]:
    """Per-epoch text from the logged metrics (train / held-out accuracy, equivariance error)."""
    met = run.metrics()
    if "epoch" not in met:
        return lambda epoch: ""
    index = {int(e): i for i, e in enumerate(met["epoch"])}
    parts = [("train_acc", "train {:.1%}"), ("heldout_acc", "held-out {:.1%}"), ("eq_error", "eq. error {:.1e}")]
    parts = [(k, f) for k, f in parts if k in met]

    def caption(epoch: int) -> str:
        i = index.get(int(epoch))
        return "" if i is None else "   ".join(f.format(met[k][i]) for k, f in parts)
    return caption


def make_movie(run_path: str | Path, out_dir: str | Path, panels: Sequence[Panel] | Sequence[str] | None = None,
               formats: Sequence[str] | str = DEFAULT_FORMATS, fps: float = 24.0, hold_s: float = 2.0,
               basename: str = "orbits", panel_px: int = 480, quality: Quality = Quality(),
               trail_epochs: float = 250, progress: bool = True, colour_orbits: bool = True,
               log: Callable[[str], None] = lambda s: print(s, file=sys.stderr)) -> EncodeResult:
    """Render the orbit movie of `run_path` into `out_dir/basename.{mp4,webm,gif,png,html}`.

    panels: Panel objects, or `--panels` words (see `choose_panels`); None: the seed's four.
    One frame per snapshot, then the last frame held `hold_s` seconds. Every check that can
    fail on user input (formats, run file, weights, output folder) runs before any frame is
    drawn; errors are UserError (one line). Returns the EncodeResult.
    """
    formats = parse_formats(formats)
    out_dir = Path(out_dir)
    with Run(run_path) as run:
        note = "panels as given"
        if panels is None or any(isinstance(p, str) for p in panels):
            panels, note = choose_panels(run, panels)
        n, m = check_panels(run, panels)
        prepare_out_dir(out_dir)
        colouring = (orbit_colouring(run, panels, n, m, warn=log) if colour_orbits
                     else plain_colouring(_n_heads(run), "one colour (orbit colours off)"))
        titles = [p.title(n, m) for p in panels]
        header = (f"{run.experiment}  ·  {run.path.name}  ·  C_{n} shifts tokens by s, outputs by {m}s  ·  "
                  f"{len(colouring.colours)} heads")
        figure = PanelFigure(titles, colouring.colours, colouring.legend, header=header, panel_px=panel_px,
                             draw_order=colouring.draw_order, trail_epochs=trail_epochs)
        states = frame_states(panel_coordinates(run, panels), trail_epochs=trail_epochs, caption=_caption(run))
        frames = (figure.render(s, rgba=True) for s in states)
        total = len(run) + int(round(hold_s * fps))
        log(f"{run.path}: {len(run)} snapshots (epochs {run.epochs[0]}..{run.epochs[-1]}), "
            f"{note}: {' '.join(map(str, panels))}; {colouring.note}")
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
