"""Speed of the orbit check (render/orbits.py): median time of `check_orbits` on 32 heads of
C_24 (the source's layer), random and with orbits, and on a larger group, against the
straightforward loop over shifts and head pairs it replaces.

    .venv/bin/python bench/orbit_check.py
"""

from __future__ import annotations

import functools
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))

from headmovies.render.orbits.check import check_orbits, shift_ov, shift_qk

from test_orbits import layer


def naive_errors(M, R, n, m):
    """Reference: every shift, every pair of heads, matrices shifted and subtracted one by one."""
    Mc, Rc = M - M.mean(-1, keepdims=True), R - R.mean(-2, keepdims=True)
    H = len(M)
    err = np.zeros((n, H, H))
    for s in range(n):
        for h in range(H):
            SM, SR = shift_qk(Mc[h], s), shift_ov(Rc[h], s, m)
            for g in range(H):
                err[s, h, g] = max(
                    np.linalg.norm(SM - Mc[g]) / np.linalg.norm(Mc[h]),
                    np.linalg.norm(SR - Rc[g]) / np.linalg.norm(Rc[h]),
                )
    return err


def median_time(f, repeat: int) -> float:
    times = []
    for _ in range(repeat):
        t = time.perf_counter()
        f()
        times.append(time.perf_counter() - t)
    return float(np.median(times))


def main() -> None:
    cases = [
        ("C_24, 32 random heads", *layer(24, 2, [], n_random=32)[:2], 24),
        ("C_24, orbits 12+4 and 16 random heads", *layer(24, 2, [12, 4], n_random=16)[:2], 24),
        ("C_113, 32 random heads", *layer(113, 2, [], n_random=32)[:2], 113),
    ]
    for name, M, R, n in cases:
        t = median_time(functools.partial(check_orbits, M, R, n, 2), 20 if n < 50 else 3)
        line = f"{name:40s} check_orbits {1e3 * t:8.2f} ms"
        if n < 50:
            t0 = median_time(functools.partial(naive_errors, M, R, n, 2), 1)
            line += f"   naive all-pairs loop {1e3 * t0:8.1f} ms   ({t0 / t:.0f}x)"
        print(line)


if __name__ == "__main__":
    main()
