"""Experiment configs: dataclass defaults in code, overridden by a TOML file, then by `--set KEY=VALUE`.

Every experiment's config subclasses `TrainConfig`, whose fields are the ones the shared
training loop reads (length of training, seed, snapshot schedule). Values are type-checked
against the dataclass annotations; a bad key or value raises `ConfigError` (one line).
"""

from __future__ import annotations

import dataclasses
import json
import math
import re
import sys
import tomllib
import typing
from dataclasses import dataclass
from pathlib import Path

from headmovies import disk
from headmovies.errors import ConfigError

MAX_EPOCHS = 100_000_000  # ~3 weeks of the default orbit run (51 epochs/s); more is a typo
MAX_SNAPSHOTS = 1_000_000  # rows per weight in the run file
MEMORY_LIMIT = 16 << 30  # bytes a config may need for its largest tensors (estimated)


def require_signs(cfg: object, positive: tuple[str, ...] = (), nonnegative: tuple[str, ...] = ()) -> None:
    """ConfigError naming the first key of `positive` not > 0 or of `nonnegative` not >= 0."""
    for key in positive:
        if not getattr(cfg, key) > 0:
            raise ConfigError(f"{key} must be > 0, got {getattr(cfg, key)}")
    for key in nonnegative:
        if not getattr(cfg, key) >= 0:
            raise ConfigError(f"{key} must be >= 0, got {getattr(cfg, key)}")


def require_memory(nbytes: int, keys: str) -> None:
    """ConfigError unless a config's estimated memory `nbytes` is within MEMORY_LIMIT; `keys`
    names the config keys that set it (for the message)."""
    if nbytes > MEMORY_LIMIT:
        raise ConfigError(
            f"this config needs about {nbytes / 2**30:.0f} GiB for its largest tensors (limit "
            f"{MEMORY_LIMIT / 2**30:.0f} GiB): lower {keys}"
        )


def snapshot_count(epochs: int, early_every: int, switch_epoch: int, late_every: int, log_early: bool) -> int:
    """An upper bound on the length of `schedule.snapshot_epochs(...)`, without building it."""
    early = min(epochs, switch_epoch) // early_every + 1
    late = (epochs - switch_epoch) // late_every if epochs > switch_epoch else 0
    return early + late + 1 + (64 if log_early else 0)


@dataclass
class TrainConfig:
    epochs: int = 1000  # final epoch: number of optimizer steps
    seed: int = 0  # seeds init, split and every random draw of training
    early_every: int = 25  # snapshot every this many epochs up to switch_epoch ...
    switch_epoch: int = 4000
    late_every: int = 100  # ... then every this many epochs to the final epoch
    log_early: bool = False  # also snapshot at epochs 1, 2, 4, ... below early_every
    # keys added after run files existed: stored (`config_dict`) only when not at the value a
    # file without them means (their default, or ABSENT_MEANS), so a run with that value writes
    # the same config, and the same file, as before they existed
    OMIT_AT_DEFAULT: typing.ClassVar[tuple[str, ...]] = ()
    # keys of OMIT_AT_DEFAULT whose default changed since: the value a file without them means
    ABSENT_MEANS: typing.ClassVar[dict[str, typing.Any]] = {}

    def validate(self) -> None:
        """Raise ConfigError if a value is out of range; experiments extend this (and bound their
        sizes with `require_memory`)."""
        if not 0 <= self.epochs <= MAX_EPOCHS:
            raise ConfigError(f"epochs must be in 0..{MAX_EPOCHS:,}, got {self.epochs:,}")
        for key in ("early_every", "late_every"):
            if not 1 <= getattr(self, key) <= MAX_EPOCHS:
                raise ConfigError(f"{key} must be in 1..{MAX_EPOCHS:,}, got {getattr(self, key):,}")
        if not 0 <= self.seed < 2**62:
            raise ConfigError(f"seed must be in 0..2**62-1, got {self.seed}")
        if not 0 <= self.switch_epoch <= MAX_EPOCHS:
            raise ConfigError(f"switch_epoch must be in 0..{MAX_EPOCHS:,}, got {self.switch_epoch:,}")
        count = snapshot_count(self.epochs, self.early_every, self.switch_epoch, self.late_every, self.log_early)
        if count > MAX_SNAPSHOTS:
            raise ConfigError(
                f"this schedule writes about {count:,} snapshots (limit {MAX_SNAPSHOTS:,}): raise "
                "early_every / late_every, or lower epochs"
            )
        for key, typ in field_types(type(self)).items():
            if typ is float and not math.isfinite(getattr(self, key)):
                raise ConfigError(f"{key} must be a finite number, got {getattr(self, key)}")


def field_types(cls: type) -> dict[str, type]:
    """{key: type} of a config dataclass (int, float, bool or str)."""
    hints = typing.get_type_hints(cls)
    return {f.name: hints[f.name] for f in dataclasses.fields(cls)}


def _coerce(key: str, value, typ: type):
    """Check/convert one value (from TOML or a --set string) to the field's type."""
    if isinstance(value, str) and typ is not str:
        text = value.strip()
        if typ is bool:
            if text.lower() in ("true", "1", "yes", "on"):
                return True
            if text.lower() in ("false", "0", "no", "off"):
                return False
            raise ConfigError(f"{key} must be true or false, got {value!r}")
        try:
            return typ(text)
        except ValueError:
            raise ConfigError(f"{key} must be {typ.__name__}, got {value!r}") from None
    if typ is float and isinstance(value, int) and not isinstance(value, bool):
        return float(value)
    if type(value) is not typ:
        raise ConfigError(f"{key} must be {typ.__name__}, got {value!r} ({type(value).__name__})")
    return value


