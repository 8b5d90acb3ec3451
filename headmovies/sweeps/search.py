r"""Search training settings of the orbit experiment (source 000) for runs whose heads form
verified G-orbits, and print one table row per (setting, seed).

Runs `OrbitTask` in-process (no run files), one run at a time, and at every `--every` epochs
prints train / held-out accuracy, equivariance error and the orbit check of the current heads.

    .venv/bin/python -m headmovies.sweeps.search --epochs 6000 --seeds 0,1,2 \
        --set split=orbit --grid eq_weight=1,10 --grid weight_decay=0.1,1

`--set KEY=VALUE` fixes a config key for every run; `--grid KEY=V1,V2,...` runs the product
of all grids. Rows are also appended as JSON lines to `--log` (default
outputs/orbit_search.jsonl) so a search can be tabulated later with `--table LOG`.
`--save DIR` keeps each run's final weights; `--load FILE` starts every run from such weights
with a fresh optimiser (a fine-tune with the given settings), `--prune F` first zeroing the
heads whose OV norm is below F x the largest (as `refine_prune` does at a second phase's start).
"""

from __future__ import annotations

import argparse
import itertools
import json
import pickle
import sys
import time
from pathlib import Path

from headmovies.parser import Parser


def orbit_summary(task, m: int, tol: float) -> dict:
    """`render.orbits.summary.orbit_summary` of the task's current heads, for a table row."""
    import torch

    from headmovies.render.orbits.summary import orbit_summary as summary

    with torch.no_grad():
        M, R = task.model.circuits()
    M = M.double().numpy()
    return summary(M, R.double().numpy(), M.shape[-1], m, tol=tol)


def seq_eq_error(model, m: int, length: int = 4, n_seq: int = 256, seed: int = 0) -> float:
    """The equivariance error, max_s ||l(x+s) - roll_{ms} l(x)|| / ||l(x)||, but over
    n_seq fixed random token sequences of `length` (not task inputs), from the circuits."""
    import torch

    p = model.n
    x = torch.randint(0, p, (n_seq, length), generator=torch.Generator().manual_seed(seed))
    with torch.no_grad():
        M, R = model.circuits()
        OV = R.mT  # (H, key, class)

        def logp(t):
            att = M[:, t[:, :, None], t[:, None, :]].softmax(-1)
            out = torch.einsum("hnij,hnjc->nic", att, OV[:, t])
            if model.residual:
                out = out + (model.W_E @ model.W_U)[t]
            return out.log_softmax(-1).double()

        l0 = logp(x)
        return max(float((logp((x + s) % p) - torch.roll(l0, m * s, -1)).norm() / l0.norm()) for s in range(1, p))


def run_one(
    overrides: dict,
    epochs: int,
    every: int,
    tol: float,
    quiet: bool,
    save: str | None = None,
    load: str | None = None,
    prune: float = 0.0,
) -> list[dict]:
    import torch

    from headmovies.tasks.orbits import M_SHIFT
    from headmovies.train.config import resolve
    from headmovies.train.orbits.config import OrbitConfig
    from headmovies.train.orbits.task import OrbitTask

    cfg = resolve(OrbitConfig, None, {**overrides, "epochs": str(epochs)})
    torch.manual_seed(cfg.seed)
    task = OrbitTask(cfg)
    if load:  # continue from saved weights (fresh optimizer): a second phase with new settings
        try:
            task.model.load_state_dict(torch.load(load))
        except Exception as exc:  # torch.load raises many kinds (unpickling, EOF, zip, shape mismatch)
            raise SystemExit(
                f"error: cannot start from {load}: {_one_line(exc)} "
                f"(--load takes a --save file of a model with the same shapes)"
            ) from None
        task.prune_heads(prune)
    rows, t0 = [], time.time()
    for epoch in range(1, epochs + 1):
        task.step(epoch)
        if epoch % every == 0 or epoch == epochs:
            met = task.evaluate()
            orb = orbit_summary(task, M_SHIFT, tol)
            row = {
                "setting": {k: v for k, v in overrides.items() if k != "seed"},
                "seed": cfg.seed,
                **({"load": load} if load else {}),
                **({"prune": prune} if prune else {}),
                "epoch": epoch,
                "train_acc": met["train_acc"],
                "heldout_acc": met["heldout_acc"],
                "eq_error_pooled": met["eq_error_pooled"],
                "eq_error_worst_input": met["eq_error_worst_input"],
                "train_loss": met["train_loss"],
                "eq_error_len4": seq_eq_error(task.model, M_SHIFT),
                "orbits": orb,
                "seconds": round(time.time() - t0, 1),
            }
            rows.append(row)
            if not quiet:
                print(format_row(row), flush=True)
    if save:
        Path(save).parent.mkdir(parents=True, exist_ok=True)
        torch.save(task.model.state_dict(), save)
    return rows


