// Heatmaps of a head's circuits: a diverging colour map (its stops come in the payload,
// matplotlib's RdBu_r) on a symmetric scale.
"use strict";
(function (exports) {
  const { fmtNum } = viewerModules.format;

  // [r, g, b] (0..255) of z in [-1, 1] (clipped): linear between equally spaced `stops`
  function colourOf(z, stops) {
    const x = (Math.max(-1, Math.min(1, z)) + 1) / 2 * (stops.length - 1);
    const i = Math.min(stops.length - 2, Math.floor(x)), f = x - i;
    return stops[i].map((c, j) => Math.round(c + f * (stops[i + 1][j] - c)));
  }

  // A <figure> with a canvas of `values` (Float64Array [n, n], row-major, rows drawn top to
  // bottom) scaled to its largest |value|, and `caption` with that scale
  function heatmap(values, n, caption, stops) {
    const cell = Math.max(4, Math.floor(168 / n)), side = cell * n;
    const canvas = document.createElement("canvas");
    canvas.width = canvas.height = side;
    canvas.style.width = canvas.style.height = side + "px";
    const ctx = canvas.getContext("2d");
    let vmax = 0;
    for (const v of values) vmax = Math.max(vmax, Math.abs(v));
    for (let r = 0; r < n; r++)
      for (let c = 0; c < n; c++) {
        const [R, G, B] = colourOf(vmax > 0 ? values[r * n + c] / vmax : 0, stops);
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

  Object.assign(exports, { colourOf, heatmap });
})((globalThis.viewerModules ??= {}).heatmap = {});
