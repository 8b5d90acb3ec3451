// What one small multiple of the census gallery draws (docs/sweeps.md, "Census gallery"): each
// head's dot in a frequency group's plane, coloured as in the orbit movie, the orbits' polygons
// and the lines of text. Pure functions; main.js turns them into SVG.
"use strict";
(function (exports) {
  const NO_ORBIT = -1, DEAD = -2; // head_orbit codes (sweeps/census_coordinates.py)

  // The style of a head by its head_orbit code k: orbit k's colour (the payload's list, the
  // movie's order: largest orbit first), grey for a live head in no orbit, light grey outlined
  // for a dead one. colours: {orbits: [hex], other, dead, dead_edge}.
  function dotStyle(k, colours) {
    if (k === DEAD) return { fill: colours.dead, stroke: colours.dead_edge, r: 1.5, layer: 0 };
    if (k === NO_ORBIT) return { fill: colours.other, stroke: "none", r: 2, layer: 1 };
    return { fill: colours.orbits[k % colours.orbits.length], stroke: "none", r: 2.8, layer: 2 };
  }

  const EDGE = 1.1; // a head farther out than this (in units of its group's largest) sits on the edge

  // A plane's dots in an SVG of `size` px (centre at size/2, unit radius at size/2 - 5, y up):
  // [{head, x, y, fill, stroke, r}], dead heads first, orbits last (drawn on top); a head
  // beyond EDGE is drawn on the edge, in its direction.
  function planeDots(plane, headOrbit, colours, size) {
    const c = size / 2, unit = size / 2 - 5;
    const dots = plane.xy.map(([x0, y0], head) => {
      const far = Math.hypot(x0, y0) / EDGE, x = far > 1 ? x0 / far : x0, y = far > 1 ? y0 / far : y0;
      const s = dotStyle(headOrbit[head], colours);
      return { head, x: +(c + unit * x).toFixed(2), y: +(c - unit * y).toFixed(2), fill: s.fill, stroke: s.stroke,
               r: s.r, layer: s.layer };
    });
    return dots.sort((a, b) => a.layer - b.layer || a.head - b.head).map(({ layer, ...d }) => d);
  }

  // The outline of orbit k in a plane: its heads' points in order of angle ("x,y x,y ..."), or
  // null when it draws no polygon there (fewer than 3 heads, or heads within 5 % of the centre).
  function orbitPolygon(plane, headOrbit, k, size) {
    const c = size / 2, unit = size / 2 - 5;
    const pts = plane.xy.filter((_, h) => headOrbit[h] === k);
    if (pts.length < 3 || pts.some(([x, y]) => Math.hypot(x, y) < 0.05)) return null;
    pts.sort((a, b) => Math.atan2(a[1], a[0]) - Math.atan2(b[1], b[0]));
    return pts.map(([x, y]) => `${(c + unit * x).toFixed(2)},${(c - unit * y).toFixed(2)}`).join(" ");
  }

  const pct = (x) => (x == null ? "–" : `${(100 * x).toFixed(1)} %`);

  // A number of the payload (3 significant digits already), or "–" for none; below 0.001 as
  // 1.23e-4 (shorter than 0.000123).
  const num = (x) => (x == null ? "–" : x !== 0 && Math.abs(x) < 1e-3 ? x.toExponential() : String(x));

  // One drawn group's orbit spectrum in brief (census_gallery.spectrum_brief), short enough for
  // one line of a tile (the plane above gives its live heads): "ω 6: k≤3 0.234, k≥4 –, r≤12.3",
  // the largest |μ̂_k|/Σ|ρ| over k ≤ 3 and over k ≥ 4, and the group's largest score amplitude r.
  function spectrumLine(s) {
    return `ω ${s.omega}: k≤3 ${num(s.low)}, k≥4 ${num(s.high)}, r≤${num(s.r_max)}`;
  }

  // The tile's text: {title, outcome, lines: [..], spectrum: [a line per drawn group, none for
  // rows before version 6]}.
  function tileText(run) {
    const orbits = run.orbits.map(([size, omega]) => `${size}-orbit ω ${omega}`).join(", ");
    const lines = [orbits || "no orbit of 2 or more heads"];
    lines.push(`held-out ${pct(run.heldout_acc)} · ${run.n_dead} dead of ${run.heads}`);
    if (run.stopped) lines.push(`screen: stopped at epoch ${run.epochs.toLocaleString("en-US")}`);
    return { title: `seed ${run.seed}`, outcome: run.outcome, lines, spectrum: (run.spectrum ?? []).map(spectrumLine) };
  }

  Object.assign(exports, { NO_ORBIT, DEAD, EDGE, dotStyle, planeDots, orbitPolygon, spectrumLine, tileText });
})((globalThis.galleryModules ??= {}).tiles = {});
