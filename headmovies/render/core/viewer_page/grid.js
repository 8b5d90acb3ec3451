// Rectangular heatmaps for the detail panes of the scatter viewer: a signed map (matplotlib's
// RdBu_r, symmetric scale) or an unsigned one (Greys, from 0), colours from the payload.
"use strict";
(function (exports) {
  const { fmtNum } = viewerModules.format;
  const { colourOf } = viewerModules.heatmap;

  // A <figure> with a canvas of values (array [rows * cols], row-major, rows drawn top to
  // bottom), cells of `cell` px, and `caption` with the scale. signed: -vmax..vmax on `stops`
  // (RdBu_r), else 0..vmax on `stops` (Greys); vmax: the largest |value| unless given.
  function grid(values, rows, cols, caption, stops, { signed = true, cell = 8, vmax = null } = {}) {
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

  Object.assign(exports, { grid });
})((globalThis.viewerModules ??= {}).grid = {});
