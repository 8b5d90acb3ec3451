"""Rendering: reads only the run file (numpy, h5py, matplotlib; never torch or `train/`).

`core/` holds what every experiment uses (reader, circuits, irrep projections, trailing-dot
panels, encoder, atomic outputs); each experiment has one package (`orbits/`, `induction/`,
`ov_coherent/`) with its analysis, figures, movie, report and command."""
