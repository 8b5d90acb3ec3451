"""The orbit experiment (source 000; docs/experiments.md), by job: `config` (OrbitConfig),
`attention` (the grid attention kernel and its gradient), `model` (AttentionLayer), `losses`
(the grid and sequence equivariance terms, the OV-bias penalty), `eq_errors` (the stored
equivariance errors), `task` (OrbitTask, one run) and `batch` (OrbitBatch, many runs per
process). `TASKS` and `BATCHING` are what the registry (`train/experiments.py`) lists.
"""

from headmovies.train.orbits.batch import OrbitBatch
from headmovies.train.orbits.task import OrbitTask

TASKS = (OrbitTask,)
BATCHING = {OrbitTask.name: OrbitBatch}
