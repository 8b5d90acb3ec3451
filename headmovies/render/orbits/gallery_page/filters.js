// Which runs the census gallery shows, in which groups: filtering by recipe and outcome and
// grouping by either (docs/sweeps.md, "Census gallery"). Pure functions of the payload's runs.
"use strict";
(function (exports) {
  // "4+3" -> [4, 3]; "none" -> []
  const sizes = (outcome) => (outcome === "none" ? [] : outcome.split("+").map(Number));

  // Outcomes in the order the gallery lists them: most heads in orbits first, then the larger
  // first orbit, then more orbits; "none" last. E.g. ["2", "none", "4+3", "3"] -> ["4+3", "3", "2", "none"].
  function outcomeOrder(outcomes) {
    const key = (o) => { const s = sizes(o); return [s.reduce((a, b) => a + b, 0), s[0] ?? 0, s.length]; };
    return [...new Set(outcomes)].sort((a, b) => {
      const ka = key(a), kb = key(b);
      for (let i = 0; i < 3; i++) if (ka[i] !== kb[i]) return kb[i] - ka[i];
      return a < b ? -1 : a > b ? 1 : 0;
    });
  }

  // Does a run pass the filter {recipe: "" (any) or a name, outcome: "" (any), "any" (some
  // orbit), "none" or an exact outcome such as "4+3"}?
  function matches(run, filter) {
    if (filter.recipe && run.recipe !== filter.recipe) return false;
    const o = filter.outcome || "";
    if (o === "") return true;
    if (o === "any") return run.outcome !== "none";
    return run.outcome === o;
  }

  // The runs passing `filter`, grouped by "recipe" (in the order of `recipes`) or "outcome"
  // (outcomeOrder), each group's runs in payload order: [{key, runs}], empty groups left out.
  function groupRuns(runs, filter, by, recipes) {
    const kept = runs.filter((r) => matches(r, filter));
    const keys = by === "outcome" ? outcomeOrder(kept.map((r) => r.outcome))
      : [...recipes, ...new Set(kept.map((r) => r.recipe))].filter((k, i, all) => all.indexOf(k) === i);
    const field = by === "outcome" ? "outcome" : "recipe";
    return keys.map((key) => ({ key, runs: kept.filter((r) => r[field] === key) })).filter((g) => g.runs.length);
  }

  // How many runs of `runs` each outcome button would show: {"": all, "any": ..., "none": ..., "4+3": ...}
  function outcomeCounts(runs) {
    const counts = { "": runs.length, any: 0, none: 0 };
    for (const r of runs) {
      if (r.outcome === "none") counts.none++;
      else { counts.any++; counts[r.outcome] = (counts[r.outcome] ?? 0) + 1; }
    }
    return counts;
  }

  Object.assign(exports, { sizes, outcomeOrder, matches, groupRuns, outcomeCounts });
})((globalThis.galleryModules ??= {}).filters = {});
