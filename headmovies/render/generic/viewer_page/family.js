// The generic viewer's legend and head pane (render/generic/viewer.py): every head in its
// colour (click one to keep it), and per head its place in each plane at the snapshot and its
// centred QK and OV circuits as heatmaps at the stored snapshot at or before it.
// A run with probe scores: the timeline adds each score's curve (of the head hovered or kept,
// else the strongest head's), and the head's pane its scores and its attention pattern on the
// probe at the stored snapshot at or before the current one, with the probe's tokens.
// app: as in scatter_main.js; the payload's arrays qk int8 [M, H, n, n], ov int8
// [M, H, n_out, n] (127 = the map's scale), scales float32 [M, H, 2] (QK, OV); with a probe
// (detail.probe) scores float32 [T, S, H] and patterns uint8 [M', H, P, P] (255 = attention 1).
// Score space (detail.view "scores"): one plane per layer, axes fixed 0 to 1, in rows of up to
// four, a dashed line at induction score 0.5; a head is absent (NaN) from other layers' planes.
"use strict";
(function (exports) {
  const { fmtEpoch } = viewerModules.format;
  const { el, swatch } = viewerModules.dom;
  const { indexAtOrBefore } = viewerModules.axes;
  const { heatmap } = viewerModules.heatmap;
  const { payloadSeries, timelineNote: curvesNote } = viewerModules.curves;
  const SCORE_INK = { previous_token: "#1f78b4", duplicate_token: "#8c564b", induction: "#e7298a" };
  const words = (name) => name.replace("_", "-");
  const PER_ROW = 4, GAP = viewerModules.scatter.GAP;
  const scoreView = (app) => app.snaps.meta.detail.view === "scores";

  // Score space: up to four planes a row, layer by layer, as the movie lays them out
  function scoreGrid(P) {
    const cols = Math.min(Math.max(P, 1), PER_ROW), free = Math.max(300, window.innerWidth - 470);
    return { rows: Math.ceil(P / cols), cols, flow: "row", size: Math.max(220, Math.min(P === 1 ? 480 : 400, Math.floor((free - (cols - 1) * GAP) / cols))) };
  }

  // Score space: the dashed line where a perfect induction head sits on the repeated probe
  function underlay(app, panel, ctx, f) {
    if (!scoreView(app) || !f.fixed) return;
    const s = panel.spec, y = f.Y(0.5);
    ctx.save();
    ctx.strokeStyle = "#b0b0b0"; ctx.setLineDash([4, 3]); ctx.lineWidth = 1;
    ctx.beginPath(); ctx.moveTo(f.X(s.x[0]), y); ctx.lineTo(f.X(s.x[1]), y); ctx.stroke();
    ctx.fillStyle = "#909090"; ctx.font = "10px system-ui, sans-serif"; ctx.textAlign = "right"; ctx.textBaseline = "bottom";
    ctx.fillText("perfect induction", f.X(s.x[1]) - 3, y - 2);
    ctx.restore();
  }

  const probeOf = (app) => (app.snaps.meta.detail.probe && app.snaps.meta.detail.probe.scores ? app.snaps.meta.detail.probe : null);
  const focus = (app) => (app.view.hovered !== null ? app.view.hovered : app.view.selected);

  // Score j of head k at snapshot i; k null: the largest over heads
  function scoreAt(app, i, j, k) {
    const S = probeOf(app).scores.length, H = app.snaps.K, A = app.snaps.arrays.scores, base = (i * S + j) * H;
    if (k !== null) return A[base + k];
    let best = NaN;
    for (let h = 0; h < H; h++) if (!(A[base + h] <= best)) best = Number.isFinite(A[base + h]) ? A[base + h] : best;
    return best;
  }

  // The timeline: the logged metrics, then each probe score from 0 to 1 (dashed, the right axis)
  function series(app) {
    const out = payloadSeries(app.snaps), probe = probeOf(app);
    if (!probe) return out;
    const k = focus(app), who = k === null ? "strongest head" : app.snaps.meta.detail.heads[k];
    probe.scores.forEach((name, j) => out.push({ label: `${name} (${who})`, colour: SCORE_INK[name] || "#555", lo: 0, hi: 1,
      dash: [5, 3], width: 1.4, right: true, at: (i) => scoreAt(app, i, j, k) }));
    return out;
  }

  function timelineNote(app) {
    const parts = curvesNote(app.snaps.meta), probe = probeOf(app);
    if (!probe) return parts;
    const last = parts.pop();
    parts.push([`${parts.length ? " · " : ""}dashed, 0 to 1 on the right: probe scores of the head hovered or kept, else the strongest: `, null]);
    probe.scores.forEach((name, j) => parts.push([`${j ? ", " : ""}${words(name)}`, SCORE_INK[name] || "#555"]));
    parts.push(last);
    return parts;
  }

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

  // Head k's attention pattern on the probe's first sequence at the stored snapshot at or
  // before the current one: a heatmap (query rows, key columns) with the tokens under it
  function patternMap(app, k) {
    const probe = probeOf(app), snaps = app.snaps, P = probe.positions;
    if (!probe.pattern_epochs.length) return null;
    const m = indexAtOrBefore(probe.pattern_epochs, snaps.epochs[app.view.t]), base = (m * snaps.K + k) * P * P;
    const values = new Float64Array(P * P);
    for (let i = 0; i < P * P; i++) values[i] = snaps.arrays.patterns[base + i] / 255;
    // black: the largest weight past the first query (which can only attend to itself, weight 1)
    let top = 0;
    for (let i = P; i < P * P; i++) top = Math.max(top, values[i]);
    const cell = Math.max(2, Math.floor(192 / P));
    const fig = heatmap(values, P, P, `attention on the probe at epoch ${fmtEpoch(probe.pattern_epochs[m])}: query (rows), ` +
                        "key (columns)", snaps.meta.colours.sequential, { signed: false, cell, vmax: top || 1 });
    fig.dataset.map = "pattern";
    fig.dataset.epoch = String(probe.pattern_epochs[m]);
    const readout = el("div", "hover for a query and key", "muted pattern-at");
    const canvas = fig.querySelector("canvas"), lab = probe.token_labels;
    canvas.addEventListener("mousemove", (ev) => {
      const r = canvas.getBoundingClientRect(), q = Math.floor((ev.clientY - r.top) / cell), key = Math.floor((ev.clientX - r.left) / cell);
      if (q < 0 || q >= P || key < 0 || key >= P) return;
      readout.textContent = `query ${q} "${lab[q]}" → key ${key} "${lab[key]}": ${values[q * P + key].toFixed(2)}`;
    });
    const tokens = el("div", `probe: ${lab.join(" ")}`, "muted probe-tokens");
    fig.append(readout, tokens);
    return fig;
  }

  function detail(app, k) {
    const snaps = app.snaps, meta = snaps.meta, d = meta.detail, t = app.view.t, box = el("div");
    const m = indexAtOrBefore(d.map_epochs, snaps.epochs[t]);
    const table = el("table");
    app.panels.forEach((p) => {
      const i = (t * snaps.K + k) * 2, tr = el("tr");
      if (!Number.isFinite(p.xy[i])) return;   // absent from this plane (score space: another layer's)
      tr.append(el("td", p.spec.title), el("td", `(${p.xy[i].toPrecision(3)}, ${p.xy[i + 1].toPrecision(3)})`, "num"));
      table.appendChild(tr);
    });
    const kept = app.view.selected === k ? " · kept (click again to let go)" : "";
    const maps = el("div", undefined, "heatmaps");
    maps.append(circuitMap(app, "qk", m, k), circuitMap(app, "ov", m, k));
    const probe = probeOf(app);
    if (probe) {
      probe.scores.forEach((name, j) => {
        const tr = el("tr"), v = scoreAt(app, t, j, k);
        tr.dataset.score = name;
        tr.append(el("td", `${words(name)} score`), el("td", Number.isFinite(v) ? v.toFixed(3) : "–", "num"));
        table.appendChild(tr);
      });
      const pattern = patternMap(app, k);
      if (pattern) maps.prepend(pattern);
    }
    box.append(el("div", `head ${d.heads[k]}`, "hid"), table,
               el("div", `at epoch ${fmtEpoch(snaps.epochs[t])}${kept}; heatmaps at epoch ${fmtEpoch(d.map_epochs[m])} ` +
                  `(${d.map_epochs.length} snapshots hold them)`, "muted maps-epoch"), maps);
    return box;
  }

  Object.assign(exports, { legendTitle: "Heads", hint: "Hover over a dot, or click a head's name, to see its QK " +
    "and OV circuits; click to keep it.", legend, detail, series, timelineNote,
    start(app) {
      if (probeOf(app)) app.tl.right = 34;
      if (scoreView(app)) { this.panelGrid = scoreGrid; this.underlay = underlay; }
    },
    hooks: (app) => ({
      // head k's pattern as drawn at the current snapshot: {epoch, positions, labels, values [P][P]}
      pattern(k) {
        const probe = probeOf(app);
        if (!probe || !probe.pattern_epochs.length) return null;
        const P = probe.positions, m = indexAtOrBefore(probe.pattern_epochs, app.snaps.epochs[app.view.t]);
        const base = (m * app.snaps.K + k) * P * P, rows = [];
        for (let q = 0; q < P; q++) rows.push(Array.from(app.snaps.arrays.patterns.subarray(base + q * P, base + q * P + P), (v) => v / 255));
        return { epoch: probe.pattern_epochs[m], positions: P, labels: probe.token_labels.slice(), values: rows };
      },
    }) });
})((globalThis.viewerModules ??= {}).family = {});
