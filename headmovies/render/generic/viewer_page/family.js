// The generic viewer's legend and head pane (render/generic/viewer.py): every head in its
// colour (click one to keep it), and per head its place in each plane at the snapshot and its
// centred QK and OV circuits as heatmaps at the stored snapshot at or before it.
// app: as in scatter_main.js; the payload's arrays qk int8 [M, H, n, n], ov int8
// [M, H, n_out, n] (127 = the map's scale), scales float32 [M, H, 2] (QK, OV).
"use strict";
(function (exports) {
  const { fmtEpoch } = viewerModules.format;
  const { el, swatch } = viewerModules.dom;
  const { indexAtOrBefore } = viewerModules.axes;
  const { heatmap } = viewerModules.heatmap;

  function legend(app) {
    const meta = app.snaps.meta, view = app.view, list = el("ul");
    if (meta.dots.length > 8) list.style.columns = "4 5em";
    meta.dots.forEach((dot, k) => {
      const li = el("li");
      li.dataset.head = dot.label;
      li.style.cursor = "pointer";
      if (k === view.selected) li.style.fontWeight = "600";
      li.append(swatch(dot.colour), dot.label);
      li.addEventListener("click", () => {
        view.selected = k === view.selected ? null : k;
        app.showDetail(); app.redraw();
      });
      list.appendChild(li);
    });
    const shades = meta.detail.layers > 1 ? " (one shade per layer)" : "";
    const note = el("div", "Each dot is one attention head" + shades + ". Hover over a " +
      "dot, or click it or its name here, for that head's circuits as heatmaps.", "note");
    const box = el("div");
    box.append(list, note);
    return box;
  }

  // Head k's map `name` ("qk" or "ov") at stored snapshot m: a <figure> (heatmap.js) on its own scale
  function circuitMap(app, name, m, k) {
    const snaps = app.snaps, d = snaps.meta.detail, H = snaps.K, A = snaps.arrays;
    const [rows, cols] = name === "qk" ? [d.tokens, d.tokens] : [d.outputs, d.tokens];
    const scale = A.scales[(m * H + k) * 2 + (name === "qk" ? 0 : 1)], base = (m * H + k) * rows * cols;
    const values = new Float64Array(rows * cols);
    for (let i = 0; i < rows * cols; i++) values[i] = A[name][base + i] / 127 * scale;
    const words = name === "qk" ? "QK circuit: query (rows), key (columns)" : "OV circuit: output (rows), token attended (columns)";
    const fig = heatmap(values, rows, cols, words, snaps.meta.colours.heatmap,
                     { cell: Math.max(2, Math.floor(192 / Math.max(rows, cols))), vmax: scale });
    fig.dataset.map = name;
    fig.dataset.scale = String(scale);
    return fig;
  }

  function detail(app, k) {
    const snaps = app.snaps, meta = snaps.meta, d = meta.detail, t = app.view.t, box = el("div");
    const m = indexAtOrBefore(d.map_epochs, snaps.epochs[t]);
    const table = el("table");
    app.panels.forEach((p) => {
      const i = (t * snaps.K + k) * 2, tr = el("tr");
      tr.append(el("td", p.spec.title), el("td", `(${p.xy[i].toPrecision(3)}, ${p.xy[i + 1].toPrecision(3)})`, "num"));
      table.appendChild(tr);
    });
    const kept = app.view.selected === k ? " · kept (click again to let go)" : "";
    const maps = el("div", undefined, "heatmaps");
    maps.append(circuitMap(app, "qk", m, k), circuitMap(app, "ov", m, k));
    box.append(el("div", `head ${d.heads[k]}`, "hid"), table,
               el("div", `at epoch ${fmtEpoch(snaps.epochs[t])}${kept}; heatmaps at epoch ${fmtEpoch(d.map_epochs[m])} ` +
                  `(${d.map_epochs.length} snapshots hold them)`, "muted maps-epoch"), maps);
    return box;
  }

  Object.assign(exports, { legendTitle: "Heads", hint: "Hover over a dot, or click a head's name, to see its QK " +
    "and OV circuits; click to keep it.", legend, detail });
})((globalThis.viewerModules ??= {}).family = {});
