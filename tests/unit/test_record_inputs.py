"""The recording API's inputs a user can get wrong: metrics that are not one number, epochs that
are not whole numbers, a config that is not a dict, another model on resume, a closed Recorder,
a step counter that restarts, a group without embeddings. Each is one line (an error or a
warning), and the file keeps what was written before."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from torch import nn

import headmovies
from headmovies.errors import ConfigError, UserError
from headmovies.runfile.reader import Run

torch.set_num_threads(1)


def _rec(path, **kwargs) -> headmovies.Recorder:
    torch.manual_seed(0)
    return headmovies.Recorder(path, nn.MultiheadAttention(8, 2), schedule=[0, 1, 2, 3], **kwargs)


@pytest.mark.parametrize(
    "value, message",
    [
        (torch.tensor([1.0, 2.0]), r"metric 'train_loss' is a tensor of shape \[2\]: give one number"),
        (np.zeros((2, 2)), r"metric 'train_loss' is a tensor of shape \[2, 2\]: give one number"),
        ("0.5", r"metric 'train_loss' must be a number, got str '0.5'"),
        (None, r"metric 'train_loss' must be a number, got NoneType None"),
    ],
)
def test_a_metric_that_is_not_one_number_is_one_line_and_nothing_is_stored(tmp_path, value, message):
    path = tmp_path / "run.h5"
    rec = _rec(path)
    rec.step(0, acc=0.25)
    with pytest.raises(UserError, match=message):
        rec.step(1, acc=0.75, train_loss=value)
    rec.step(2)
    rec.close()
    with Run(path) as run:
        metrics = run.metrics()
    assert list(metrics["epoch"]) == [0, 2]
    np.testing.assert_array_equal(metrics["acc"], [0.25, np.nan])  # the bad step's metrics were dropped
    assert "train_loss" not in metrics


def test_one_element_tensors_and_numpy_numbers_are_metrics(tmp_path):
    path = tmp_path / "run.h5"
    with _rec(path) as rec:
        rec.step(0, a=torch.tensor(0.5), b=np.float32(0.25), c=np.array([[2.0]]), d=np.int64(3), e=True)
    with Run(path) as run:
        metrics = run.metrics()
    assert {k: float(metrics[k][0]) for k in "abcde"} == {"a": 0.5, "b": 0.25, "c": 2.0, "d": 3.0, "e": 1.0}


def test_epochs_must_be_whole_numbers(tmp_path):
    path = tmp_path / "run.h5"
    with _rec(path) as rec:
        assert rec.step(np.int64(0)) and rec.step(torch.tensor(1)) and rec.step(2.0)
        bad_epochs = ((2.5, "float 2.5"), ("3", "str '3'"), (None, "NoneType None"), (True, "bool True"))
        for bad, shown in bad_epochs:
            with pytest.raises(UserError, match=f"epoch must be a whole number \\(a step count\\), got {shown}"):
                rec.step(bad)
        with pytest.raises(UserError, match=r"got float 3\.5"):
            rec.write(3.5)
    with Run(path) as run:
        assert list(run.epochs) == [0, 1, 2]


def test_a_config_that_is_not_a_dict(tmp_path):
    with pytest.raises(ConfigError, match="config must be a dict of JSON-able settings, got list"):
        _rec(tmp_path / "run.h5", config=[("lr", 1)])
    assert not (tmp_path / "run.h5").exists() and not (tmp_path / "run.h5.lock").exists()


def test_a_group_without_embeddings_is_warned_by_the_recorder_and_the_renderers(tmp_path, capsys):
    """An nn.MultiheadAttention model whose embedding is not named as the adapters look for it:
    the run has no W_E or W_U, and with group_order both ends say the group lands on residual
    basis vectors; a model with W_E and W_U gets no warning."""
    from headmovies.errors import forget_warnings
    from headmovies.render.generic.heads import find_heads

    class Model(nn.Module):
        def __init__(self, named: bool):
            super().__init__()
            self.add_module("wte" if named else "emb", nn.Embedding(6, 8))
            self.attn = nn.MultiheadAttention(8, 2)
            self.add_module("lm_head" if named else "out", nn.Linear(8, 5))

    for named in (False, True):
        forget_warnings()
        path = tmp_path / f"{named}.h5"
        with headmovies.Recorder(path, Model(named), group_order=5, schedule=[0]) as rec:
            rec.step(0)
        err = capsys.readouterr().err
        with Run(path) as run:
            assert ("W_E" in run.weight_names) is named
            heads = find_heads(run)
        assert (heads.tokens, heads.outputs, heads.group_order) == (5, 5, 5)
        both = capsys.readouterr().err
        if named:
            assert err == both == ""
            continue
        assert err == (
            "warning: group_order=5, but no W_E or W_U was found in Model (model.W_E/W_U, an nn.Embedding named "
            "wte, tok_embeddings or embed_tokens, an nn.Linear named lm_head or unembed): renderers will lay the "
            "group on the residual stream's basis vectors instead; rename them, or record a weights function with "
            "'W_E' and 'W_U'\n"
        )
        assert both == (
            "warning: False.h5 stores no W_E or W_U: Z_5 is laid on the residual stream's first 5 basis vectors in "
            "place of tokens and output classes, so its planes may mean little (docs/recording.md, 'What is "
            "recorded')\n"
        )


def test_a_second_recorder_of_a_file_in_the_same_process_says_so(tmp_path):
    """A notebook cell run twice: the first Recorder still holds the file; the second one's
    error says the holder is this process, not some other PID to hunt for."""
    import os

    from headmovies.errors import RunLockedError

    path = tmp_path / "run.h5"
    first = _rec(path)
    first.step(0)
    with pytest.raises(RunLockedError) as err:
        _rec(path, force=True)
    assert str(err.value) == (
        f"{path} is already being written in this process (PID {os.getpid()}), which holds run.h5.lock: one writer "
        "per run file; an earlier writer of it is open; wait for it to finish, or close its Recorder"
    )
    first.close()
    _rec(path, force=True).close()  # free again


def test_resuming_with_another_model_stops_before_touching_the_file(tmp_path):
    path = tmp_path / "run.h5"
    with _rec(path) as rec:  # MultiheadAttention(8, 2): W_Q [2, 8, 4]
        rec.step(0)
        rec.step(1)
    before = path.read_bytes()
    shapes = r"its blocks.0.attn.W_K is \[4, 8, 2\], in the file \[2, 8, 4\]"
    with pytest.raises(ConfigError, match=r"cannot resume .*run.h5 with another model: " + shapes):
        headmovies.Recorder(path, nn.MultiheadAttention(8, 4), schedule=[0, 1, 2, 3], resume=True)
    assert path.read_bytes() == before and not (tmp_path / "run.h5.lock").exists()
    rec = _rec(path, resume=True)  # the same model resumes
    rec.step(2)
    rec.close()
    with Run(path) as run:
        assert list(run.epochs) == [0, 1, 2]


def test_close_is_idempotent_and_a_closed_recorder_says_so(tmp_path):
    path = tmp_path / "run.h5"
    rec = _rec(path)
    rec.step(0)
    rec.close()
    rec.close()  # again: nothing (it raised a KeyError from h5py)
    closed = f"this Recorder of {path} is closed; to go on, open a new one with resume=True"
    for call in (lambda: rec.step(1), lambda: rec.write(2)):
        with pytest.raises(UserError) as err:
            call()
        assert str(err.value) == closed
    with Run(path) as run:
        assert list(run.epochs) == [0] and run.complete
    with _rec(path, resume=True) as again:  # as the message says
        assert again.step(1)
    with Run(path) as run:
        assert list(run.epochs) == [0, 1]


def test_resuming_a_file_that_is_no_run_says_how_a_recording_starts_over(tmp_path):
    path = tmp_path / "run.h5"
    path.write_text("not HDF5\n")
    with pytest.raises(UserError) as err:
        _rec(path, resume=True)
    message = str(err.value)
    assert message.startswith(f"cannot resume: {path} is not a readable HDF5 run file (truncated or corrupt?): ")
    assert message.endswith("; start over with force=True") and "headmovies train" not in message
    assert path.read_text() == "not HDF5\n"


def test_a_step_counter_that_restarts_is_warned_about_once(tmp_path, capsys):
    """step() with epochs going back (a counter restarted every pass over the data) writes
    nothing until they pass the last snapshot, as documented, and says so once; a loop that
    starts again from 0 after resume=True goes up from there and is not warned about."""
    from headmovies.errors import forget_warnings

    forget_warnings()
    path = tmp_path / "run.h5"
    with headmovies.Recorder(path, nn.MultiheadAttention(8, 2), schedule=lambda e: e % 2 == 0) as rec:
        wrote = [rec.step(i) for _ in range(3) for i in range(5)]  # 0..4, three passes
    assert wrote == [True, False, True, False, True] + [False] * 10
    err = capsys.readouterr().err
    assert err == (
        f"warning: {path}: step(0) after step(4): epochs went back, and none is written again until they pass 4 "
        "(the last snapshot's); count steps over the whole run\n"
    )
    with Run(path) as run:
        assert list(run.epochs) == [0, 2, 4]
    with headmovies.Recorder(path, nn.MultiheadAttention(8, 2), schedule=lambda e: e % 2 == 0, resume=True) as rec:
        assert [rec.step(i) for i in range(9)] == [False] * 5 + [False, True, False, True]
    assert capsys.readouterr().err == ""


def test_group_order_takes_numpy_integers_and_refuses_the_rest(tmp_path):
    path = tmp_path / "run.h5"
    with _rec(path, group_order=np.int64(5)) as rec:
        rec.step(0)
    with Run(path) as run:
        assert run.attrs()["group_order"] == 5
    for bad in (5.0, True, 1, "5"):
        with pytest.raises(ConfigError, match=r"group_order must be an int >= 2 \(the p of Z_p\), got "):
            _rec(tmp_path / "other.h5", group_order=bad)
