"""A sweep's outcomes (`headmovies sweep`, docs/sweeps.md): its table and its outcome figure,
made from the rows of DIR/sweep.jsonl alone.

summary.md groups runs by config (their grid point) across seeds: runs done and failed, the
outcomes and their counts, and each final metric's median and range. census.{png,svg}
(`outcome_figure`) draws, per config, how many seeds reached each outcome (for orbits: the
orbit structure, e.g. '4+2'). The orbit census across sweeps is another thing: `census`.
"""

from __future__ import annotations

import contextlib
import textwrap
from collections import Counter
from collections.abc import Callable
from pathlib import Path

import numpy as np

from headmovies.render.core.outputs import save_figure, write_text
from headmovies.sweeps.sweep_rows import latest

FAILED = "failed"
FINISHED = ("done", "stopped")  # stopped: trained through --stop-at only, summarised there


def value_text(value) -> str:
    """10.0 -> '10', True -> 'true', others as str."""
    if isinstance(value, bool):
        return str(value).lower()
    if isinstance(value, float) and value.is_integer() and abs(value) < 1e15:
        return str(int(value))
    return str(value)


def config_text(row: dict) -> str:
    """'eq_weight=10 split=orbit' (the run's grid point), or 'all runs' without a grid."""
    return " ".join(f"{k}={value_text(v)}" for k, v in row["grid"].items()) or "all runs"


def outcome_of(row: dict) -> str:
    return row["summary"]["outcome"] if row["status"] in FINISHED else FAILED


def by_config(rows: list[dict]) -> dict[str, list[dict]]:
    """{config text: its rows, by seed}, configs in the order of their grid values."""
    groups: dict[str, list[dict]] = {}
    for row in rows:
        groups.setdefault(config_text(row), []).append(row)
    order = list(groups)
    with contextlib.suppress(TypeError):  # grids of different keys and types: keep first-seen order
        order.sort(key=lambda k: tuple(groups[k][0]["grid"].items()))
    return {k: sorted(groups[k], key=lambda r: r["seed"]) for k in order}


def seeds_text(seeds: list[int]) -> str:
    """[0, 1, 2, 3, 7] -> '0–3, 7'."""
    seeds, parts, i = sorted(seeds), [], 0
    while i < len(seeds):
        j = i
        while j + 1 < len(seeds) and seeds[j + 1] == seeds[j] + 1:
            j += 1
        parts.append(str(seeds[i]) if i == j else f"{seeds[i]}–{seeds[j]}")
        i = j + 1
    return ", ".join(parts)


def outcome_order(rows: list[dict]) -> list[str]:
    """Outcomes by how often they occur over all rows (ties by name), 'failed' last."""
    counts = Counter(outcome_of(r) for r in rows)
    order = sorted((o for o in counts if o != FAILED), key=lambda o: (-counts[o], o))
    return order + ([FAILED] if FAILED in counts else [])


def _number(name: str, value: float) -> str:
    if value is None or not np.isfinite(value):
        return "—"
    return f"{value:.1%}" if "acc" in name else f"{value:.3g}"


def _spread(name: str, values: list[float]) -> str:
    """Median, and [min, max] when they differ."""
    if not values:
        return "—"
    lo, mid, hi = min(values), float(np.median(values)), max(values)
    return _number(name, mid) if lo == hi else f"{_number(name, mid)} [{_number(name, lo)}, {_number(name, hi)}]"


def _row(cells: list) -> str:
    """One Markdown table row; a '|' in a cell (an error message, a grid value) is escaped so
    that it does not split the cell."""
    return "| " + " | ".join(str(c).replace("|", "\\|") for c in cells) + " |"


