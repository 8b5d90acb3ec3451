"""The parts every viewer page shares (docs/viewer.md): number formats, payload decoding,
trails and rescaling axes, heatmaps, the stylesheet, the scatter viewer's scripts, and the
build that inlines a family's page (`build.page`)."""
