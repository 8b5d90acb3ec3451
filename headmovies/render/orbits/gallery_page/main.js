// The census gallery (docs/sweeps.md, "Census gallery"): the wiring. Reads the payload written
// by headmovies/sweeps/census_gallery.py, fills the controls, and draws one tile per run that
// passes the filter (filters.js), its planes as inline SVG (tiles.js).
"use strict";
(function () {
  const { outcomeOrder, groupRuns, outcomeCounts } = galleryModules.filters;
  const { planeDots, orbitPolygon, tileText } = galleryModules.tiles;
  const { $ } = viewerModules.dom;
  const SVG = "http://www.w3.org/2000/svg";
  const SIZE = 68; // px of one plane

  const P = JSON.parse($("payload").textContent);
  const state = { recipe: "", outcome: "", by: "recipe", circuit: "qk" };

  function el(tag, attrs = {}, text = null) {
    const e = tag.startsWith("svg:") ? document.createElementNS(SVG, tag.slice(4)) : document.createElement(tag);
    for (const [k, v] of Object.entries(attrs)) e.setAttribute(k, v);
    if (text != null) e.textContent = text;
    return e;
  }

  function planeSvg(run, group) {
    const plane = group[state.circuit], ho = run.planes.head_orbit;
    const svg = el("svg:svg", { width: SIZE, height: SIZE, viewBox: `0 0 ${SIZE} ${SIZE}` });
    svg.append(el("svg:line", { x1: SIZE / 2, y1: 2, x2: SIZE / 2, y2: SIZE - 2, stroke: "#eee" }));
    svg.append(el("svg:line", { x1: 2, y1: SIZE / 2, x2: SIZE - 2, y2: SIZE / 2, stroke: "#eee" }));
    run.orbits.forEach((_, k) => {
      const pts = orbitPolygon(plane, ho, k, SIZE);
      if (pts) svg.append(el("svg:polygon", { points: pts, fill: "none", stroke: P.colours.orbits[k % P.colours.orbits.length],
                                              "stroke-width": 0.8, "stroke-opacity": 0.6 }));
    });
    for (const d of planeDots(plane, ho, P.colours, SIZE)) {
      const dot = el("svg:circle", { cx: d.x, cy: d.y, r: d.r, fill: d.fill });
      if (d.stroke !== "none") dot.setAttribute("stroke", d.stroke), dot.setAttribute("stroke-width", 0.6);
      dot.append(el("svg:title", {}, `head ${d.head}`));
      svg.append(dot);
    }
    const u = plane.u, v = plane.v;
    const box = el("div", { class: "plane", title: `${state.circuit.toUpperCase()} (${u}, ${v}): ${group.heads} live heads at ω ${group.omega}` });
    box.append(svg, el("div", {}, `ω ${group.omega} (${group.heads})`));
    return box;
  }

  function tile(run) {
    const t = tileText(run);
    const name = `${run.recipe} · ${run.run}`;
    const box = run.viewer ? el("a", { class: "tile", href: run.viewer, title: `${name}: open its viewer` })
      : el("div", { class: "tile", title: name });
    const head = el("div", { class: "head" });
    head.append(el("span", {}, t.title), el("span", { class: "outcome" }, t.outcome));
    const planes = el("div", { class: "planes" });
    if (run.planes && run.planes.groups.length) planes.append(...run.planes.groups.map((g) => planeSvg(run, g)));
    else planes.append(el("div", { class: "none" }, run.planes ? "all heads dead" : "no coordinates (older row)"));
    box.append(head, planes);
    for (const line of t.lines) box.append(el("div", { class: "text" }, line));
    t.spectrum.forEach((line, i) => box.append(el("div", { class: "spectrum", title: `ω ${run.spectrum[i].omega}, `
      + `${run.spectrum[i].heads} live heads: largest |μ̂_k|/Σ|ρ| over k ≤ 3, over k ≥ 4; largest score amplitude r` }, line)));
    if (run.viewer) box.append(el("div", { class: "link" }, "viewer →"));
    box.dataset.recipe = run.recipe;
    box.dataset.outcome = run.outcome;
    return box;
  }

  function draw() {
    const groups = groupRuns(P.runs, state, state.by, P.recipes);
    const main = $("groups");
    main.replaceChildren();
    let shown = 0;
    for (const g of groups) {
      const sec = el("section", { class: "group" });
      const h = el("h2", {}, state.by === "outcome" ? `outcome ${g.key}` : g.key);
      h.append(el("span", { class: "muted" }, ` · ${g.runs.length} run${g.runs.length === 1 ? "" : "s"}`));
      const tiles = el("div", { class: "tiles" });
      tiles.append(...g.runs.map(tile));
      sec.append(h, tiles);
      main.append(sec);
      shown += g.runs.length;
    }
    $("count").textContent = `showing ${shown} of ${P.runs.length} runs`;
    drawOutcomes();
  }

  function drawOutcomes() {
    const pool = P.runs.filter((r) => !state.recipe || r.recipe === state.recipe);
    const counts = outcomeCounts(pool);
    const keys = ["", "any", "none", ...outcomeOrder(P.runs.map((r) => r.outcome)).filter((o) => o !== "none")];
    const words = { "": "all", any: "any orbit", none: "none" };
    $("outcomes").replaceChildren(...keys.map((k) => {
      const b = el("button", { type: "button", "data-outcome": k, "aria-pressed": String(state.outcome === k) },
                   `${words[k] ?? k} (${counts[k] ?? 0})`);
      b.addEventListener("click", () => { state.outcome = k; draw(); });
      return b;
    }));
  }

  function legend() {
    const items = P.colours.orbits.slice(0, 3).map((c, i) => [c, ["largest orbit", "second orbit", "third orbit"][i]]);
    items.push([P.colours.other, "live head in no orbit"], [P.colours.dead, "dead head", P.colours.dead_edge]);
    $("legend").replaceChildren(...items.map(([c, words, edge]) => {
      const s = el("span");
      s.append(el("span", { class: "swatch", style: `background:${c}` + (edge ? `;box-shadow:0 0 0 1px ${edge} inset` : "") }), words);
      return s;
    }), el("span", {}, "under each plane: its frequency ω (live heads at ω)"),
    el("span", {}, "“ω 6: k≤3 a, k≥4 b, r≤c”: the ω 6 group's largest |μ̂_k|/Σ|ρ| over k ≤ 3 (a) and k ≥ 4 (b), its largest score amplitude r (c)"));
  }

  try {
    $("about").textContent = P.about;
    $("recipe").append(el("option", { value: "" }, `all recipes (${P.runs.length})`),
                       ...P.recipes.map((r) => el("option", { value: r }, `${r} (${P.runs.filter((x) => x.recipe === r).length})`)));
    $("recipe").addEventListener("change", (e) => { state.recipe = e.target.value; draw(); });
    $("group-by").addEventListener("change", (e) => { state.by = e.target.value; draw(); });
    $("circuit").addEventListener("change", (e) => { state.circuit = e.target.value; draw(); });
    $("controls").addEventListener("submit", (e) => e.preventDefault());
    legend();
    draw();
    document.body.dataset.state = "ready";
  } catch (err) {
    $("error").hidden = false;
    $("error").textContent = `the gallery could not be drawn: ${err.message}`;
    throw err;
  }
})();
