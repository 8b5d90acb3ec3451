"""The OV-coherent viewer's own script (docs/viewer.md, "OV-coherent viewer"): family.js, the
legend and the token pane, inlined with the shared parts of render/core/viewer_page/ by its build."""
