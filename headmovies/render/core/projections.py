"""Irrep (Fourier) coordinates of QK and OV circuits (docs/math.md, "Irrep coordinates").

For X indexed by two token values and frequencies u, v (integers mod n, negatives allowed):
    X^(u, v) = (1/n) * sum_{a,b} X[a, b] * exp(+2 pi i (u a + v b) / n)
A shift s of the token values multiplies X^(u, v) by exp(2 pi i r s / n), with
    r = u + v        for QK (M_{s.h}[a+s, b+s] = M_h[a, b]),
    r = m u + v      for OV (u = output frequency, v = input frequency; outputs shift by m s),
so the heads of one orbit draw a regular polygon with n / gcd(r, n) vertices centred at 0.
Source: source 000 ("Attention heads forming orbits"); docs/math.md, "Irrep coordinates".
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass

import numpy as np

from headmovies.errors import UserError

CIRCUITS = ("qk", "ov")


def irrep_coordinate(X: np.ndarray, u: int, v: int) -> np.ndarray:
    """Complex X^(u, v) [...] of X [..., n, n] (first index frequency u, second v)."""
    n = X.shape[-1]
    if X.shape[-2] != n:
        raise ValueError(f"expected square [..., n, n] matrices, got {X.shape}")
    a = np.arange(n)
    ea = np.exp(2j * np.pi * u * a / n)
    eb = np.exp(2j * np.pi * v * a / n)
    return np.einsum("...ab,a,b->...", X, ea, eb) / n


def fourier_power(X: np.ndarray) -> np.ndarray:
    """|X^(u, v)|^2 for all frequency pairs: [..., n, n] indexed [u mod n, v mod n]."""
    n = X.shape[-1]
    # X^(u, v) = (1/n) sum X[a,b] e^{+i...} = n * ifft2(X)[u, v]
    return np.abs(np.fft.ifft2(X, axes=(-2, -1)) * n) ** 2


def rotation_frequency(circuit: str, u: int, v: int, n: int, m: int = 1) -> int:
    """r (mod n) such that a shift s rotates X^(u, v) by r s 2 pi / n."""
    return ((u + v) if circuit == "qk" else (m * u + v)) % n


def polygon_order(r: int, n: int) -> int:
    """Vertices of an orbit's polygon in a plane of rotation frequency r: n / gcd(r, n)."""
    return n // math.gcd(r % n, n)


@dataclass(frozen=True)
class Panel:
    """One movie panel: the plane (circuit, u, v) of X^(u, v)."""

    circuit: str
    u: int
    v: int

    def r(self, n: int, m: int) -> int:
        return rotation_frequency(self.circuit, self.u, self.v, n, m)

    def order(self, n: int, m: int) -> int:
        return polygon_order(self.r(n, m), n)

    def title(self, n: int, m: int) -> str:
        """What the panel shows, in words: 'QK circuit, frequencies (u, v) = (0, 6)'."""
        return f"{self.circuit.upper()} circuit, frequencies (u, v) = ({self.u}, {self.v})"

    def note(self, n: int, m: int) -> str:
        """What a shift does in this plane, in words, on two lines: 'a shift by s turns every
        dot by s·90° (ω = 6, 15° a step)\nso an orbit draws a square, or sits at 0'."""
        r, k = self.r(n, m), self.order(n, m)
        step = 360 / n
        turn = r * step
        if k == 1:
            return f"ω = {r}: a shift moves no dot\nso an orbit's heads coincide"
        shape = {2: "a pair of opposite points", 3: "a triangle", 4: "a square"}.get(k, f"a regular {k}-gon")
        return (
            f"a shift by s turns every dot by s·{turn:.4g}° (ω = {r}, {step:.4g}° a step)\n"
            f"so an orbit draws {shape}, or sits at 0"
        )

    def __str__(self) -> str:
        return f"{self.circuit}:{self.u},{self.v}"


_PANEL = re.compile(r"^\s*(qk|ov)\s*:\s*([+-]?\d+)\s*,\s*([+-]?\d+)\s*$", re.IGNORECASE)


def parse_panel(text: str, n: int | None = None) -> Panel:
    """'qk:0,10' -> Panel('qk', 0, 10). Raises UserError with the expected form, or, given the
    group order n, for a frequency outside -(n-1)..n-1 (u and u - n name the same frequency, so
    anything further out is a typo, not a plane); also for the planes the centring removes (QK
    with v = 0, OV with u = 0: zero for every head)."""
    match = _PANEL.match(text)
    if not match:
        raise UserError(
            f"bad panel {text!r}: expected CIRCUIT:U,V with CIRCUIT qk or ov and integer "
            "frequencies, e.g. qk:0,10 ov:10,-10"
        )
    panel = Panel(match.group(1).lower(), int(match.group(2)), int(match.group(3)))
    if n is not None and not (abs(panel.u) < n and abs(panel.v) < n):
        raise UserError(
            f"bad panel {text!r}: frequencies of C_{n} are 0..{n - 1} (or -{n - 1}..-1, the same "
            f"planes counted down), got u={panel.u}, v={panel.v}"
        )
    if (panel.circuit, panel.v if panel.circuit == "qk" else panel.u) in (("qk", 0), ("ov", 0)):
        zero, which = ("v", "key") if panel.circuit == "qk" else ("u", "output")
        raise UserError(
            f"bad panel {text!r}: {panel.circuit.upper()} planes with {zero} = 0 are centred away "
            f"(docs/math.md, 'QK and OV circuits'): every head sits at 0; choose a nonzero {which} "
            f"frequency {zero}"
        )
    return panel
