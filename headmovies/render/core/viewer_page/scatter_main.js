// The scatter viewer (docs/viewer.md, render/core/scatter_viewer.py): the wiring. Reads the
// payload, holds the state (which snapshot, playing, which dot) and connects the player, the
// planes, the timeline and the family's legend and detail pane (family.js: viewerModules.family,
// {legendTitle, hint, legend(app) -> Node, detail(app, k) -> Node, styleOf?(app, t, k)}).
"use strict";
(function () {
  const { unpack } = viewerModules.decode;
  const { indexAtOrBefore, pointAt } = viewerModules.axes;
  const scatter = viewerModules.scatter;
  const curves = viewerModules.curves;
  const family = viewerModules.family;
  const $ = (id) => document.getElementById(id);

  const PAYLOAD = JSON.parse($("payload").textContent);
  const meta = PAYLOAD.meta;
  const snaps = {
    meta, T: PAYLOAD.epochs.length, K: meta.dots.length, P: meta.planes.length, epochs: PAYLOAD.epochs,
    captions: PAYLOAD.captions, arrays: null, coords: null, curves: null,
    indexAtOrBefore(epoch) { return indexAtOrBefore(this.epochs, epoch); },
  };
  const view = { t: 0, playing: false, epoch: 0, last: 0, hold: 0, selected: null, hovered: null, trails: true };
  const app = {
    snaps, view, family, panels: [], tl: curves.createTimeline($("timeline")),
    holdEpochs: meta.events.map((e) => e.epoch),
    redraw: drawAll, setSnapshot, showDetail,
    styleOf: (t, k) => (family.styleOf ? family.styleOf(app, t, k) : meta.dots[k]),
  };
  const player = viewerModules.player.createPlayer(app);

  function fail(message) {
    const el = $("error");
    el.hidden = false;
    el.textContent = message;
  }

  function layout() {
    scatter.layoutPanels(app);
    // the timeline fills its column beside the panels (viewer.css), or spans them when stacked
    const wrap = $("timeline-wrap").clientWidth;
    curves.sizeTimeline(app.tl, wrap > 200 ? wrap : parseFloat($("panels-area").style.width) || 640);
  }

  function drawAll() {
    for (const p of app.panels) scatter.drawPanel(app, p);
    curves.drawTimeline(app);
  }

  function showDetail() {
    const box = $("head-info"), k = view.hovered !== null ? view.hovered : view.selected;
    $("legend").replaceChildren(family.legend(app));
    const node = k === null ? null : family.detail(app, k);
    if (node === null) {
      const hint = document.createElement("span");
      hint.className = "muted";
      hint.textContent = family.hint;
      box.replaceChildren(hint);
      box.dataset.dot = "";
      return;
    }
    box.replaceChildren(node);
    box.dataset.dot = String(k);
  }

  // Show snapshot t; keepEpoch: playback keeps its own epoch between snapshots
  function setSnapshot(t, keepEpoch) {
    viewerModules.player.showSnapshot(snaps, view, t, keepEpoch);
    showDetail();
    drawAll();
  }

  function listen() {
    player.listen();
    let dragging = false;
    const move = (ev) => player.setEpoch(curves.timelineEpoch(app, ev));
    app.tl.canvas.addEventListener("mousedown", (ev) => { dragging = true; player.play(false); move(ev); });
    window.addEventListener("mousemove", (ev) => { if (dragging) move(ev); });
    window.addEventListener("mouseup", () => { dragging = false; });
    window.addEventListener("resize", () => { layout(); drawAll(); });
  }

  async function start() {
    $("lead").textContent = meta.lead;
    $("runline").textContent = meta.runline;
    $("legend-title").textContent = family.legendTitle;
    document.title = `${meta.file} · headmovies viewer`;
    if (!snaps.T) { fail("This run has no snapshot yet."); return; }
    snaps.arrays = await unpack(PAYLOAD.arrays);
    snaps.coords = snaps.arrays.coords;
    snaps.curves = snaps.arrays.curves;
    app.panels = meta.planes.map((spec, i) => scatter.makePanel(app, spec, i));
    $("panels").append(...app.panels.map((p) => p.el));
    layout();
    for (const p of app.panels) scatter.fillCoords(app, p);
    $("timeline-note").replaceChildren(...curves.timelineNote(meta).map(([text, colour]) => {
      const span = document.createElement("span");
      span.textContent = text;
      if (colour) span.style.color = colour;
      return span;
    }));
    setSnapshot(0);
    listen();
    document.body.dataset.state = "ready";
  }

  // hooks for tests and the curious: where each dot is drawn, in data and in page pixels, and
  // a plane's axis half-width (null: fixed axes)
  window.headmovies = {
    axis(i) { const p = app.panels[i]; return p.limits ? p.limits[view.t] : null; },
    get snapshot() { return view.t; },
    get epochs() { return snaps.epochs.slice(); },
    dots(i) {
      const p = app.panels[i], rect = p.canvas.getBoundingClientRect();
      return snaps.meta.dots.map((d, k) => {
        const [x, y] = pointAt(p.xy, snaps.K, view.t, k);
        return { dot: k, label: d.label, x, y, px: rect.left + p.canvas.clientLeft + p.screen[k][0],
                 py: rect.top + p.canvas.clientTop + p.screen[k][1] };
      });
    },
  };

  start().catch((err) => fail(`The viewer could not start: ${err.message}`));
})();
