// The timeline of every viewer page (docs/viewer.md), linear in epochs from the first snapshot
// to the run's last epoch: the run's curves (the payload's, or the family's `series`), its
// events as dashed marks with their labels in rows, and the cursor; click or drag to move.
"use strict";
(function (exports) {
  const { fmtEpoch, fmtNum, fmtG } = viewerModules.format;
  const INK = { paper: "#fff", future: "#f3f3f3", axis: "#bbb", label: "#666", cursor: "#d00" };

  function createTimeline(canvas, h = 150) { return { canvas, w: 0, h, left: 44, right: 16 }; }

  function sizeTimeline(tl, width) {
    const dpr = window.devicePixelRatio || 1;
    tl.w = width;
    tl.canvas.style.width = width + "px"; tl.canvas.style.height = tl.h + "px";
    tl.canvas.width = Math.round(width * dpr); tl.canvas.height = Math.round(tl.h * dpr);
  }

  // {x(epoch) -> px, epoch(px), end}: from the first snapshot to the run's last epoch
  function epochAxis(app) {
    const tl = app.tl, snaps = app.snaps, first = snaps.epochs[0];
    const end = Math.max(snaps.meta.final_epoch, snaps.epochs[snaps.T - 1] || 1);
    const span = Math.max(1, end - first), width = tl.w - tl.left - tl.right;
    return { end, x: (e) => tl.left + (e - first) / span * width, epoch: (x) => first + (x - tl.left) / width * span };
  }

  // A round tick step giving about 8 ticks over `span`: 1, 2, 2.5 or 5 times a power of 10,
  // at least 1 (epochs are whole)
  function niceStep(span) {
    const raw = Math.max(span, 8) / 8, p = Math.pow(10, Math.floor(Math.log10(raw)));
    for (const m of [1, 2, 2.5, 5, 10]) if (m * p >= raw) return m * p;
    return 10 * p;
  }

  // Label rows for marks [[x, width]] sorted by x: each in the first row where it fits
  function labelRows(marks, x0, x1, rows) {
    const rowEnd = new Array(rows).fill(-Infinity), out = [];
    for (const [x, width] of marks) {
      let left = Math.min(Math.max(x - width / 2, x0), x1 - width);
      let row = rowEnd.findIndex((end) => end + 6 <= left);
      if (row < 0) { row = rowEnd.indexOf(Math.min(...rowEnd)); left = Math.min(rowEnd[row] + 6, x1 - width); }
      rowEnd[row] = left + width;
      out.push([left, row]);
    }
    return out;
  }

  function drawTimeline(app) {
    const tl = app.tl, snaps = app.snaps, meta = snaps.meta, ax = epochAxis(app);
    const ctx = tl.canvas.getContext("2d"), dpr = window.devicePixelRatio || 1, w = tl.w, h = tl.h;
    ctx.setTransform(dpr, 0, 0, dpr, 0, 0);
    ctx.fillStyle = INK.paper; ctx.fillRect(0, 0, w, h);
    const top = 40, bottom = h - 22, x0 = tl.left, x1 = w - tl.right, last = snaps.epochs[snaps.T - 1];
    if (last < ax.end) { ctx.fillStyle = INK.future; ctx.fillRect(ax.x(last), top, x1 - ax.x(last), bottom - top); }
    ctx.strokeStyle = INK.axis; ctx.lineWidth = 1;
    ctx.beginPath(); ctx.moveTo(x0, bottom + 0.5); ctx.lineTo(x1, bottom + 0.5); ctx.stroke();
    ctx.fillStyle = INK.label; ctx.font = "11px system-ui, sans-serif"; ctx.textAlign = "center"; ctx.textBaseline = "top";
    const step = niceStep(ax.end - snaps.epochs[0]);
    for (let e = Math.ceil(snaps.epochs[0] / step) * step; e <= ax.end; e += step) {
      const x = ax.x(e), tw = ctx.measureText(fmtEpoch(e)).width;
      ctx.beginPath(); ctx.moveTo(x + 0.5, bottom); ctx.lineTo(x + 0.5, bottom + 4); ctx.stroke();
      ctx.fillText(fmtEpoch(e), Math.min(x, w - tw / 2 - 1), bottom + 6);
    }
    ctx.textAlign = "left"; ctx.fillText("epoch", 2, bottom + 6);
    const family = app.family || {}, series = family.series ? family.series(app) : payloadSeries(snaps);
    const drawn = [];
    for (const c of series) {
      const span = Math.max(c.hi - c.lo, 1e-12), y = (v) => bottom - (v - c.lo) / span * (bottom - top - 4);
      ctx.strokeStyle = c.colour; ctx.lineWidth = c.width ?? 1.6; ctx.setLineDash(c.dash || []); ctx.beginPath();
      let pen = false, lastY = 0;
      const pts = [];
      for (let i = 0; i < snaps.T; i++) {
        const v = c.at(i);
        if (!Number.isFinite(v)) { pen = pen && Boolean(c.join); continue; }
        const x = ax.x(snaps.epochs[i]);
        if (!pen) ctx.moveTo(x, y(v));
        else { if (c.step) ctx.lineTo(x, lastY); ctx.lineTo(x, y(v)); }
        pen = true; lastY = y(v);
        pts.push([snaps.epochs[i], c.log ? 10 ** v : v, x, y(v)]);
      }
      ctx.stroke(); ctx.setLineDash([]);
      // a metric logged at fewer snapshots than there are: a dot at each value it has
      if (c.join && pts.length < snaps.T) {
        ctx.fillStyle = c.colour;
        for (const [, , x, py] of pts) { ctx.beginPath(); ctx.arc(x, py, 2, 0, 2 * Math.PI); ctx.fill(); }
      }
      drawn.push({ label: c.label ?? "", colour: c.colour, log: Boolean(c.log), points: pts });
    }
    const scale = series.find((c) => c.scale) || series[0], ticks = [];
    if (scale) {
      ctx.fillStyle = scale.colour; ctx.strokeStyle = INK.axis; ctx.textAlign = "right"; ctx.textBaseline = "middle";
      const span = Math.max(scale.hi - scale.lo, 1e-12), y = (v) => bottom - (v - scale.lo) / span * (bottom - top - 4);
      const marks = scale.hiLabel !== undefined ? [[scale.hi, scale.hiLabel], [scale.lo, scale.loLabel ?? fmtNum(scale.lo)]]
                    : valueTicks(scale.lo, scale.hi, scale.log).map((v) => [scale.log ? Math.log10(v) : v, fmtG(v)]);
      for (const [v, text] of marks) {
        const py = Math.round(y(v)) + 0.5;
        ctx.beginPath(); ctx.moveTo(x0 - 3, py); ctx.lineTo(x0, py); ctx.stroke();
        ctx.fillText(text, x0 - 4, Math.max(top - 2, Math.min(py, bottom - 4)));
        ticks.push({ text, y: y(v) });
      }
    }
    const right = series.find((c) => c.right && c !== scale), rightTicks = [];
    if (right) {  // a second scale (a series with `right`): its ticks on the right, linear
      const span = Math.max(right.hi - right.lo, 1e-12), y = (v) => bottom - (v - right.lo) / span * (bottom - top - 4);
      ctx.fillStyle = INK.label; ctx.strokeStyle = INK.axis; ctx.textAlign = "left"; ctx.textBaseline = "middle";
      for (const v of valueTicks(right.lo, right.hi, false)) {
        const py = Math.round(y(v)) + 0.5;
        ctx.beginPath(); ctx.moveTo(x1, py); ctx.lineTo(x1 + 3, py); ctx.stroke();
        ctx.fillText(fmtG(v), x1 + 4, Math.max(top - 2, Math.min(py, bottom - 4)));
        rightTicks.push({ text: fmtG(v), y: y(v) });
      }
    }
    tl.drawn = { series: drawn, ticks, rightTicks, scale: scale ? scale.label ?? "" : null };
    ctx.font = "10.5px system-ui, sans-serif"; ctx.textBaseline = "top"; ctx.textAlign = "left";
    const marks = (family.marks ? family.marks(app) : meta.events).slice().sort((a, b) => a.epoch - b.epoch);
    const places = labelRows(marks.map((e) => [ax.x(e.epoch), ctx.measureText(e.short).width]), x0, x1, 3);
    marks.forEach((e, i) => {
      const x = ax.x(e.epoch);
      ctx.strokeStyle = e.colour; ctx.lineWidth = 1.2; ctx.setLineDash([3, 3]);
      ctx.beginPath(); ctx.moveTo(x + 0.5, top); ctx.lineTo(x + 0.5, bottom); ctx.stroke(); ctx.setLineDash([]);
      ctx.fillStyle = e.colour; ctx.fillText(e.short, places[i][0], 1 + 12 * places[i][1]);
    });
    const cx = ax.x(snaps.epochs[app.view.t]);
    ctx.strokeStyle = INK.cursor; ctx.lineWidth = 2;
    ctx.beginPath(); ctx.moveTo(cx, top - 2); ctx.lineTo(cx, bottom + 2); ctx.stroke();
  }

  // The payload's curves (meta.curves, values in snaps.curves [T, C]) as series, each joined
  // over the snapshots where it was not logged (a metric logged every 50 steps, snapshots every 25)
  function payloadSeries(snaps) {
    const C = snaps.meta.curves.length;
    return snaps.meta.curves.map((c, j) => ({ join: true, ...c, at: (i) => snaps.curves[i * C + j] }));
  }

  // Values for the y-axis' ticks between lo and hi, in the metric's units: on a log scale (lo, hi
  // log10 of the metric) 1, 2 and 5 times powers of 10 (only the powers when those are 3 or
  // more), else about 3 round steps; the ends where fewer than 2 fall inside
  function valueTicks(lo, hi, log) {
    let out = [];
    if (log) {
      for (let k = Math.floor(lo); k <= Math.ceil(hi); k++)
        for (const m of [1, 2, 5]) { const v = m * 10 ** k, l = Math.log10(v); if (l >= lo - 1e-9 && l <= hi + 1e-9) out.push(v); }
      const powers = out.filter((v) => Math.abs(Math.log10(v) - Math.round(Math.log10(v))) < 1e-9);
      if (powers.length >= 3) out = powers;
      if (out.length < 2) out = [10 ** lo, 10 ** hi];
      return out;
    }
    const raw = (hi - lo) / 3, p = 10 ** Math.floor(Math.log10(raw || 1));
    const step = [1, 2, 2.5, 5, 10].map((m) => m * p).find((s) => s >= raw) || 10 * p;
    for (let v = Math.ceil(lo / step - 1e-9) * step; v <= hi + 1e-9 * step; v += step) out.push(+v.toPrecision(12));
    return out.length >= 2 ? out : [lo, hi];
  }

  // The words under the timeline, as [text, colour | null] parts: each curve in its colour
  function timelineNote(meta) {
    const parts = [];
    // a log-scale curve's range in the metric's own units: lo and hi are its log10
    const range = (c) => (c.log ? `log scale, ${fmtNum(10 ** c.lo)} to ${fmtNum(10 ** c.hi)}` : `${fmtNum(c.lo)} to ${fmtNum(c.hi)}`);
    meta.curves.forEach((c, i) => parts.push([`${i ? ", " : ""}`, null], [`${c.label} (${range(c)})`, c.colour]));
    const marks = meta.events.map((e) => `${e.label} (epoch ${fmtEpoch(e.epoch)})`);
    parts.push([(marks.length ? (parts.length ? " · " : "") + "dashed: " + marks.join("; ") : "") + ". Click or drag to move.", null]);
    return parts;
  }

  function timelineEpoch(app, ev) {
    const rect = app.tl.canvas.getBoundingClientRect();  // CSS may draw it narrower than tl.w
    return epochAxis(app).epoch((ev.clientX - rect.left) * app.tl.w / (rect.width || app.tl.w));
  }

  Object.assign(exports, { createTimeline, sizeTimeline, epochAxis, niceStep, labelRows, drawTimeline, timelineNote, valueTicks, payloadSeries,
                           timelineEpoch });
})((globalThis.viewerModules ??= {}).curves = {});
