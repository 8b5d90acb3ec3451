// Trails and rescaling axes, the movie's rule (render/core/panels.py, `frame_states`), on the
// page's flat arrays. Pure functions.
//
// xy: Float64Array [T, H, 2] of one plane (x, y of each head at each snapshot), epochs: [T]
// increasing, trail: trail length in epochs, rule: {lookahead, ease, margin, floor} from the payload.
"use strict";
(function (exports) {
  // The last index i with epochs[i] <= epoch (0 if epoch is before the first)
  function indexAtOrBefore(epochs, epoch) {
    let lo = 0, hi = epochs.length - 1;
    if (epoch < epochs[0]) return 0;
    while (lo < hi) {
      const mid = (lo + hi + 1) >> 1;
      if (epochs[mid] <= epoch) lo = mid; else hi = mid - 1;
    }
    return lo;
  }

  // The trail of snapshot t: indices front..t, the first point moved a fraction w of the way to
  // the next (null: not moved) so that it lies exactly `trail` epochs back, at epoch `start`
  function trailOf(epochs, t, trail) {
    const start = epochs[t] - trail;
    let front = 0;
    if (epochs[0] <= start) front = Math.min(indexAtOrBefore(epochs, start), t);
    let w = null;
    if (front < t && epochs[front] < start) w = (start - epochs[front]) / (epochs[front + 1] - epochs[front]);
    return { front, w, start };
  }

  function pointAt(xy, H, i, h) { return [xy[(i * H + h) * 2], xy[(i * H + h) * 2 + 1]]; }

  // Head h's trail at snapshot t (tr from trailOf): [[x, y, epoch], ...] oldest first
  function trailPoints(xy, H, epochs, t, h, tr) {
    const pts = [];
    for (let i = tr.front; i <= t; i++) {
      let [x, y] = pointAt(xy, H, i, h), e = epochs[i];
      if (i === tr.front && tr.w !== null) {
        const [x1, y1] = pointAt(xy, H, i + 1, h);
        x += tr.w * (x1 - x); y += tr.w * (y1 - y); e = tr.start;
      }
      pts.push([x, y, e]);
    }
    return pts;
  }

  // Axis half-width at each snapshot, Float64Array [T]: with R_t the largest radius in view
  // (points and trails), A_t = max(R_t .. R_t+lookahead), log L_t = log L_t-1 + ease (log A_t -
  // log L_t-1) (a plane all at 0 so far starts at A_t), L_t = max(L_t, R_t), limit margin L_t
  // (1 while everything sits at 0)
  function axisLimits(xy, H, epochs, trail, rule) {
    const T = epochs.length, radius = new Float64Array(T), limits = new Float64Array(T);
    const floor = rule.floor, logFloor = Math.log(floor);
    for (let t = 0; t < T; t++) {
      const tr = trailOf(epochs, t, trail);
      let r = 0;
      for (let h = 0; h < H; h++)
        for (const [x, y] of trailPoints(xy, H, epochs, t, h, tr)) r = Math.max(r, Math.hypot(x, y));
      radius[t] = r;
    }
    let logL = null;
    for (let t = 0; t < T; t++) {
      let ahead = 0;
      for (let j = t; j < Math.min(T, t + rule.lookahead + 1); j++) ahead = Math.max(ahead, radius[j]);
      const logA = Math.log(Math.max(ahead, floor));
      if (logL === null || logL <= logFloor) logL = logA;
      else logL = logL + rule.ease * (logA - logL);
      logL = Math.max(logL, Math.log(Math.max(radius[t], floor)));
      const level = Math.max(Math.exp(logL), radius[t]);
      limits[t] = ahead > 0 ? rule.margin * level : 1.0;
    }
    return limits;
  }

  Object.assign(exports, { indexAtOrBefore, trailOf, pointAt, trailPoints, axisLimits });
})((globalThis.viewerModules ??= {}).axes = {});
