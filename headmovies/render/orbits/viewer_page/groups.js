// The "Frequency groups" panel: at the current snapshot, each group of live heads at one
// frequency ω with its orbit spectrum |μ̂_k|/Σ|ρ_h| (k = 1..N_ω − 1; 0 on an exact orbit), the
// heads' QK score amplitude A and their largest stabiliser-odd fractions (render/orbits/spectrum.py,
// docs/math.md "Orbit spectrum"). app: as in family.js. Pure functions first.
"use strict";
(function (exports) {
  const { $, el } = viewerModules.dom;

  // A moment as the census prints it: "0.000", "0.231", "–" (no value)
  const fmtMoment = (x) => (x === null || x === undefined ? "–" : x.toFixed(3));

  // One group ([omega, order, heads, spectrum, r_min, r_max, odd_qk, odd_ov], viewer.py) in words:
  // {omega, title, spectrum, detail, exact} (exact: every moment below 1e-3)
  function groupWords(g) {
    const [omega, order, heads, spectrum, rMin, rMax, oddQk, oddOv] = g;
    const n = heads.length;
    const pct = (x) => (x === null ? "–" : `${(100 * x).toFixed(1)} %`);
    return {
      omega,
      title: `ω = ${omega} (orbit size ${order}): ${n} head${n === 1 ? "" : "s"} ${heads.join(", ")}`,
      spectrum: `|μ̂_k|/Σ|ρ|, k = 1..${order - 1}: ${spectrum.map(fmtMoment).join(" ")}`,
      detail: `score amplitude A ${rMin === null ? "–" : rMin.toFixed(2)}–${rMax === null ? "–" : rMax.toFixed(2)}` +
              ` · stabiliser-odd QK ≤ ${pct(oddQk)}, OV ≤ ${pct(oddOv)}`,
      exact: spectrum.every((x) => x !== null && x < 1e-3),
    };
  }

  // The panel at the current snapshot: groups of two or more heads first, largest first
  function updateGroups(app) {
    const snaps = app.snaps, t = app.view.t, box = $("groups");
    const groups = (snaps.groups[t] || []).slice()
      .sort((a, b) => (b[2].length >= 2) - (a[2].length >= 2) || b[2].length - a[2].length || a[0] - b[0]);
    if (!groups.length) { box.textContent = "no live head"; return; }
    const ul = el("ul");
    for (const g of groups) {
      const w = groupWords(g), li = el("li", undefined, w.exact ? "exact" : undefined);
      li.dataset.omega = String(w.omega);
      li.append(el("div", w.title, "title"), el("div", w.spectrum, "spectrum"), el("div", w.detail, "detail"));
      ul.appendChild(li);
    }
    box.replaceChildren(ul, el("div", "Per frequency ω, the heads' OV-weighted phase moments in the (0, ω) plane: all 0 " +
      "on an exact orbit; the equivariance loss sees low k most (about I_k(r)/I_0(r)).", "note"));
  }

  Object.assign(exports, { fmtMoment, groupWords, updateGroups });
})((globalThis.viewerModules ??= {}).groups = {});
