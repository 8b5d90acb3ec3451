"""The orbit experiment (docs/experiments.md): importing this package registers `task.OrbitTask`."""
from headmovies.train.orbits import task  # noqa: F401  (registers OrbitTask)
