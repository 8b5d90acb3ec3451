"""The house: every experiment is complete in every layer, and rendering never loads torch."""
from __future__ import annotations

import argparse
import importlib
import pkgutil
import subprocess
import sys
from pathlib import Path

import pytest

import headmovies
from headmovies import tasks

RENDER_PARTS = ("figures", "movie", "summary")      # docs/extending.md
COMMAND_API = ("NAME", "HELP", "add_arguments", "run")
SUMMARY_API = ("sweep_summary", "SWEEP_OUTCOME")               # what `headmovies sweep` calls per run


def test_every_registered_experiment_has_every_part():
    """A family in tasks/ names its experiments; each is registered by train/<family>(.py or /) with a
    Config, and render/<family>/ has figures, movie and summary (with the sweep's summary of a run,
    named in the sweeps' registry); commands/<family>.py has the command API."""
    from headmovies.sweeps import registry
    from headmovies.train import experiments
    from headmovies.train.config import TrainConfig
    registered = experiments.all_experiments()
    families = tasks.experiments()
    assert set(registered) == set(families), "tasks/*.EXPERIMENTS and the train registry disagree"
    assert list(experiments.FAMILIES) == tasks.families()
    for name, cls in registered.items():
        family = families[name]
        assert f"{cls.__module__}.".startswith(f"headmovies.train.{family}."), (name, cls.__module__)
        assert cls.Config is not TrainConfig and cls.description, name
    for family in tasks.families():
        for part in RENDER_PARTS:
            importlib.import_module(f"headmovies.render.{family}.{part}")
        command = importlib.import_module(f"headmovies.commands.{family}")
        assert all(hasattr(command, attr) for attr in COMMAND_API), family
        summary = importlib.import_module(f"headmovies.render.{family}.summary")
        assert all(hasattr(summary, attr) for attr in SUMMARY_API), family
        assert callable(summary.sweep_summary) and isinstance(summary.SWEEP_OUTCOME, str), family
        assert registry.SUMMARIES[family] == (summary.sweep_summary, summary.SWEEP_OUTCOME), family
    assert set(registry.SUMMARIES) == set(tasks.families())


def test_a_family_missing_a_part_is_caught(monkeypatch):
    """The check above fails when a family lacks its render package (a fourth experiment added
    to tasks/ only)."""
    monkeypatch.setattr(tasks, "families", lambda: ["orbits", "no_such_family"])
    with pytest.raises(ModuleNotFoundError):
        for family in tasks.families():
            importlib.import_module(f"headmovies.commands.{family}")


def _modules(package: str) -> list[str]:
    pkg = importlib.import_module(package)
    return [m.name for m in pkgutil.walk_packages(pkg.__path__, prefix=f"{package}.")]


def test_rendering_never_imports_torch():
    """Import every rendering module, the run-file schema, the task facts and the CLI parser in
    a fresh interpreter: torch and headmovies.train stay unloaded."""
    mods = ["headmovies.errors", "headmovies.cli"] + _modules("headmovies.runfile") + _modules("headmovies.render") \
        + _modules("headmovies.tasks")
    code = ("import sys\n" + "".join(f"import {m}\n" for m in mods)
            + "from headmovies.cli import build_parser\nbuild_parser()\n"
            + "bad = sorted(m for m in sys.modules if m == 'torch' or m.startswith('headmovies.train'))\n"
            + "print(len(sys.modules)); assert not bad, bad\n")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    assert len(mods) >= 25


def test_cli_lists_every_command():
    done = subprocess.run([sys.executable, "-m", "headmovies", "--help"], capture_output=True, text=True)
    assert done.returncode == 0
    for name in ("train", "sweep", "orbits", "induction", "ov-coherent"):
        assert name in done.stdout
    assert headmovies.__doc__ and "tasks/" in headmovies.__doc__
    done = subprocess.run([sys.executable, "-m", "headmovies", "--version"], capture_output=True, text=True)
    assert (done.returncode, done.stdout) == (0, f"headmovies {headmovies.__version__}\n")
    pyproject = (Path(headmovies.__file__).parents[1] / "pyproject.toml").read_text()
    assert 'version = {attr = "headmovies.__version__"}' in pyproject      # one version, not two


def _parsers(parser: argparse.ArgumentParser, name: str = "headmovies"):
    yield name, parser
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for sub_name, sub in action.choices.items():
                yield from _parsers(sub, f"{name} {sub_name}")


def test_every_help_fits_a_terminal(monkeypatch):
    """`--help` of every command in an 80-column terminal: argparse wraps the options, the
    descriptions are wrapped by hand (RawDescriptionHelpFormatter); no line runs past 100."""
    from headmovies.cli import build_parser
    monkeypatch.setenv("COLUMNS", "80")
    seen = 0
    for name, parser in _parsers(build_parser()):
        long = [line for line in parser.format_help().splitlines() if len(line) > 100]
        assert not long, (name, long)
        seen += 1
    assert seen >= 14                # the top level, 5 commands and their actions
