"""The viewer engine every viewer page runs on (docs/viewer.md, "The page"): the markup, the
stylesheets, number formats, payload decoding, trails and rescaling axes, heatmaps, the player,
planes, timeline and wiring, and the build that inlines a family's page (`build.page`)."""
