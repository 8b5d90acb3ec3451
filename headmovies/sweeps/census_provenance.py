"""Provenance of the orbit census (census.md, "Provenance"; docs/sweeps.md): which code, machine
and dates made which rows, generated from the run files, never written by hand.

Each census row carries `provenance` (`run_provenance`, read from its run file's root
attributes `created`, `git_commit`, `versions` and `machine`), so the table survives once the
run files are gone. Rows made before this field, and run files written before the `machine`
attribute, say "not recorded". Every row also has `file_mtime_ns`, when its run file was last
written, so even the oldest rows give a date.
"""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

from headmovies.errors import RunFileError
from headmovies.runfile.reader import Run

NOT_RECORDED = "not recorded"


def run_provenance(run: Run) -> dict:
    """A row's `provenance` from an open run: {"created": ISO 8601 UTC or None, "git_commit":
    str ("" when the trainer found no git checkout) or None, "versions": {"headmovies",
    "torch", "python"} (those recorded) or None, "machine": {"cpu", "cores", "system"} or None}."""
    p = run.provenance()
    versions = p["versions"]
    if versions is not None:
        versions = {k: versions[k] for k in ("headmovies", "torch", "python") if k in versions}
    return {"created": p["created"], "git_commit": p["git_commit"], "versions": versions, "machine": p["machine"]}


def with_provenance(row: dict, path: Path) -> dict:
    """`row` with `provenance` read from its run file at `path` when the row lacks it (a row
    counted before the field existed) and the file is there and readable; else `row` as is."""
    if "provenance" in row or not path.exists():
        return row
    try:
        with Run(path) as run:
            return {**row, "provenance": run_provenance(run)}
    except RunFileError:
        return row


def code_of(row: dict) -> str:
    """The code that trained a row's run: "headmovies 0.2.0, commit e085f39", "headmovies
    0.2.0, no git commit" (a copy without git metadata) or "not recorded"."""
    p = row.get("provenance")
    if not p or p.get("versions") is None:
        return NOT_RECORDED
    version = p["versions"].get("headmovies")
    name = f"headmovies {version}" if version else "headmovies (version not recorded)"
    commit = p.get("git_commit")
    if commit is None:
        return f"{name}, commit {NOT_RECORDED}"
    return f"{name}, commit {commit[:7]}" if commit else f"{name}, no git commit"


def machine_of(row: dict) -> str:
    """The machine that trained a row's run: "AMD EPYC 7B13, 2 cores (Linux x86_64)" or "not recorded"."""
    m = (row.get("provenance") or {}).get("machine")
    if not m:
        return NOT_RECORDED
    cores = m.get("cores")
    text = m.get("cpu") or "CPU unknown"
    if cores:
        text += f", {cores} core{'s' if cores != 1 else ''}"
    return text + (f" ({m['system']})" if m.get("system") else "")


def _utc(ts: datetime) -> tuple[str, str]:
    return ts.strftime("%Y-%m-%d"), ts.strftime("%H:%M")


def _created(row: dict) -> datetime | None:
    text = (row.get("provenance") or {}).get("created")
    if not text:
        return None
    try:
        ts = datetime.fromisoformat(text)
    except ValueError:
        return None
    return (ts if ts.tzinfo else ts.replace(tzinfo=UTC)).astimezone(UTC)


def _written(row: dict) -> datetime | None:
    ns = row.get("file_mtime_ns")
    return datetime.fromtimestamp(ns / 1e9, UTC) if ns else None


def seed_ranges(seeds: list[int]) -> str:
    """Sorted seeds as ranges: [0, 1, 2, 5, 7, 8] -> "0–2, 5, 7–8"."""
    out: list[str] = []
    seeds = sorted(set(seeds))
    i = 0
    while i < len(seeds):
        j = i
        while j + 1 < len(seeds) and seeds[j + 1] == seeds[j] + 1:
            j += 1
        out.append(str(seeds[i]) if i == j else f"{seeds[i]}–{seeds[j]}")
        i = j + 1
    return ", ".join(out)


def _span(times: list[datetime]) -> str:
    if not times:
        return NOT_RECORDED
    (d0, t0), (d1, t1) = _utc(min(times)), _utc(max(times))
    if (d0, t0) == (d1, t1):
        return f"{d0} {t0}"
    return f"{d0} {t0}–{t1}" if d0 == d1 else f"{d0} {t0} – {d1} {t1}"


def provenance_table(rows: list[dict]) -> str:
    """One line per recipe, code, machine and UTC day the run files were last written: the
    seeds, how many runs, when they were started (`created`) and last written."""
    groups: dict[tuple, list[dict]] = {}
    for r in rows:
        w = _written(r)
        key = (r["recipe"], code_of(r), machine_of(r), w.strftime("%Y-%m-%d") if w else "")
        groups.setdefault(key, []).append(r)
    recipes = list(dict.fromkeys(r["recipe"] for r in rows))
    lines = [
        "| recipe | seeds | runs | code | machine | started (UTC) | run file last written (UTC) |",
        "|---|---|---|---|---|---|---|",
    ]
    for key in sorted(groups, key=lambda k: (recipes.index(k[0]), k[3], k[1], k[2])):
        rs = groups[key]
        created = [t for t in map(_created, rs) if t]
        written = [t for t in map(_written, rs) if t]
        lines.append(
            f"| {key[0]} | {seed_ranges([r['seed'] for r in rs])} | {len(rs)} | {key[1]} | {key[2]} | "
            f"{_span(created)} | {_span(written)} |"
        )
    return "\n".join(lines)


def provenance_markdown(rows: list[dict]) -> str:
    """The "Provenance" section of census.md."""
    recorded = sum(machine_of(r) != NOT_RECORDED for r in rows)
    return "\n".join(
        [
            "## Provenance",
            "",
            (
                "Which code and machine made each row, and when, from the run files' root attributes "
                "(`created`, `git_commit`, `versions`, `machine`; docs/run-file.md). A resumed run "
                "records the machine that started it. Rows counted before this table existed say "
                f'"{NOT_RECORDED}". {recorded} of {len(rows)} rows name their machine. Another CPU '
                "rounds differently, so its runs can differ in the last digits."
            ),
            "",
            provenance_table(rows),
            "",
        ]
    )
