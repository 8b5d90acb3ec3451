"""The planes each head is drawn in, for any run (docs/recording.md, "Rendering"), fixed once for
the whole run so that nothing jumps:

- irrep planes, when the tokens carry Z_p: X^(u, v) of each head's centred circuit
  (render/core/projections.py), the planes holding most power at the last snapshot, two per
  circuit (or those the user names, `qk:U,V`);
- a basis the user names: {'qk': [K, n, n], 'ov': [K, n_out, n]} matrices, coordinate k the
  inner product <X, B_k>, planes (B_0, B_1), (B_2, B_3), ...;
- otherwise principal axes fitted once on all snapshots: the uncentred SVD of every head's
  flattened circuit at up to `FIT_SNAPSHOTS` snapshots spread over the run (0 stays the zero
  circuit), planes (PC1, PC2) and (PC3, PC4) of each circuit.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from headmovies.errors import UserError
from headmovies.render.core.projections import CIRCUITS, Panel, fourier_power, irrep_coordinate, parse_panel
from headmovies.render.generic.heads import Heads, iter_circuits
from headmovies.runfile.reader import Run

FIT_SNAPSHOTS = 64
PER_CIRCUIT = 2  # planes per circuit


@dataclass
class Planes:
    """titles, notes: per plane; axis_labels: (x, y); kind: 'irrep', 'basis' or 'pca';
    epochs [T]; coords complex [T, P, H]; panels: the irrep planes (kind 'irrep')."""

    kind: str
    titles: list[str]
    notes: list[str]
    axis_labels: tuple[str, str]
    epochs: np.ndarray
    coords: np.ndarray
    panels: list[Panel]


def top_irrep_planes(circuits: dict[str, np.ndarray], p: int, per_circuit: int = PER_CIRCUIT) -> list[Panel]:
    """The `per_circuit` planes of each circuit with most power summed over heads (`circuits`:
    one snapshot's {'qk': [H, p, p], 'ov': [H, p, p]}); conjugate planes (-u, -v) counted once,
    planes the centring empties (QK v = 0, OV u = 0) left out."""
    out = []
    for c in CIRCUITS:
        power = fourier_power(circuits[c]).sum(axis=0)  # [p, p]
        seen: set[tuple[int, int]] = set()
        for flat in np.argsort(-power, axis=None, kind="stable"):
            u, v = divmod(int(flat), p)
            if (c == "qk" and v == 0) or (c == "ov" and u == 0) or ((-u) % p, (-v) % p) in seen:
                continue
            seen.add((u, v))
            signed = (u if u <= p // 2 else u - p, v if v <= p // 2 else v - p)
            out.append(Panel(c, *signed))
            if len(seen) == per_circuit:
                break
    return out


def _irrep(run: Run, heads: Heads, panels: list[str] | None) -> Planes:
    p = heads.group_order
    assert p is not None
    if panels:
        chosen = [parse_panel(t, p) for t in panels]
    else:
        _, last = next(iter_circuits(run, heads, np.array([len(run) - 1])))
        chosen = top_irrep_planes(last, p)
    coords = [
        np.stack([irrep_coordinate(c[pl.circuit], pl.u, pl.v) for pl in chosen]) for _, c in iter_circuits(run, heads)
    ]
    m = run.m or 1  # outputs shift by m s under a shift s of the inputs (1 unless the run says)
    return Planes(
        "irrep",
        [pl.title(p, m) for pl in chosen],
        [pl.note(p, m) for pl in chosen],
        ("real part", "imaginary part"),
        run.epochs.copy(),
        np.stack(coords),
        chosen,
    )


def _pairs(k: int) -> list[tuple[int, int]]:
    return [(i, i + 1) for i in range(0, k - 1, 2)]


def _basis(run: Run, heads: Heads, basis: dict[str, np.ndarray]) -> Planes:
    titles, notes, planes = [], [], []
    for c in CIRCUITS:
        if c not in basis:
            continue
        B = np.asarray(basis[c], np.float64)
        n_out = heads.tokens if c == "qk" else heads.outputs
        if B.ndim != 3 or B.shape[1:] != (n_out, heads.tokens) or B.shape[0] < 2:
            raise UserError(
                f"basis {c!r} must be [K >= 2, {n_out}, {heads.tokens}] matrices (the {c.upper()} circuit's shape), "
                f"got {list(B.shape)}"
            )
        for i, j in _pairs(B.shape[0]):
            titles.append(f"{c.upper()} circuit, basis matrices {i} and {j}")
            notes.append("axes: the inner products with the user's basis")
            planes.append((c, B[i], B[j]))
    if not planes:
        raise UserError("the basis names no circuit: give 'qk' and/or 'ov' matrices")
    coords = []
    for _, circ in iter_circuits(run, heads):
        coords.append(
            np.stack(
                [np.einsum("hab,ab->h", circ[c], x) + 1j * np.einsum("hab,ab->h", circ[c], y) for c, x, y in planes]
            )
        )
    return Planes(
        "basis",
        titles,
        notes,
        ("the first matrix in the title", "the second matrix in the title"),
        run.epochs.copy(),
        np.stack(coords),
        [],
    )


def _pca(run: Run, heads: Heads) -> Planes:
    T = len(run)
    fit = np.unique(np.linspace(0, T - 1, min(T, FIT_SNAPSHOTS)).round().astype(int))
    rows: dict[str, list[np.ndarray]] = {c: [] for c in CIRCUITS}
    for _, circ in iter_circuits(run, heads, fit):
        for c in CIRCUITS:
            rows[c].append(circ[c].reshape(heads.total, -1))
    axes = {}
    for c in CIRCUITS:
        X = np.concatenate(rows[c])  # [len(fit) * H, n_out * n]
        _, s, Vt = np.linalg.svd(X, full_matrices=False)
        k = 2 * PER_CIRCUIT
        V = np.zeros((k, X.shape[1]))
        V[: min(k, len(Vt))] = Vt[:k]
        share = s[:k] ** 2 / max(float((s**2).sum()), 1e-300)
        axes[c] = (V, np.pad(share, (0, k - len(share))))
    titles, notes = [], []
    for c in CIRCUITS:
        for i, j in _pairs(2 * PER_CIRCUIT):
            titles.append(f"{c.upper()} circuit, principal axes {i + 1} and {j + 1}")
            notes.append(f"fitted on all snapshots; {100 * (axes[c][1][i] + axes[c][1][j]):.0f} % of its square norm")
    coords = []
    for _, circ in iter_circuits(run, heads):
        planes = []
        for c in CIRCUITS:
            proj = circ[c].reshape(heads.total, -1) @ axes[c][0].T  # [H, 4]
            planes += [proj[:, i] + 1j * proj[:, j] for i, j in _pairs(2 * PER_CIRCUIT)]
        coords.append(np.stack(planes))
    return Planes(
        "pca",
        titles,
        notes,
        ("the first axis in the title", "the second axis in the title"),
        run.epochs.copy(),
        np.stack(coords),
        [],
    )


def planes_of(
    run: Run, heads: Heads, panels: list[str] | None = None, basis: dict[str, np.ndarray] | None = None
) -> Planes:
    """Every snapshot's head coordinates in the run's planes (module docstring): irrep planes
    when `heads.group_order` is set (`panels` names them, e.g. ['ov:4,-4']), else the user's
    `basis`, else principal axes. UserError for panels without a group, or a bad basis."""
    if basis is not None:
        return _basis(run, heads, basis)
    if heads.group_order is not None:
        return _irrep(run, heads, panels)
    if panels:
        raise UserError("irrep panels need a cyclic group: give the run's group order (--group-order P)")
    return _pca(run, heads)
