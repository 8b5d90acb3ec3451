// The generic viewer: scrub the snapshots of any run; each head a dot with its trail in each
// plane; a head's centred QK and OV heatmaps at the nearest stored snapshot (docs/recording.md).
"use strict";
const D = JSON.parse(document.getElementById("payload").textContent);
const T = D.epochs.length, P = D.titles.length, H = D.heads.length, SIZE = 320;
const scrub = document.getElementById("scrub");
const canvases = [];
let t = T - 1, head = 0, timer = null;
document.getElementById("header").textContent = D.header;
scrub.max = T - 1;
for (let p = 0; p < P; p++) {
  const div = document.createElement("div");
  div.className = "panel";
  const h3 = document.createElement("h3");
  h3.textContent = D.titles[p];
  const note = document.createElement("p");
  note.className = "note";
  note.textContent = D.notes[p];
  const c = document.createElement("canvas");
  c.width = c.height = SIZE;
  c.addEventListener("click", (ev) => pick(p, ev));
  div.append(h3, note, c);
  document.getElementById("panels").append(div);
  canvases.push(c);
}
D.heads.forEach((label, h) => {
  const b = document.createElement("button");
  b.type = "button";
  b.textContent = label;
  b.style.background = D.colours[h];
  b.addEventListener("click", () => { head = h; draw(); });
  document.getElementById("heads").append(b);
});
function xy(p, s, h) { const i = 2 * (s * P * H + p * H + h); return [D.coords[i], D.coords[i + 1]]; }
function toPx(v, lim) { return SIZE / 2 + (v / lim) * (SIZE / 2); }
function pick(p, ev) {
  const r = ev.target.getBoundingClientRect(), lim = D.limits[t * P + p];
  let best = -1, bestD = 1e9;
  for (let h = 0; h < H; h++) {
    const [x, y] = xy(p, t, h);
    const d = Math.hypot(toPx(x, lim) - (ev.clientX - r.left), toPx(-y, lim) - (ev.clientY - r.top));
    if (d < bestD) { bestD = d; best = h; }
  }
  if (bestD < 20) { head = best; draw(); }
}
function drawPanel(p) {
  const g = canvases[p].getContext("2d"), lim = D.limits[t * P + p];
  g.clearRect(0, 0, SIZE, SIZE);
  g.strokeStyle = "#ccc";
  g.beginPath(); g.moveTo(SIZE / 2, 0); g.lineTo(SIZE / 2, SIZE); g.moveTo(0, SIZE / 2); g.lineTo(SIZE, SIZE / 2); g.stroke();
  let s0 = t;
  while (s0 > 0 && D.epochs[t] - D.epochs[s0 - 1] <= D.trail_epochs) s0--;
  for (let h = 0; h < H; h++) {
    g.strokeStyle = D.colours[h]; g.globalAlpha = 0.35; g.lineWidth = 1.5;
    g.beginPath();
    for (let s = s0; s <= t; s++) {
      const [x, y] = xy(p, s, h);
      if (s === s0) g.moveTo(toPx(x, lim), toPx(-y, lim)); else g.lineTo(toPx(x, lim), toPx(-y, lim));
    }
    g.stroke();
    g.globalAlpha = 1;
    const [x, y] = xy(p, t, h);
    g.fillStyle = D.colours[h];
    g.beginPath(); g.arc(toPx(x, lim), toPx(-y, lim), h === head ? 6 : 4, 0, 2 * Math.PI); g.fill();
    if (h === head) { g.strokeStyle = "#222"; g.lineWidth = 1.5; g.stroke(); }
  }
  g.fillStyle = "#777"; g.font = "11px sans-serif";
  g.fillText("axes span \u00b1" + lim.toPrecision(3), SIZE - 120, SIZE - 6);
}
const B64 = Uint8Array.from(atob(D.maps.data), (c) => c.charCodeAt(0));
const MAPS = new Int8Array(B64.buffer);
function drawMaps() {
  let m = 0;
  for (let i = 0; i < D.maps.epochs.length; i++) if (D.maps.epochs[i] <= D.epochs[t]) m = i;
  const box = document.getElementById("maps");
  box.textContent = "";
  let offset = 0;
  const sizes = D.maps.shapes;  // [[rows, cols] of qk, of ov]
  const per = sizes.reduce((a, [r, c]) => a + r * c, 0);
  offset = (m * H + head) * per;
  sizes.forEach(([rows, cols], k) => {
    const c = document.createElement("canvas");
    c.className = "map"; c.width = cols; c.height = rows;
    const scale = Math.max(2, Math.floor(200 / Math.max(rows, cols)));
    c.style.width = cols * scale + "px"; c.style.height = rows * scale + "px";
    const g = c.getContext("2d"), img = g.createImageData(cols, rows);
    for (let i = 0; i < rows * cols; i++) {
      const v = MAPS[offset + i] / 127;
      const r = v > 0 ? 255 : Math.round(255 * (1 + v)), b = v < 0 ? 255 : Math.round(255 * (1 - v));
      const gg = Math.round(255 * (1 - Math.abs(v)));
      img.data.set([r, gg, b, 255], 4 * i);
    }
    g.putImageData(img, 0, 0);
    offset += rows * cols;
    const fig = document.createElement("figure"), cap = document.createElement("figcaption");
    cap.textContent = D.heads[head] + " " + ["QK (query down, key across)", "OV (output down, token across)"][k] +
      ", epoch " + D.maps.epochs[m].toLocaleString() + ", max |entry| " + D.maps.scales[(m * H + head) * 2 + k].toPrecision(3);
    fig.append(c, cap);
    box.append(fig);
  });
}
function draw() {
  scrub.value = t;
  document.getElementById("epoch").textContent = "epoch " + D.epochs[t].toLocaleString();
  document.getElementById("caption").textContent = D.captions[t];
  for (let p = 0; p < P; p++) drawPanel(p);
  document.querySelectorAll("#heads button").forEach((b, h) => b.classList.toggle("on", h === head));
  drawMaps();
}
scrub.addEventListener("input", () => { t = +scrub.value; draw(); });
document.getElementById("play").addEventListener("click", (ev) => {
  if (timer) { clearInterval(timer); timer = null; ev.target.textContent = "play"; return; }
  if (t === T - 1) t = 0;
  ev.target.textContent = "pause";
  timer = setInterval(() => { if (t >= T - 1) { clearInterval(timer); timer = null; ev.target.textContent = "play"; return; } t++; draw(); }, 80);
});
draw();
