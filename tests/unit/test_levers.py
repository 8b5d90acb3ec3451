"""The levers (docs/experiments.md, "Levers") as orbit config keys (score_scale, qk_decay, qk_init, frozen_embed),
each on a case with a known answer; their storage (only when set) and batched training's refusal;
the grid_kernel key's checks and storage (its kernels: test_fused_kernels.py)."""

from __future__ import annotations

import json
import math

import pytest
import torch

from headmovies.errors import ConfigError
from headmovies.train import config
from headmovies.train.config import config_dict
from headmovies.train.orbits.batch import OrbitBatch, batch_key
from headmovies.train.orbits.config import OrbitConfig
from headmovies.train.orbits.model import AttentionLayer
from headmovies.train.orbits.task import OrbitTask

TINY = {"p": "5", "n_heads": "3", "d_model": "12", "d_head": "2", "epochs": "6", "eq_start": "2", "eq_ramp": "2"}


def cfg_of(**kw) -> OrbitConfig:
    return config.resolve(OrbitConfig, sets={**TINY, **{k: str(v) for k, v in kw.items()}})


def task_of(**kw) -> OrbitTask:
    cfg = cfg_of(**kw)
    torch.manual_seed(cfg.seed)
    return OrbitTask(cfg)


def layer(**kw) -> AttentionLayer:
    torch.manual_seed(0)
    return AttentionLayer(5, 3, 12, 2, False, **kw)


def test_score_scale_two_doubles_every_score():
    M1, R1 = layer().circuits()
    M2, R2 = layer(score_scale=2.0).circuits()
    assert torch.equal(M2, 2 * M1) and torch.equal(R2, R1)  # times 2 is exact in floating point
    tokens = torch.tensor([[0, 1, 2], [4, 4, 3]])
    a, b = layer(score_scale=2.0), layer()
    with torch.no_grad():
        b.W_Q *= 2  # the same scores by doubling W_Q instead: the same outputs
    torch.testing.assert_close(a(tokens), b(tokens), rtol=1e-6, atol=1e-6)


def test_qk_init_scales_the_initial_w_q_and_w_k_only():
    base, big = layer(), layer(qk_init=3.0)
    for name in ("W_Q", "W_K"):
        torch.testing.assert_close(getattr(big, name), 3 * getattr(base, name), rtol=1e-6, atol=0)
    for name in ("W_E", "W_V", "W_O", "W_U"):
        assert torch.equal(getattr(big, name), getattr(base, name))


@pytest.mark.parametrize("qk_decay", [True, False])
def test_without_qk_decay_w_q_and_w_k_keep_their_values_under_decay_alone(qk_decay):
    """With zero gradients AdamW's step is decay alone: p -> p (1 - lr wd). qk_decay=false leaves
    W_Q and W_K exactly as they were; the other weights shrink by (1 - lr wd) either way."""
    task = task_of(qk_decay=qk_decay)
    before = {k: v.detach().clone() for k, v in task.model.named_parameters()}
    lr, wd = 0.1, 0.5
    task.set_hyperparameters(lr, wd)
    for p in task.model.parameters():
        p.grad = torch.zeros_like(p)
    task.optimizer.step()
    for name, p in task.model.named_parameters():
        decayed = before[name] * (1 - lr * wd)
        if name in ("W_Q", "W_K") and not qk_decay:
            assert torch.equal(p, before[name]), name
        else:
            torch.testing.assert_close(p.detach(), decayed, rtol=1e-6, atol=0)


def test_frozen_embed_keeps_w_e_and_w_u_one_hot_and_circulant_through_training():
    task = task_of(frozen_embed=True)
    n, d = 5, 12
    W_E0, W_Q0 = task.model.W_E.detach().clone(), task.model.W_Q.detach().clone()
    assert torch.equal(W_E0[:, :n], math.sqrt(d) * torch.eye(n)) and not W_E0[:, n:].any()
    W_U0 = task.model.W_U.detach().clone()
    assert torch.equal(W_U0[n : 2 * n], torch.eye(n)) and not W_U0[:n].any() and not W_U0[2 * n :].any()
    for epoch in range(1, 7):
        task.step(epoch)
    assert torch.equal(task.model.W_E, W_E0) and torch.equal(task.model.W_U, W_U0)
    assert not torch.equal(task.model.W_Q, W_Q0)  # the rest trains
    gram = task.model.W_E @ task.model.W_E.T  # circulant: d I, which every shift permutes into itself
    assert torch.equal(gram, d * torch.eye(n))
    assert all(p.requires_grad for group in task.optimizer.param_groups for p in group["params"])


def test_frozen_embed_needs_room_for_two_blocks():
    with pytest.raises(ConfigError, match="frozen_embed needs d_model >= 2 p"):
        cfg_of(frozen_embed=True, d_model=8)


