"""Each head's style (colour, size, outline) at each snapshot of the orbit movie and stills: an
orbit is shown only from the snapshot at which the orbit check verifies it (docs/movie.md,
"What a frame shows").

The orbit check of every snapshot (`history.OrbitHistory`, from the pass over the run,
`stream`) says which heads are in verified orbits when. Each orbit of the final snapshot is a
`Track`, followed back over the run. At snapshot t a head is drawn

- in its orbit's colour, filled (and the orbit's polygon outlined in the panels where it
  draws one), when that orbit is verified at t;
- grey, like any other live head, while that orbit is not verified: a frame tells nothing
  that happens after its epoch (the viewer's timeline is the place for the whole run);
- grey, when it is live and in no orbit of the final snapshot;
- in a third colour when it is in a verified orbit at t that is not one of the final
  snapshot's (an orbit that forms and breaks again; the default run has none);
- as a small light-grey dot with a darker outline when it is dead at t (OV circuit below
  `dead_tol` of the largest head's; dead overrides every other state).

The legend has one entry per final orbit ("4-orbit (heads 5, 15, 30, 31): square where ω = 6,
at 0 where ω = 8 · verified since epoch 10,800", true in every panel), blank while that orbit
is not verified; one for other verified orbits (if any), one for the other live heads and one
for the dead heads, with counts at t.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from matplotlib.colors import to_rgba

from headmovies.render.core.frame_states import Look
from headmovies.render.core.projections import Panel
from headmovies.render.orbits.colours import DEAD_COLOUR, DEAD_EDGE, OTHER_COLOUR, orbit_colour, shape_name
from headmovies.render.orbits.history import OrbitHistory

# dot area (points^2) and outline width by state
VERIFIED = dict(size=40.0, lw=0.6)
OTHER = dict(size=26.0, lw=0.5)
DEAD = dict(size=11.0, lw=0.8)
WHITE = to_rgba("white")
NONE = (0.0, 0.0, 0.0, 0.0)


@dataclass
class Track:
    """An orbit verified at the final snapshot, followed back over the run.

    size: orbit size (units); heads: its heads, sorted; colour: its colour; verified: bool [T],
    the same set of heads is a verified orbit at each snapshot; since: the epoch from which it
    is verified at every later snapshot (`OrbitHistory.locked_in`); error_at_since: its worst
    error at that snapshot."""

    size: int
    heads: tuple[int, ...]
    colour: str
    verified: np.ndarray
    since: int
    error_at_since: float

    def name(self) -> str:
        return f"{self.size}-orbit"

    def head_list(self) -> str:
        """'2, 10, 13, 18'; runs of three or more consecutive heads as '0–11'."""
        return head_ranges(self.heads)


def head_ranges(heads) -> str:
    """Sorted head indices in words: [0, 1, 2, 3, 7, 9, 10] -> '0–3, 7, 9, 10'."""
    heads = sorted(int(h) for h in heads)
    parts, i = [], 0
    while i < len(heads):
        j = i
        while j + 1 < len(heads) and heads[j + 1] == heads[j] + 1:
            j += 1
        parts += [f"{heads[i]}–{heads[j]}"] if j - i >= 2 else [str(h) for h in heads[i : j + 1]]
        i = j + 1
    return ", ".join(parts)


def final_tracks(history: OrbitHistory) -> list[Track]:
    """The final snapshot's verified orbits, largest first (ties: lowest head first), coloured
    in that order (`colours.orbit_colour`)."""
    if not len(history):
        return []
    orbits = sorted(history.orbits[-1], key=lambda o: (-int(o[0]), min(o[1])))
    tracks = []
    for i, (size, heads, _) in enumerate(orbits):
        heads = tuple(sorted(int(h) for h in heads))
        since = history.locked_in(heads)
        assert since is not None  # a verified orbit of the last snapshot
        t = int(np.searchsorted(history.epochs, since))
        err = next(e for s, h, e in history.orbits[t] if tuple(sorted(h)) == heads)
        tracks.append(Track(int(size), heads, orbit_colour(i), history.verified(heads), since, float(err)))
    return tracks


def shapes_in_panels(track: Track, panels: list[Panel], final: np.ndarray, n: int, m: int) -> list[int]:
    """Per panel, the polygon order the track draws there at the final snapshot, or 0 where it
    sits at 0: its stabiliser forces 0 unless the polygon order divides the orbit size, and
    heads within 1 % of the panel's largest radius count as at 0. final: complex [P, H]
    coordinates at the final snapshot."""
    scale = np.abs(final).max(axis=1)  # [P]
    heads = list(track.heads)
    out = []
    for p, panel in enumerate(panels):
        k = panel.order(n, m)
        shown = (track.size % k == 0) and bool((np.abs(final[p, heads]) > 0.01 * max(scale[p], 1e-300)).any())
        out.append(k if shown else 0)
    return out


def shape_words(shapes: list[int], panels: list[Panel], n: int, m: int) -> str:
    """What an orbit draws, true in every panel: 'square where ω = 6, pair in QK (0, 12), at 0 in
    OV (12, 12)'. Panels of one rotation frequency r are named together when the orbit draws
    the same there, else one by one."""
    by_r: dict[int, list[int]] = {}
    for p, panel in enumerate(panels):
        by_r.setdefault(panel.r(n, m), []).append(p)
    parts = []
    for r, ps in by_r.items():
        if len({shapes[p] for p in ps}) == 1:
            k = shapes[ps[0]]
            parts.append(f"{shape_name(k) if k else 'at 0'} where ω = {r}")
        else:
            parts += [
                f"{shape_name(shapes[p]) if shapes[p] else 'at 0'} in {panels[p].circuit.upper()} "
                f"({panels[p].u}, {panels[p].v})"
                for p in ps
            ]
    return ", ".join(parts)


class OrbitLooks:
    """Per-snapshot `Look`s of the orbit movie, with what the figure needs to be built.

    history: the orbit check of the snapshots drawn (all of them for a movie). panels and
    final (complex [P, H], coordinates at the final snapshot) decide where each orbit draws
    a polygon. complete: the history covers the whole run, so "verified since" is a date;
    otherwise (a still from the last snapshot alone) the legend says "verified at epoch E".

    colours [H] (initial colours), legend [(label, colour)] (its slots), draw_order, outlines
    [(panel, heads, colour)], track_of_outline [G], look(t) -> Look, note (one line).
    """

    def __init__(
        self, history: OrbitHistory, panels: list[Panel], final: np.ndarray, n: int, m: int, complete: bool = True
    ):
        self.history = history
        self.tracks = final_tracks(history)
        self.complete = complete
        H = history.dead.shape[1]
        self.n_heads = H
        self.member = np.full(H, -1)  # track of each head
        for i, tr in enumerate(self.tracks):
            self.member[np.asarray(tr.heads, int)] = i
        tracked = np.zeros((len(history), H), bool)
        for tr in self.tracks:
            tracked[np.ix_(tr.verified, np.asarray(tr.heads, int))] = True
        self.transient = history.in_orbit & ~tracked  # [T, H]
        self.transient_colour = orbit_colour(len(self.tracks))
        self.shapes = []
        self.outlines, self.track_of_outline = [], []
        for i, tr in enumerate(self.tracks):
            where = shapes_in_panels(tr, panels, final, n, m)
            self.shapes.append(shape_words(where, panels, n, m))
            for p in range(len(panels)):
                if where[p] >= 2:
                    self.outlines.append((p, list(tr.heads), tr.colour))
                    self.track_of_outline.append(i)
        # legend slots: the tracks, orbits that do not last (if any), other live heads, dead heads
        self.has_transient = bool(self.transient.any())
        self.has_dead = bool(history.dead.any())
        self.legend = [(self._track_label(i, len(history) - 1), tr.colour) for i, tr in enumerate(self.tracks)]
        if self.has_transient:
            self.legend.append(("", self.transient_colour))
        self.legend.append(("", OTHER_COLOUR))
        if self.has_dead:
            self.legend.append(("", DEAD_COLOUR))
        first = self.look(0)
        self.colours = [tuple(c) for c in first.face]
        dead_any = np.asarray(history.dead.any(0))  # [H]
        self.draw_order = (
            [h for h in range(H) if dead_any[h] and self.member[h] < 0]
            + [h for h in range(H) if not dead_any[h] and self.member[h] < 0]
            + [h for i in reversed(range(len(self.tracks))) for h in self.tracks[i].heads]
        )
        sizes = ", ".join(str(tr.size) for tr in self.tracks)
        found = (
            (
                f"{len(self.tracks)} verified orbit{'s' if len(self.tracks) > 1 else ''} at the final snapshot "
                f"(size {sizes}), each shown from the snapshot it is verified: "
                + ", ".join(f"{tr.name()} from epoch {tr.since:,}" for tr in self.tracks)
            )
            if self.tracks
            else "no verified orbit at the final snapshot"
        )
        self.note = found

    def _track_label(self, i: int, t: int) -> str:
        tr = self.tracks[i]
        head = f"{tr.name()} (heads {tr.head_list()}): {self.shapes[i]}"
        if tr.verified[t]:
            if self.complete and t >= int(np.searchsorted(self.history.epochs, tr.since)):
                return f"{head} · verified since epoch {tr.since:,}"
            return f"{head} · verified at epoch {int(self.history.epochs[t]):,}"
        return ""  # not verified yet: nothing about it shows

    def state(self, t: int) -> np.ndarray:
        """int [H] per head at snapshot t: 0 dead, 1 other live, 2 in a final orbit not verified
        at t (drawn as 1), 3 verified (its final orbit), 4 in another verified orbit (also a final
        orbit's head while it is in another verified orbit, as the strip counts it)."""
        h = self.history
        s = np.ones(self.n_heads, int)
        for tr in self.tracks:
            s[list(tr.heads)] = 3 if tr.verified[t] else 2
        s[self.transient[t]] = 4  # never a head of a final orbit verified at t (`transient`)
        s[h.dead[t]] = 0
        return s

    def look(self, t: int) -> Look:
        """The `Look` of snapshot index t."""
        H = self.n_heads
        state = self.state(t)
        face = np.empty((H, 4))
        edge = np.empty((H, 4))
        trail = np.empty((H, 4))
        size = np.empty(H)
        lw = np.empty(H)
        for h in range(H):
            colour = self.tracks[self.member[h]].colour if self.member[h] >= 0 else OTHER_COLOUR
            if state[h] == 0:
                style, f, e, tc = DEAD, to_rgba(DEAD_COLOUR), to_rgba(DEAD_EDGE), to_rgba(DEAD_COLOUR)
            elif state[h] == 3:
                style, f, e, tc = VERIFIED, to_rgba(colour), WHITE, to_rgba(colour)
            elif state[h] == 4:
                style, f, e, tc = VERIFIED, to_rgba(self.transient_colour), WHITE, to_rgba(self.transient_colour)
            else:
                style, f, e, tc = OTHER, to_rgba(OTHER_COLOUR), WHITE, to_rgba(OTHER_COLOUR)
            face[h], edge[h], trail[h], size[h], lw[h] = f, e, tc, style["size"], style["lw"]
        outlines = np.array([bool(self.tracks[i].verified[t]) for i in self.track_of_outline], bool)
        legend = []
        for i, tr in enumerate(self.tracks):
            on = tr.verified[t]
            legend.append(
                (
                    self._track_label(i, t),
                    to_rgba(tr.colour) if on else NONE,
                    WHITE if on else NONE,
                    VERIFIED["size"],
                )
            )
        if self.has_transient:
            k = int((state == 4).sum())
            legend.append(
                (
                    f"{k} head{'s' if k != 1 else ''} in {'another' if self.tracks else 'a'} verified orbit",
                    to_rgba(self.transient_colour),
                    WHITE,
                    VERIFIED["size"],
                )
            )
        others = int(((state == 1) | (state == 2)).sum())
        legend.append(
            (
                f"{others} other live head{'s' if others != 1 else ''} (in no verified orbit)",
                to_rgba(OTHER_COLOUR),
                WHITE,
                OTHER["size"],
            )
        )
        if self.has_dead:
            dead = int((state == 0).sum())
            legend.append(
                (
                    f"{dead} dead head{'s' if dead != 1 else ''} (OV circuit < {self.dead_tol_words()})",
                    to_rgba(DEAD_COLOUR),
                    to_rgba(DEAD_EDGE),
                    DEAD["size"] * 2,
                )
            )
        return Look(face, edge, size, lw, trail, outlines, legend)

    def dead_tol_words(self) -> str:
        return f"{100 * self.history.dead_tol:.3g} % of the largest head's"
