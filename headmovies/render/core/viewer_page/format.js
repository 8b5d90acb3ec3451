// Numbers in words for the viewer: epochs, relative errors, axis half-widths. Pure functions.
"use strict";
(function (exports) {
  // 16000 -> "16,000"
  const fmtEpoch = (e) => Math.round(e).toLocaleString("en-US");

  // A relative error as render/orbits/check.format_error writes it: "0.10%", "8.6e-08"; an error
  // that two decimals would print as the tolerance gets the digits that tell its side ("1.996%"),
  // one closer than five decimals a sign ("<2.00000%").
  function formatError(x, tol) {
    if (x < 1e-4) return x.toExponential(1).replace(/e([+-])(\d)$/, "e$10$2");
    let digits = 2;
    const same = (d) => (100 * x).toFixed(d) === (100 * tol).toFixed(d);
    while (digits < 5 && x !== tol && same(digits)) digits++;
    return (x !== tol && same(digits) ? (x < tol ? "<" : ">") : "") + (100 * x).toFixed(digits) + "%";
  }

  // An axis half-width or a heatmap's scale: "0", "123", "1.23", "0.012"
  const fmtNum = (x) => (x === 0 ? "0" : Math.abs(x) >= 100 ? x.toFixed(0) : Math.abs(x) >= 1 ? x.toPrecision(3)
                         : x.toPrecision(2));

  // Python's "{x:g}" for numbers between 1e-4 and 1e6: six significant digits, no trailing zeros
  const fmtG = (x) => String(+x.toPrecision(6));

  // Python's f"{x:+.2f}": a signed score ("+0.69", "-1.00", "-0.00")
  const fmtSigned = (x) => (x >= 0 ? "+" : "") + x.toFixed(2);

  Object.assign(exports, { fmtEpoch, formatError, fmtNum, fmtG, fmtSigned });
})((globalThis.viewerModules ??= {}).format = {});
