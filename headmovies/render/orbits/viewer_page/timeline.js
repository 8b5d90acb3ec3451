// The timeline beside (or under) the panels, linear in epochs from the first snapshot to the run's last
// epoch: heads in verified orbits, the equivariance error, the run's events and each final
// orbit's lock-in, and the cursor. app: as in panels.js, with tl: {canvas, w, h, left, right}.
"use strict";
(function (exports) {
  const { fmtEpoch } = viewerModules.format;
  const INK = { paper: "#fff", future: "#f3f3f3", axis: "#bbb", label: "#666", eqError: "#c9a0dc", heads: "#333",
                event: "#888", cursor: "#d00" };

  // The canvas, its sizing, the epoch axis, tick steps and clicks are the scatter viewers' (curves.js)
  const curves = viewerModules.curves;
  const { sizeTimeline, epochAxis, niceStep, timelineEpoch } = curves;

  function createTimeline(canvas) { return { ...curves.createTimeline(canvas), h: 140 }; }

  // Dashed marks: the run's events, each final orbit's verification among them (worded in
  // Python, render/orbits/events.py), as [epoch, label, colour]
  function marks(meta) {
    return meta.events.map((e) => [e.epoch, e.short, e.result ? e.colour : INK.event]);
  }

  // Playback pauses about 1 s at these epochs: events and lock-ins
  function holdEpochs(meta) {
    return meta.events.map((e) => e.epoch).concat(meta.orbits.filter((o) => o.locked_in !== null).map((o) => o.locked_in));
  }

  function drawTimeline(app) {
    const tl = app.tl, snaps = app.snaps, meta = snaps.meta, H = snaps.H, ax = epochAxis(app);
    const ctx = tl.canvas.getContext("2d"), dpr = window.devicePixelRatio || 1, w = tl.w, h = tl.h;
    ctx.setTransform(dpr, 0, 0, dpr, 0, 0);
    ctx.fillStyle = INK.paper; ctx.fillRect(0, 0, w, h);
    const top = 40, bottom = h - 22, x0 = tl.left, x1 = w - tl.right;
    const first = snaps.epochs[0], last = snaps.epochs[snaps.T - 1];
    if (last < ax.end) { ctx.fillStyle = INK.future; ctx.fillRect(ax.x(last), top, x1 - ax.x(last), bottom - top); }
    ctx.strokeStyle = INK.axis; ctx.lineWidth = 1;
    ctx.beginPath(); ctx.moveTo(x0, bottom + 0.5); ctx.lineTo(x1, bottom + 0.5); ctx.stroke();
    ctx.fillStyle = INK.label; ctx.font = "11px system-ui, sans-serif"; ctx.textAlign = "center"; ctx.textBaseline = "top";
    const step = niceStep(ax.end - first);
    for (let e = Math.ceil(first / step) * step; e <= ax.end; e += step) {
      const x = ax.x(e);
      ctx.beginPath(); ctx.moveTo(x + 0.5, bottom); ctx.lineTo(x + 0.5, bottom + 4); ctx.stroke();
      const tw = ctx.measureText(fmtEpoch(e)).width;
      ctx.fillText(fmtEpoch(e), Math.min(x, w - tw / 2 - 1), bottom + 6);
    }
    ctx.textAlign = "left"; ctx.fillText("epoch", 2, bottom + 6);
    // equivariance error (log scale), light
    const eq = snaps.eqError.map((v, i) => [i, v]).filter(([, v]) => v !== null && v > 0);
    if (eq.length > 1) {
      const logs = eq.map(([, v]) => Math.log10(v));
      const lo = Math.min(...logs), hi = Math.max(...logs), span = Math.max(hi - lo, 1e-9);
      ctx.strokeStyle = INK.eqError; ctx.lineWidth = 1.2; ctx.beginPath();
      eq.forEach(([i], j) => {
        const x = ax.x(snaps.epochs[i]), y = bottom - (logs[j] - lo) / span * (bottom - top - 4);
        j ? ctx.lineTo(x, y) : ctx.moveTo(x, y);
      });
      ctx.stroke();
    }
    // heads in verified orbits (0..H), step curve
    ctx.strokeStyle = INK.heads; ctx.lineWidth = 1.5; ctx.beginPath();
    let lastY = null;
    for (let i = 0; i < snaps.T; i++) {
      const x = ax.x(snaps.epochs[i]), y = bottom - snaps.verifiedCount(i) / H * (bottom - top - 4);
      if (lastY === null) ctx.moveTo(x, y); else { ctx.lineTo(x, lastY); ctx.lineTo(x, y); }
      lastY = y;
    }
    ctx.stroke();
    // events and lock-ins, labels in three rows, each where it fits
    ctx.font = "10.5px system-ui, sans-serif"; ctx.textBaseline = "top";
    const rowEnd = [-Infinity, -Infinity, -Infinity];
    for (const [epoch, label, colour] of marks(meta).sort((a, b) => a[0] - b[0])) {
      const x = ax.x(epoch);
      ctx.strokeStyle = colour; ctx.lineWidth = 1.2; ctx.setLineDash([3, 3]);
      ctx.beginPath(); ctx.moveTo(x + 0.5, top); ctx.lineTo(x + 0.5, bottom); ctx.stroke(); ctx.setLineDash([]);
      const width = ctx.measureText(label).width;
      let left = Math.min(Math.max(x - width / 2, x0), x1 - width);
      let row = rowEnd.findIndex((end) => end + 6 <= left);
      if (row < 0) {                               // no room: the least crowded row, shifted right
        row = rowEnd.indexOf(Math.min(...rowEnd));
        left = Math.min(rowEnd[row] + 6, x1 - width);
      }
      ctx.fillStyle = colour; ctx.textAlign = "left";
      ctx.fillText(label, left, 1 + 12 * row);
      rowEnd[row] = left + width;
    }
    // cursor
    const cx = ax.x(snaps.epochs[app.view.t]);
    ctx.strokeStyle = INK.cursor; ctx.lineWidth = 2;
    ctx.beginPath(); ctx.moveTo(cx, top - 2); ctx.lineTo(cx, bottom + 2); ctx.stroke();
    ctx.fillStyle = INK.heads; ctx.textAlign = "right"; ctx.textBaseline = "top";
    ctx.fillText(String(H), x0 - 4, top - 2); ctx.fillText("0", x0 - 4, bottom - 10);
  }

  // The words under the timeline
  function timelineNote(snaps) {
    const meta = snaps.meta, parts = ["Black: heads in verified orbits (0 to " + snaps.H + ")"];
    if (snaps.eqError.some((v) => v !== null)) parts.push("lilac: equivariance error (log scale)");
    parts.push("dashed: " + meta.events.map((e) => `epoch ${fmtEpoch(e.epoch)}: ${e.label}`).join("; "));
    return parts.join(" · ") + ". Click or drag to move.";
  }

  Object.assign(exports, { createTimeline, sizeTimeline, niceStep, holdEpochs, drawTimeline, timelineNote, timelineEpoch });
})((globalThis.viewerModules ??= {}).timeline = {});
