// Small page-building helpers every viewer page shares: the element of an id, elements, and
// swatches for the legends.
"use strict";
(function (exports) {
  const $ = (id) => document.getElementById(id);

  // <tag class="className">text</tag> (text and className optional)
  function el(tag, text, className) {
    const e = document.createElement(tag);
    if (text !== undefined) e.textContent = text;
    if (className) e.className = className;
    return e;
  }

  // A round colour swatch for a legend: filled, or a ring (hollow, as a "ring" dot; faded by `opacity`)
  function swatch(colour, hollow, opacity) {
    const s = el("span", undefined, "swatch");
    if (hollow) s.style.border = `2px solid ${colour}`; else s.style.background = colour;
    if (opacity !== undefined) s.style.opacity = String(opacity);
    return s;
  }

  Object.assign(exports, { $, el, swatch });
})((globalThis.viewerModules ??= {}).dom = {});