def load_toml(path: str | Path) -> dict:
    """Read a flat TOML table of overrides (UTF-8, a leading byte-order mark allowed). Raises
    ConfigError if unreadable, malformed, a named pipe or device, or holding an integer of more
    digits than Python converts."""
    disk.check_file_kind(path, "config file")
    try:
        with open(path, "rb") as fh:
            data = tomllib.loads(fh.read().decode("utf-8").removeprefix("\ufeff"))  # a byte-order mark is no TOML
    except OSError as exc:
        raise ConfigError(f"cannot read config file {path}: {exc.strerror}") from None
    except UnicodeDecodeError as exc:
        raise ConfigError(
            f"config file {path} is not UTF-8 text (byte {exc.object[exc.start]:#04x} at offset "
            f"{exc.start}); save it as UTF-8"
        ) from None
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"config file {path} is not valid TOML: {exc}") from None
    except ValueError as exc:  # an integer of more digits than Python converts (4,300 by default)
        digits = re.search(r"value has (\d+) digits", str(exc))
        raise ConfigError(
            f"config file {path} holds an integer of {digits.group(1) if digits else 'too many'} digits, more than "
            f"Python reads ({sys.get_int_max_str_digits():,}); no config key takes one that large"
        ) from None
    nested = [k for k, v in data.items() if isinstance(v, dict)]
    if nested:
        raise ConfigError(f"config file {path}: expected flat key = value pairs, got tables {nested}")
    return data


def parse_sets(pairs: list[str]) -> dict[str, str]:
    """Turn ['lr=1e-3', 'residual=true'] into {'lr': '1e-3', 'residual': 'true'}."""
    out = {}
    for pair in pairs:
        key, sep, value = pair.partition("=")
        if not sep or not key.strip():
            raise ConfigError(f"--set expects KEY=VALUE, got {pair!r}")
        out[key.strip()] = value
    return out


def resolve(cls: type, toml: dict | None = None, sets: dict | None = None):
    """Defaults of `cls`, then `toml` overrides, then `sets` overrides; type-checked and validated."""
    types = field_types(cls)
    values = {}
    for source in (toml or {}, sets or {}):
        for key, value in source.items():
            if key not in types:
                raise ConfigError(f"unknown config key {key!r}; known keys: {', '.join(types)}")
            values[key] = _coerce(key, value, types[key])
    cfg = cls(**values)
    cfg.validate()
    return cfg


def describe(cls: type) -> str:
    """One line per key: 'name (type, default value)' for --help."""
    defaults = cls()
    return "\n".join(f"  {k} ({t.__name__}, default {getattr(defaults, k)!r})" for k, t in field_types(cls).items())


def stored_config(cfg) -> dict:
    """The config's keys and values as run files and checkpoints store them: the dataclass as a
    dict, less the keys of its class's OMIT_AT_DEFAULT while at the value a file without them
    means: their default, or the class's ABSENT_MEANS for a key whose default changed (a file
    without them keeps its meaning, and a run with those values writes the file it wrote before
    they existed)."""
    d = dataclasses.asdict(cfg)
    for key in getattr(cfg, "OMIT_AT_DEFAULT", ()):
        if key in d and d[key] == _absent_means(cfg, key):
            del d[key]
    return d


def _absent_means(cfg, key: str):
    """The value a run file without `key` (one of OMIT_AT_DEFAULT) means: ABSENT_MEANS's, else the
    key's default."""
    absent = getattr(cfg, "ABSENT_MEANS", {})
    if key in absent:
        return absent[key]
    return next(f.default for f in dataclasses.fields(cfg) if f.name == key)


def file_value(cfg, stored: dict, key: str):
    """The value of `key` in a run file's config dict `stored`: its own, or for a key of the
    class's OMIT_AT_DEFAULT that the file lacks the value such a file means (ABSENT_MEANS, else
    the key's default); None for another key the file lacks."""
    if key in stored:
        return stored[key]
    return _absent_means(cfg, key) if key in getattr(cfg, "OMIT_AT_DEFAULT", ()) else None


def set_file_values(cfg, stored: dict, keys: list[str]) -> str:
    """'--set k=v ...': the command-line settings that give `keys` the values of the run file's
    config `stored` (`file_value`), for an error message to suggest; keys the file lacks left out."""
    values = {k: file_value(cfg, stored, k) for k in keys}
    shown = {k: json.dumps(v) if isinstance(v, bool) else v for k, v in values.items() if v is not None}
    return " ".join(f"--set {k}={v}" for k, v in shown.items())


def config_dict(cfg) -> dict:
    """The config as the run file stores it (root attribute `config`, `stored_config`): a JSON
    round trip, so tuples become lists and a dict compares equal to one read back from a file."""
    return json.loads(json.dumps(stored_config(cfg), sort_keys=True))


def changed_keys(old: dict, new: dict) -> list[str]:
    """Sorted keys whose values differ between two config dicts (a key missing from one differs)."""
    missing = object()
    return sorted(k for k in set(old) | set(new) if old.get(k, missing) != new.get(k, missing))
