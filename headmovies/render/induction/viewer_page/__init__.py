"""The induction viewer's own script (docs/viewer.md, "Induction viewer"): family.js, the legend
and the head pane, inlined with the shared parts of render/core/viewer_page/ by its build."""