def test_lever_keys_are_stored_only_when_set():
    default = config_dict(OrbitConfig())
    # grid_kernel's default is written: a file without it means the kernel of older runs
    assert set(OrbitConfig.OMIT_AT_DEFAULT) & set(default) == {"grid_kernel"}
    set_ = config_dict(OrbitConfig(score_scale=2.0, qk_decay=False))
    assert (set_["score_scale"], set_["qk_decay"]) == (2.0, False) and "qk_init" not in set_
    # a stored config without them reads back as the defaults
    back = config.resolve(
        OrbitConfig, sets={k: json.dumps(v) if isinstance(v, bool) else str(v) for k, v in {}.items()}
    )
    assert back.levers() == [] and OrbitConfig(score_scale=2.0).levers() == ["score_scale=2.0"]
    assert OrbitConfig(grid_kernel="compiled").levers() == []  # how the term is computed, not a lever


def test_batched_training_leaves_frozen_embed_and_imposed_runs_alone_and_refuses_them():
    assert batch_key(cfg_of(frozen_embed=True, d_model=10)) is None
    assert batch_key(cfg_of(impose_orbit_at=3)) is None and batch_key(cfg_of()) is not None
    # score_scale and qk_init may differ per instance; qk_decay is the optimizer's, shared
    assert batch_key(cfg_of(score_scale=2, qk_init=3)) == batch_key(cfg_of())
    assert batch_key(cfg_of(qk_decay="false")) != batch_key(cfg_of())
    with pytest.raises(ValueError, match="batched training does not implement frozen_embed=True"):
        OrbitBatch([cfg_of(d_model=10), cfg_of(frozen_embed=True, d_model=10, seed=1)])


@pytest.mark.parametrize("qk_decay", ["true", "false"])
def test_batched_lever_runs_equal_their_single_runs_bit_for_bit(qk_decay):
    """score_scale, qk_init (per instance) and qk_decay (shared) in a batch: each instance's
    weights, AdamW state (its no-decay group too) and metrics equal its single run's."""
    kw = dict(epochs=12, weight_decay=1.0, qk_decay=qk_decay, eq_seq_lens="3", eq_seq_batch=4)
    cfgs = [cfg_of(seed=0, score_scale=2, **kw), cfg_of(seed=1, score_scale=0.5, qk_init=3, **kw), cfg_of(seed=2, **kw)]
    singles = []
    for cfg in cfgs:
        torch.manual_seed(cfg.seed)
        task = OrbitTask(cfg)
        for epoch in range(1, cfg.epochs + 1):
            task.step(epoch)
        singles.append(task)
    batch = OrbitBatch(cfgs)
    for epoch in range(1, cfgs[0].epochs + 1):
        batch.step(epoch)
    for i, single in enumerate(singles):
        view = batch.sync(i)
        for name, w in single.model.state_dict().items():
            assert torch.equal(w, view.model.state_dict()[name]), (i, name)
        assert str(single.optimizer.state_dict()) == str(view.optimizer.state_dict())
        assert single.evaluate() == view.evaluate()
    # the levers act: without weight decay on W_Q, W_K the QK weights differ from a decayed run's
    flipped = {**kw, "qk_decay": "true" if qk_decay == "false" else "false"}
    other = OrbitBatch([cfg_of(seed=0, score_scale=2, **flipped)])
    for epoch in range(1, cfgs[0].epochs + 1):
        other.step(epoch)
    assert not torch.equal(other.sync(0).model.W_Q, batch.sync(0).model.W_Q)


def test_compiled_grid_kernel_needs_a_cpp_compiler(monkeypatch, tmp_path):
    """grid_kernel=compiled runs the grid attention through torch.compile, which builds C++: with
    no compiler on PATH the config is refused at once (one line), not at the first step."""
    monkeypatch.setenv("PATH", str(tmp_path))  # an empty folder: no c++, g++ or clang++
    with pytest.raises(ConfigError, match="grid_kernel=compiled needs a C\\+\\+ compiler"):
        cfg_of(grid_kernel="compiled")
    cfg_of(grid_kernel="eager")  # the others need none
    cfg_of(grid_kernel="fused")
    with pytest.raises(ConfigError, match="grid_kernel must be one of"):
        cfg_of(grid_kernel="fast")


def test_grid_kernel_is_stored_unless_eager_and_trains_alone_only_when_compiled():
    """The fused kernel is the default since 2026-12-08; run files from before have no
    grid_kernel key and were trained with the eager kernel, so a file without the key means
    eager: eager is the value left out, the default is written."""
    assert config_dict(OrbitConfig())["grid_kernel"] == "fused"
    assert "grid_kernel" not in config_dict(OrbitConfig(grid_kernel="eager"))
    assert config_dict(OrbitConfig(grid_kernel="compiled"))["grid_kernel"] == "compiled"
    assert batch_key(OrbitConfig(grid_kernel="compiled")) is None  # the batch has no compiled kernel
    keys = {k: batch_key(OrbitConfig(grid_kernel=k)) for k in ("fused", "eager")}
    assert None not in keys.values() and keys["fused"] != keys["eager"]  # batched, never together