def _one_line(exc: Exception, limit: int = 200) -> str:
    """An exception's message on one line (whitespace collapsed), cut at `limit` characters."""
    if isinstance(exc, pickle.UnpicklingError):
        return "not a weights file (it does not unpickle)"
    text = " ".join(str(exc).split()) or type(exc).__name__
    return text if len(text) <= limit else text[: limit - 3] + "..."


def _setting_text(r: dict, sep: str, eq: str) -> str:
    """The row's overrides, plus --load and --prune when given, e.g. 'lr=3e-4 load=w.pt prune=0.25'."""
    items = {**r["setting"], **{k: r[k] for k in ("load", "prune") if r.get(k)}}
    return sep.join(f"{k}{eq}{v}" for k, v in items.items()) or "defaults"


def format_row(r: dict) -> str:
    o = r["orbits"]
    setting = _setting_text(r, " ", "=")
    closest = ",".join(f"{c:.3f}" for c in o.get("closest", [])[:3])
    return (
        f"{setting:<48} s{r['seed']} ep{r['epoch']:>6} train {r['train_acc']:.4f} held {r['heldout_acc']:.4f} "
        f"eq {r['eq_error_pooled']:.1e} worst {r['eq_error_worst_input']:.1e} "
        f"(len4 {r.get('eq_error_len4', float('nan')):.0e}) |M|max {o['max_score']:5.1f} dead {o['n_dead']:>2} "
        f"orbits {o['orbit_sizes']} closest {closest} groups {_groups_text(o)} ({r['seconds']:.0f}s)"
    )


def _groups_text(o: dict) -> str:
    """'w:n' per frequency group (live heads), e.g. '2:12 6:4'."""
    return " ".join(f"{w}:{n}" for w, n in o.get("groups", {}).items())


