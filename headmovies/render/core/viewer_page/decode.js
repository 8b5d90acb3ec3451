// Decoding the payload's binary arrays (headmovies/render/orbits/viewer.py, `pack`): base64 text
// of zlib-compressed bytes, unpacked by the browser's DecompressionStream into typed arrays.
"use strict";
(function (exports) {
  const TYPES = { f4: Float32Array, i1: Int8Array, i2: Int16Array, u1: Uint8Array };

  function b64bytes(text) {
    const bin = atob(text);
    const out = new Uint8Array(bin.length);
    for (let i = 0; i < bin.length; i++) out[i] = bin.charCodeAt(i);
    return out;
  }

  // {manifest: [[name, dtype, shape, byte offset]], blob: base64(zlib(bytes))} -> {name: typed array}
  // (flat, row-major in `shape`; views on one buffer)
  async function unpack(packed) {
    if (typeof DecompressionStream === "undefined") {
      throw new Error("this browser lacks DecompressionStream (Chrome 80+, Firefox 113+, Safari 16.4+)");
    }
    const stream = new Blob([b64bytes(packed.blob)]).stream().pipeThrough(new DecompressionStream("deflate"));
    const buf = await new Response(stream).arrayBuffer();
    const out = {};
    for (const [name, dtype, shape, offset] of packed.manifest) {
      const count = shape.reduce((a, b) => a * b, 1);
      out[name] = new TYPES[dtype](buf, offset, count);
    }
    return out;
  }

  // Undo viewer.time_delta in place: a running sum along the first axis (`stride` values per
  // snapshot), wrapping in the array's integer type as numpy's did. Returns `a`.
  function undoDeltas(a, stride) {
    for (let i = stride; i < a.length; i++) a[i] = a[i] + a[i - stride];
    return a;
  }

  // old[0:keep] followed by add, in old's type (a chunk appended at snapshot `keep`)
  function joined(old, add, keep) {
    const out = new old.constructor(keep + add.length);
    out.set(old.subarray(0, keep));
    out.set(add, keep);
    return out;
  }

  Object.assign(exports, { b64bytes, unpack, undoDeltas, joined });
})((globalThis.viewerModules ??= {}).decode = {});
