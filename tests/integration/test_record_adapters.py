"""The recording API's adapters against the real libraries (tiny models built from code,
nothing downloaded): each finds every attention layer, and its W_Q, W_K, W_V, W_O are the
model's own, in the run file's shapes ([n_heads, d_model, d_head], W_O [n_heads, d_head,
d_model]): a per-head numpy forward from them reproduces the module's own attention output."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch
from torch import nn
from torch.nn import functional

from headmovies.errors import ModelError
from headmovies.record import find_adapter

torch.set_num_threads(1)


def per_head_attention(x: np.ndarray, W_Q, W_K, W_V, W_O, causal: bool) -> np.ndarray:
    """sum_h softmax(x W_Q[h] (x W_K[h])^T / sqrt(d_head)) x W_V[h] W_O[h], x [T, d_model]."""
    out = np.zeros_like(x, dtype=np.float64)
    T = x.shape[0]
    for h in range(W_Q.shape[0]):
        s = (x @ W_Q[h]) @ (x @ W_K[h]).T / math.sqrt(W_Q.shape[-1])
        if causal:
            s = np.where(np.tril(np.ones((T, T), bool)), s, -np.inf)
        a = np.exp(s - s.max(-1, keepdims=True))
        a /= a.sum(-1, keepdims=True)
        out += a @ (x @ W_V[h]) @ W_O[h]
    return out


class CausalSelfAttention(nn.Module):
    """nanoGPT's (model.py), without dropout and biases."""

    def __init__(self, n_embd: int, n_head: int):
        super().__init__()
        self.c_attn = nn.Linear(n_embd, 3 * n_embd, bias=False)
        self.c_proj = nn.Linear(n_embd, n_embd, bias=False)
        self.n_head, self.n_embd = n_head, n_embd

    def forward(self, x):
        B, T, C = x.size()
        q, k, v = self.c_attn(x).split(self.n_embd, dim=2)
        k = k.view(B, T, self.n_head, C // self.n_head).transpose(1, 2)
        q = q.view(B, T, self.n_head, C // self.n_head).transpose(1, 2)
        v = v.view(B, T, self.n_head, C // self.n_head).transpose(1, 2)
        y = functional.scaled_dot_product_attention(q, k, v, is_causal=True)
        return self.c_proj(y.transpose(1, 2).contiguous().view(B, T, C))


class NanoGPT(nn.Module):
    def __init__(self, vocab=13, n_embd=16, n_head=4, n_layer=2):
        super().__init__()
        self.transformer = nn.ModuleDict(
            {
                "wte": nn.Embedding(vocab, n_embd),
                "wpe": nn.Embedding(5, n_embd),
                "h": nn.ModuleList(
                    nn.ModuleDict({"attn": CausalSelfAttention(n_embd, n_head), "mlp": nn.Linear(n_embd, n_embd)})
                    for _ in range(n_layer)
                ),
            }
        )
        self.lm_head = nn.Linear(n_embd, vocab, bias=False)


def test_nanogpt_fused_c_attn_reproduces_its_attention():
    torch.manual_seed(0)
    model = NanoGPT()
    adapter = find_adapter(model)
    w = adapter.read()
    assert adapter.layers == ["transformer.h.0.attn", "transformer.h.1.attn"]
    assert "nanoGPT" in adapter.description and "2 layers x 4 heads" in adapter.description
    assert w["blocks.1.attn.W_Q"].shape == (4, 16, 4) and w["blocks.1.attn.W_O"].shape == (4, 4, 16)
    np.testing.assert_array_equal(w["W_E"], model.transformer.wte.weight.detach().numpy())
    np.testing.assert_array_equal(w["W_pos"], model.transformer.wpe.weight.detach().numpy())
    np.testing.assert_array_equal(w["W_U"], model.lm_head.weight.detach().numpy().T)
    x = torch.randn(1, 5, 16)
    for layer in range(2):
        want = model.transformer.h[layer].attn(x)[0].detach().numpy()
        p = f"blocks.{layer}.attn."
        got = per_head_attention(x[0].numpy(), *(w[p + k] for k in ("W_Q", "W_K", "W_V", "W_O")), causal=True)
        np.testing.assert_allclose(got, want, atol=1e-5)


@pytest.mark.parametrize("same_dims", [True, False])
def test_multihead_attention_reproduces_its_output(same_dims):
    torch.manual_seed(1)
    kdim = None if same_dims else 16  # kdim given: separate q/k/v projection weights
    mha = nn.MultiheadAttention(16, 4, bias=False, batch_first=True, kdim=kdim, vdim=kdim)
    model = nn.Sequential(nn.Linear(16, 16), mha)
    adapter = find_adapter(model)
    assert adapter.layers == ["1"] and "MultiheadAttention" in adapter.description
    w = adapter.read()
    assert set(w) == {f"blocks.0.attn.{k}" for k in ("W_Q", "W_K", "W_V", "W_O")}  # no embedding to find
    x = torch.randn(1, 6, 16)
    want = mha(x, x, x, need_weights=False)[0][0].detach().numpy()
    got = per_head_attention(x[0].numpy(), *(w[f"blocks.0.attn.{k}"] for k in ("W_Q", "W_K", "W_V", "W_O")), False)
    np.testing.assert_allclose(got, want, atol=1e-5)


def test_a_weights_function_and_its_errors():
    rng = np.random.default_rng(0)
    W = {k: rng.normal(size=(2, 8, 4)).astype(np.float32) for k in ("W_Q", "W_K", "W_V")}
    W["W_O"] = rng.normal(size=(2, 4, 8)).astype(np.float32)
    E = rng.normal(size=(5, 8))
    adapter = find_adapter(lambda: {"enc": W, "dec": W, "W_E": E})
    w = adapter.read()
    assert sorted(w) == ["W_E"] + sorted(f"blocks.{i}.attn.{k}" for i in (0, 1) for k in W)
    np.testing.assert_array_equal(w["blocks.1.attn.W_O"], W["W_O"])
    bad = dict(W, W_O=W["W_Q"])  # [2, 8, 4] where [2, 4, 8] belongs
    with pytest.raises(ModelError, match=r"blocks.0.attn.W_O has shape \[2, 8, 4\]"):
        find_adapter(lambda: {0: bad}).read()
    with pytest.raises(ModelError, match=r"layer 0 lacks \['W_V'\]"):
        find_adapter(lambda: {0: {k: v for k, v in W.items() if k != "W_V"}}).read()


def test_a_model_without_attention_is_named_in_one_line():
    model = nn.Sequential(nn.Embedding(5, 8), nn.Linear(8, 8), nn.ReLU(), nn.Linear(8, 5))
    with pytest.raises(ModelError) as err:
        find_adapter(model)
    message = str(err.value)
    assert "\n" not in message
    held = "(it holds Linear x2, Sequential x1, Embedding x1, ReLU x1)"
    assert f"no attention layer found in Sequential {held}" in message
    with pytest.raises(ModelError, match="cannot record a str"):
        find_adapter("gpt2")
    with pytest.raises(ModelError, match=r"cannot record the class MultiheadAttention: give a model built from it"):
        find_adapter(nn.MultiheadAttention)


@pytest.mark.slow
@pytest.mark.parametrize("attn_only", [True, False])
def test_transformer_lens_hooked_transformer_every_layer(attn_only):
    """A real HookedTransformer (2 layers, attention-only or with MLPs): every layer's W_Q..W_O
    and W_E, W_U, W_pos equal the model's own."""
    from transformer_lens import HookedTransformer, HookedTransformerConfig

    cfg = HookedTransformerConfig(
        n_layers=2, d_model=16, d_head=4, n_heads=4, d_vocab=11, n_ctx=3, attn_only=attn_only, seed=0,
        **({} if attn_only else {"d_mlp": 32, "act_fn": "relu"}),
    )  # fmt: skip
    model = HookedTransformer(cfg)
    adapter = find_adapter(model)
    assert adapter.layers == ["blocks.0.attn", "blocks.1.attn"]
    assert adapter.description == "TransformerLens attention: 2 layers x 4 heads"
    w = adapter.read()
    for layer in range(2):
        for k in ("W_Q", "W_K", "W_V", "W_O"):
            own = getattr(model.blocks[layer].attn, k).detach().numpy()
            np.testing.assert_array_equal(w[f"blocks.{layer}.attn.{k}"], own)
    for k in ("W_E", "W_U", "W_pos"):
        np.testing.assert_array_equal(w[k], getattr(model, k).detach().numpy())
    assert w["W_U"].shape == (16, 11) and w["blocks.0.attn.W_O"].shape == (4, 4, 16)


@pytest.mark.slow
def test_transformer_lens_grouped_query_keys_are_expanded_per_head():
    from transformer_lens import HookedTransformer, HookedTransformerConfig

    cfg = HookedTransformerConfig(
        n_layers=1, d_model=16, d_head=4, n_heads=4, n_key_value_heads=2, d_vocab=7, n_ctx=3, attn_only=True
    )
    model = HookedTransformer(cfg)
    w = find_adapter(model).read()
    assert w["blocks.0.attn.W_K"].shape == (4, 16, 4)
    np.testing.assert_array_equal(w["blocks.0.attn.W_K"], model.blocks[0].attn.W_K.detach().numpy())
    np.testing.assert_array_equal(w["blocks.0.attn.W_K"][0], w["blocks.0.attn.W_K"][1])  # shared key head


@pytest.mark.slow
def test_huggingface_gpt2_conv1d_attention():
    """Hugging Face GPT-2 (config built in code): the transposed Conv1D c_attn split per head."""
    from transformers import GPT2Config, GPT2LMHeadModel

    torch.manual_seed(2)
    model = GPT2LMHeadModel(GPT2Config(vocab_size=13, n_positions=8, n_embd=16, n_layer=2, n_head=4))
    adapter = find_adapter(model)
    assert adapter.layers == ["transformer.h.0.attn", "transformer.h.1.attn"]
    assert "GPT-2" in adapter.description
    w = adapter.read()
    attn = model.transformer.h[1].attn
    c = attn.c_attn.weight.detach().numpy()  # [16, 48]: x @ c gives q | k | v
    for h in range(4):
        np.testing.assert_array_equal(w["blocks.1.attn.W_Q"][h], c[:, 4 * h : 4 * h + 4])
        np.testing.assert_array_equal(w["blocks.1.attn.W_V"][h], c[:, 32 + 4 * h : 32 + 4 * h + 4])
        np.testing.assert_array_equal(w["blocks.1.attn.W_O"][h], attn.c_proj.weight.detach().numpy()[4 * h : 4 * h + 4])
    np.testing.assert_array_equal(w["W_E"], model.transformer.wte.weight.detach().numpy())
    np.testing.assert_array_equal(w["W_U"], model.lm_head.weight.detach().numpy().T)


def test_a_large_vocabulary_is_stored_cut_to_the_tokens_drawn(tmp_path):
    """nanoGPT with a 5,000-token vocabulary: W_E keeps its first 1,024 rows and W_U its first
    1,024 columns (Recorder's default `tokens`), equal to the model's; `tokens=` chooses another
    cut, and the file is about that much smaller than with the whole matrices."""
    import headmovies
    from headmovies.runfile.reader import Run

    torch.manual_seed(0)
    model = NanoGPT(vocab=5000, n_embd=16)
    sizes = {}
    for tokens in (1024, 5000):
        path = tmp_path / f"t{tokens}.h5"
        with headmovies.Recorder(path, model, schedule=[0], tokens=tokens) as rec:
            rec.step(0)
        with Run(path) as run:
            w = run.weights(0)
        assert w["W_E"].shape == (tokens, 16) and w["W_U"].shape == (16, tokens)
        np.testing.assert_array_equal(w["W_E"], model.transformer.wte.weight.detach().numpy()[:tokens])
        np.testing.assert_array_equal(w["W_U"], model.lm_head.weight.detach().numpy().T[:, :tokens])
        sizes[tokens] = path.stat().st_size
    # 2 x 16 x (5000 - 1024) float32 = 0.51 MB less
    assert sizes[5000] - sizes[1024] == pytest.approx(2 * 16 * 3976 * 4, rel=0.1)
    with pytest.raises(headmovies.errors.ConfigError, match="tokens must be a positive int"):
        headmovies.Recorder(tmp_path / "x.h5", model, tokens=0)
