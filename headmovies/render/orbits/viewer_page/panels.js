// The panels: one canvas per irrep plane, its dots, trails, orbit polygons and rescaling axes,
// and which head the mouse is on.
//
// app (main.js): {snaps: Snapshots, view: {t, selected, hovered, trails}, panels: [panel],
// redraw(), showHead()}. A panel: {spec: {circuit, u, v, r, order, title, axes}, index, custom,
// el, canvas, ctx, size, screen: [H] of [px, py], xy: [T, H, 2], limits: [T], bound: [T, H] | null}.
"use strict";
(function (exports) {
  const { fmtNum } = viewerModules.format;
  const { planeFromRows } = viewerModules.planes;
  const { axisLimits, pointAt, trailOf, trailPoints } = viewerModules.axes;
  const { RANK } = viewerModules.snapshots;
  const $ = (id) => document.getElementById(id);
  const INK = { paper: "#fff", cross: "#e4e4e4", ring: "#999", chosen: "#111", scale: "#888" };
  const GAP = 14;                                 // px between panel columns (viewer.css, .grid)

  // Side of a panel in px for the window's width: two columns beside the legend
  // Two rows of panels and the page's header fit the window's height; a column stays for the
  // timeline and legend on their right
  function panelSize() {
    const free = Math.max(260, Math.min(window.innerWidth - 460, 760));
    const high = Math.floor((window.innerHeight - 140) / 2) - 110;
    return Math.max(220, Math.min(340, high, Math.floor((free - GAP) / 2)));
  }

  function makePanel(app, spec, index, custom) {
    const el = document.createElement("div");
    el.className = "panel";
    const h2 = document.createElement("h2");
    const title = document.createElement("span");
    title.textContent = spec.title + (custom ? " ≈" : "");
    h2.appendChild(title);
    const canvas = document.createElement("canvas");
    const axes = document.createElement("p");
    axes.className = "axes";
    axes.textContent = spec.axes + (custom ? " ≈: computed in the page from 8-bit Fourier rows of the " +
      "circuits; each dot's true place lies within its grey ring (none drawn below 1.5 px)." : "");
    el.append(h2, canvas, axes);
    const panel = { spec, index, custom, el, canvas, ctx: canvas.getContext("2d"), size: 0, screen: [], xy: null,
                    limits: null, bound: null };
    if (custom) {
      const rm = document.createElement("button");
      rm.type = "button"; rm.textContent = "remove"; rm.title = "remove this plane";
      rm.addEventListener("click", () => {
        app.panels = app.panels.filter((p) => p !== panel);
        el.remove();
      });
      h2.appendChild(rm);
    }
    const view = app.view;
    canvas.addEventListener("mousemove", (ev) => {
      const h = pick(panel, ev);
      if (h !== view.hovered) { view.hovered = h; app.showHead(); app.redraw(); }
    });
    canvas.addEventListener("mouseleave", () => { view.hovered = null; app.showHead(); app.redraw(); });
    canvas.addEventListener("click", (ev) => {
      const h = pick(panel, ev);
      view.selected = h === view.selected ? null : h;
      app.showHead(); app.redraw();
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

  // The movie's panels column by column, QK above OV, as the movie lays them out; planes added
  // in the page below them in as many columns
  function layoutPanels(app) {
    const size = panelSize(), P = app.snaps.P;
    const rows = P <= 2 ? 1 : 2;
    const grid = $("panels");
    grid.style.gridTemplateRows = `repeat(${rows}, auto)`;
    grid.style.gridAutoFlow = "column";
    const cols = Math.max(2, Math.ceil(P / rows));
    $("panels-area").style.width = `${cols * size + (cols - 1) * GAP}px`;
    $("custom-panels").style.gridTemplateColumns = `repeat(${cols}, ${size}px)`;
    for (const p of app.panels) sizePanel(p, size);
  }

  // The panel's coordinates at every snapshot held (the payload's for the movie's panels,
  // computed from the Fourier rows for planes added in the page) and its axes
  function fillCoords(app, panel) {
    const snaps = app.snaps, H = snaps.H, T = snaps.T, xy = new Float64Array(T * H * 2);
    if (panel.custom) {
      panel.bound = new Float64Array(T * H);
      planeFromRows(snaps, panel.spec, 0, T, xy, panel.bound);
    } else {
      const p = panel.index, P = snaps.P;
      for (let t = 0; t < T; t++)
        for (let h = 0; h < H; h++)
          for (let c = 0; c < 2; c++) xy[(t * H + h) * 2 + c] = snaps.coords[((t * P + p) * H + h) * 2 + c];
    }
    panel.xy = xy;
    panel.limits = axisLimits(xy, H, snaps.epochs, snaps.meta.trail_epochs, snaps.meta.axes);
  }

  function drawPanel(app, panel) {
    const snaps = app.snaps, view = app.view, H = snaps.H, trail = snaps.meta.trail_epochs;
    const t = view.t, ctx = panel.ctx, size = panel.size, dpr = window.devicePixelRatio || 1;
    ctx.setTransform(dpr, 0, 0, dpr, 0, 0);
    ctx.fillStyle = INK.paper;
    ctx.fillRect(0, 0, size, size);
    const L = panel.limits[t], half = size / 2;
    const X = (x) => half + (x / L) * half, Y = (y) => half - (y / L) * half;
    ctx.strokeStyle = INK.cross; ctx.lineWidth = 1;
    ctx.beginPath(); ctx.moveTo(half, 0); ctx.lineTo(half, size); ctx.moveTo(0, half); ctx.lineTo(size, half); ctx.stroke();
    const styles = [], order = [];
    for (let h = 0; h < H; h++) { styles.push(snaps.styleOf(t, h)); order.push(h); }
    order.sort((a, b) => (RANK[styles[a].kind] - RANK[styles[b].kind]) ||
                         ((styles[a].orbit ? styles[a].orbit.size : 0) - (styles[b].orbit ? styles[b].orbit.size : 0)) ||
                         (b - a));
    // polygons of the orbits verified at this snapshot, in planes where they draw one
    for (const [key] of snaps.orbits[t]) {
      const o = snaps.orbitByKey.get(key);
      if (!o || o.size < 2 || panel.spec.order !== o.size) continue;
      const pts = o.heads.map((h) => pointAt(panel.xy, H, t, h)).filter(([x, y]) => Math.hypot(x, y) > 0.02 * L);
      if (pts.length < 2) continue;
      pts.sort((p, q) => Math.atan2(p[1], p[0]) - Math.atan2(q[1], q[0]));
      ctx.strokeStyle = o.colour; ctx.globalAlpha = 0.45; ctx.lineWidth = 1.2;
      ctx.beginPath();
      pts.forEach(([x, y], i) => (i ? ctx.lineTo(X(x), Y(y)) : ctx.moveTo(X(x), Y(y))));
      ctx.closePath(); ctx.stroke(); ctx.globalAlpha = 1;
    }
    if (view.trails && trail > 0) {
      const tr = trailOf(snaps.epochs, t, trail);
      ctx.lineWidth = 1.4; ctx.lineCap = "butt";
      for (const h of order) {
        const pts = trailPoints(panel.xy, H, snaps.epochs, t, h, tr), st = styles[h];
        const base = st.kind === "hint" ? 0.3 : st.kind === "dead" ? 0.5 : 0.8;
        ctx.strokeStyle = st.colour;
        for (let i = 1; i < pts.length; i++) {
          const age = snaps.epochs[t] - (pts[i - 1][2] + pts[i][2]) / 2;
          ctx.globalAlpha = base * Math.max(0, 1 - age / trail);
          ctx.beginPath(); ctx.moveTo(X(pts[i - 1][0]), Y(pts[i - 1][1])); ctx.lineTo(X(pts[i][0]), Y(pts[i][1])); ctx.stroke();
        }
      }
      ctx.globalAlpha = 1;
    }
    panel.screen = new Array(H);
    const top = view.selected !== null ? view.selected : view.hovered;
    const drawOrder = top === null ? order : order.filter((h) => h !== top).concat([top]);
    for (const h of drawOrder) {
      const [x, y] = pointAt(panel.xy, H, t, h), st = styles[h];
      const px = X(x), py = Y(y);
      panel.screen[h] = [px, py];
      if (panel.custom) {                         // the true coordinate lies within this ring
        const ring = panel.bound[t * H + h] / L * half;
        if (ring >= 1.5) {
          ctx.beginPath(); ctx.arc(px, py, ring, 0, 2 * Math.PI);
          ctx.strokeStyle = INK.ring; ctx.globalAlpha = 0.45; ctx.lineWidth = 0.8; ctx.stroke(); ctx.globalAlpha = 1;
        }
      }
      drawDot(ctx, px, py, st, snaps.meta.colours.dead_edge);
      if (h === top) {
        ctx.beginPath(); ctx.arc(px, py, 8.5, 0, 2 * Math.PI);
        ctx.strokeStyle = INK.chosen; ctx.lineWidth = 1.6; ctx.stroke();
      }
    }
    ctx.fillStyle = INK.scale; ctx.font = "11px system-ui, sans-serif"; ctx.textAlign = "right"; ctx.textBaseline = "top";
    ctx.fillText(`axes ±${fmtNum(L)}`, size - 6, 5);
  }

  // A dead head small with an outline, a hint a hollow ring, others filled and edged in white
  function drawDot(ctx, px, py, st, deadEdge) {
    ctx.beginPath();
    if (st.kind === "dead") {
      ctx.arc(px, py, 3.5, 0, 2 * Math.PI);
      ctx.fillStyle = st.colour; ctx.fill();
      ctx.strokeStyle = deadEdge; ctx.lineWidth = 1; ctx.stroke();
    } else if (st.kind === "hint") {
      ctx.arc(px, py, 4.5, 0, 2 * Math.PI);
      ctx.fillStyle = INK.paper; ctx.fill();
      ctx.globalAlpha = 0.55; ctx.strokeStyle = st.colour; ctx.lineWidth = 1.8; ctx.stroke(); ctx.globalAlpha = 1;
    } else {
      ctx.arc(px, py, 5, 0, 2 * Math.PI);
      ctx.fillStyle = st.colour; ctx.fill();
      ctx.strokeStyle = INK.paper; ctx.lineWidth = 0.8; ctx.stroke();
    }
  }

  // The head whose dot is nearest the mouse, within 10 px (null if none)
  function pick(panel, ev) {
    const rect = panel.canvas.getBoundingClientRect();
    const mx = ev.clientX - rect.left, my = ev.clientY - rect.top;
    let best = null, bestD = 10;
    for (let h = 0; h < panel.screen.length; h++) {
      const s = panel.screen[h];
      if (!s) continue;
      const d = Math.hypot(s[0] - mx, s[1] - my);
      if (d <= bestD) { best = h; bestD = d; }
    }
    return best;
  }

  Object.assign(exports, { panelSize, makePanel, sizePanel, layoutPanels, fillCoords, drawPanel });
})((globalThis.viewerModules ??= {}).panels = {});
