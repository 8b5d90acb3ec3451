// Heatmaps for the detail panes of every viewer page: a signed map (matplotlib's RdBu_r,
// symmetric scale) or an unsigned one (Greys, from 0), colours from the payload.
"use strict";
(function (exports) {
  const { fmtNum } = viewerModules.format;

  // [r, g, b] (0..255) of z in [-1, 1] (clipped): linear between equally spaced `stops`
  function colourOf(z, stops) {
    const x = (Math.max(-1, Math.min(1, z)) + 1) / 2 * (stops.length - 1);
    const i = Math.min(stops.length - 2, Math.floor(x)), f = x - i;
    return stops[i].map((c, j) => Math.round(c + f * (stops[i + 1][j] - c)));
  }

  // A <figure> with a canvas of values (array [rows * cols], row-major, rows drawn top to
  // bottom), cells of `cell` px, and `caption` with the scale. signed: -vmax..vmax on `stops`
  // (RdBu_r), else 0..vmax on `stops` (Greys); vmax: the largest |value| unless given.
  function heatmap(values, rows, cols, caption, stops, { signed = true, cell = 8, vmax = null } = {}) {
    let top = vmax;
    if (top === null) { top = 0; for (const v of values) top = Math.max(top, Math.abs(v)); }
    const canvas = document.createElement("canvas");
    canvas.width = cols * cell; canvas.height = rows * cell;
    canvas.style.width = canvas.width + "px"; canvas.style.height = canvas.height + "px";
    const ctx = canvas.getContext("2d");
    for (let r = 0; r < rows; r++)
      for (let c = 0; c < cols; c++) {
        const z = top > 0 ? values[r * cols + c] / top : 0;
        const [R, G, B] = colourOf(signed ? z : 2 * z - 1, stops);
        ctx.fillStyle = `rgb(${R},${G},${B})`;
        ctx.fillRect(c * cell, r * cell, cell, cell);
      }
    const fig = document.createElement("figure");
    fig.style.width = Math.max(canvas.width, 160) + "px";
    const cap = document.createElement("figcaption");
    cap.textContent = signed ? `${caption}; red +, blue −, scale ±${fmtNum(top)}` : `${caption}; black ${fmtNum(top)}, white 0`;
    fig.append(canvas, cap);
    return fig;
  }

  Object.assign(exports, { colourOf, heatmap });
})((globalThis.viewerModules ??= {}).heatmap = {});
