"""The rows file of a sweep, DIR/sweep.jsonl (docs/sweeps.md): one JSON object per line, one
line per finished, stopped or failed run, appended by the sweep's driver alone (`jobs.make_row`
makes a row; a rerun appends a new row for a run it trains again).
"""

from __future__ import annotations

import json
import os
from pathlib import Path

ROWS_FILE = "sweep.jsonl"  # one row per finished (or failed) run, appended


def read_sweep_rows(path: str | Path) -> list[dict]:
    """Rows of a sweep.jsonl: each line a JSON object with at least run, seed and status; a line
    cut short by a killed sweep (or anything else that is not such a row) is skipped. [] when
    the file does not exist."""
    path, rows = Path(path), []
    if path.exists():
        for line in path.read_text(encoding="utf-8").splitlines():
            try:
                row = json.loads(line)
            except json.JSONDecodeError:
                continue
            if isinstance(row, dict) and {"run", "seed", "status"} <= row.keys():
                rows.append(row)
    return rows


def latest(rows: list[dict]) -> list[dict]:
    """The last row of each run (a rerun appends a new row for a run that failed before), in
    the order the runs first appear."""
    last: dict[str, dict] = {}
    for row in rows:
        last[row["run"]] = row  # a dict keeps a key where it was first inserted
    return list(last.values())


def append_sweep_rows(path: Path, rows: list[dict]) -> None:
    """Append `rows` to the sweep.jsonl at `path`, one line each, and fsync. A last line cut
    short by a killed sweep is ended first, so the next row starts on a line of its own."""
    if path.exists() and path.stat().st_size:
        with open(path, "rb") as fh:
            fh.seek(-1, os.SEEK_END)
            cut = fh.read(1) != b"\n"
        if cut:
            with open(path, "a", encoding="utf-8") as fh:
                fh.write("\n")
    with open(path, "a", encoding="utf-8") as fh:
        for row in rows:
            fh.write(json.dumps(row) + "\n")
        fh.flush()
        os.fsync(fh.fileno())
