"""The orbit check's report (`check.check_orbits` makes it): the verified orbits, merged and
dead heads, per-head match errors, and their text and JSON forms (`orbits check`, `--json`).

Source: source 000 ("Attention heads forming orbits"); docs/math.md, "Orbit check". The
definitions are in `check`'s docstring; this module only holds and words the result.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field

import numpy as np

from headmovies.render.orbits.spectrum import FrequencyGroup

TOL = 0.02  # source 000: "within 2 % in relative Frobenius norm"
DEAD_TOL = 0.01  # a head whose centred OV norm is below 1 % of the largest head's is dead
M_FLOOR = 1e-9  # logits: a centred QK circuit this small is uniform attention
GAUGES = ("spec", "bias")
MARGIN = 0.1  # an orbit whose worst error is within this fraction of tol from tol is marginal


def is_marginal(worst: float, tol: float = TOL) -> bool:
    """True when a worst error lies within a tenth of the tolerance from it (1.8-2.2 % for 2 %):
    verified or not, a retrain on another CPU can move it across (seed 57's pair: 1.97 % ->
    2.0006 %)."""
    return bool(abs(worst - tol) <= MARGIN * tol * (1 + 1e-12))  # 1.8 % itself counts, despite rounding


@dataclass
class Orbit:
    """One verified orbit.

    units: merged units in shift order: units[k] = k.units[0] for k < size (each a list of
        original head indices; a unit of more than one head is a merged group).
    heads: all original heads of the orbit, sorted. size: number of units = n / |stabiliser|.
    stabiliser: the shifts fixing each member. worst_error: max over members and shifts of e.
    """

    units: list[list[int]]
    stabiliser: list[int]
    worst_error: float

    @property
    def size(self) -> int:
        return len(self.units)

    @property
    def heads(self) -> list[int]:
        return sorted(h for unit in self.units for h in unit)


@dataclass
class OrbitReport:
    """Result of `check_orbits`. Shapes use H = number of heads, n = group order.

    orbits: verified orbits, largest first. merged: groups of >= 2 heads merged into one unit
    (identical centred M_h). dead: heads set apart (negligible OV). unassigned: live heads in
    no verified orbit. match [n, H] int: for head h and shift s, the head (first of its unit)
    that s sends h's unit onto (-1 for dead heads). match_error [n, H]: that match's relative
    error e (NaN for dead heads). head_error [H]: max over s of match_error (NaN if dead).
    near_misses: orbits that fail only on the tolerance, by less than a tenth of it (they would
    verify at 1.1 tol; `is_marginal`). groups: the live heads' frequency groups with their
    orbit spectrum (`spectrum.orbit_spectrum`, of the spec-gauge circuits).
    """

    n: int
    m: int
    tol: float
    dead_tol: float
    n_heads: int
    orbits: list[Orbit]
    merged: list[list[int]]
    dead: list[int]
    unassigned: list[int]
    match: np.ndarray
    match_error: np.ndarray
    head_error: np.ndarray
    epoch: int | None = field(default=None)
    gauge: str = "spec"
    bias_error: float | None = None
    near_misses: list[Orbit] = field(default_factory=list)
    groups: list[FrequencyGroup] = field(default_factory=list)

    def to_dict(self) -> dict:
        """JSON-ready dict: errors to 6 significant digits, NaN written as null."""

        def num(v):
            return None if not np.isfinite(v) else sig6(v)

        return {
            "epoch": self.epoch,
            "n": self.n,
            "m": self.m,
            "tol": self.tol,
            "dead_tol": self.dead_tol,
            "n_heads": self.n_heads,
            "gauge": self.gauge,
            "bias_error": None if self.bias_error is None else num(self.bias_error),
            "orbits": [
                {
                    "size": o.size,
                    "stabiliser": o.stabiliser,
                    "worst_error": num(o.worst_error),
                    "marginal": is_marginal(o.worst_error, self.tol),
                    "heads": o.heads,
                    "units": o.units,
                }
                for o in self.orbits
            ],
            "near_misses": [
                {"size": o.size, "worst_error": num(o.worst_error), "heads": o.heads, "units": o.units}
                for o in self.near_misses
            ],
            "frequency_groups": [g.to_dict() for g in self.groups],
            "merged": self.merged,
            "dead": self.dead,
            "unassigned": self.unassigned,
            "head_error": [num(v) for v in self.head_error],
            "match": self.match.tolist(),
            "match_error": [[num(v) for v in row] for row in self.match_error],
        }

    def to_json(self) -> str:
        """JSON text, one top-level key (and one orbit) per line."""
        lines = []
        for key, value in self.to_dict().items():
            if key in ("orbits", "near_misses", "frequency_groups") and value:
                value = "[\n  " + ",\n  ".join(json.dumps(o) for o in value) + "\n ]"
            else:
                value = json.dumps(value)
            lines.append(f" {json.dumps(key)}: {value}")
        return "{\n" + ",\n".join(lines) + "\n}"

    def text(self) -> str:
        """A few lines in words."""
        at = f" at epoch {self.epoch:,}" if self.epoch is not None else ""
        lines = [
            f"orbit check{at}: C_{self.n} acting on {heads(self.n_heads)} (outputs shift by "
            f"{self.m}s), tolerance {self.tol:.1%} relative Frobenius norm"
            + (", bias gauge (each head's key-independent OV part removed)" if self.gauge == "bias" else "")
        ]
        if not self.orbits:
            lines.append("  no verified orbit")
        for i, o in enumerate(self.orbits, 1):
            extra = f" ({len(o.heads)} heads after merging)" if len(o.heads) != o.size else ""
            lines.append(
                f"  orbit {i}: size {o.size}{extra}, stabiliser {{{', '.join(map(str, o.stabiliser))}}}, "
                f"worst error {format_error(o.worst_error, self.tol)}"
                + (" (marginal: within a tenth of the tolerance)" if is_marginal(o.worst_error, self.tol) else "")
                + f": heads in shift order {_units_text(o.units)}"
            )
        for o in self.near_misses:
            lines.append(
                f"  near miss (not verified, marginal: within a tenth of the tolerance): size {o.size}, "
                f"worst error {format_error(o.worst_error, self.tol)}: heads in shift order {_units_text(o.units)}"
            )
        if self.merged:
            lines.append(f"  merged (same centred QK, OV summed): {_units_text(self.merged)}")
        lines.append(
            f"  dead (OV norm < {self.dead_tol:.0%} of the largest): "
            + (f"{heads(len(self.dead))} {self.dead}" if self.dead else "none")
        )
        if self.unassigned:
            errs = self.head_error[self.unassigned]
            lines.append(
                f"  in no orbit: {heads(len(self.unassigned))} {self.unassigned} "
                f"(their worst-shift match error: {np.nanmin(errs):.1%} to {np.nanmax(errs):.1%})"
            )
        else:
            lines.append("  in no orbit: none")
        lines += [f"  {g.text()}" for g in self.groups]
        if self.bias_error is not None:
            lines.append(f"  total bias sum_h beta_h: {format_error(self.bias_error)} from equivariant (worst shift)")
        return "\n".join(lines)


def heads(k: int) -> str:
    """'1 head', '3 heads'."""
    return f"{k} head" if k == 1 else f"{k} heads"


def format_error(x: float, tol: float = TOL) -> str:
    """A relative error in words: 1.23% or, below 0.01%, 1.2e-07. An error that two decimals
    would print as the tolerance itself gets the digits that tell on which side it lies
    (1.996%, 2.003%), and one closer than five decimals a sign (<2.00000%, >2.00000%)."""
    if x < 1e-4:
        return f"{x:.1e}"
    digits = 2
    while digits < 5 and x != tol and f"{x:.{digits}%}" == f"{tol:.{digits}%}":
        digits += 1
    text = f"{x:.{digits}%}"
    if x != tol and text == f"{tol:.{digits}%}":
        text = ("<" if x < tol else ">") + text
    return text


def _units_text(units: list[list[int]]) -> str:
    return "[" + ", ".join("+".join(map(str, u)) for u in units) + "]"


def sig6(v: float) -> float:
    """`v` to 6 significant digits: how reports and census rows store errors (one rounding before display)."""
    return float(f"{v:.6g}")