def main() -> int:
    ap = Parser(
        prog="python -m headmovies.sweeps.search",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    ap.add_argument(
        "--set",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="override one orbit config key for every run (repeatable)",
    )
    ap.add_argument(
        "--grid",
        action="append",
        default=[],
        metavar="KEY=V1,V2",
        help="run every value of this config key (repeatable: the product of the grids)",
    )
    ap.add_argument("--seeds", help="seeds: '0,3,5', a range '0-9', or both '0-3,10' (default: the experiment's, 24)")
    ap.add_argument("--epochs", type=int, default=4000, help="epochs per run (default 4000)")
    ap.add_argument("--every", type=int, default=1000, help="evaluate every this many epochs (default 1000)")
    ap.add_argument("--tol", type=float, default=0.02, help="orbit tolerance (seed: 0.02)")
    ap.add_argument("--threads", type=int, default=1, help="torch threads (default 1)")
    ap.add_argument(
        "--log",
        default="outputs/orbit_search.jsonl",
        help="append every evaluation here, one JSON line each (default outputs/orbit_search.jsonl)",
    )
    ap.add_argument("--table", metavar="LOG", help="only print the final-epoch table of a log")
    ap.add_argument("--quiet", action="store_true", help="no line per evaluation")
    ap.add_argument("--save", metavar="DIR", help="save each run's final weights (state_dict) here")
    ap.add_argument("--load", metavar="PT", help="start every run from these weights (a --save file)")
    ap.add_argument(
        "--prune",
        type=float,
        default=0.0,
        metavar="F",
        help="with --load: zero the heads whose OV norm is below F x the largest first (default 0)",
    )
    args = ap.parse_args()
    if not 0 <= args.prune < 1:
        ap.error(f"--prune takes a fraction in [0, 1), got {args.prune}")
    if args.prune and not args.load:
        ap.error("--prune needs --load (it prunes the loaded weights)")
    for name in ("epochs", "every", "threads"):
        if getattr(args, name) < 1:
            ap.error(f"--{name} must be >= 1, got {getattr(args, name)}")
    if args.table:
        print_table(read_log(args.table))
        return 0
    import torch

    torch.set_num_threads(args.threads)
    from headmovies.sweeps.plan import parse_seeds
    from headmovies.train.config import parse_sets, resolve
    from headmovies.train.orbits.config import OrbitConfig

    fixed = parse_sets(args.set)
    grids = [(k, v.split(",")) for k, v in parse_sets(args.grid).items()]
    seeds = [str(s) for s in parse_seeds(args.seeds)] if args.seeds is not None else [str(OrbitConfig.seed)]
    combos = [
        {**fixed, **{k: v for (k, _), v in zip(grids, combo)}, "seed": seed}
        for combo in itertools.product(*(vals for _, vals in grids))
        for seed in seeds
    ]
    for overrides in combos:  # every setting checked before the first run trains
        resolve(OrbitConfig, None, {**overrides, "epochs": str(args.epochs)})
    finals = []
    Path(args.log).parent.mkdir(parents=True, exist_ok=True)
    for overrides in combos:
        name = "_".join(f"{k}{v}" for k, v in overrides.items())
        save = f"{args.save}/{name}.pt" if args.save else None
        rows = run_one(overrides, args.epochs, args.every, args.tol, args.quiet, save, args.load, args.prune)
        rows[-1]["final"] = True
        with open(args.log, "a") as fh:
            for r in rows:
                fh.write(json.dumps(r) + "\n")
        finals.append(rows[-1])
    print_table(finals)
    return 0


def read_log(path: str) -> list[dict]:
    """The final-epoch rows of a search log (--log). ConfigError when it is unreadable or not one."""
    from headmovies.errors import ConfigError

    try:
        with open(path) as fh:
            rows = [json.loads(line) for line in fh if line.strip()]
    except OSError as exc:
        raise ConfigError(f"cannot read search log {path}: {exc.strerror or exc}") from None
    except ValueError:
        raise ConfigError(f"{path} is not a search log (JSON lines written by --log)") from None
    if not rows or not all(isinstance(r, dict) and {"orbits", "seed", "epoch"} <= r.keys() for r in rows):
        raise ConfigError(f"{path} is not a search log (JSON lines written by --log) or holds no rows")
    return [r for r in rows if r.get("final")]


def print_table(rows: list[dict]) -> None:
    print(
        "\n| setting | seed | epochs | train acc | held-out acc | eq error pooled | worst input "
        "| orbits (sizes) | closest errors |"
    )
    print("|---|---|---|---|---|---|---|---|---|")
    for r in rows:
        o = r["orbits"]
        setting = _setting_text(r, ", ", " ")
        print(
            f"| {setting} | {r['seed']} | {r['epoch']} | {r['train_acc']:.2%} | {r['heldout_acc']:.2%} | "
            f"{r.get('eq_error_pooled', r.get('eq_error', float('nan'))):.1e} | "  # 'eq_error': logs before both errors
            f"{r.get('eq_error_worst_input', float('nan')):.1e} | {o.get('orbit_sizes')} | "
            f"{', '.join(f'{c:.3f}' for c in o.get('closest', [])[:3])} |"
        )


if __name__ == "__main__":
    from headmovies.errors import UserError

    try:
        sys.exit(main())
    except UserError as exc:
        print(f"error: {exc}", file=sys.stderr)
        sys.exit(2)
