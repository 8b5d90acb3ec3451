"""Rendering any run, a recorded one (headmovies.record) or a built-in one: no experiment's
knowledge needed (docs/recording.md, "Rendering").

    heads.py     its attention layers, each head's centred token-space circuits per snapshot
    planes.py    the planes heads are drawn in: irrep planes (Z_p), a user's basis, or
                 principal axes fitted once on all snapshots
    movie.py     the movie (trailing dots, rescaling axes): `render_movie`
    figures.py   metrics, final heads' heatmaps, OV frequencies, summary.json: `render_figures`;
                 OV power per frequency, key frequencies, when a metric reached a level
    viewer.py    the one-page viewer, a scatter-viewer family (viewer_page/family.js):
                 `render_viewer`
    notebook.py  `headmovies.show(run)`: movie or viewer inline in Jupyter
"""
