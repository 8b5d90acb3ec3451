// The viewer engine (docs/viewer.md, "The viewer engine: how a family plugs in", its hooks): reads
// the payload, holds the state (which snapshot, playing, which dot) and connects the player, the
// planes, the timeline and the family's parts (family.js: viewerModules.family).
"use strict";
(function () {
  const { $, el } = viewerModules.dom;
  const { unpack } = viewerModules.decode;
  const { indexAtOrBefore, pointAt } = viewerModules.axes;
  const scatter = viewerModules.scatter;
  const curves = viewerModules.curves;
  const family = viewerModules.family;

  const PAYLOAD = JSON.parse($("payload").textContent);
  const view = { t: 0, playing: false, epoch: 0, last: 0, hold: 0, selected: null, hovered: null, trails: true };
  const app = {
    snaps: null, view, family, live: PAYLOAD.live || null, panels: [], panelSize: 0,
    tl: curves.createTimeline($("timeline"), family.timelineHeight),
    get holdEpochs() { return family.holdEpochs ? family.holdEpochs(app) : app.snaps.meta.events.map((e) => e.epoch); },
    waitAtEnd: () => Boolean(app.live) && !app.snaps.meta.complete,
    redraw: drawAll, setSnapshot, showDetail, refresh, words,
    styleOf: (t, k) => (family.styleOf ? family.styleOf(app, t, k) : app.snaps.meta.dots[k]),
  };
  let player = null;

  // The payload's snapshots: epochs, captions and the arrays (coords [T, P, K, 2], curves [T, C], the family's)
  async function load(payload) {
    const meta = payload.meta, T = payload.epochs.length, arrays = T ? await unpack(payload.arrays) : {};
    return { meta, T, K: meta.dots.length, P: meta.planes.length, planes: meta.planes, epochs: payload.epochs,
             captions: payload.captions, arrays, coords: arrays.coords, curves: arrays.curves,
             indexAtOrBefore(epoch) { return indexAtOrBefore(this.epochs, epoch); } };
  }

  function fail(message) {
    const box = $("error");
    box.hidden = false;
    box.textContent = message;
  }

  function words(meta) {
    if (family.words) family.words(app, meta);
    else { $("lead").textContent = meta.lead; $("runline").textContent = meta.runline; }
    document.title = `${meta.file} · headmovies viewer`;
  }

  function layout() {
    scatter.layoutPanels(app);
    // stacked (viewer.css) when the panels and a column of 360 px do not fit side by side
    const body = document.body, pad = parseFloat(getComputedStyle(body).paddingLeft) + parseFloat(getComputedStyle(body).paddingRight);
    body.classList.toggle("stacked", parseFloat($("panels-area").style.width) + 20 + 360 + pad > document.documentElement.clientWidth);
    // the timeline fills its column beside the panels (viewer.css), or spans them when stacked
    const wrap = $("timeline-wrap").clientWidth;
    curves.sizeTimeline(app.tl, wrap > 200 ? Math.min(wrap, 1100) : parseFloat($("panels-area").style.width) || 640);
  }

  function drawAll() {
    if (!app.snaps.T) return;
    for (const p of app.panels) scatter.drawPanel(app, p);
    curves.drawTimeline(app);
  }

  // The legend, and the hovered dot's detail (else the kept one's, else the hint)
  function showDetail() {
    const box = $("head-info"), k = view.hovered !== null ? view.hovered : view.selected;
    $("legend").replaceChildren(family.legend(app));
    const node = k === null ? null : family.detail(app, k);
    box.replaceChildren(node === null ? el("span", family.hint, "muted") : node);
    box.dataset.head = node === null ? "" : String(k);
  }

  // Show snapshot t; keepEpoch: playback keeps its own epoch between snapshots
  function setSnapshot(t, keepEpoch) {
    viewerModules.player.showSnapshot(app.snaps, view, t, keepEpoch);
    showDetail();
    if (family.update) family.update(app);
    drawAll();
  }

  // After new snapshots: every panel's coordinates and axes, the scrubber's range, the note
  function refresh() {
    const snaps = app.snaps, scr = $("scrubber");
    for (const p of app.panels) scatter.fillCoords(app, p);
    scr.min = String(snaps.epochs[0]);
    scr.max = String(snaps.epochs[snaps.T - 1]);
    const note = family.timelineNote ? family.timelineNote(app) : curves.timelineNote(snaps.meta);
    $("timeline-note").replaceChildren(...note.map(([text, colour]) => {
      const span = el("span", text);
      if (colour) span.style.color = colour;
      return span;
    }));
  }

  function listen() {
    player.listen();   // play, scrubber, speed, trails, keys (player.js)
    let dragging = false;
    const move = (ev) => player.setEpoch(curves.timelineEpoch(app, ev));
    app.tl.canvas.addEventListener("mousedown", (ev) => { dragging = true; player.play(false); move(ev); });
    window.addEventListener("mousemove", (ev) => { if (dragging) move(ev); });
    window.addEventListener("mouseup", () => { dragging = false; });
    window.addEventListener("resize", () => { layout(); drawAll(); });
  }

  async function start() {
    const snaps = app.snaps = await (family.load || load)(PAYLOAD);
    words(snaps.meta);
    $("legend-title").textContent = family.legendTitle;
    if (!snaps.T) { fail("This run has no snapshot yet."); return; }
    if (family.start) family.start(app);
    player = viewerModules.player.createPlayer(app);
    app.panels = snaps.planes.map((spec, i) => scatter.makePanel(app, spec, i));
    $("panels").append(...app.panels.map((p) => p.el));
    layout();
    refresh();
    setSnapshot(app.live ? snaps.T - 1 : 0);
    listen();
    document.body.dataset.state = "ready";
  }

  // hooks for tests and the curious: where each dot is drawn, in data and in page pixels (all
  // null for a dot absent from the plane), and
  // a plane's axis half-width (null: fixed axes); a family may add or replace some
  const hooks = {
    axis(i) { const p = app.panels[i]; return p.limits ? p.limits[view.t] : null; },
    get snapshot() { return view.t; },
    get epochs() { return app.snaps.epochs.slice(); },
    // what the timeline drew: each series' points [epoch, value in the metric's units, px, py]
    // (canvas pixels) and the y-axis' ticks {text, y}
    get timeline() { return JSON.parse(JSON.stringify(app.tl.drawn || null)); },
    dots(i) {
      const p = app.panels[i], rect = p.canvas.getBoundingClientRect(), snaps = app.snaps;
      return snaps.meta.dots.map((d, k) => {
        const [x, y] = pointAt(p.xy, snaps.K, view.t, k);
        if (!p.screen[k]) return { dot: k, label: d.label, x: null, y: null, px: null, py: null };   // absent from this plane
        return { dot: k, label: d.label, x, y, px: rect.left + p.canvas.clientLeft + p.screen[k][0],
                 py: rect.top + p.canvas.clientTop + p.screen[k][1] };
      });
    },
  };
  window.headmovies = Object.defineProperties(hooks, Object.getOwnPropertyDescriptors(family.hooks ? family.hooks(app) : {}));

  start().catch((err) => fail(`The viewer could not start: ${err.message}`));
})();
