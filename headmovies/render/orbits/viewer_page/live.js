// The live view (`headmovies orbits watch`, render/orbits/watch.py): ask the server for the
// snapshots the page lacks, every poll_ms, and say how the run is doing.
"use strict";
(function (exports) {
  const { fmtEpoch } = viewerModules.format;
  const QUIET_S = 30;                  // a writer quiet this long is called out

  // The badge for a server status ({epoch, final_epoch, complete, quiet_s, message}), lost: the
  // server did not answer. {text, className} ("", "stale" or "lost")
  function liveBadge(status, lost) {
    const quiet = status.quiet_s > QUIET_S && !status.complete;
    let text = `live: epoch ${fmtEpoch(status.epoch)} of ${fmtEpoch(status.final_epoch)}`;
    if (status.complete) text += " · training finished";
    else if (status.quiet_s > QUIET_S) text += ` · no new snapshot for ${Math.round(status.quiet_s)} s`;
    if (status.message) text += ` · ${status.message}`;
    if (lost) text += " · server not answering, retrying";
    return { text, className: lost ? "lost" : quiet ? "stale" : "" };
  }

  function showBadge(status, lost) {
    const box = viewerModules.dom.$("live"), badge = liveBadge(status, lost);
    box.hidden = false;
    box.className = badge.className;
    box.textContent = badge.text;
    box.dataset.epoch = String(status.epoch);
  }

  // Poll forever. live: the payload's {update, poll_ms, gen, identity}; app (the engine,
  // core/viewer_page/scatter_main.js): {snaps, view, words(meta), refresh(), setSnapshot(t),
  // showDetail(), redraw()}. While the cursor is on the newest snapshot it follows new ones; a
  // page from another run reloads.
  function follow(app, live) {
    let gen = live.gen, lastStatus = null;
    async function poll() {
      const snaps = app.snaps;
      try {
        const r = await fetch(`${live.update}?gen=${gen}&since=${snaps.T}&identity=${encodeURIComponent(live.identity)}`,
                              { cache: "no-store" });
        if (!r.ok) throw new Error(String(r.status));
        const u = await r.json();
        if (u.reload) { location.reload(); return; }      // another run now lives in this file
        const atEnd = app.view.t === snaps.T - 1;
        gen = u.gen;
        app.words(u.meta);
        for (const c of u.chunks) await snaps.append(c);
        if (u.chunks.length) {
          app.refresh();
          app.setSnapshot(atEnd || app.view.t >= snaps.T ? snaps.T - 1 : app.view.t);
        } else {
          app.showDetail(); app.redraw();
        }
        lastStatus = u.status;
        showBadge(u.status, false);
      } catch (err) {
        if (lastStatus) showBadge(lastStatus, true);
      }
      setTimeout(poll, live.poll_ms);
    }
    poll();
  }

  Object.assign(exports, { liveBadge, follow });
})((globalThis.viewerModules ??= {}).live = {});
