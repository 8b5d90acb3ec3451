"""Training (torch): config (`config`), snapshot schedule (`schedule`), the experiment registry
(`experiments`), one model module per experiment family (`orbits`, `induction`,
`ov_coherent`), and the one training loop (`loop`) with what it calls by job: a new run file
(`new_run`), checkpoints (`checkpoints`), `--resume` (`resume`), `--fork-from` (`fork`),
`--reuse` (`reuse`); `batch_loop` trains many runs in one process. The run file itself, writer
included, is `headmovies.runfile`. Run `headmovies train --help`."""
