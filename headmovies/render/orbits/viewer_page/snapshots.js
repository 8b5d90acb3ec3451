// The run's snapshots as the page holds them, grown chunk by chunk (the file's, then the live
// view's), and what the orbit check says of each head at each snapshot.
"use strict";
(function (exports) {
  const { unpack, undoDeltas, joined } = viewerModules.decode;
  const { indexAtOrBefore } = viewerModules.axes;

  // How each kind of dot stacks: later kinds are drawn on top
  const RANK = { dead: 0, other: 1, hint: 2, orbit: 3 };

  class Snapshots {
    // meta: the payload's meta (viewer.py, `ViewerData.meta`). Sizes are fixed from it; T grows.
    constructor(meta) {
      this.H = this.K = meta.n_heads; this.N = meta.n; this.D = meta.d_head; this.P = meta.panels.length;
      this.scaleSteps = meta.fourier_rows.scale_steps; this.zeroCode = meta.fourier_rows.zero_code;
      const m = Math.floor(this.N / 2) + 1;
      this.perRows = this.H * 4 * m * 2 * this.D;       // row values and scale codes per snapshot
      this.perCodes = this.H * 4 * m;
      this.T = 0;
      this.epochs = []; this.captions = []; this.eqError = []; this.orbits = [];   // [T] each
      this.groups = [];                       // [T]: frequency groups and their orbit spectrum (groups.js)
      this.coords = new Float32Array(0);      // [T, P, H, 2]: the movie's panels
      this.rows = new Int8Array(0);           // [T, H, 4, m, 2 D] and [T, H, 4, m]: see planes.js
      this.codes = new Int16Array(0);
      this.headError = new Float32Array(0);   // [T, H]: worst-shift match error
      this.dead = new Uint8Array(0);          // [T, H]
      this.setMeta(meta);
    }

    // A new meta (the live view resends it): the orbits seen so far and their colours
    setMeta(meta) {
      this.meta = meta;
      this.planes = meta.panels;              // the engine's planes (scatter.js)
      this.orbitByKey = new Map(meta.orbits.map((o) => [o.key, o]));
      this.finalOrbitOf = new Array(this.H).fill(null);
      for (const o of meta.orbits) if (o.final) for (const h of o.heads) this.finalOrbitOf[h] = o;
    }

    // Add a chunk ({start, epochs, captions, eq_error, orbits, arrays}) at snapshot `start`,
    // dropping whatever the page held from there on (a resumed run rewrote it)
    async append(c) {
      const A = await unpack(c.arrays);
      const k = c.start, H = this.H;
      undoDeltas(A.rows, this.perRows);             // stored as differences between snapshots
      undoDeltas(A.codes, this.perCodes);
      this.coords = joined(this.coords, A.coords, k * this.P * H * 2);
      this.rows = joined(this.rows, A.rows, k * this.perRows);
      this.codes = joined(this.codes, A.codes, k * this.perCodes);
      this.headError = joined(this.headError, A.head_error, k * H);
      this.dead = joined(this.dead, A.dead, k * H);
      for (const key of ["epochs", "captions", "eqError", "orbits", "groups"]) this[key].length = k;
      this.epochs.push(...c.epochs);
      this.captions.push(...c.captions);
      this.eqError.push(...c.eq_error);
      this.orbits.push(...c.orbits);
      this.groups.push(...(c.groups || c.epochs.map(() => [])));
      this.T = k + c.epochs.length;
    }

    indexAtOrBefore(epoch) { return indexAtOrBefore(this.epochs, epoch); }

    // [orbit's meta, its worst error] if head h is in an orbit verified at snapshot t, else null
    orbitAt(t, h) {
      for (const [key, err] of this.orbits[t]) {
        const o = this.orbitByKey.get(key);
        if (o && o.heads.includes(h)) return [o, err];
      }
      return null;
    }

    // How head h is drawn at snapshot t: dead, in a verified orbit, a hint of the final orbit it
    // joins later, or other; with its colour (and orbit, and that orbit's error)
    styleOf(t, h) {
      const colours = this.meta.colours;
      if (this.dead[t * this.H + h]) return { kind: "dead", colour: colours.dead };
      const hit = this.orbitAt(t, h);
      if (hit) return { kind: "orbit", colour: hit[0].colour, orbit: hit[0], error: hit[1] };
      const fin = this.finalOrbitOf[h];
      if (fin) return { kind: "hint", colour: fin.colour, orbit: fin };
      return { kind: "other", colour: colours.other };
    }

    // Heads in orbits verified at snapshot t
    verifiedCount(t) {
      let k = 0;
      for (const [key] of this.orbits[t]) { const o = this.orbitByKey.get(key); if (o) k += o.heads.length; }
      return k;
    }
  }

  Object.assign(exports, { RANK, Snapshots });
})((globalThis.viewerModules ??= {}).snapshots = {});
