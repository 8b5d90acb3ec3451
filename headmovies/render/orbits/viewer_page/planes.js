// Irrep planes computed in the page (docs/viewer.md, "Payload and precision"): a plane's words,
// and from the 8-bit Fourier rows of each head's circuit factors its coordinates X^(u, v) with a
// bound on their rounding error, the factors themselves and the centred circuits. Pure functions.
//
// `src` is the snapshot data these read: {rows: Int8Array [T, H, 4, m, 2 D] (real parts, then
// imaginary parts), codes: Int16Array [T, H, 4, m], H, N, D, scaleSteps, zeroCode}, m = N/2 + 1
// (floor), row u of factor f (0: QK query, 1: QK key, 2: OV output, 3: OV value) scaled by
// 2^(code / scaleSteps), or 0 where code is zeroCode (viewer.py, `quantise_rows`).
"use strict";
(function (exports) {
  const { fmtG } = viewerModules.format;

  function gcd(a, b) { while (b) [a, b] = [b, a % b]; return a; }
  const mod = (a, n) => ((a % n) + n) % n;

  // Title and axis text of the plane (circuit, u, v) of C_n with output shift m, as
  // viewer.plane_words writes them; r: rotation frequency, order: vertices of an orbit's polygon
  function planeWords(circuit, u, v, n, m) {
    const r = mod(circuit === "qk" ? u + v : m * u + v, n);
    const k = n / gcd(r, n);
    const name = circuit.toUpperCase();
    const shape = k === 1 ? "stays put" : k === 2 ? "draws a pair" : `draws a regular ${k}-gon`;
    const turn = 360 * r / n;
    const deg = turn === Math.round(turn) ? fmtG(turn) : turn.toFixed(1);
    return { circuit, u, v, r, order: k, title: `${name} circuit, (u, v) = (${u}, ${v})`,
             axes: `x, y: real and imaginary part of each head's (${u}, ${v}) Fourier coefficient of its centred ` +
                   `${name} circuit. A shift by s turns every dot by ω·s·${fmtG(360 / n)}° (ω = ${r}: ` +
                   `${deg}° per unit shift); an orbit ${shape} here.` };
  }

  // Why the plane cannot be drawn ("" if it can): the softmax gauge centres QK v = 0 and OV u = 0 away
  function centredAway(circuit, u, v, n) {
    if (circuit === "qk" && mod(v, n) === 0)
      return "QK planes with v = 0 are centred away (softmax ignores them): every dot sits at 0";
    if (circuit === "ov" && mod(u, n) === 0)
      return "OV planes with u = 0 are centred away (softmax ignores them): every dot sits at 0";
    return "";
  }

  // Fourier row u (any integer) of factor f of head h at snapshot t: A^[u, e] = sum_a F[a, e]
  // exp(2 pi i u a / n), rows u > n/2 the conjugates of n - u. {re, im: Float64Array [D], err: how
  // far each entry can be from the true one (both parts rounded to half a step)}
  function rowOf(src, t, h, f, u) {
    const { H, N, D } = src, M = Math.floor(N / 2) + 1;
    const uu = mod(u, N), conj = uu >= M, r = conj ? N - uu : uu;
    const ci = ((t * H + h) * 4 + f) * M + r, code = src.codes[ci];
    const s = code === src.zeroCode ? 0 : Math.pow(2, code / src.scaleSteps), base = ci * 2 * D;
    const re = new Float64Array(D), im = new Float64Array(D);
    for (let e = 0; e < D; e++) { re[e] = s * src.rows[base + e]; im[e] = (conj ? -s : s) * src.rows[base + D + e]; }
    return { re, im, err: s / 2 * Math.SQRT2 };
  }

  // X^(u, v) = (1/n) sum_e A^[u, e] B^[v, e] of plane `spec` ({circuit, u, v}) for snapshots
  // t0..t1-1, centred M = F0 F1^T (QK) or R = F2 F3^T (OV): out[(t H + h) 2 + 0|1] = Re|Im, and
  // bound[t H + h] = (1/n) sum_e (dA |B^| + |A^| dB + dA dB), the most the rounding can move it
  function planeFromRows(src, spec, t0, t1, out, bound) {
    const { H, N, D } = src, fa = spec.circuit === "qk" ? 0 : 2, fb = fa + 1;
    for (let t = t0; t < t1; t++) {
      for (let h = 0; h < H; h++) {
        const A = rowOf(src, t, h, fa, spec.u), B = rowOf(src, t, h, fb, spec.v);
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

  // Factor f of head h at snapshot t from its rows, Float64Array [N, D] row-major:
  // F[a, e] = (1/n) sum_u A^[u, e] exp(-2 pi i u a / n) (the inverse of viewer.fourier_rows)
  function factorFromRows(src, t, h, f) {
    const { N, D } = src, out = new Float64Array(N * D), rows = [];
    for (let u = 0; u < N; u++) rows.push(rowOf(src, t, h, f, u));
    for (let a = 0; a < N; a++)
      for (let u = 0; u < N; u++) {
        const c = Math.cos(2 * Math.PI * u * a / N), s = Math.sin(2 * Math.PI * u * a / N), row = rows[u];
        for (let e = 0; e < D; e++) out[a * D + e] += (row.re[e] * c + row.im[e] * s) / N;
      }
    return out;
  }

  // Centred QK circuit M[a, b] (which 0) or OV circuit R[c, b] (which 1) of head h at snapshot t,
  // Float64Array [N, N] row-major
  function circuitMatrix(src, t, h, which) {
    const { N, D } = src;
    const A = factorFromRows(src, t, h, 2 * which), B = factorFromRows(src, t, h, 2 * which + 1);
    const out = new Float64Array(N * N);
    for (let r = 0; r < N; r++)
      for (let c = 0; c < N; c++) {
        let acc = 0;
        for (let e = 0; e < D; e++) acc += A[r * D + e] * B[c * D + e];
        out[r * N + c] = acc;
      }
    return out;
  }

  Object.assign(exports, { gcd, mod, planeWords, centredAway, rowOf, planeFromRows, factorFromRows, circuitMatrix });
})((globalThis.viewerModules ??= {}).planes = {});
