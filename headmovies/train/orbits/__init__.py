"""The orbit experiment (seed 000; docs/experiments.md), by job: `config` (OrbitConfig),
`attention` (the grid attention kernel and its gradient), `model` (AttentionLayer), `losses`
(the grid and sequence equivariance terms, the OV-bias penalty), `eq_errors` (the stored
equivariance errors), `task` (OrbitTask, one run) and `batch` (OrbitBatch, many runs per
process). Importing the package registers both.
"""
from headmovies.train.orbits import batch, task  # noqa: F401  (register OrbitTask and OrbitBatch)
