"""The probe (train/probe.py, record/probing.py): each kind of attention's patterns equal the
library's own, training is bit-identical with and without it, and its records land in the run
file (/probe) with the file's guarantees."""

from __future__ import annotations

import math
import random

import numpy as np
import pytest
import torch
from torch import nn
from torch.nn import functional

import headmovies
from headmovies.errors import ConfigError
from headmovies.record.adapters import find_adapter
from headmovies.runfile.reader import Run
from headmovies.train.head_scores import repeated_tokens
from headmovies.train.probe import Probe

torch.set_num_threads(1)


class CausalSelfAttention(nn.Module):
    """nanoGPT's (model.py), flash path: fused c_attn, F.scaled_dot_product_attention."""

    def __init__(self, d_model: int, n_head: int, dropout: float = 0.0):
        super().__init__()
        self.c_attn = nn.Linear(d_model, 3 * d_model, bias=True)
        self.c_proj = nn.Linear(d_model, d_model, bias=True)
        self.attn_dropout, self.resid_dropout = dropout, nn.Dropout(dropout)
        self.n_head, self.n_embd = n_head, d_model

    def forward(self, x):
        B, T, C = x.size()
        q, k, v = self.c_attn(x).split(self.n_embd, dim=2)
        k = k.view(B, T, self.n_head, C // self.n_head).transpose(1, 2)  # (B, nh, T, hs)
        q = q.view(B, T, self.n_head, C // self.n_head).transpose(1, 2)
        v = v.view(B, T, self.n_head, C // self.n_head).transpose(1, 2)
        p = self.attn_dropout if self.training else 0.0
        y = functional.scaled_dot_product_attention(q, k, v, attn_mask=None, dropout_p=p, is_causal=True)
        y = y.transpose(1, 2).contiguous().view(B, T, C)
        return self.resid_dropout(self.c_proj(y))


class BabyGPT(nn.Module):
    """Attention-only nanoGPT: wte + wpe, blocks with LayerNorm and dropout, lm_head."""

    def __init__(self, vocab=11, ctx=16, d_model=16, n_head=4, n_layer=2, dropout=0.1):
        super().__init__()
        self.transformer = nn.ModuleDict(
            dict(
                wte=nn.Embedding(vocab, d_model),
                wpe=nn.Embedding(ctx, d_model),
                drop=nn.Dropout(dropout),
                h=nn.ModuleList(CausalSelfAttention(d_model, n_head, dropout) for _ in range(n_layer)),
                ln=nn.ModuleList(nn.LayerNorm(d_model) for _ in range(n_layer)),
            )
        )
        self.lm_head = nn.Linear(d_model, vocab, bias=False)

    def forward(self, idx):
        t = self.transformer
        x = t.drop(t.wte(idx) + t.wpe(torch.arange(idx.shape[1])))
        for ln, attn in zip(t.ln, t.h, strict=True):
            x = x + attn(ln(x))
        return self.lm_head(x)


def test_nanogpt_patterns_reproduce_its_fused_attention():
    """The pattern recomputed from the captured input (c_attn's W_Q, W_K and biases, causal mask)
    times v gives what scaled_dot_product_attention gave: the layer's own output."""
    torch.manual_seed(0)
    model = BabyGPT().eval()
    tokens = repeated_tokens(11, 8, 3)
    probe = Probe(model, list(find_adapter(model).modules), tokens)
    seen: list[tuple[torch.Tensor, torch.Tensor]] = []

    def keep(module, args, output) -> None:
        seen.append((args[0], output))

    hooks = [a.register_forward_hook(keep) for a in model.transformer.h]
    record = probe.run()
    for h in hooks:
        h.remove()
    assert record["patterns"].shape == (2, 2, 4, 16, 16)
    for layer, attn in enumerate(model.transformer.h):
        x, out = seen[layer]
        A = torch.tensor(record["patterns"][:, layer].astype(np.float32))  # [2, H, T, T] (float16 stored)
        v = attn.c_attn(x).split(16, dim=2)[2][:2].view(2, 16, 4, 4).transpose(1, 2)
        y = (A @ v).transpose(1, 2).reshape(2, 16, 16)
        torch.testing.assert_close(attn.c_proj(y), out[:2], atol=3e-3, rtol=0)
        np.testing.assert_allclose(record["patterns"][:, layer].astype(np.float32).sum(-1), 1, atol=2e-3)
        assert np.all(np.triu(record["patterns"][0, layer, 0].astype(np.float32), 1) == 0)


def test_transformer_lens_patterns_and_scores_equal_its_cache_and_detectors():
    from transformer_lens import HookedTransformer, HookedTransformerConfig
    from transformer_lens.head_detector import compute_head_attention_similarity_score as tl_score
    from transformer_lens.head_detector import get_induction_head_detection_pattern

    cfg = HookedTransformerConfig(
        n_layers=2, d_model=16, d_head=4, n_heads=4, d_vocab=11, n_ctx=32, attn_only=True, seed=0
    )
    model = HookedTransformer(cfg)
    tokens = repeated_tokens(11, 8, 3)
    record = Probe(model, list(find_adapter(model).modules), tokens, vocab_out=11).run()
    _, cache = model.run_with_cache(torch.tensor(tokens))
    for layer in range(2):
        own = cache["pattern", layer].numpy()  # [B, H, T, T]
        np.testing.assert_allclose(record["patterns"][:, layer].astype(np.float32), own[:2], atol=1e-3)
        for head in range(4):
            theirs = np.mean(
                [
                    tl_score(
                        torch.tensor(own[b, head]),
                        get_induction_head_detection_pattern(torch.tensor(tokens[b])[None]),
                        exclude_bos=False,
                        exclude_current_token=False,
                        error_measure="mul",
                    )
                    for b in range(3)
                ]
            )
            assert record["scores/induction"][layer, head] == pytest.approx(theirs, abs=1e-5)
    assert np.isfinite(record["in_context_score"])  # the forward returns logits [B, P, V]


def test_multihead_attention_patterns_are_its_own_weights_per_head():
    torch.manual_seed(1)
    mha = nn.MultiheadAttention(8, 2, batch_first=True)

    class M(nn.Module):
        def __init__(self):
            super().__init__()
            self.W_E = nn.Parameter(torch.randn(5, 8))
            self.attn = mha

        def forward(self, tokens):
            x = self.W_E[tokens]
            T = x.shape[1]
            mask = torch.ones(T, T, dtype=torch.bool).triu(1)
            return self.attn(x, x, x, attn_mask=mask, need_weights=False)[0]

    model = M()
    tokens = repeated_tokens(5, 4, 2)
    record = Probe(model, list(find_adapter(model).modules), tokens).run()
    x = model.W_E[torch.tensor(tokens)].detach()
    Wq, Wk, _ = mha.in_proj_weight.detach().split(8)
    bq, bk, _ = mha.in_proj_bias.detach().split(8)
    q = (x @ Wq.T + bq).view(2, 8, 2, 4).transpose(1, 2)
    k = (x @ Wk.T + bk).view(2, 8, 2, 4).transpose(1, 2)
    att = (q @ k.transpose(-1, -2) / math.sqrt(4)).masked_fill(torch.ones(8, 8, dtype=torch.bool).triu(1), -math.inf)
    np.testing.assert_allclose(record["patterns"][:, 0].astype(np.float32), att.softmax(-1).numpy(), atol=1e-3)
    assert np.isnan(record["in_context_score"])  # its output is no logits


def _train(probe, seed=0, steps=30, draws=False):
    """A real loop (dropout, global torch/numpy/python RNG draws), recording every 3 steps;
    `draws`: the probe's forward draws from every global RNG too (they must be restored)."""
    torch.manual_seed(seed)
    np.random.seed(seed)
    random.seed(seed)
    model = BabyGPT()
    model.transformer.ln[0].eval()  # a module the user keeps in eval mode stays so
    opt = torch.optim.AdamW(model.parameters(), lr=3e-3)
    losses = []
    import tempfile

    with tempfile.TemporaryDirectory() as d:

        def forward(tokens):
            torch.rand(3), random.random(), np.random.rand()
            return model(tokens)

        rec = None
        if probe != "none":
            schedule = range(0, steps + 1, 3)
            rec = headmovies.Recorder(
                f"{d}/run.h5", model, schedule=schedule, probe=probe, forward=forward if draws else None
            )
        for step in range(steps + 1):
            x = torch.randint(0, 11, (4, 16))
            x[:, 8:] = x[:, :8]
            x[:, 0] = random.randrange(11) + int(np.random.randint(0, 1))
            loss = functional.cross_entropy(model(x)[:, :-1].reshape(-1, 11), x[:, 1:].reshape(-1))
            opt.zero_grad()
            loss.backward()
            opt.step()
            losses.append(loss.item())
            if rec is not None:
                rec.step(step, train_loss=loss.item())
                assert model.training and not model.transformer.ln[0].training
        scores = None
        if rec is not None:
            rec.close()
            with Run(f"{d}/run.h5") as run:
                scores = run.head_scores()
    return losses, {k: v.clone() for k, v in model.state_dict().items()}, scores


def test_training_is_bit_identical_with_and_without_the_probe():
    plain, with_default, without = _train("none"), _train(headmovies.record.probing.DEFAULT), _train(None)
    drawing = _train(headmovies.record.probing.DEFAULT, draws=True)
    assert with_default[2] is not None and with_default[2]["induction"].shape == (11, 2, 4)
    assert without[2] == {}
    for other in (with_default, without, drawing):
        assert other[0] == plain[0]  # every loss, exactly
        for k, v in plain[1].items():
            assert torch.equal(v, other[1][k]), k


def test_probe_options_and_errors(tmp_path):
    torch.manual_seed(0)
    model = BabyGPT()
    own = np.array([[1, 2, 3, 1, 2, 3]])
    with headmovies.Recorder(tmp_path / "own.h5", model, schedule=[0], probe=own) as rec:
        rec.step(0)
    with Run(tmp_path / "own.h5") as run:
        np.testing.assert_array_equal(run.probe_tokens(), own)
        assert run.patterns(-1).shape == (1, 2, 4, 6, 6)
        assert run.in_context_scores().shape == (1,)
    for bad in ([[0.5, 1.5]], np.zeros((0, 4), np.int64)):  # not ids; no sequence at all
        with pytest.raises(ConfigError, match=r"probe must be None or token ids, ints >= 0 \[batch >= 1, "):
            headmovies.Recorder(tmp_path / "bad.h5", model, probe=bad)
    with pytest.raises(ConfigError, match="below the vocabulary's"):  # at construction, not the first step
        headmovies.Recorder(tmp_path / "vocab.h5", model, probe=[[1, 2, 999]])
    with pytest.raises(ConfigError, match="fit the model's 16 positions"):
        headmovies.Recorder(tmp_path / "long.h5", model, probe=np.ones((1, 17), np.int64))
    assert not list(tmp_path.glob("vocab.h5*")) and not list(tmp_path.glob("long.h5*"))  # no file, no lock
    with pytest.raises(ConfigError, match="not a weights function"):
        headmovies.Recorder(tmp_path / "fn.h5", lambda: {"W_E": None}, probe=own)
    calls = []
    with headmovies.Recorder(
        tmp_path / "fw.h5", model, schedule=[0], forward=lambda t: calls.append(t) or model(t)
    ) as rec:
        rec.step(0)
    assert calls and calls[0].shape == (4, 16)  # the default probe: 4 sequences, W_pos's 16 positions


def test_a_default_probe_that_cannot_run_the_model_warns_and_records_weights(tmp_path, capsys):
    class TwoInputs(BabyGPT):
        def forward(self, idx, extra):
            return super().forward(idx + extra)

    model = TwoInputs()
    with headmovies.Recorder(tmp_path / "run.h5", model, schedule=[0, 1]) as rec:
        rec.step(0)
        rec.step(1)
    assert "the default probe could not run the model" in capsys.readouterr().err
    with Run(tmp_path / "run.h5") as run:
        assert len(run) == 2 and run.head_scores() == {}
    with (
        pytest.raises(ConfigError, match="the probe could not run the model"),
        headmovies.Recorder(tmp_path / "own.h5", model, schedule=[0], probe=[[1, 2, 1, 2]]) as rec,
    ):
        rec.step(0)


def test_huggingface_gpt2_patterns_equal_its_output_attentions():
    from transformers import GPT2Config, GPT2LMHeadModel

    torch.manual_seed(2)
    config = GPT2Config(vocab_size=13, n_positions=16, n_embd=16, n_layer=2, n_head=4, attn_implementation="eager")
    model = GPT2LMHeadModel(config).eval()
    tokens = repeated_tokens(13, 8, 2)
    record = Probe(model, list(find_adapter(model).modules), tokens, vocab_out=13).run()
    own = model(torch.tensor(tokens), output_attentions=True).attentions
    for layer in range(2):
        np.testing.assert_allclose(
            record["patterns"][:, layer].astype(np.float32), own[layer].detach().numpy(), atol=1e-3
        )
    assert np.isfinite(record["in_context_score"])  # `.logits` of its output


def test_total_spaces_about_200_snapshots(tmp_path):
    from headmovies.errors import UserError
    from headmovies.record.schedules import spaced_schedule

    written = [e for e in range(301) if spaced_schedule(300)(e)]
    assert written[:3] == [0, 2, 4] and written[-1] == 300 and len(written) == 151
    written = [e for e in range(4001) if spaced_schedule(4000)(e)]
    assert written[:3] == [0, 20, 40] and written[-1] == 4000 and len(written) == 201
    assert [e for e in range(11) if spaced_schedule(7)(e)] == list(range(11))
    with pytest.raises(UserError, match="schedule and total exclude each other"):
        headmovies.Recorder(tmp_path / "run.h5", BabyGPT(), schedule=[0], total=10)
    with pytest.raises(UserError, match="total must be a positive int"):
        headmovies.Recorder(tmp_path / "run.h5", BabyGPT(), total=0)


def test_float16_halves_the_weights_and_reads_as_float32(tmp_path):
    from headmovies.record.recorder import Recorder

    torch.manual_seed(0)
    model = BabyGPT(vocab=64, ctx=16, d_model=64)
    sizes = {}
    for dtype in ("float32", "float16"):
        path = tmp_path / f"{dtype}.h5"
        with Recorder(path, model, schedule=range(8), probe=None, dtype=dtype) as rec:
            for e in range(8):
                rec.step(e)
        sizes[dtype] = path.stat().st_size
    assert 0.45 < sizes["float16"] / sizes["float32"] < 0.6
    with Run(tmp_path / "float32.h5") as full, Run(tmp_path / "float16.h5") as half:
        a, b = full.weights(-1), half.weights(-1)
        assert b["blocks.0.attn.W_Q"].dtype == np.float32
        for k in a:
            np.testing.assert_allclose(b[k], a[k], rtol=1e-3, atol=1e-4)
            np.testing.assert_array_equal(b[k], a[k].astype(np.float16).astype(np.float32))
    with pytest.raises(ConfigError, match="dtype must be 'float32' or 'float16'"):
        Recorder(tmp_path / "x.h5", model, dtype="int8")


def test_a_metric_added_later_keeps_the_probe_rows(tmp_path):
    """A new metric name rebuilds the file (HDF5 adds no dataset under SWMR): /probe comes along,
    one row per snapshot."""
    torch.manual_seed(0)
    model = BabyGPT()
    path = tmp_path / "run.h5"
    with headmovies.Recorder(path, model, schedule=[0, 1, 2]) as rec:
        rec.step(0, train_loss=1.0)
        rec.step(1, train_loss=1.0, test_acc=0.5)
        rec.step(2, train_loss=1.0)
    with Run(path) as run:
        assert run.head_scores()["induction"].shape == (3, 2, 4) and run.in_context_scores().shape == (3,)
        np.testing.assert_array_equal(run.metrics()["test_acc"], [np.nan, 0.5, np.nan])


def test_decode_stores_the_probe_tokens_as_text_through_a_rebuild_and_a_resume(tmp_path):
    """`decode` (ids -> text, as nanoGPT's) labels the first probe sequence; the labels survive a
    new metric (the file rebuilt) and a resume; a decode that fails is one ConfigError, no file."""
    torch.manual_seed(0)
    model = BabyGPT()
    own = np.array([[1, 2, 3, 1, 2, 3], [4, 5, 6, 4, 5, 6]])
    letters = "".join(chr(ord("a") + i) for i in range(26))
    decode = lambda ids: "".join(letters[i] for i in ids)  # noqa: E731

    def failing(ids):
        raise ValueError("boom")

    path = tmp_path / "run.h5"
    with headmovies.Recorder(path, model, schedule=[0, 1, 2], probe=own, decode=decode) as rec:
        rec.step(0, train_loss=1.0)
        rec.step(1, train_loss=1.0, val_loss=2.0)
    with headmovies.Recorder(path, model, schedule=[0, 1, 2], probe=own, resume=True) as rec:
        rec.step(2, train_loss=1.0)
    with Run(path) as run:
        assert run.probe_labels() == ["b", "c", "d", "b", "c", "d"] and len(run) == 3
    with headmovies.Recorder(tmp_path / "plain.h5", model, schedule=[0], probe=own) as rec:
        rec.step(0)
    with Run(tmp_path / "plain.h5") as run:
        assert run.probe_labels() is None
    with pytest.raises(ConfigError, match=r"decode\(\[1\]\) failed on the probe's token 1: boom"):
        headmovies.Recorder(tmp_path / "bad.h5", model, probe=own, decode=failing)
    with pytest.raises(ConfigError, match=r"returned int, not a string"):
        headmovies.Recorder(tmp_path / "bad.h5", model, probe=own, decode=lambda ids: ids[0])
    assert not (tmp_path / "bad.h5").exists()
