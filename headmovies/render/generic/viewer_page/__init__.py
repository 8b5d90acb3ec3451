"""The generic viewer's own script (docs/recording.md, "The viewer"): family.js, the legend and the
head pane, inlined with the shared parts of render/core/viewer_page/ by its build."""