def summary_markdown(
    rows: list[dict],
    experiment: str,
    outcome_text: str,
    settings: dict,
    detail: Callable[[dict], str] | None = None,
    detail_text: str = "",
) -> str:
    """The sweep's Markdown table (by config across seeds), then one line per run; with
    `detail` (a finished row's summary -> text, `registry.FamilySummary`), a column of it beside
    each run's outcome, headed by `detail_text` up to its colon and explained under the table."""
    rows = latest(rows)
    done = [r for r in rows if r["status"] in FINISHED]
    stopped = sum(r["status"] == "stopped" for r in rows)
    metrics = sorted(dict.fromkeys(k for r in done for k in r["metrics"]), key=lambda k: ("acc" not in k, k))
    fixed = ", ".join(f"{k}={value_text(v)}" for k, v in settings.items()) or "none"
    out = [
        f"# Sweep: {experiment}",
        "",
        f"{len(rows)} runs: {len(done) - stopped} done, "
        + (f"{stopped} stopped early (--stop-at: summarised at that epoch), " if stopped else "")
        + f"{len(rows) - len(done)} failed. Fixed settings: {fixed} "
        f"(other keys: the experiment's defaults). Every row is in `sweep.jsonl`; the census figure is "
        f"`census.png`.",
        "",
        f"Outcome: {outcome_text}.",
        "",
        "## By config",
        "",
        _row(["config", "seeds", "done", "failed", "outcomes", *metrics, "seconds per run"]),
        "|" + "---|" * (6 + len(metrics)),
    ]
    for name, group in by_config(rows).items():
        ok = [r for r in group if r["status"] in FINISHED]
        counts = Counter(outcome_of(r) for r in ok)
        outcomes = ", ".join(f"{o} ×{c}" for o, c in sorted(counts.items(), key=lambda kv: (-kv[1], kv[0]))) or "—"
        cells = [_spread(m, [r["metrics"][m] for r in ok if m in r["metrics"]]) for m in metrics]
        seconds = _spread("seconds", [r["seconds"] / max(1, r.get("batch", 1)) for r in ok])
        n_done = sum(r["status"] == "done" for r in ok)
        done_text = f"{n_done} (+{len(ok) - n_done} stopped)" if len(ok) > n_done else str(n_done)
        out.append(
            _row(
                [
                    name,
                    seeds_text([r["seed"] for r in group]),
                    done_text,
                    str(len(group) - len(ok)),
                    outcomes,
                    *cells,
                    seconds,
                ]
            )
        )
    out += [
        "",
        "Metrics: median [min, max] over the config's seeds that finished"
        + (", and those stopped early (at their --stop-at epoch)" if stopped else "")
        + ". Seconds per run: wall time of its training (a batch's time divided by its runs) and summary; "
        "a forked run's (`--fork-from`) cover only the epochs after its fork.",
        "",
        "## Runs",
        "",
    ]
    extra = [detail_text.split(":", 1)[0]] if detail else []
    if detail:
        out += [f"{detail_text[:1].upper()}{detail_text[1:]}.", ""]
    out += [
        _row(["run", "seed", "status", "outcome", *extra, *metrics, "seconds", "batch", "error"]),
        "|" + "---|" * (7 + len(extra) + len(metrics)),
    ]
    for r in sorted(rows, key=lambda r: (config_text(r), r["seed"])):
        cells = [_number(m, r["metrics"].get(m)) if r["metrics"] else "—" for m in metrics]
        fork = r.get("forked_from")
        seconds = f"{r['seconds']:.1f}" + (f" (forked at epoch {fork.rsplit('@', 1)[-1]})" if fork else "")
        out.append(
            _row(
                [
                    r["run"],
                    str(r["seed"]),
                    r["status"],
                    outcome_of(r),
                    *([detail(r["summary"]) if r["status"] in FINISHED else ""] if detail else []),
                    *cells,
                    seconds,
                    str(r.get("batch", 1)),
                    r["error"] or "",
                ]
            )
        )
    return "\n".join(out) + "\n"


def outcome_figure(rows: list[dict], experiment: str, outcome_text: str):
    """Horizontal bars, one per config, split by outcome: how many seeds reached each."""
    import matplotlib
    from matplotlib.figure import Figure
    from matplotlib.layout_engine import ConstrainedLayoutEngine
    from matplotlib.ticker import MaxNLocator

    rows = latest(rows)
    groups = by_config(rows)
    order = outcome_order(rows)
    cmap = matplotlib.colormaps["tab20" if len(order) > 10 else "tab10"]
    colours = {o: ("0.6" if o == FAILED else cmap(i % cmap.N)) for i, o in enumerate(order)}
    names = list(groups)
    fig = Figure(figsize=(8, 1.9 + 0.45 * len(names)), layout="constrained")
    ax = fig.add_subplot()
    y = np.arange(len(names))[::-1]
    left = np.zeros(len(names))
    for o in order:
        counts = np.array([sum(outcome_of(r) == o for r in groups[n]) for n in names], float)
        bars = ax.barh(
            y, counts, left=left, color=colours[o], label=o, edgecolor="white", hatch="//" if o == FAILED else None
        )
        for b, c in zip(bars, counts):
            if c:
                ax.text(
                    b.get_x() + b.get_width() / 2,
                    b.get_y() + b.get_height() / 2,
                    str(int(c)),
                    ha="center",
                    va="center",
                    fontsize=9,
                )
        left += counts
    ax.set_yticks(y, names)
    ax.set_xlabel("runs (seeds)")
    ax.set_xlim(0, max(1, left.max()))
    locator = ax.xaxis.get_major_locator()
    if isinstance(locator, MaxNLocator):  # the default AutoLocator is one
        locator.set_params(integer=True)
    ax.set_title(f"{experiment} sweep: outcome census across seeds, per config")
    ax.legend(title="outcome", loc="upper left", bbox_to_anchor=(1.01, 1), frameon=False)
    fig.text(0.01, 0.0, "\n".join(textwrap.wrap(f"outcome: {outcome_text}", 110)), fontsize=7, va="bottom", color="0.3")
    engine = fig.get_layout_engine()
    if isinstance(engine, ConstrainedLayoutEngine):  # layout="constrained" above
        engine.set(rect=(0, 0.06 + 0.012 * len(textwrap.wrap(outcome_text, 110)), 1, 0.94))
    return fig


def write_outcomes(
    out: str | Path,
    rows: list[dict],
    experiment: str,
    outcome_text: str,
    settings: dict,
    detail: Callable[[dict], str] | None = None,
    detail_text: str = "",
) -> list[Path]:
    """Write out/summary.md (`summary_markdown`) and out/census.{png,svg} (each atomically);
    returns their paths ([] without rows)."""
    if not rows:
        return []
    out = Path(out)
    md = summary_markdown(rows, experiment, outcome_text, settings, detail, detail_text)
    paths = [write_text(out / "summary.md", md)]
    paths += save_figure(outcome_figure(rows, experiment, outcome_text), out, "census", dpi=120)
    return paths
