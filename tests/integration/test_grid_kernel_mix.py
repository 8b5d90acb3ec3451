"""A run trained with the eager grid kernel (config grid_kernel = "eager"; a run file from before
the key existed lacks it) met by today's default (fused): resume, fork and --reuse never mix the
kernels, and their one-line messages name the file's kernel and the setting that continues it."""

from __future__ import annotations

import pytest

from headmovies.cli import main as cli_main
from headmovies.errors import ConfigError, UserError
from headmovies.sweeps.folder import refuse_overwrite
from headmovies.train import config, loop
from headmovies.train.orbits.config import OrbitConfig

TINY = {
    "p": "5",
    "n_heads": "3",
    "d_model": "12",
    "d_head": "2",
    "epochs": "40",
    "eq_start": "5",
    "eq_ramp": "5",
    "refine_start": "20",
    "refine_ramp": "5",
    "early_every": "10",
}


def cfg(**sets) -> OrbitConfig:
    return config.resolve(OrbitConfig, sets={**TINY, **sets})


def test_an_eager_run_is_not_continued_with_the_fused_kernel(tmp_path, capsys):
    src, out = tmp_path / "eager.h5", tmp_path / "fork.h5"
    loop.train("orbits", cfg(grid_kernel="eager"), src, progress=False, stop_at=20)
    with pytest.raises(ConfigError, match=r"different config \(grid_kernel\).*--set grid_kernel=eager"):
        loop.train("orbits", cfg(), src, progress=False, resume=True)
    with pytest.raises(ConfigError, match=r"grid_kernel: 'eager' there, 'fused' here.*--set grid_kernel=eager"):
        loop.train("orbits", cfg(refine_lr="0.002"), out, progress=False, fork_from=src)
    assert not out.exists()
    # the command: one line, exit 2
    sets = [a for k, v in TINY.items() for a in ("--set", f"{k}={v}")]
    assert cli_main(["train", "orbits", "--out", str(src), "--resume", "--no-progress", *sets]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "--set grid_kernel=eager" in err
    # what the hint says continues the run
    loop.train("orbits", cfg(grid_kernel="eager"), src, progress=False, resume=True)
    # --reuse sets the eager run aside, naming its kernel (not "(absent)")
    assert cli_main(["train", "orbits", "--out", str(src), "--reuse", "--no-progress", *sets]) == 0
    said = capsys.readouterr().out
    assert "(grid_kernel eager → fused): moved to" in said and (tmp_path / "eager.previous.h5").exists()


def test_a_fused_run_is_not_resumed_with_a_key_at_its_omitted_value(tmp_path):
    """The other way round: a fused run resumed with --set grid_kernel=eager (a value the stored
    config omits) is refused, not continued with the eager kernel under a rewritten config; so is
    a run with a lever set resumed without it."""
    out = tmp_path / "fused.h5"
    loop.train("orbits", cfg(score_scale="2"), out, progress=False, stop_at=20)
    with pytest.raises(ConfigError, match=r"different config \(grid_kernel\).*--set grid_kernel=fused"):
        loop.train("orbits", cfg(score_scale="2", grid_kernel="eager"), out, progress=False, resume=True)
    with pytest.raises(ConfigError, match=r"different config \(score_scale\).*--set score_scale=2.0"):
        loop.train("orbits", cfg(), out, progress=False, resume=True)
    loop.train("orbits", cfg(score_scale="2"), out, progress=False, resume=True)


def test_a_sweep_names_the_value_an_omitted_key_means_and_the_fix(tmp_path):
    """A sweep meeting a finished run whose file omits a key (at its default) names that value and
    the --set that continues the sweep, not '(absent)' and an empty fix."""
    out = tmp_path / "run.h5"
    loop.train("orbits", cfg(epochs="20"), out, progress=False)
    with pytest.raises(UserError, match=r"score_scale=1.0 \(this sweep: 2.0\).*rerun with --set score_scale=1.0 \("):
        refuse_overwrite(out, cfg(epochs="20", score_scale="2"))
    with pytest.raises(UserError, match=r"grid_kernel=fused \(this sweep: eager\).*--set grid_kernel=fused \("):
        refuse_overwrite(out, cfg(epochs="20", grid_kernel="eager"))
