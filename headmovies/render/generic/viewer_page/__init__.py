"""The generic viewer's own script (docs/recording.md, "Viewer"): family.js, the legend and the
head pane, inlined with the shared parts of render/core/viewer_page/ by its build."""
