"""Shared test setup. Helpers live beside the tests and are imported one way, by module name
(`from equivariant import equivariant_run`): pytest puts this folder on sys.path."""
from __future__ import annotations

import os

import pytest

# Tiny models: a second thread only adds OpenMP waits on a shared 2-core machine (30x slower
# measured with spinning threads). Subprocesses started by tests inherit these.
os.environ.setdefault("OMP_NUM_THREADS", "1")
os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")


@pytest.fixture(autouse=True, scope="session")
def one_torch_thread():
    """One torch thread in the test process (torch is imported only if a test needs it)."""
    import sys
    if "torch" in sys.modules:
        sys.modules["torch"].set_num_threads(1)
    yield
