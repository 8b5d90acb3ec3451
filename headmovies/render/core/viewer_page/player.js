// Scrub, play and step through the snapshots (every viewer page; docs/viewer.md): the
// scrubber, the play button, the speed menu, the trails box and the keys. Playback moves a
// fixed number of epochs per second and pauses about 1 s at the timeline's events.
//
// app: {snaps: {T, epochs, indexAtOrBefore(epoch)}, view: {t, playing, epoch, last, hold, trails},
// holdEpochs: [epoch] (read at every step: a getter may change it), setSnapshot(t, keepEpoch),
// redraw(), waitAtEnd?() -> true while playback should wait at the newest snapshot for more (a
// live run), else it stops there}. A page whose speed menu holds options keeps them; an empty
// one gets `speeds` of the run's span.
"use strict";
(function (exports) {
  const { fmtEpoch } = viewerModules.format;
  const { $ } = viewerModules.dom;

  // A round number of epochs per second near x: 1, 2 or 5 times a power of 10, at least 1
  function roundSpeed(x) {
    const p = Math.pow(10, Math.floor(Math.log10(Math.max(x, 1))));
    for (const m of [1, 2, 5]) if (x <= m * p * 1.5) return m * p;
    return 10 * p;
  }

  // Speed choices for a run of `span` epochs: the whole run in about 40, 20, 10 and 5 seconds
  // (the second is the default), as [epochs per second]
  function speeds(span) {
    const out = [];
    for (const s of [40, 20, 10, 5]) { const v = roundSpeed(Math.max(span, 1) / s); if (!out.includes(v)) out.push(v); }
    return out;
  }

  // Show snapshot t in the page's common parts: the view's t (and its epoch, unless keepEpoch:
  // playback keeps its own between snapshots), the scrubber, the epoch line and the caption
  function showSnapshot(snaps, view, t, keepEpoch) {
    view.t = Math.max(0, Math.min(snaps.T - 1, t));
    const epoch = snaps.epochs[view.t];
    if (!keepEpoch) view.epoch = epoch;
    $("scrubber").value = String(epoch);
    const el = $("epoch");
    el.textContent = `epoch ${fmtEpoch(epoch)}`;
    el.dataset.epoch = String(epoch);
    el.dataset.snapshot = String(view.t);
    $("caption").textContent = `${snaps.captions[view.t]}   ·   snapshot ${view.t + 1} of ${snaps.T}`;
  }

  // The speed menu: the family's choices ({choices, chosen}), else `speeds` of the run's span
  function fillSpeeds(span, given) {
    const choices = given ? given.choices : speeds(span), chosen = given ? given.chosen : choices[1];
    $("speed").replaceChildren(...choices.map((v) => {
      const o = document.createElement("option");
      o.value = String(v); o.textContent = `${fmtEpoch(v)} epochs/s`; o.selected = v === chosen;
      return o;
    }));
  }

  function createPlayer(app) {
    const view = app.view, snaps = app.snaps;

    function play(on) {
      view.playing = on;
      $("play").textContent = on ? "❚❚ pause" : "▶ play";
      if (on) {
        if (view.t >= snaps.T - 1) app.setSnapshot(0);
        view.epoch = snaps.epochs[view.t]; view.last = performance.now(); view.hold = 0;
        requestAnimationFrame(tick);
      }
    }

    function tick(now) {
      if (!view.playing) return;
      const dt = (now - view.last) / 1000;
      view.last = now;
      if (now < view.hold) { requestAnimationFrame(tick); return; }
      let next = view.epoch + Number($("speed").value) * dt;
      for (const e of app.holdEpochs) if (view.epoch < e && next >= e) { next = e; view.hold = now + 1000; }
      view.epoch = next;
      const t = snaps.indexAtOrBefore(next);
      if (t !== view.t) app.setSnapshot(t, true);
      const newest = snaps.epochs[snaps.T - 1];
      if (next >= newest) {
        if (!(app.waitAtEnd && app.waitAtEnd())) { app.setSnapshot(snaps.T - 1); play(false); return; }
        view.epoch = newest;
      }
      requestAnimationFrame(tick);
    }

    function setEpoch(epoch) { app.setSnapshot(snaps.indexAtOrBefore(Math.round(epoch))); }

    function listen() {
      const scr = $("scrubber");
      scr.min = String(snaps.epochs[0]); scr.max = String(snaps.epochs[snaps.T - 1]);
      if (!$("speed").options.length) fillSpeeds(snaps.epochs[snaps.T - 1] - snaps.epochs[0], app.family && app.family.speeds);
      $("play").addEventListener("click", () => play(!view.playing));
      scr.addEventListener("input", (ev) => { play(false); setEpoch(Number(ev.target.value)); });
      $("trails").addEventListener("change", (ev) => { view.trails = ev.target.checked; app.redraw(); });
      document.addEventListener("keydown", (ev) => {
        if (ev.target.tagName === "INPUT" && ev.target.type !== "range" || ev.target.tagName === "SELECT") return;
        if (ev.key === " ") { ev.preventDefault(); play(!view.playing); }
        else if (ev.key === "ArrowRight") { ev.preventDefault(); play(false); app.setSnapshot(view.t + 1); }
        else if (ev.key === "ArrowLeft") { ev.preventDefault(); play(false); app.setSnapshot(view.t - 1); }
      });
    }

    return { play, setEpoch, listen };
  }

  Object.assign(exports, { roundSpeed, speeds, showSnapshot, createPlayer });
})((globalThis.viewerModules ??= {}).player = {});
