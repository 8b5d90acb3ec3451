// The OV-coherent viewer's legend and token pane (render/ov_coherent/viewer.py): per head its
// preference order of the signal tokens and their read-off QK scores (minus the mean noise
// score) at the snapshot; per token its scores in every head, and each head's OV table.
// app: as in scatter_main.js; the payload's arrays qk [T, H, 12], ov [T, H, 10, 12].
"use strict";
(function (exports) {
  const { fmtEpoch, fmtSigned: signed } = viewerModules.format;
  const { el, swatch } = viewerModules.dom;
  const { heatmap } = viewerModules.heatmap;

  // tokens V (the dots) and classes C (the pairs) come in the payload
  const qkOf = (app, t, h, tok) => app.snaps.arrays.qk[(t * app.snaps.meta.detail.n_heads + h) * app.snaps.K + tok];

  function legend(app) {
    const snaps = app.snaps, meta = snaps.meta, d = meta.detail, t = app.view.t, H = d.n_heads;
    const box = el("div"), table = el("table"), head = el("tr");
    head.appendChild(el("th", "head"));
    head.appendChild(el("th", "prefers (most first)"));
    for (const tok of d.signal) {
      const th = el("th");
      th.append(swatch(meta.dots[tok].colour), ` ${tok}`);
      head.appendChild(th);
    }
    table.appendChild(head);
    for (let h = 0; h < H; h++) {
      const tr = el("tr");
      tr.dataset.head = String(h + 1);
      tr.append(el("td", `head ${h + 1}`), el("td", d.orderings[t][h], "ordering"));
      for (const tok of d.signal) tr.appendChild(el("td", signed(qkOf(app, t, h, tok)), "num qk"));
      table.appendChild(tr);
    }
    box.appendChild(table);
    const opp = d.opposite[t];
    if (opp !== null) {
      box.appendChild(el("div", opp ? "Heads 1 and 2 prefer the signal tokens in opposite orders at this snapshot."
                                     : "Heads 1 and 2 do not prefer the signal tokens in opposite orders here.", "note opposite"));
    }
    box.appendChild(el("div", "Numbers: how strongly the read-off attends to each signal token, minus the mean over " +
      "noise tokens (\"noise\" in the order marks where that mean falls). Dots: tokens 1-4 coloured, the read-off a " +
      "ring, noise small and grey. Hover over a dot for that token.", "note"));
    return box;
  }

  function detail(app, k) {
    const snaps = app.snaps, meta = snaps.meta, d = meta.detail, t = app.view.t, H = d.n_heads, box = el("div");
    const V = snaps.K, C = d.classes.length;
    const name = k === 0 ? "the read-off token" : d.signal.includes(k) ? `signal token ${k}` : `noise token ${k}`;
    const table = el("table");
    for (let h = 0; h < H; h++) {
      const tr = el("tr");
      tr.append(el("td", `head ${h + 1}: attention score minus mean noise`), el("td", signed(qkOf(app, t, h, k)), "num"));
      table.appendChild(tr);
    }
    const kept = app.view.selected === k ? " · kept (click again to let go)" : "";
    box.append(el("div", name, "hid"), table, el("div", `at epoch ${fmtEpoch(snaps.epochs[t])}${kept}`, "muted"));
    const maps = el("div", undefined, "heatmaps");
    for (let h = 0; h < Math.min(H, 2); h++) {
      const base = (t * H + h) * C * V, table = snaps.arrays.ov.subarray(base, base + C * V);
      maps.appendChild(heatmap(table, C, V, `head ${h + 1}'s OV table`, meta.colours.heatmap, { cell: H === 1 ? 16 : 11 }));
    }
    box.append(maps, el("div", "OV table: the logit each pair gets (rows " + d.classes.map((c) => c.join("")).join(", ") +
      `) per unit of attention on each token 0-${V - 1} (columns), centred over pairs.`, "note"));
    return box;
  }

  Object.assign(exports, { legendTitle: "Heads at this snapshot", hint: "Hover over a dot to see that token in " +
    "every head and the heads' OV tables; click it to keep it.", legend, detail });
})((globalThis.viewerModules ??= {}).family = {});
