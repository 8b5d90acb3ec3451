// The headmovies viewer (docs/viewer.md): the wiring. Reads the payload written by
// headmovies/render/orbits/viewer.py, holds the state (which snapshot, playing, which head),
// and connects the controls, panels, legend, timeline and live view (the other scripts).
"use strict";
(function () {
  const { formatError } = viewerModules.format;
  const { mod, planeWords, centredAway } = viewerModules.planes;
  const { pointAt } = viewerModules.axes;
  const { Snapshots } = viewerModules.snapshots;
  const { panelSize, makePanel, sizePanel, layoutPanels, fillCoords, drawPanel } = viewerModules.panels;
  const heads = viewerModules.heads;
  const { updateGroups } = viewerModules.groups;
  const timeline = viewerModules.timeline;
  const { follow } = viewerModules.live;
  const $ = (id) => document.getElementById(id);

  const PAYLOAD = JSON.parse($("payload").textContent);
  const LIVE = PAYLOAD.live;
  const snaps = new Snapshots(PAYLOAD.meta);
  const view = { t: 0, playing: false, epoch: 0, last: 0, hold: 0, selected: null, hovered: null, trails: true };
  const app = {
    snaps, view, panels: [], tl: timeline.createTimeline($("timeline")),
    get holdEpochs() { return timeline.holdEpochs(snaps.meta); },   // events and lock-ins
    waitAtEnd: () => Boolean(LIVE) && !snaps.meta.complete,          // live: wait at the newest snapshot
    redraw: drawAll,
    showHead: () => heads.showHead(app),
    updateLegend: () => heads.updateLegend(app),
    setMeta, refresh, setSnapshot,
  };
  const player = viewerModules.player.createPlayer(app);

  function fail(message) {
    const el = $("error");
    el.hidden = false;
    el.textContent = message;
  }

  function setMeta(meta) {
    snaps.setMeta(meta);
    $("runline").textContent = meta.headline;  // worded in Python (viewer.headline)
    document.title = `${meta.file} · headmovies viewer`;
  }

  function layout() {
    layoutPanels(app);
    // as wide as its column (beside the panels), or as the panels (stacked, narrow windows)
    const column = $("timeline-wrap").clientWidth, panels = parseFloat($("panels-area").style.width) || 640;
    timeline.sizeTimeline(app.tl, column > 0 ? Math.min(column, 1100) : panels);
  }

  function drawAll() {
    if (!snaps.T) return;
    for (const p of app.panels) drawPanel(app, p);
    timeline.drawTimeline(app);
  }

  // Show snapshot t; keepEpoch: playback keeps its own epoch between snapshots
  function setSnapshot(t, keepEpoch) {
    viewerModules.player.showSnapshot(snaps, view, t, keepEpoch);
    app.updateLegend();
    app.showHead();
    updateGroups(app);
    drawAll();
  }

  // After new snapshots: every panel's coordinates and axes, the scrubber's range, the note
  function refresh() {
    for (const p of app.panels) fillCoords(app, p);
    const scr = $("scrubber");
    scr.min = String(snaps.epochs[0]);
    scr.max = String(snaps.epochs[snaps.T - 1]);
    $("timeline-note").textContent = timeline.timelineNote(snaps);
  }

  // ---- a plane chosen in the page ----------------------------------------------------------
  function addPlane(ev) {
    ev.preventDefault();
    const circuit = $("plane-circuit").value, N = snaps.N;
    const u = Number($("plane-u").value), v = Number($("plane-v").value), msg = $("plane-msg");
    if (!Number.isInteger(u) || !Number.isInteger(v)) { msg.textContent = "u and v must be integers"; return; }
    const refused = centredAway(circuit, u, v, N);
    if (refused) { msg.textContent = refused; return; }
    if (app.panels.some((p) => p.spec.circuit === circuit && mod(p.spec.u - u, N) === 0 && mod(p.spec.v - v, N) === 0)) {
      msg.textContent = "that plane is already shown"; return;
    }
    msg.textContent = "";
    const panel = makePanel(app, planeWords(circuit, u, v, N, snaps.meta.m), app.panels.length, true);
    app.panels.push(panel);
    $("custom-panels").appendChild(panel.el);
    sizePanel(panel, panelSize());
    fillCoords(app, panel);
    drawPanel(app, panel);
  }

  function listen() {
    player.listen();   // play, scrubber, speed, trails, keys (core/viewer_page/player.js)
    let dragging = false;
    const move = (ev) => player.setEpoch(timeline.timelineEpoch(app, ev));
    app.tl.canvas.addEventListener("mousedown", (ev) => { dragging = true; player.play(false); move(ev); });
    window.addEventListener("mousemove", (ev) => { if (dragging) move(ev); });
    window.addEventListener("mouseup", () => { dragging = false; });
    $("add-plane").addEventListener("submit", addPlane);
    window.addEventListener("resize", () => { layout(); drawAll(); });
  }

  async function start() {
    setMeta(snaps.meta);
    for (const c of PAYLOAD.chunks) await snaps.append(c);
    if (!snaps.T) { fail("This run has no snapshot yet."); return; }
    app.panels = snaps.meta.panels.map((spec, i) => makePanel(app, spec, i, false));
    $("panels").append(...app.panels.map((p) => p.el));
    layout();
    refresh();
    setSnapshot(LIVE ? snaps.T - 1 : 0);
    listen();
    if (LIVE) follow(app, LIVE);
    document.body.dataset.state = "ready";
  }

  // hooks for tests and the curious: where each dot is drawn, in data and in page pixels
  window.headmovies = {
    formatError: (x) => formatError(x, snaps.meta.tol),
    get snapshot() { return view.t; },
    get epochs() { return snaps.epochs.slice(); },
    panels: () => app.panels.map((p) => ({ circuit: p.spec.circuit, u: p.spec.u, v: p.spec.v, custom: p.custom })),
    dots(i) {
      const p = app.panels[i], t = view.t, H = snaps.H, rect = p.canvas.getBoundingClientRect();
      const out = [];
      for (let h = 0; h < H; h++) {
        const [x, y] = pointAt(p.xy, H, t, h);
        out.push({ head: h, x, y, px: rect.left + p.canvas.clientLeft + p.screen[h][0],
                   py: rect.top + p.canvas.clientTop + p.screen[h][1], kind: snaps.styleOf(t, h).kind,
                   bound: p.bound ? p.bound[t * H + h] : 0 });
      }
      return { limit: p.limits[t], size: p.size, left: rect.left + p.canvas.clientLeft, top: rect.top + p.canvas.clientTop,
               dots: out };
    },
  };

  start().catch((err) => fail(`The viewer could not start: ${err.message}`));
})();
