// The heads in words: the legend (orbits at the current snapshot, other and dead heads) and the
// box of the head under the mouse, with the heatmaps of its circuits (the engine's legend and
// detail, family.js). app: as in core/viewer_page/scatter_main.js, with snaps a `Snapshots`.
"use strict";
(function (exports) {
  const { fmtEpoch, formatError } = viewerModules.format;
  const { circuitMatrix } = viewerModules.planes;
  const { heatmap } = viewerModules.heatmap;
  const { el, swatch } = viewerModules.dom;

  // "12-orbit (heads 0, 1, 2)"
  function orbitName(o) { return `${o.size}-orbit (heads ${o.heads.join(", ")})`; }

  // What the check says of orbit o ({locked_in: epoch | null}) at `epoch`, where it is verified
  // (verifiedNow) or not
  function orbitStatus(o, epoch, verifiedNow) {
    if (verifiedNow) {
      if (o.locked_in !== null && epoch >= o.locked_in) return `verified since epoch ${fmtEpoch(o.locked_in)}`;
      return "verified at this snapshot" + (o.locked_in !== null ? `; for good from epoch ${fmtEpoch(o.locked_in)}`
                                                                  : "; not at the latest snapshot");
    }
    return o.locked_in !== null ? `not yet verified: from epoch ${fmtEpoch(o.locked_in)}` : "not verified at this snapshot";
  }

  // A worst error within a tenth of the tolerance from it (render/orbits/check_report.is_marginal)
  const marginal = (x, tol) => Math.abs(x - tol) <= 0.1 * tol * (1 + 1e-12);

  // "2 %" of a tolerance
  const percent = (x) => `${(100 * x).toFixed(0)} %`;

  function legendItem(colour, hollow, text, faint) {
    const li = el("li", undefined, faint ? "faint" : undefined);
    li.append(swatch(colour, hollow, hollow ? 0.6 : undefined), el("span", text));
    return li;
  }

  function legend(app) {
    const snaps = app.snaps, meta = snaps.meta, t = app.view.t, H = snaps.H, ul = document.createElement("ul");
    const now = new Map(snaps.orbits[t].map(([k, e]) => [k, e]));
    let dead = 0, other = 0;
    for (let h = 0; h < H; h++) {
      if (snaps.dead[t * H + h]) dead++;
      else if (!snaps.orbitAt(t, h)) other++;
    }
    for (const o of meta.orbits) {
      const verified = now.has(o.key);
      if (!o.final && !verified) continue;
      const text = `${orbitName(o)}: ${orbitStatus(o, snaps.epochs[t], verified)}` +
                   (verified ? `, worst error ${formatError(now.get(o.key), meta.tol)}` : "") +
                   (verified && marginal(now.get(o.key), meta.tol) ? " (marginal: within a tenth of the tolerance)" : "");
      ul.appendChild(legendItem(o.colour, !verified, text, !verified));
    }
    const plain = [[other, `live head${other === 1 ? "" : "s"} in no verified orbit`, meta.colours.other],
                   [dead, `dead head${dead === 1 ? "" : "s"} (OV circuit below ${percent(meta.dead_tol)} of the largest)`,
                    meta.colours.dead]];
    for (const [count, label, colour] of plain) if (count) ul.appendChild(legendItem(colour, false, `${count} ${label}`));
    const box = el("div");
    box.append(ul, el("div", "Filled dot: in an orbit the check verifies at this snapshot. Ring: will be in that " +
      "orbit later, not verified yet. Lines join an orbit's heads in planes where it draws its polygon.", "note"));
    return box;
  }

  // Head h: its orbit, its error and its circuits at this snapshot
  function detail(app, h) {
    const snaps = app.snaps, meta = snaps.meta, view = app.view;
    const t = view.t, E = snaps.epochs[t], st = snaps.styleOf(t, h), err = snaps.headError[t * snaps.H + h];
    let orbit = "in no verified orbit at this snapshot";
    if (st.kind === "dead") orbit = `dead at this snapshot: OV circuit below ${percent(meta.dead_tol)} of the largest head's`;
    else if (st.kind === "orbit") orbit = `${orbitName(st.orbit)}: ${orbitStatus(st.orbit, E, true)}`;
    else if (st.kind === "hint") orbit = `${orbit}; ${orbitName(st.orbit)} ${orbitStatus(st.orbit, E, false)}`;
    const error = Number.isFinite(err)
      ? `worst-shift match error ${formatError(err, meta.tol)} (an orbit needs ≤ ${percent(meta.tol)})`
      : "worst-shift match error: none (dead head)";
    const maps = el("div", undefined, "heatmaps"), box = el("div");
    const N = snaps.N, stops = meta.colours.heatmap, size = { cell: Math.max(4, Math.floor(168 / N)) };
    maps.append(heatmap(circuitMatrix(snaps, t, h, 0), N, N,
                        "centred QK circuit M[a, b]: query token a (rows), key token b (columns)", stops, size),
                heatmap(circuitMatrix(snaps, t, h, 1), N, N,
                        "centred OV circuit R[c, b]: output class c (rows), attended token b (columns)", stops, size));
    box.append(el("div", `head ${h}`, "hid"), el("div", orbit, "orbit"), el("div", error, "error"),
               el("div", `at epoch ${fmtEpoch(E)}` + (view.selected === h ? " · kept (click again to let go)" : ""), "muted"),
               maps);
    return box;
  }

  Object.assign(exports, { orbitName, orbitStatus, marginal, legend, detail });
})((globalThis.viewerModules ??= {}).heads = {});
