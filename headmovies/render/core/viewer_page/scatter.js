// The viewer engine's planes (docs/viewer.md, "The page"): one canvas per plane with a
// dot per head (or token), its trail and the axes: fixed ranges, or symmetric about 0 and
// following the dots by the movie's rule (axes.js, `axisLimits`); and which dot the mouse is on.
// A panel: {spec (meta.planes[i]), index, el, canvas, ctx, size, screen: [K] of [px, py], xy:
// Float64Array [T, K, 2], limits: [T] | null, bound: [T, K] | null, compute?(xy)}. A dot's style:
// {kind: "dot" | "ring" | "small", colour, label?, r?, alpha?, fill?, edge?, trail?, rank?}.
// A dot whose coordinates in a plane are NaN is absent from it: not drawn, no trail, not picked
// (screen[k] null).
"use strict";
(function (exports) {
  const { fmtNum } = viewerModules.format;
  const { $ } = viewerModules.dom;
  const { axisLimits, pointAt, trailOf, trailPoints } = viewerModules.axes;
  // the look of the planes; a family may change some (family.look)
  const LABEL_NEAR = 24;   // px, two label heights: labelled dots this close share one label
  const LOOK = { paper: "#fff", cross: "#e4e4e4", label: "#777", chosen: "#111", small: "#9a9a9a", bound: "#999", ring: 9 };
  const GAP = 14, PAD = 26;                          // px between panels; inner margin of fixed axes
  const RADIUS = { small: 3, ring: 5, dot: 5.5 }, RANK = { small: 0, ring: 1, dot: 2 };

  // The grid of P panels: one row beside the legend (about 420 px); one panel alone a little
  // larger, so that the page is not half empty. {rows, cols, size (px), flow?} (flow: the CSS
  // grid-auto-flow, default "column"); a family may lay out its own (family.panelGrid)
  function panelGrid(P) {
    const free = Math.max(300, window.innerWidth - 470), cols = Math.max(P, 1);
    return { rows: 1, cols, size: Math.max(220, Math.min(P === 1 ? 480 : 400, Math.floor((free - (P - 1) * GAP) / cols))) };
  }

  function makePanel(app, spec, index) {
    const el = document.createElement("div");
    el.className = "panel";
    const h2 = document.createElement("h2");
    h2.textContent = spec.title;
    const canvas = document.createElement("canvas");
    const axes = document.createElement("p");
    axes.className = "axes";
    axes.textContent = spec.axes;
    el.append(h2, canvas, axes);
    const panel = { spec, index, el, canvas, ctx: canvas.getContext("2d"), size: 0, screen: [], xy: null, limits: null,
                    bound: null };
    const view = app.view;
    canvas.addEventListener("mousemove", (ev) => {
      const k = pick(panel, ev);
      if (k !== view.hovered) { view.hovered = k; app.showDetail(); app.redraw(); }
    });
    canvas.addEventListener("mouseleave", () => { view.hovered = null; app.showDetail(); app.redraw(); });
    canvas.addEventListener("click", (ev) => {
      const k = pick(panel, ev);
      view.selected = k === view.selected ? null : k;
      app.showDetail(); app.redraw();
    });
    return panel;
  }

  function sizePanel(panel, size) {
    const dpr = window.devicePixelRatio || 1;
    panel.size = size;
    panel.canvas.style.width = panel.canvas.style.height = size + "px";
    panel.canvas.width = panel.canvas.height = Math.round(size * dpr);
    panel.el.style.setProperty("--panel-size", size + "px");
  }

  // The payload's planes column by column in the family's grid; planes added in the page (in
  // #custom-panels, where a page has it) below them in as many columns
  function layoutPanels(app) {
    const g = (app.family.panelGrid || panelGrid)(app.snaps.P), grid = $("panels"), custom = $("custom-panels");
    grid.style.gridTemplateColumns = `repeat(${g.cols}, ${g.size}px)`;
    grid.style.gridTemplateRows = `repeat(${g.rows}, auto)`;
    grid.style.gridAutoFlow = g.flow || "column";
    $("panels-area").style.width = `${g.cols * g.size + (g.cols - 1) * GAP}px`;
    if (custom) custom.style.gridTemplateColumns = `repeat(${g.cols}, ${g.size}px)`;
    app.panelSize = g.size;
    for (const p of app.panels) sizePanel(p, g.size);
  }

  // The plane's coordinates at every snapshot (from coords [T, P, K, 2], or computed in the
  // page by panel.compute(xy)) and its axes
  function fillCoords(app, panel) {
    const snaps = app.snaps, K = snaps.K, T = snaps.T, P = snaps.P, xy = new Float64Array(T * K * 2);
    if (panel.compute) panel.compute(xy);
    else {
      for (let t = 0; t < T; t++)
        for (let k = 0; k < K; k++)
          for (let c = 0; c < 2; c++) xy[(t * K + k) * 2 + c] = snaps.coords[((t * P + panel.index) * K + k) * 2 + c];
    }
    panel.xy = xy;
    const fixed = panel.spec.x && panel.spec.y;
    panel.limits = fixed ? null : axisLimits(xy, K, snaps.epochs, snaps.meta.trail_epochs, snaps.meta.axes);
  }

  // Data -> canvas px at snapshot t: {X, Y, fixed, L}
  function frame(panel, t) {
    const s = panel.spec, size = panel.size;
    if (panel.limits === null) {
      const [x0, x1] = s.x, [y0, y1] = s.y, w = size - 2 * PAD;
      return { fixed: true, X: (x) => PAD + (x - x0) / (x1 - x0) * w, Y: (y) => size - PAD - (y - y0) / (y1 - y0) * w };
    }
    const L = panel.limits[t], half = size / 2;
    return { fixed: false, L, X: (x) => half + (x / L) * half, Y: (y) => half - (y / L) * half };
  }

  function drawAxes(ctx, panel, f, ink) {
    const s = panel.spec, size = panel.size;
    ctx.strokeStyle = ink.cross; ctx.lineWidth = 1; ctx.fillStyle = ink.label;
    ctx.font = "11px system-ui, sans-serif";
    if (f.fixed) {
      ctx.strokeRect(f.X(s.x[0]), f.Y(s.y[1]), f.X(s.x[1]) - f.X(s.x[0]), f.Y(s.y[0]) - f.Y(s.y[1]));
      ctx.beginPath();
      if (s.x[0] < 0 && s.x[1] > 0) { ctx.moveTo(f.X(0), f.Y(s.y[0])); ctx.lineTo(f.X(0), f.Y(s.y[1])); }
      if (s.y[0] < 0 && s.y[1] > 0) { ctx.moveTo(f.X(s.x[0]), f.Y(0)); ctx.lineTo(f.X(s.x[1]), f.Y(0)); }
      ctx.stroke();
      ctx.textBaseline = "top"; ctx.textAlign = "left"; ctx.fillText(fmtNum(s.x[0]), f.X(s.x[0]), size - PAD + 3);
      ctx.textAlign = "right"; ctx.fillText(fmtNum(s.x[1]), f.X(s.x[1]), size - PAD + 3);
      ctx.textAlign = "center"; ctx.fillText(s.x_label, size / 2, size - PAD + 3);
      ctx.save(); ctx.translate(PAD - 16, size / 2); ctx.rotate(-Math.PI / 2);
      ctx.fillText(s.y_label, 0, 0); ctx.restore();
      ctx.textAlign = "right"; ctx.textBaseline = "bottom"; ctx.fillText(fmtNum(s.y[1]), PAD - 3, f.Y(s.y[1]) + 10);
      ctx.textBaseline = "top"; ctx.fillText(fmtNum(s.y[0]), PAD - 3, f.Y(s.y[0]) - 10);
    } else {
      const half = size / 2;
      ctx.beginPath(); ctx.moveTo(half, 0); ctx.lineTo(half, size); ctx.moveTo(0, half); ctx.lineTo(size, half); ctx.stroke();
      ctx.textAlign = "right"; ctx.textBaseline = "top"; ctx.fillText(`axes ±${fmtNum(f.L)}`, size - 6, 5);
      if (s.x_label) {
        ctx.textAlign = "left"; ctx.textBaseline = "bottom";
        ctx.fillText(`across: ${s.x_label} · up: ${s.y_label}`, 6, size - 4);
      }
    }
  }

  // One dot of radius r in its style
  function drawDot(ctx, px, py, st, r, ink) {
    ctx.beginPath(); ctx.arc(px, py, r, 0, 2 * Math.PI);
    if (st.kind === "small") {
      ctx.fillStyle = st.fill || ink.small; ctx.fill();
      if (st.edge) { ctx.strokeStyle = st.edge; ctx.lineWidth = 1; ctx.stroke(); }
    } else if (st.kind === "ring") {
      ctx.fillStyle = ink.paper; ctx.fill();
      ctx.globalAlpha = st.alpha ?? 1; ctx.strokeStyle = st.colour; ctx.lineWidth = 1.8; ctx.stroke(); ctx.globalAlpha = 1;
    } else {
      ctx.fillStyle = st.colour; ctx.fill();
      ctx.strokeStyle = ink.paper; ctx.lineWidth = 0.8; ctx.stroke();
    }
  }

  function drawPanel(app, panel) {
    const snaps = app.snaps, view = app.view, K = snaps.K, trail = snaps.meta.trail_epochs;
    const t = view.t, ctx = panel.ctx, size = panel.size, dpr = window.devicePixelRatio || 1;
    const ink = app.family.look ? { ...LOOK, ...app.family.look } : LOOK;
    ctx.setTransform(dpr, 0, 0, dpr, 0, 0);
    ctx.fillStyle = ink.paper; ctx.fillRect(0, 0, size, size);
    const f = frame(panel, t);
    drawAxes(ctx, panel, f, ink);
    const styles = [];
    for (let k = 0; k < K; k++) styles.push(app.styleOf(t, k));
    const rank = (st) => st.rank ?? RANK[st.kind];
    const order = styles.map((_, k) => k).sort((a, b) => rank(styles[a]) - rank(styles[b]) || b - a);
    if (app.family.underlay) app.family.underlay(app, panel, ctx, f);    // e.g. the orbits' polygons
    if (view.trails && trail > 0) {
      const tr = trailOf(snaps.epochs, t, trail);
      ctx.lineWidth = 1.4;
      for (const k of order) {
        const st = styles[k], base = st.trail ?? (st.kind === "small" ? 0 : 0.8);
        if (!base) continue;
        const pts = trailPoints(panel.xy, K, snaps.epochs, t, k, tr).filter(([x, y]) => Number.isFinite(x) && Number.isFinite(y));
        ctx.strokeStyle = st.colour;
        for (let i = 1; i < pts.length; i++) {
          const age = snaps.epochs[t] - (pts[i - 1][2] + pts[i][2]) / 2;
          ctx.globalAlpha = base * Math.max(0, 1 - age / trail);
          ctx.beginPath(); ctx.moveTo(f.X(pts[i - 1][0]), f.Y(pts[i - 1][1])); ctx.lineTo(f.X(pts[i][0]), f.Y(pts[i][1]));
          ctx.stroke();
        }
      }
      ctx.globalAlpha = 1;
    }
    panel.screen = new Array(K);
    const top = view.selected !== null ? view.selected : view.hovered;
    const drawOrder = top === null ? order : order.filter((k) => k !== top).concat([top]);
    ctx.font = "600 11px system-ui, sans-serif"; ctx.textAlign = "left"; ctx.textBaseline = "bottom";
    const present = (k) => Number.isFinite(pointAt(panel.xy, K, t, k)[0]);
    const named = styles.filter((st, k) => st.kind !== "small" && st.label && present(k)).length <= 6;   // few enough to label them all
    const labels = [];
    for (const k of drawOrder) {
      const [x, y] = pointAt(panel.xy, K, t, k), st = styles[k], px = f.X(x), py = f.Y(y), r = st.r ?? RADIUS[st.kind];
      if (!Number.isFinite(x) || !Number.isFinite(y)) { panel.screen[k] = null; continue; }   // absent from this plane
      panel.screen[k] = [px, py];
      if (panel.bound) {                          // a plane computed in the page: the true place lies within this ring
        const ring = panel.bound[t * K + k] / f.L * size / 2;
        if (ring >= 1.5) {
          ctx.beginPath(); ctx.arc(px, py, ring, 0, 2 * Math.PI);
          ctx.strokeStyle = ink.bound; ctx.globalAlpha = 0.45; ctx.lineWidth = 0.8; ctx.stroke(); ctx.globalAlpha = 1;
        }
      }
      drawDot(ctx, px, py, st, r, ink);
      if (st.label && st.kind !== "small" && (named || k === top)) labels.push({ k, px, py, label: st.label, colour: st.colour });
      if (k === top) {
        ctx.beginPath(); ctx.arc(px, py, ink.ring, 0, 2 * Math.PI);
        ctx.strokeStyle = ink.chosen; ctx.lineWidth = 1.6; ctx.stroke();
      }
    }
    for (const g of labelGroups(labels, LABEL_NEAR)) {   // left of the dot near the right edge
      const text = joinLabels(g.slice().sort((a, b) => a.k - b.k).map((d) => d.label)), { px, py, colour } = g[0];
      const right = px + 8 + ctx.measureText(text).width > size;
      ctx.fillStyle = colour; ctx.textAlign = right ? "right" : "left";
      ctx.fillText(text, right ? px - 6 : px + 6, py - 3);
    }
  }

  // Labels of dots closer than `near` px to a group's first dot, in order: one label per group
  // (heads that coincide, as all do at initialisation, read as "L0H0,1,2,3", not as a smear)
  function labelGroups(items, near) {
    const groups = [];
    for (const d of items) {
      const g = groups.find((h) => Math.hypot(h[0].px - d.px, h[0].py - d.py) < near);
      if (g) g.push(d); else groups.push([d]);
    }
    return groups;
  }

  // ["L0H0", "L0H2"] -> "L0H0,2" when the labels differ only in a trailing number; else joined by " · "
  function joinLabels(labels) {
    if (labels.length === 1) return labels[0];
    const parts = labels.map((s) => /^(.*?)(\d+)$/.exec(s));
    if (parts.every((m) => m && m[1] === parts[0][1])) return parts[0][1] + parts.map((m) => m[2]).join(",");
    return labels.join(" · ");
  }

  // The dot nearest the mouse, within 10 px (null if none)
  function pick(panel, ev) {
    const rect = panel.canvas.getBoundingClientRect();
    const mx = ev.clientX - rect.left, my = ev.clientY - rect.top;
    let best = null, bestD = 10;
    panel.screen.forEach((s, k) => {
      const d = s ? Math.hypot(s[0] - mx, s[1] - my) : Infinity;
      if (d <= bestD) { best = k; bestD = d; }
    });
    return best;
  }

  Object.assign(exports, { GAP, panelGrid, makePanel, sizePanel, layoutPanels, fillCoords, frame, drawPanel, labelGroups, joinLabels });
})((globalThis.viewerModules ??= {}).scatter = {});
