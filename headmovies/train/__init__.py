"""Training (torch): config (`config`), snapshot schedule (`schedule`), the experiment registry
(`experiments`), one model module per experiment family (`orbits`, `induction`,
`ov_coherent`), the one training loop (`loop`) and the run-file writer (`writer`).
Run `headmovies train --help`."""
