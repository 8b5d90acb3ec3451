"""A sweep folder as found, checked before a sweep plans its runs (docs/sweeps.md): the fixed
settings that DIR/sweep.json records against this sweep's, and run files that a sweep must not
replace (trained with another config, e.g. under older package defaults).
"""

from __future__ import annotations

import json
from pathlib import Path

from headmovies import runfile
from headmovies.errors import RunFileError, UserError, warn
from headmovies.runfile.checkpoint import checkpoint_path
from headmovies.train.config import TrainConfig, changed_keys, config_dict, file_value, set_file_values
from headmovies.train.reuse import run_status

SETTINGS_FILE = "sweep.json"  # the experiment and its fixed settings, checked on every rerun


def _shown(value) -> str:
    return "(absent)" if value is None else str(value)


def refuse_overwrite(path: Path, cfg: TrainConfig) -> None:
    """A sweep never replaces a finished (or resumable) run trained with another config: that
    happens when the package's defaults changed since the sweep started, and retraining would
    throw the run away. UserError naming the keys that differ."""
    if not path.exists():
        return
    try:
        with runfile.open_for_reading(path) as f:
            old = runfile.read_config(f)
    except RunFileError:
        warn(f"{path} is not a readable run file (killed while being created?): training it anew")
        return
    if run_status(path) != "complete" and not checkpoint_path(path).exists():
        return
    new = config_dict(cfg)
    diff = changed_keys(old, new)
    if not diff:
        return
    # a key a config omits has the value a file without it means (`config.file_value`)
    was, now = ({k: file_value(cfg, d, k) for k in diff} for d in (old, new))
    shown = ", ".join(f"{k}={_shown(was[k])} (this sweep: {_shown(now[k])})" for k in diff[:4])
    fix = set_file_values(cfg, old, diff[:4])
    raise UserError(
        f"{path} was trained with {shown}{' …' if len(diff) > 4 else ''}; a sweep does not replace "
        f"it: rerun with {fix} (the defaults may have changed since), or choose a new --out"
    )


def check_settings(out: Path, experiment: str, settings: dict) -> str:
    """'new' (no sweep.json yet), 'same' (the recorded settings), or 'changed': other settings
    for the same experiment, accepted (by `plan.make_plan`) only if they make exactly the configs
    of the folder's run files, e.g. `--set refine_prune=0.25` for runs trained when 0.25 was the
    default. UserError for another experiment or an unreadable sweep.json."""
    path = out / SETTINGS_FILE
    if out.exists() and not out.is_dir():
        raise UserError(f"output folder {out} is a file; remove it or choose another --out")
    if not path.exists():
        return "new"
    try:
        old = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, json.JSONDecodeError) as exc:
        raise UserError(
            f"{path} is unreadable ({' '.join(str(exc).split())}); remove it and rerun "
            "this command to rewrite it, or choose a new --out"
        ) from None
    if old.get("experiment") != experiment:
        raise settings_error(out, experiment, settings)
    return "same" if old.get("settings") == json.loads(json.dumps(settings)) else "changed"


def settings_error(out: Path, experiment: str, settings: dict) -> UserError:
    old = json.loads((out / SETTINGS_FILE).read_text(encoding="utf-8"))
    if old.get("experiment") != experiment:
        return UserError(f"{out} holds a sweep of {old.get('experiment')}, not {experiment}: choose a new --out")
    was, now = old.get("settings") or {}, json.loads(json.dumps(settings))
    keys = changed_keys(was, now)
    diff = ", ".join(f"{k}={was.get(k, '(unset)')} there, {now.get(k, '(unset)')} here" for k in keys)
    return UserError(
        f"{out} holds a sweep of {experiment} with other fixed settings ({diff}): rerun with its "
        f"--set/--config values, or choose a new --out"
    )
