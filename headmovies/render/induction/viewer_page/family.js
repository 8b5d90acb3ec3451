// The induction viewer's legend and head pane (render/induction/viewer.py): per head its OV
// copying score, its attention on the previous token and at the induction offset, and its mean
// attention pattern at the snapshot. app: as in scatter_main.js; the payload's arrays copying
// [T, C], prev and induction [T, K], attention uint8 [T, K, n, n] (255 = 1).
"use strict";
(function (exports) {
  const { fmtEpoch, fmtSigned: signed } = viewerModules.format;
  const { el, swatch } = viewerModules.dom;
  const { heatmap } = viewerModules.heatmap;

  // The copying score of circuit `name` ("L0H1", "L0 sum of heads", "direct path W_E W_U") at t
  function copyingOf(app, t, name) {
    const d = app.snaps.meta.detail, C = d.circuits.length;
    return app.snaps.arrays.copying[t * C + d.circuits.indexOf(name)];
  }

  function legend(app) {
    const snaps = app.snaps, meta = snaps.meta, d = meta.detail, t = app.view.t, K = snaps.K, A = snaps.arrays;
    const table = el("table");
    const head = el("tr");
    for (const h of ["head", "copying", "previous token", "induction"]) head.appendChild(el("th", h));
    table.appendChild(head);
    const hot = app.view.hovered !== null ? app.view.hovered : app.view.selected;
    for (let k = 0; k < K; k++) {
      const tr = el("tr");
      tr.dataset.head = d.heads[k];
      if (k === hot) tr.className = "hot";
      const name = el("td");
      name.append(swatch(meta.dots[k].colour), " " + d.heads[k]);
      tr.append(name, el("td", signed(copyingOf(app, t, d.heads[k])), "num copying"),
                el("td", A.prev[t * K + k].toFixed(2), "num prev"), el("td", A.induction[t * K + k].toFixed(2), "num induction"));
      table.appendChild(tr);
    }
    for (const name of d.circuits.filter((c) => !d.heads.includes(c))) {
      const tr = el("tr");
      tr.append(el("td", name), el("td", signed(copyingOf(app, t, name)), "num"), el("td", ""), el("td", ""));
      table.appendChild(tr);
    }
    const note = el("div", "Copying: +1 the head copies the letter it attends to into its guess of the next letter, " +
      "−1 it suppresses it. Previous token and induction: mean attention one back and " +
      `${d.block_len - 1} back (the letter after the previous copy of the current one). Hover over a dot for its head.`,
      "note");
    const box = el("div");
    box.append(table, note);
    return box;
  }

  function detail(app, k) {
    const snaps = app.snaps, d = snaps.meta.detail, t = app.view.t, K = snaps.K, n = d.seq_len, A = snaps.arrays;
    const name = d.heads[k], box = el("div");
    const att = new Float64Array(n * n), base = (t * K + k) * n * n;
    for (let i = 0; i < n * n; i++) att[i] = A.attention[base + i] / 255;
    const kept = app.view.selected === k ? " · kept (click again to let go)" : "";
    const rows = [["OV copying score", signed(copyingOf(app, t, name))],
                  ["attention on the previous token", A.prev[t * K + k].toFixed(2)],
                  [`attention ${d.block_len - 1} back (induction)`, A.induction[t * K + k].toFixed(2)]];
    const table = el("table");
    for (const [label, value] of rows) { const tr = el("tr"); tr.append(el("td", label), el("td", value, "num")); table.appendChild(tr); }
    box.append(el("div", `head ${name}`, "hid"), table, el("div", `at epoch ${fmtEpoch(snaps.epochs[t])}${kept}`, "muted"),
               heatmap(att, n, n, `mean attention over ${d.n_sequences} fresh sequences: query position (rows), key ` +
                    "position (columns)", snaps.meta.colours.sequential, { signed: false, cell: Math.max(4, Math.floor(192 / n)), vmax: 1 }));
    return box;
  }

  Object.assign(exports, { legendTitle: "Heads at this snapshot", hint: "Hover over a dot to see that head's " +
    "attention pattern; click it to keep it.", legend, detail });
})((globalThis.viewerModules ??= {}).family = {});
