// The headmovies viewer (docs/viewer.md): plain JavaScript and canvas, no network except the
// live view's own server. Reads the payload written by headmovies/render/orbits/viewer.py.
"use strict";
(function () {
  const $ = (id) => document.getElementById(id);
  const PAYLOAD = JSON.parse($("payload").textContent);
  const LIVE = PAYLOAD.live;
  let META = PAYLOAD.meta;
  const H = META.n_heads, N = META.n, D = META.d_head, P0 = META.panels.length;
  const M = Math.floor(N / 2) + 1, ROW = 2 * D;  // Fourier rows u = 0..n/2 of each factor, re then im
  const PER_R = H * 4 * M * ROW, PER_C = H * 4 * M;    // row values and scale codes per snapshot
  const ZERO_CODE = -32768, SCALE_STEPS = 8;           // as viewer.py
  const LOOKAHEAD = 8, EASE = 0.25, MARGIN = 1.12, TINY = 1e-30;   // as render/core/panels.py
  const TRAIL = META.trail_epochs;

  // ---- snapshot data, grown chunk by chunk --------------------------------------------------
  const S = { T: 0, epochs: [], captions: [], eqError: [], orbits: [],
              coords: new Float32Array(0), rows: new Int8Array(0), codes: new Int16Array(0),
              headError: new Float32Array(0), dead: new Uint8Array(0) };
  const view = { t: 0, playing: false, epoch: 0, last: 0, hold: 0, selected: null, hovered: null, trails: true };
  let orbitByKey = new Map(), finalOrbitOf = new Array(H).fill(null);
  let panels = [];

  const fmtEpoch = (e) => Math.round(e).toLocaleString("en-US");
  const pct = (x) => {                        // as check.format_error: 0.10%, 8.6e-08, 1.996% (not 2.00%)
    if (x < 1e-4) return x.toExponential(1).replace(/e([+-])(\d)$/, "e$10$2");
    let digits = 2;
    const same = (d) => (100 * x).toFixed(d) === (100 * META.tol).toFixed(d);
    while (digits < 5 && x !== META.tol && same(digits)) digits++;
    return (x !== META.tol && same(digits) ? (x < META.tol ? "<" : ">") : "") + (100 * x).toFixed(digits) + "%";
  };
  const fmtNum = (x) => (x === 0 ? "0" : Math.abs(x) >= 100 ? x.toFixed(0) : Math.abs(x) >= 1 ? x.toPrecision(3)
                        : x.toPrecision(2));

  function fail(message) {
    const el = $("error");
    el.hidden = false;
    el.textContent = message;
  }

  function b64bytes(text) {
    const bin = atob(text);
    const out = new Uint8Array(bin.length);
    for (let i = 0; i < bin.length; i++) out[i] = bin.charCodeAt(i);
    return out;
  }

  async function unpack(packed) {
    if (typeof DecompressionStream === "undefined") {
      throw new Error("this browser lacks DecompressionStream (Chrome 80+, Firefox 113+, Safari 16.4+)");
    }
    const stream = new Blob([b64bytes(packed.blob)]).stream().pipeThrough(new DecompressionStream("deflate"));
    const buf = await new Response(stream).arrayBuffer();
    const types = { f4: Float32Array, i1: Int8Array, i2: Int16Array, u1: Uint8Array };
    const out = {};
    for (const [name, dtype, shape, offset] of packed.manifest) {
      const count = shape.reduce((a, b) => a * b, 1);
      out[name] = new types[dtype](buf, offset, count);
    }
    return out;
  }

  function joined(old, add, keep) {
    const out = new old.constructor(keep + add.length);
    out.set(old.subarray(0, keep));
    out.set(add, keep);
    return out;
  }

  async function appendChunk(c) {
    const A = await unpack(c.arrays);
    const k = c.start, t = c.epochs.length;
    const rows = A.rows, codes = A.codes;   // stored as differences between snapshots; typed arrays wrap
    for (let i = PER_R; i < rows.length; i++) rows[i] = rows[i] + rows[i - PER_R];
    for (let i = PER_C; i < codes.length; i++) codes[i] = codes[i] + codes[i - PER_C];
    S.coords = joined(S.coords, A.coords, k * P0 * H * 2);
    S.rows = joined(S.rows, rows, k * PER_R);
    S.codes = joined(S.codes, codes, k * PER_C);
    S.headError = joined(S.headError, A.head_error, k * H);
    S.dead = joined(S.dead, A.dead, k * H);
    for (const key of ["epochs", "captions", "eqError", "orbits"]) S[key].length = k;
    S.epochs.push(...c.epochs);
    S.captions.push(...c.captions);
    S.eqError.push(...c.eq_error);
    S.orbits.push(...c.orbits);
    S.T = k + t;
  }

  function setMeta(meta) {
    META = meta;
    orbitByKey = new Map(meta.orbits.map((o) => [o.key, o]));
    finalOrbitOf = new Array(H).fill(null);
    for (const o of meta.orbits) if (o.final) for (const h of o.heads) finalOrbitOf[h] = o;
    const file = meta.file, exp = meta.experiment;
    $("runline").textContent = `${exp} · ${file} · C_${N} shifts tokens by s, outputs by ${meta.m}s · ` +
      `${H} heads · orbit check at every snapshot (${(100 * meta.tol).toFixed(0)} % tolerance) · ${meta.panel_note}`;
    document.title = `${file} · headmovies viewer`;
  }

  // ---- per-snapshot facts -------------------------------------------------------------------
  function orbitAt(t, h) {                     // [orbit meta, worst error] or null
    for (const [key, err] of S.orbits[t]) {
      const o = orbitByKey.get(key);
      if (o && o.heads.includes(h)) return [o, err];
    }
    return null;
  }

  function styleOf(t, h) {
    if (S.dead[t * H + h]) return { kind: "dead", colour: META.colours.dead };
    const hit = orbitAt(t, h);
    if (hit) return { kind: "orbit", colour: hit[0].colour, orbit: hit[0], error: hit[1] };
    const fin = finalOrbitOf[h];
    if (fin) return { kind: "hint", colour: fin.colour, orbit: fin };
    return { kind: "other", colour: META.colours.other };
  }

  const RANK = { dead: 0, other: 1, hint: 2, orbit: 3 };

  function lastIndexAtOrBefore(epoch) {          // binary search in S.epochs
    let lo = 0, hi = S.T - 1;
    if (epoch < S.epochs[0]) return 0;
    while (lo < hi) {
      const mid = (lo + hi + 1) >> 1;
      if (S.epochs[mid] <= epoch) lo = mid; else hi = mid - 1;
    }
    return lo;
  }

  // ---- planes: coordinates, trails, axis limits (render/core/panels.py, frame_states) ------
  function gcd(a, b) { while (b) [a, b] = [b, a % b]; return a; }
  const mod = (a, n) => ((a % n) + n) % n;

  function planeWords(circuit, u, v) {           // as plane_words in viewer.py
    const r = mod(circuit === "qk" ? u + v : META.m * u + v, N);
    const k = N / gcd(r, N);
    const name = circuit.toUpperCase();
    const shape = k === 1 ? "stays put" : k === 2 ? "draws a pair" : `draws a regular ${k}-gon`;
    const turn = 360 * r / N;
    return { circuit, u, v, r, order: k, title: `${name} circuit, (u, v) = (${u}, ${v})`,
             axes: `x, y: real and imaginary part of each head's (${u}, ${v}) Fourier coefficient of its centred ` +
                   `${name} circuit. A shift by s turns every dot by r·s·${+(360 / N).toFixed(3)}° (r = ${r}: ` +
                   `${+turn.toFixed(1)}° per unit shift); an orbit ${shape} here.` };
  }

  // Fourier row u of factor f (0: QK query, 1: QK key, 2: OV output, 3: OV value) of head h at
  // snapshot t: A^[u, e] = sum_a F[a, e] exp(2 pi i u a / n), rows u > n/2 the conjugates of n - u;
  // err: how far each entry can be from the true one (both parts rounded to half a step)
  function rowOf(t, h, f, u) {
    const uu = mod(u, N), conj = uu >= M, r = conj ? N - uu : uu;
    const ci = ((t * H + h) * 4 + f) * M + r, code = S.codes[ci];
    const s = code === ZERO_CODE ? 0 : Math.pow(2, code / SCALE_STEPS), base = ci * ROW;
    const re = new Float64Array(D), im = new Float64Array(D);
    for (let e = 0; e < D; e++) { re[e] = s * S.rows[base + e]; im[e] = (conj ? -s : s) * S.rows[base + D + e]; }
    return { re, im, err: s / 2 * Math.SQRT2 };
  }

  // X^(u,v) = (1/n) sum_e A^[u, e] B^[v, e] (centred M = F0 F1^T, R = F2 F3^T), and a bound on its
  // error from the 8-bit rows: (1/n) sum_e (dA |B^| + |A^| dB + dA dB)
  function planeFromRows(spec, t0, t1, out, bound) {
    const fa = spec.circuit === "qk" ? 0 : 2, fb = fa + 1;
    for (let t = t0; t < t1; t++) {
      for (let h = 0; h < H; h++) {
        const A = rowOf(t, h, fa, spec.u), B = rowOf(t, h, fb, spec.v);
        let re = 0, im = 0, err = 0;
        for (let e = 0; e < D; e++) {
          re += A.re[e] * B.re[e] - A.im[e] * B.im[e];
          im += A.re[e] * B.im[e] + A.im[e] * B.re[e];
          err += A.err * Math.hypot(B.re[e], B.im[e]) + Math.hypot(A.re[e], A.im[e]) * B.err + A.err * B.err;
        }
        out[(t * H + h) * 2] = re / N;
        out[(t * H + h) * 2 + 1] = im / N;
        bound[t * H + h] = err / N;
      }
    }
  }

  function fillCoords(panel) {
    const xy = new Float64Array(S.T * H * 2);
    if (panel.custom) {
      panel.bound = new Float64Array(S.T * H);
      planeFromRows(panel.spec, 0, S.T, xy, panel.bound);
    } else {
      const p = panel.index;
      for (let t = 0; t < S.T; t++)
        for (let h = 0; h < H; h++)
          for (let c = 0; c < 2; c++) xy[(t * H + h) * 2 + c] = S.coords[((t * P0 + p) * H + h) * 2 + c];
    }
    panel.xy = xy;
    panel.limits = axisLimits(xy);
  }

  // the trail of snapshot t: indices front..t, the first point moved to exactly `trail` epochs back
  function trailOf(t, trail) {
    const start = S.epochs[t] - trail;
    let front = 0;
    if (S.epochs[0] <= start) front = Math.min(lastIndexAtOrBefore(start), t);
    let w = null;
    if (front < t && S.epochs[front] < start) w = (start - S.epochs[front]) / (S.epochs[front + 1] - S.epochs[front]);
    return { front, w, start };
  }

  function pointAt(xy, i, h) { return [xy[(i * H + h) * 2], xy[(i * H + h) * 2 + 1]]; }

  function trailPoints(xy, t, h, tr) {          // [[x, y, epoch], ...] oldest first
    const pts = [];
    for (let i = tr.front; i <= t; i++) {
      let [x, y] = pointAt(xy, i, h), e = S.epochs[i];
      if (i === tr.front && tr.w !== null) {
        const [x1, y1] = pointAt(xy, i + 1, h);
        x += tr.w * (x1 - x); y += tr.w * (y1 - y); e = tr.start;
      }
      pts.push([x, y, e]);
    }
    return pts;
  }

  function axisLimits(xy) {
    const T = S.T, radius = new Float64Array(T), limits = new Float64Array(T);
    for (let t = 0; t < T; t++) {
      const tr = trailOf(t, TRAIL);
      let r = 0;
      for (let h = 0; h < H; h++)
        for (const [x, y] of trailPoints(xy, t, h, tr)) r = Math.max(r, Math.hypot(x, y));
      radius[t] = r;
    }
    let logL = null;
    for (let t = 0; t < T; t++) {
      let ahead = 0;
      for (let j = t; j < Math.min(T, t + LOOKAHEAD + 1); j++) ahead = Math.max(ahead, radius[j]);
      const logA = Math.log(Math.max(ahead, TINY));
      if (logL === null || logL <= Math.log(TINY)) logL = logA;
      else logL = logL + EASE * (logA - logL);
      logL = Math.max(logL, Math.log(Math.max(radius[t], TINY)));
      const level = Math.max(Math.exp(logL), radius[t]);
      limits[t] = ahead > 0 ? MARGIN * level : 1.0;
    }
    return limits;
  }

  // ---- panels ---------------------------------------------------------------------------------
  function panelSize() {
    const free = Math.max(260, Math.min(window.innerWidth - 420, 760));
    return Math.max(220, Math.min(340, Math.floor((free - 14) / 2)));
  }

  function makePanel(spec, index, custom) {
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
        panels = panels.filter((p) => p !== panel);
        el.remove();
      });
      h2.appendChild(rm);
    }
    canvas.addEventListener("mousemove", (ev) => hover(panel, ev));
    canvas.addEventListener("mouseleave", () => { view.hovered = null; showHead(); drawAll(); });
    canvas.addEventListener("click", (ev) => {
      const h = pick(panel, ev);
      view.selected = h === view.selected ? null : h;
      showHead(); drawAll();
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

  function layoutPanels() {
    const size = panelSize();
    const rows = P0 <= 2 ? 1 : 2;                 // as the movie: column by column, QK above OV
    const grid = $("panels");
    grid.style.gridTemplateRows = `repeat(${rows}, auto)`;
    grid.style.gridAutoFlow = "column";
    const cols = Math.max(2, Math.ceil(P0 / rows));
    $("panels-area").style.width = `${cols * size + (cols - 1) * 14}px`;
    $("custom-panels").style.gridTemplateColumns = `repeat(${cols}, ${size}px)`;
    for (const p of panels) sizePanel(p, size);
    sizeTimeline();
  }

  function drawPanel(panel) {
    const t = view.t, ctx = panel.ctx, size = panel.size, dpr = window.devicePixelRatio || 1;
    ctx.setTransform(dpr, 0, 0, dpr, 0, 0);
    ctx.fillStyle = "#fff";
    ctx.fillRect(0, 0, size, size);
    const L = panel.limits[t], half = size / 2;
    const X = (x) => half + (x / L) * half, Y = (y) => half - (y / L) * half;
    ctx.strokeStyle = "#e4e4e4"; ctx.lineWidth = 1;
    ctx.beginPath(); ctx.moveTo(half, 0); ctx.lineTo(half, size); ctx.moveTo(0, half); ctx.lineTo(size, half); ctx.stroke();
    const styles = [], order = [];
    for (let h = 0; h < H; h++) { styles.push(styleOf(t, h)); order.push(h); }
    order.sort((a, b) => (RANK[styles[a].kind] - RANK[styles[b].kind]) ||
                         ((styles[a].orbit ? styles[a].orbit.size : 0) - (styles[b].orbit ? styles[b].orbit.size : 0)) ||
                         (b - a));
    // polygons of the orbits verified at this snapshot, in planes where they draw one
    for (const [key] of S.orbits[t]) {
      const o = orbitByKey.get(key);
      if (!o || o.size < 2 || panel.spec.order !== o.size) continue;
      const pts = o.heads.map((h) => pointAt(panel.xy, t, h)).filter(([x, y]) => Math.hypot(x, y) > 0.02 * L);
      if (pts.length < 2) continue;
      pts.sort((p, q) => Math.atan2(p[1], p[0]) - Math.atan2(q[1], q[0]));
      ctx.strokeStyle = o.colour; ctx.globalAlpha = 0.45; ctx.lineWidth = 1.2;
      ctx.beginPath();
      pts.forEach(([x, y], i) => (i ? ctx.lineTo(X(x), Y(y)) : ctx.moveTo(X(x), Y(y))));
      ctx.closePath(); ctx.stroke(); ctx.globalAlpha = 1;
    }
    if (view.trails && TRAIL > 0) {
      const tr = trailOf(t, TRAIL);
      ctx.lineWidth = 1.4; ctx.lineCap = "butt";
      for (const h of order) {
        const pts = trailPoints(panel.xy, t, h, tr), st = styles[h];
        const base = st.kind === "hint" ? 0.3 : st.kind === "dead" ? 0.5 : 0.8;
        ctx.strokeStyle = st.colour;
        for (let i = 1; i < pts.length; i++) {
          const age = S.epochs[t] - (pts[i - 1][2] + pts[i][2]) / 2;
          ctx.globalAlpha = base * Math.max(0, 1 - age / TRAIL);
          ctx.beginPath(); ctx.moveTo(X(pts[i - 1][0]), Y(pts[i - 1][1])); ctx.lineTo(X(pts[i][0]), Y(pts[i][1])); ctx.stroke();
        }
      }
      ctx.globalAlpha = 1;
    }
    panel.screen = new Array(H);
    const top = view.selected !== null ? view.selected : view.hovered;
    const drawOrder = top === null ? order : order.filter((h) => h !== top).concat([top]);
    for (const h of drawOrder) {
      const [x, y] = pointAt(panel.xy, t, h), st = styles[h];
      const px = X(x), py = Y(y);
      panel.screen[h] = [px, py];
      if (panel.custom) {                         // the true coordinate lies within this ring
        const ring = panel.bound[t * H + h] / L * half;
        if (ring >= 1.5) {
          ctx.beginPath(); ctx.arc(px, py, ring, 0, 2 * Math.PI);
          ctx.strokeStyle = "#999"; ctx.globalAlpha = 0.45; ctx.lineWidth = 0.8; ctx.stroke(); ctx.globalAlpha = 1;
        }
      }
      ctx.beginPath();
      if (st.kind === "dead") {
        ctx.arc(px, py, 3.5, 0, 2 * Math.PI);
        ctx.fillStyle = st.colour; ctx.fill();
        ctx.strokeStyle = "#b4b4b4"; ctx.lineWidth = 1; ctx.stroke();
      } else if (st.kind === "hint") {
        ctx.arc(px, py, 4.5, 0, 2 * Math.PI);
        ctx.fillStyle = "#fff"; ctx.fill();
        ctx.globalAlpha = 0.55; ctx.strokeStyle = st.colour; ctx.lineWidth = 1.8; ctx.stroke(); ctx.globalAlpha = 1;
      } else {
        ctx.arc(px, py, 5, 0, 2 * Math.PI);
        ctx.fillStyle = st.colour; ctx.fill();
        ctx.strokeStyle = "#fff"; ctx.lineWidth = 0.8; ctx.stroke();
      }
      if (h === top) {
        ctx.beginPath(); ctx.arc(px, py, 8.5, 0, 2 * Math.PI);
        ctx.strokeStyle = "#111"; ctx.lineWidth = 1.6; ctx.stroke();
      }
    }
    ctx.fillStyle = "#888"; ctx.font = "11px system-ui, sans-serif"; ctx.textAlign = "right"; ctx.textBaseline = "top";
    ctx.fillText(`axes ±${fmtNum(L)}`, size - 6, 5);
  }

  function pick(panel, ev) {
    const rect = panel.canvas.getBoundingClientRect();
    const mx = ev.clientX - rect.left, my = ev.clientY - rect.top;
    let best = null, bestD = 10;
    for (let h = 0; h < H; h++) {
      const s = panel.screen[h];
      if (!s) continue;
      const d = Math.hypot(s[0] - mx, s[1] - my);
      if (d <= bestD) { best = h; bestD = d; }
    }
    return best;
  }

  function hover(panel, ev) {
    const h = pick(panel, ev);
    if (h !== view.hovered) { view.hovered = h; showHead(); drawAll(); }
  }

  // ---- legend and the head box --------------------------------------------------------------
  function orbitName(o) { return `${o.size}-orbit (heads ${o.heads.join(", ")})`; }

  function orbitStatus(o, t, verifiedNow) {
    const E = S.epochs[t];
    if (verifiedNow) {
      if (o.locked_in !== null && E >= o.locked_in) return `verified since epoch ${fmtEpoch(o.locked_in)}`;
      return "verified at this snapshot" + (o.locked_in !== null ? `; for good from epoch ${fmtEpoch(o.locked_in)}`
                                                                  : "; not at the latest snapshot");
    }
    return o.locked_in !== null ? `not yet verified: from epoch ${fmtEpoch(o.locked_in)}` : "not verified at this snapshot";
  }

  function swatch(colour, hollow) {
    const s = document.createElement("span");
    s.className = "swatch";
    if (hollow) { s.style.border = `2px solid ${colour}`; s.style.opacity = "0.6"; }
    else s.style.background = colour;
    return s;
  }

  function updateLegend() {
    const t = view.t, ul = document.createElement("ul");
    const now = new Map(S.orbits[t].map(([k, e]) => [k, e]));
    let dead = 0, other = 0;
    for (let h = 0; h < H; h++) {
      if (S.dead[t * H + h]) dead++;
      else if (!orbitAt(t, h)) other++;
    }
    for (const o of META.orbits) {
      const verified = now.has(o.key);
      if (!o.final && !verified) continue;
      const li = document.createElement("li");
      if (!verified) li.className = "faint";
      const text = document.createElement("span");
      text.textContent = `${orbitName(o)}: ${orbitStatus(o, t, verified)}` +
                         (verified ? `, worst error ${pct(now.get(o.key))}` : "");
      li.append(swatch(o.colour, !verified), text);
      ul.appendChild(li);
    }
    const plain = [[other, `live head${other === 1 ? "" : "s"} in no verified orbit`, META.colours.other],
                   [dead, `dead head${dead === 1 ? "" : "s"} (OV circuit below ${(100 * META.dead_tol).toFixed(0)} % of the largest)`,
                    META.colours.dead]];
    for (const [count, label, colour] of plain) {
      if (!count) continue;
      const li = document.createElement("li");
      const text = document.createElement("span");
      text.textContent = `${count} ${label}`;
      li.append(swatch(colour, false), text);
      ul.appendChild(li);
    }
    const note = document.createElement("div");
    note.className = "note";
    note.textContent = "Filled dot: in an orbit the check verifies at this snapshot. Ring: will be in that orbit " +
      "later, not verified yet. Lines join an orbit's heads in planes where it draws its polygon.";
    const legend = $("legend");
    legend.replaceChildren(ul, note);
  }

  const RDBU = [[5, 48, 97], [33, 102, 172], [67, 147, 195], [146, 197, 222], [209, 229, 240], [247, 247, 247],
                [253, 219, 199], [244, 165, 130], [214, 96, 77], [178, 24, 43], [103, 0, 31]];   // RdBu_r

  function colourOf(z) {                         // z in [-1, 1]
    const x = (Math.max(-1, Math.min(1, z)) + 1) / 2 * (RDBU.length - 1);
    const i = Math.min(RDBU.length - 2, Math.floor(x)), f = x - i;
    return RDBU[i].map((c, j) => Math.round(c + f * (RDBU[i + 1][j] - c)));
  }

  function factorFromRows(t, h, f) {             // F[a, e] = (1/n) sum_u A^[u, e] exp(-2 pi i u a / n)
    const out = new Float64Array(N * D), rows = [];
    for (let u = 0; u < N; u++) rows.push(rowOf(t, h, f, u));
    for (let a = 0; a < N; a++)
      for (let u = 0; u < N; u++) {
        const c = Math.cos(2 * Math.PI * u * a / N), s = Math.sin(2 * Math.PI * u * a / N), row = rows[u];
        for (let e = 0; e < D; e++) out[a * D + e] += (row.re[e] * c + row.im[e] * s) / N;
      }
    return out;
  }

  function circuitMatrix(t, h, which) {          // centred M (which 0) or R (which 1), [N, N] row-major
    const A = factorFromRows(t, h, 2 * which), B = factorFromRows(t, h, 2 * which + 1), out = new Float64Array(N * N);
    for (let r = 0; r < N; r++)
      for (let c = 0; c < N; c++) {
        let acc = 0;
        for (let e = 0; e < D; e++) acc += A[r * D + e] * B[c * D + e];
        out[r * N + c] = acc;
      }
    return out;
  }

  function heatmap(values, caption) {
    const cell = Math.max(4, Math.floor(168 / N)), side = cell * N;
    const canvas = document.createElement("canvas");
    canvas.width = canvas.height = side;
    canvas.style.width = canvas.style.height = side + "px";
    const ctx = canvas.getContext("2d");
    let vmax = 0;
    for (const v of values) vmax = Math.max(vmax, Math.abs(v));
    for (let r = 0; r < N; r++)
      for (let c = 0; c < N; c++) {
        const [R, G, B] = colourOf(vmax > 0 ? values[r * N + c] / vmax : 0);
        ctx.fillStyle = `rgb(${R},${G},${B})`;
        ctx.fillRect(c * cell, r * cell, cell, cell);
      }
    const fig = document.createElement("figure");
    fig.style.width = side + "px";
    const cap = document.createElement("figcaption");
    cap.textContent = `${caption}; red +, blue −, scale ±${fmtNum(vmax)}`;
    fig.append(canvas, cap);
    return fig;
  }

  function showHead() {
    const box = $("head-info");
    const h = view.hovered !== null ? view.hovered : view.selected;
    if (h === null || !S.T) {
      box.innerHTML = '<span class="muted">Hover over a dot to see that head; click it to keep it.</span>';
      box.dataset.head = "";
      return;
    }
    const t = view.t, st = styleOf(t, h), err = S.headError[t * H + h];
    box.dataset.head = String(h);
    const rows = [];
    const title = document.createElement("div");
    title.className = "hid";
    title.textContent = `head ${h}`;
    rows.push(title);
    const orbit = document.createElement("div");
    if (st.kind === "dead") orbit.textContent = `dead at this snapshot: OV circuit below ${(100 * META.dead_tol).toFixed(0)} % of the largest head's`;
    else if (st.kind === "orbit") orbit.textContent = `${orbitName(st.orbit)}: ${orbitStatus(st.orbit, t, true)}`;
    else if (st.kind === "hint") orbit.textContent = `in no verified orbit at this snapshot; ${orbitName(st.orbit)} ${orbitStatus(st.orbit, t, false)}`;
    else orbit.textContent = "in no verified orbit at this snapshot";
    orbit.className = "orbit";
    rows.push(orbit);
    const e = document.createElement("div");
    e.className = "error";
    e.textContent = Number.isFinite(err) ? `worst-shift match error ${pct(err)} (an orbit needs ≤ ${(100 * META.tol).toFixed(0)} %)`
                                         : "worst-shift match error: none (dead head)";
    rows.push(e);
    const at = document.createElement("div");
    at.className = "muted";
    at.textContent = `at epoch ${fmtEpoch(S.epochs[t])}` + (view.selected === h ? " · kept (click again to let go)" : "");
    rows.push(at);
    const maps = document.createElement("div");
    maps.className = "heatmaps";
    maps.append(heatmap(circuitMatrix(t, h, 0), "centred QK circuit M[a, b]: query token a (rows), key token b (columns)"),
                heatmap(circuitMatrix(t, h, 1), "centred OV circuit R[c, b]: output class c (rows), attended token b (columns)"));
    rows.push(maps);
    box.replaceChildren(...rows);
  }

  // ---- timeline -----------------------------------------------------------------------------
  const TL = { canvas: $("timeline"), w: 0, h: 140, left: 44, right: 16 };

  function sizeTimeline() {
    const width = parseFloat($("panels-area").style.width) || 640;
    const dpr = window.devicePixelRatio || 1;
    TL.w = width;
    TL.canvas.style.width = width + "px"; TL.canvas.style.height = TL.h + "px";
    TL.canvas.width = Math.round(width * dpr); TL.canvas.height = Math.round(TL.h * dpr);
  }

  function tlMax() { return Math.max(META.final_epoch, S.epochs[S.T - 1] || 1); }
  function tlX(epoch) { return TL.left + (epoch - S.epochs[0]) / Math.max(1, tlMax() - S.epochs[0]) * (TL.w - TL.left - TL.right); }
  function tlEpoch(x) { return S.epochs[0] + (x - TL.left) / (TL.w - TL.left - TL.right) * Math.max(1, tlMax() - S.epochs[0]); }

  function niceStep(span) {
    const raw = span / 8, p = Math.pow(10, Math.floor(Math.log10(raw)));
    for (const m of [1, 2, 2.5, 5, 10]) if (m * p >= raw) return m * p;
    return 10 * p;
  }

  function drawTimeline() {
    const ctx = TL.canvas.getContext("2d"), dpr = window.devicePixelRatio || 1, w = TL.w, h = TL.h;
    ctx.setTransform(dpr, 0, 0, dpr, 0, 0);
    ctx.fillStyle = "#fff"; ctx.fillRect(0, 0, w, h);
    const top = 40, bottom = h - 22, x0 = TL.left, x1 = w - TL.right;
    const last = S.epochs[S.T - 1];
    if (last < tlMax()) { ctx.fillStyle = "#f3f3f3"; ctx.fillRect(tlX(last), top, x1 - tlX(last), bottom - top); }
    ctx.strokeStyle = "#bbb"; ctx.lineWidth = 1;
    ctx.beginPath(); ctx.moveTo(x0, bottom + 0.5); ctx.lineTo(x1, bottom + 0.5); ctx.stroke();
    ctx.fillStyle = "#666"; ctx.font = "11px system-ui, sans-serif"; ctx.textAlign = "center"; ctx.textBaseline = "top";
    const step = niceStep(tlMax() - S.epochs[0]);
    for (let e = Math.ceil(S.epochs[0] / step) * step; e <= tlMax(); e += step) {
      const x = tlX(e);
      ctx.beginPath(); ctx.moveTo(x + 0.5, bottom); ctx.lineTo(x + 0.5, bottom + 4); ctx.stroke();
      const tw = ctx.measureText(fmtEpoch(e)).width;
      ctx.fillText(fmtEpoch(e), Math.min(x, w - tw / 2 - 1), bottom + 6);
    }
    ctx.textAlign = "left"; ctx.fillText("epoch", 2, bottom + 6);
    // equivariance error (log scale), light
    const eq = S.eqError.map((v, i) => [i, v]).filter(([, v]) => v !== null && v > 0);
    if (eq.length > 1) {
      const logs = eq.map(([, v]) => Math.log10(v));
      const lo = Math.min(...logs), hi = Math.max(...logs), span = Math.max(hi - lo, 1e-9);
      ctx.strokeStyle = "#c9a0dc"; ctx.lineWidth = 1.2; ctx.beginPath();
      eq.forEach(([i], j) => {
        const x = tlX(S.epochs[i]), y = bottom - (logs[j] - lo) / span * (bottom - top - 4);
        j ? ctx.lineTo(x, y) : ctx.moveTo(x, y);
      });
      ctx.stroke();
    }
    // heads in verified orbits (0..H), step curve
    ctx.strokeStyle = "#333"; ctx.lineWidth = 1.5; ctx.beginPath();
    let lastY = null;
    for (let i = 0; i < S.T; i++) {
      let k = 0;
      for (const [key] of S.orbits[i]) { const o = orbitByKey.get(key); if (o) k += o.heads.length; }
      const x = tlX(S.epochs[i]), y = bottom - k / H * (bottom - top - 4);
      if (lastY === null) ctx.moveTo(x, y); else { ctx.lineTo(x, lastY); ctx.lineTo(x, y); }
      lastY = y;
    }
    ctx.stroke();
    // events and lock-ins
    ctx.font = "10.5px system-ui, sans-serif"; ctx.textBaseline = "top";
    const marks = META.events.map((e) => [e.epoch, e.short, "#888"]).concat(
      META.orbits.filter((o) => o.final && o.locked_in !== null).map((o) => [o.locked_in, `${o.size}-orbit verified`, o.colour]));
    const rowEnd = [-Infinity, -Infinity, -Infinity];   // labels in three rows, each where it fits
    for (const [epoch, label, colour] of marks.sort((a, b) => a[0] - b[0])) {
      const x = tlX(epoch);
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
    const cx = tlX(S.epochs[view.t]);
    ctx.strokeStyle = "#d00"; ctx.lineWidth = 2;
    ctx.beginPath(); ctx.moveTo(cx, top - 2); ctx.lineTo(cx, bottom + 2); ctx.stroke();
    ctx.fillStyle = "#333"; ctx.textAlign = "right"; ctx.textBaseline = "top";
    ctx.fillText(String(H), x0 - 4, top - 2); ctx.fillText("0", x0 - 4, bottom - 10);
  }

  function timelineNote() {
    const parts = ["Black: heads in verified orbits (0 to " + H + ")"];
    if (S.eqError.some((v) => v !== null)) parts.push("lilac: equivariance error (log scale)");
    parts.push("dashed: " + META.events.map((e) => `${e.label} (epoch ${fmtEpoch(e.epoch)})`).concat(
      META.orbits.filter((o) => o.final && o.locked_in !== null).map((o) => `${orbitName(o)} verified from epoch ${fmtEpoch(o.locked_in)}`)).join("; "));
    $("timeline-note").textContent = parts.join(" · ") + ". Click or drag to move.";
  }

  function timelineAt(ev) {
    const rect = TL.canvas.getBoundingClientRect();
    setEpoch(tlEpoch(ev.clientX - rect.left));
  }

  // ---- state changes ------------------------------------------------------------------------
  function drawAll() {
    if (!S.T) return;
    for (const p of panels) drawPanel(p);
    drawTimeline();
  }

  function setSnapshot(t, keepEpoch) {
    view.t = Math.max(0, Math.min(S.T - 1, t));
    if (!keepEpoch) view.epoch = S.epochs[view.t];
    const scr = $("scrubber");
    scr.value = String(S.epochs[view.t]);
    const el = $("epoch");
    el.textContent = `epoch ${fmtEpoch(S.epochs[view.t])}`;
    el.dataset.epoch = String(S.epochs[view.t]);
    el.dataset.snapshot = String(view.t);
    $("caption").textContent = `${S.captions[view.t]}   ·   snapshot ${view.t + 1} of ${S.T}`;
    updateLegend();
    showHead();
    drawAll();
  }

  function setEpoch(epoch) { setSnapshot(lastIndexAtOrBefore(Math.round(epoch))); }

  function play(on) {
    view.playing = on;
    $("play").textContent = on ? "❚❚ pause" : "▶ play";
    if (on) {
      if (view.t >= S.T - 1) setSnapshot(0);
      view.epoch = S.epochs[view.t]; view.last = performance.now(); view.hold = 0;
      requestAnimationFrame(tick);
    }
  }

  function holdEpochs() {                        // playback pauses ~1 s at these epochs
    return META.events.map((e) => e.epoch).concat(META.orbits.filter((o) => o.locked_in !== null).map((o) => o.locked_in));
  }

  function tick(now) {
    if (!view.playing) return;
    const dt = (now - view.last) / 1000;
    view.last = now;
    if (now < view.hold) { requestAnimationFrame(tick); return; }
    const speed = Number($("speed").value);
    let next = view.epoch + speed * dt;
    for (const e of holdEpochs()) if (view.epoch < e && next >= e) { next = e; view.hold = now + 1000; }
    view.epoch = next;
    const t = lastIndexAtOrBefore(next);
    if (t !== view.t) setSnapshot(t, true);
    if (next >= S.epochs[S.T - 1]) {
      if (!LIVE || META.complete) { setSnapshot(S.T - 1); play(false); return; }
      view.epoch = S.epochs[S.T - 1];   // live: wait at the newest snapshot
    }
    requestAnimationFrame(tick);
  }

  function refreshAll() {
    for (const p of panels) fillCoords(p);
    const scr = $("scrubber");
    scr.min = String(S.epochs[0]);
    scr.max = String(S.epochs[S.T - 1]);
    timelineNote();
  }

  // ---- live view ----------------------------------------------------------------------------
  let gen = LIVE ? LIVE.gen : 0;

  function liveBadge(status, lost) {
    const el = $("live");
    el.hidden = false;
    el.className = lost ? "lost" : status.quiet_s > 30 && !status.complete ? "stale" : "";
    let text = `live: epoch ${fmtEpoch(status.epoch)} of ${fmtEpoch(status.final_epoch)}`;
    if (status.complete) text += " · training finished";
    else if (status.quiet_s > 30) text += ` · no new snapshot for ${Math.round(status.quiet_s)} s`;
    if (status.message) text += ` · ${status.message}`;
    if (lost) text += " · server not answering, retrying";
    el.textContent = text;
    el.dataset.epoch = String(status.epoch);
  }

  let lastStatus = null;
  async function poll() {
    try {
      const r = await fetch(`${LIVE.update}?gen=${gen}&since=${S.T}&identity=${encodeURIComponent(LIVE.identity)}`,
                            { cache: "no-store" });
      if (!r.ok) throw new Error(String(r.status));
      const u = await r.json();
      if (u.reload) { location.reload(); return; }      // another run now lives in this file
      const atEnd = view.t === S.T - 1;
      gen = u.gen;
      setMeta(u.meta);
      for (const c of u.chunks) await appendChunk(c);
      if (u.chunks.length) {
        refreshAll();
        setSnapshot(atEnd || view.t >= S.T ? S.T - 1 : view.t);
      } else {
        updateLegend(); drawAll();
      }
      lastStatus = u.status;
      liveBadge(u.status, false);
    } catch (err) {
      if (lastStatus) liveBadge(lastStatus, true);
    }
    setTimeout(poll, LIVE.poll_ms);
  }

  // ---- start --------------------------------------------------------------------------------
  async function start() {
    setMeta(META);
    for (const c of PAYLOAD.chunks) await appendChunk(c);
    if (!S.T) { fail("This run has no snapshot yet."); return; }
    panels = META.panels.map((spec, i) => makePanel(spec, i, false));
    $("panels").append(...panels.map((p) => p.el));
    layoutPanels();
    refreshAll();
    setSnapshot(LIVE ? S.T - 1 : 0);

    $("play").addEventListener("click", () => play(!view.playing));
    $("scrubber").addEventListener("input", (ev) => { play(false); setEpoch(Number(ev.target.value)); });
    $("trails").addEventListener("change", (ev) => { view.trails = ev.target.checked; drawAll(); });
    let dragging = false;
    TL.canvas.addEventListener("mousedown", (ev) => { dragging = true; play(false); timelineAt(ev); });
    window.addEventListener("mousemove", (ev) => { if (dragging) timelineAt(ev); });
    window.addEventListener("mouseup", () => { dragging = false; });
    document.addEventListener("keydown", (ev) => {
      if (ev.target.tagName === "INPUT" && ev.target.type !== "range" || ev.target.tagName === "SELECT") return;
      if (ev.key === " ") { ev.preventDefault(); play(!view.playing); }
      else if (ev.key === "ArrowRight") { ev.preventDefault(); play(false); setSnapshot(view.t + 1); }
      else if (ev.key === "ArrowLeft") { ev.preventDefault(); play(false); setSnapshot(view.t - 1); }
    });
    $("add-plane").addEventListener("submit", (ev) => {
      ev.preventDefault();
      const circuit = $("plane-circuit").value;
      const u = Number($("plane-u").value), v = Number($("plane-v").value), msg = $("plane-msg");
      if (!Number.isInteger(u) || !Number.isInteger(v)) { msg.textContent = "u and v must be integers"; return; }
      if ((circuit === "qk" && mod(v, N) === 0) || (circuit === "ov" && mod(u, N) === 0)) {
        msg.textContent = circuit === "qk" ? "QK planes with v = 0 are centred away (softmax ignores them): every dot sits at 0"
                                           : "OV planes with u = 0 are centred away (softmax ignores them): every dot sits at 0";
        return;
      }
      if (panels.some((p) => p.spec.circuit === circuit && mod(p.spec.u - u, N) === 0 && mod(p.spec.v - v, N) === 0)) {
        msg.textContent = "that plane is already shown"; return;
      }
      msg.textContent = "";
      const panel = makePanel(planeWords(circuit, u, v), panels.length, true);
      panels.push(panel);
      $("custom-panels").appendChild(panel.el);
      sizePanel(panel, panelSize());
      fillCoords(panel);
      drawPanel(panel);
    });
    window.addEventListener("resize", () => { layoutPanels(); drawAll(); });
    if (LIVE) poll();
    document.body.dataset.state = "ready";
  }

  // hooks for tests and the curious: where each dot is drawn, in data and in page pixels
  window.headmovies = {
    formatError: pct,
    get snapshot() { return view.t; },
    get epochs() { return S.epochs.slice(); },
    panels: () => panels.map((p) => ({ circuit: p.spec.circuit, u: p.spec.u, v: p.spec.v, custom: p.custom })),
    dots(i) {
      const p = panels[i], t = view.t, rect = p.canvas.getBoundingClientRect();
      const out = [];
      for (let h = 0; h < H; h++) {
        const [x, y] = pointAt(p.xy, t, h);
        out.push({ head: h, x, y, px: rect.left + p.canvas.clientLeft + p.screen[h][0],
                   py: rect.top + p.canvas.clientTop + p.screen[h][1], kind: styleOf(t, h).kind,
                   bound: p.bound ? p.bound[t * H + h] : 0 });
      }
      return { limit: p.limits[t], size: p.size, left: rect.left + p.canvas.clientLeft, top: rect.top + p.canvas.clientTop,
               dots: out };
    },
  };

  start().catch((err) => fail(`The viewer could not start: ${err.message}`));
})();
