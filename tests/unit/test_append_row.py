"""`schema.append_row`, the writer's low-level append of one row, stores the same bytes as h5py's
`resize` and `ds[t] = value` (float32 rows into float32 and float16 datasets with checksums,
Python floats into float64, ints into int64), in SWMR mode too, and refuses a row of another shape
before growing the dataset."""

from __future__ import annotations

import h5py
import numpy as np
import pytest

from headmovies.runfile import schema

CASES = [
    ("weights", np.float32, (3, 4), lambda r: r.standard_normal((3, 4)).astype(np.float32)),
    ("half", np.float16, (3, 4), lambda r: (1e3 * r.standard_normal((3, 4))).astype(np.float32)),
    ("metric", np.float64, (), lambda r: float(r.standard_normal())),
    ("epoch", np.int64, (), lambda r: int(r.integers(0, 2**40))),
]


def _make(f: h5py.File, name: str, dtype, shape) -> h5py.Dataset:
    chunks = (1, *shape) if shape else (1024,)
    return f.create_dataset(
        name, shape=(0, *shape), maxshape=(None, *shape), chunks=chunks, dtype=dtype, fletcher32=True
    )


def test_append_row_stores_what_resize_and_setitem_store(tmp_path):
    rng = np.random.default_rng(0)
    with h5py.File(tmp_path / "run.h5", "w", libver="latest") as f:
        pairs = [(_make(f, f"{n}_low", d, s), _make(f, f"{n}_high", d, s), value) for n, d, s, value in CASES]
        f.swmr_mode = True
        for t in range(5):
            for low, high, value in pairs:
                row = value(rng)
                schema.append_row(low, t, row)
                high.resize(t + 1, axis=0)
                high[t] = row
            f.flush()
    with h5py.File(tmp_path / "run.h5", "r", swmr=True) as f:
        for name, dtype, shape, _ in CASES:
            low, high = f[f"{name}_low"][()], f[f"{name}_high"][()]
            assert low.shape == high.shape == (5, *shape) and low.dtype == high.dtype == np.dtype(dtype)
            assert low.tobytes() == high.tobytes()


def test_append_row_refuses_a_row_of_another_shape_before_growing(tmp_path):
    with h5py.File(tmp_path / "run.h5", "w") as f:
        ds = _make(f, "w", np.float32, (3, 4))
        schema.append_row(ds, 0, np.ones((3, 4), np.float32))
        with pytest.raises(ValueError, match=r"a row of /w is \[3, 4\], got \[4, 3\]"):
            schema.append_row(ds, 1, np.ones((4, 3), np.float32))
        assert ds.shape == (1, 3, 4)
