// Small page-building helpers for the scatter viewer's legends and detail panes (family.js).
"use strict";
(function (exports) {
  // <tag class="className">text</tag> (text and className optional)
  function el(tag, text, className) {
    const e = document.createElement(tag);
    if (text !== undefined) e.textContent = text;
    if (className) e.className = className;
    return e;
  }

  // A round colour swatch for a legend: filled, or a ring (hollow, as a "ring" dot)
  function swatch(colour, hollow) {
    const s = el("span", undefined, "swatch");
    if (hollow) s.style.border = `2px solid ${colour}`; else s.style.background = colour;
    return s;
  }

  Object.assign(exports, { el, swatch });
})((globalThis.viewerModules ??= {}).dom = {});
