// The orbit family of the viewer engine (docs/viewer.md; core/viewer_page/scatter_main.js): its
// snapshots grow chunk by chunk (snapshots.js), dots take the colours of the orbit check, the
// orbits verified at a snapshot draw their polygons, planes can be added in the page (planes.js),
// the timeline shows the heads in verified orbits and the equivariance error, a live page follows
// the run (live.js), and a "Frequency groups" panel (groups.js).
"use strict";
(function (exports) {
  const { formatError, fmtEpoch } = viewerModules.format;
  const { $ } = viewerModules.dom;
  const { mod, planeWords, centredAway, planeFromRows } = viewerModules.planes;
  const { pointAt } = viewerModules.axes;
  const { Snapshots, RANK } = viewerModules.snapshots;
  const scatter = viewerModules.scatter;
  const heads = viewerModules.heads;
  const INK = { eqError: "#c9a0dc", heads: "#333", event: "#888" };
  const GAP = scatter.GAP;

  async function load(payload) {
    const snaps = new Snapshots(payload.meta);
    for (const c of payload.chunks) await snaps.append(c);
    return snaps;
  }

  // The page's first line, worded in Python (viewer.headline); a live page's meta may change it
  function words(app, meta) {
    app.snaps.setMeta(meta);
    $("runline").textContent = meta.headline;
  }

  // The movie's panels column by column, QK above OV, as the movie lays them out: two rows of
  // panels and the page's header fit the window's height; a column stays for the timeline and
  // legend on their right
  function panelGrid(P) {
    const free = Math.max(260, Math.min(window.innerWidth - 460, 760));
    const high = Math.floor((window.innerHeight - 140) / 2) - 110;
    const rows = P <= 2 ? 1 : 2;
    return { rows, cols: Math.max(2, Math.ceil(P / rows)), size: Math.max(220, Math.min(340, high, Math.floor((free - GAP) / 2))) };
  }

  // A dead head small with an outline, a hint of its final orbit a faint ring, others filled;
  // orbit heads on top, larger orbits above smaller
  function styleOf(app, t, h) {
    const st = app.snaps.styleOf(t, h), colours = app.snaps.meta.colours;
    const rank = 100 * RANK[st.kind] + (st.orbit ? st.orbit.size : 0);
    if (st.kind === "dead") {
      return { kind: "small", colour: st.colour, fill: st.colour, edge: colours.dead_edge, r: 3.5, trail: 0.5, rank };
    }
    if (st.kind === "hint") return { kind: "ring", colour: st.colour, r: 4.5, alpha: 0.55, trail: 0.3, rank };
    return { kind: "dot", colour: st.colour, r: 5, rank };
  }

  // The polygons of the orbits verified at this snapshot, in planes where they draw one
  function underlay(app, panel, ctx, f) {
    const snaps = app.snaps, t = app.view.t, H = snaps.H;
    for (const [key] of snaps.orbits[t]) {
      const o = snaps.orbitByKey.get(key);
      if (!o || o.size < 2 || panel.spec.order !== o.size) continue;
      const pts = o.heads.map((h) => pointAt(panel.xy, H, t, h)).filter(([x, y]) => Math.hypot(x, y) > 0.02 * f.L);
      if (pts.length < 2) continue;
      pts.sort((p, q) => Math.atan2(p[1], p[0]) - Math.atan2(q[1], q[0]));
      ctx.strokeStyle = o.colour; ctx.globalAlpha = 0.45; ctx.lineWidth = 1.2;
      ctx.beginPath();
      pts.forEach(([x, y], i) => (i ? ctx.lineTo(f.X(x), f.Y(y)) : ctx.moveTo(f.X(x), f.Y(y))));
      ctx.closePath(); ctx.stroke(); ctx.globalAlpha = 1;
    }
  }

  // The timeline: the equivariance error (log scale, light), then the heads in verified orbits
  // (0..H, a step curve, which labels the axis)
  function series(app) {
    const snaps = app.snaps, H = snaps.H, logs = snaps.eqError.map((v) => (v !== null && v > 0 ? Math.log10(v) : NaN));
    const known = logs.filter(Number.isFinite), out = [];
    if (known.length > 1) {
      const lo = Math.min(...known), hi = Math.max(...known);
      out.push({ colour: INK.eqError, width: 1.2, lo, hi: lo + Math.max(hi - lo, 1e-9), join: true, at: (i) => logs[i] });
    }
    out.push({ colour: INK.heads, width: 1.5, lo: 0, hi: H, step: true, scale: true, hiLabel: String(H), loLabel: "0",
               at: (i) => snaps.verifiedCount(i) });
    return out;
  }

  // Dashed marks: the run's events, each final orbit's verification among them (worded in
  // Python, render/orbits/events.py)
  const marks = (app) => app.snaps.meta.events.map((e) => ({ epoch: e.epoch, short: e.short, colour: e.result ? e.colour : INK.event }));

  // Playback pauses about 1 s at these epochs: events and lock-ins
  function holdsOf(meta) {
    return meta.events.map((e) => e.epoch).concat(meta.orbits.filter((o) => o.locked_in !== null).map((o) => o.locked_in));
  }

  function timelineNote(app) {
    const snaps = app.snaps, meta = snaps.meta, parts = ["Black: heads in verified orbits (0 to " + snaps.H + ")"];
    if (snaps.eqError.some((v) => v !== null)) parts.push("lilac: equivariance error (log scale)");
    parts.push("dashed: " + meta.events.map((e) => `epoch ${fmtEpoch(e.epoch)}: ${e.label}`).join("; "));
    return [[parts.join(" · ") + ". Click or drag to move.", null]];
  }

  // A plane chosen in the page ("Add a plane"), computed from the Fourier rows with its error bound
  function addPlane(app, ev) {
    ev.preventDefault();
    const snaps = app.snaps, circuit = $("plane-circuit").value, N = snaps.N;
    const u = Number($("plane-u").value), v = Number($("plane-v").value), msg = $("plane-msg");
    if (!Number.isInteger(u) || !Number.isInteger(v)) { msg.textContent = "u and v must be integers"; return; }
    const refused = centredAway(circuit, u, v, N);
    if (refused) { msg.textContent = refused; return; }
    if (app.panels.some((p) => p.spec.circuit === circuit && mod(p.spec.u - u, N) === 0 && mod(p.spec.v - v, N) === 0)) {
      msg.textContent = "that plane is already shown"; return;
    }
    msg.textContent = "";
    const panel = scatter.makePanel(app, planeWords(circuit, u, v, N, snaps.meta.m), app.panels.length);
    panel.custom = true;
    panel.compute = (xy) => {
      panel.bound = new Float64Array(snaps.T * snaps.H);
      planeFromRows(snaps, panel.spec, 0, snaps.T, xy, panel.bound);
    };
    panel.el.querySelector("h2").textContent += " ≈";
    panel.el.querySelector(".axes").textContent += " ≈: computed in the page from 8-bit Fourier rows of the circuits; " +
      "each dot's true place lies within its grey ring (none drawn below 1.5 px).";
    const rm = document.createElement("button");
    rm.type = "button"; rm.textContent = "remove"; rm.title = "remove this plane";
    rm.addEventListener("click", () => { app.panels = app.panels.filter((p) => p !== panel); panel.el.remove(); });
    panel.el.querySelector("h2").appendChild(rm);
    app.panels.push(panel);
    $("custom-panels").appendChild(panel.el);
    scatter.sizePanel(panel, app.panelSize);
    scatter.fillCoords(app, panel);
    scatter.drawPanel(app, panel);
  }

  // The family's parts of the page: "Add a plane" and its panels under the payload's, the
  // frequency groups under the head box; the live view
  function start(app) {
    $("panels").insertAdjacentHTML("afterend", `<form id="add-plane" autocomplete="off"><span>Add a plane:</span>
      <select id="plane-circuit" aria-label="circuit"><option value="qk">QK circuit</option><option value="ov">OV circuit</option></select>
      <label>u <input id="plane-u" type="number" step="1" value="0"></label> <label>v <input id="plane-v" type="number" step="1" value="4"></label>
      <button id="plane-add" type="submit">add plane</button> <span id="plane-msg" role="status"></span></form>
      <div id="custom-panels" class="grid"></div>`);
    $("head-info").insertAdjacentHTML("afterend", '<h3 id="groups-title">Frequency groups</h3><div id="groups"></div>');
    $("add-plane").addEventListener("submit", (ev) => addPlane(app, ev));
    if (app.live) viewerModules.live.follow(app, app.live);
  }

  // hooks for tests: the formatted error as the check writes it, the panels, and where each
  // head is drawn (data, page pixels, its kind in the orbit check and its ring's radius)
  function hooks(app) {
    const snaps = () => app.snaps;
    return {
      formatError: (x) => formatError(x, snaps().meta.tol),
      panels: () => app.panels.map((p) => ({ circuit: p.spec.circuit, u: p.spec.u, v: p.spec.v, custom: Boolean(p.custom) })),
      dots(i) {
        const p = app.panels[i], t = app.view.t, H = snaps().H, rect = p.canvas.getBoundingClientRect(), out = [];
        for (let h = 0; h < H; h++) {
          const [x, y] = pointAt(p.xy, H, t, h);
          out.push({ head: h, x, y, px: rect.left + p.canvas.clientLeft + p.screen[h][0],
                     py: rect.top + p.canvas.clientTop + p.screen[h][1], kind: snaps().styleOf(t, h).kind,
                     bound: p.bound ? p.bound[t * H + h] : 0 });
        }
        return { limit: p.limits[t], size: p.size, left: rect.left + p.canvas.clientLeft, top: rect.top + p.canvas.clientTop,
                 dots: out };
      },
    };
  }

  Object.assign(exports, {
    legendTitle: "Heads", hint: "Hover over a dot to see that head; click it to keep it.",
    speeds: { choices: [250, 500, 1000, 2000, 4000], chosen: 1000 }, look: { label: "#888", ring: 8.5 },
    legend: heads.legend, detail: heads.detail, load, words, panelGrid, styleOf, underlay, series, marks,
    holdsOf, holdEpochs: (app) => holdsOf(app.snaps.meta), timelineNote, timelineHeight: 140,
    update: viewerModules.groups.updateGroups, start, hooks,
  });
})((globalThis.viewerModules ??= {}).family = {});
