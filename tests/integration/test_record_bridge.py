"""TransformerLens 3's TransformerBridge (a Hugging Face GPT-2 built in code, booted offline with
a word-level tokenizer): the Recorder finds its attention as TransformerLens attention, records
the same W_Q ... W_O, W_E, W_U and W_pos as the model's own, and its probe's patterns equal the
bridge's `hook_pattern` cache (eval mode)."""

from __future__ import annotations

import numpy as np
import pytest
import torch

import headmovies
from headmovies.runfile.reader import Run
from headmovies.train.head_scores import repeated_tokens

torch.set_num_threads(1)


def _bridge(tmp_path):
    tokenizers = pytest.importorskip("tokenizers")
    from transformer_lens.model_bridge import TransformerBridge
    from transformers import GPT2Config, GPT2LMHeadModel, PreTrainedTokenizerFast

    words = tokenizers.Tokenizer(tokenizers.models.WordLevel({str(i): i for i in range(13)}, unk_token="0"))
    words.pre_tokenizer = tokenizers.pre_tokenizers.Whitespace()
    special = dict(eos_token="12", bos_token="12", unk_token="0", pad_token="12")
    PreTrainedTokenizerFast(tokenizer_object=words, **special).save_pretrained(tmp_path / "tok")
    tokenizer = PreTrainedTokenizerFast.from_pretrained(tmp_path / "tok")
    torch.manual_seed(0)
    config = GPT2Config(vocab_size=13, n_positions=16, n_embd=16, n_layer=2, n_head=4)
    config.name_or_path = "gpt2"
    hf = GPT2LMHeadModel(config)
    wpe, c_attn = hf.transformer.wpe.weight.detach().clone(), hf.transformer.h[1].attn.c_attn.weight.detach().clone()
    return TransformerBridge.boot_transformers("gpt2", hf_model=hf, tokenizer=tokenizer), wpe, c_attn


@pytest.mark.slow
def test_a_transformer_bridge_is_recorded_with_its_probe(tmp_path, monkeypatch):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    bridge, wpe, c_attn = _bridge(tmp_path)
    path = tmp_path / "run.h5"
    with headmovies.Recorder(path, bridge, schedule=[0]) as rec:
        rec.step(0)
    with Run(path) as run:
        assert "TransformerLens attention: 2 layers x 4 heads" in run.attrs()["adapter"]
        w = run.weights(-1)
        for h in range(4):
            np.testing.assert_array_equal(w["blocks.1.attn.W_Q"][h], c_attn[:, 4 * h : 4 * h + 4].numpy())
        np.testing.assert_array_equal(w["W_pos"], wpe.numpy())
        assert w["W_E"].shape == (13, 16) and w["W_U"].shape == (16, 13)
        patterns, tokens = run.patterns(-1), run.probe_tokens()
        assert tokens.shape == (4, 16) and np.isfinite(run.in_context_scores()).all()
    assert bridge.training  # the probe left its mode as it was
    bridge.eval()
    _, cache = bridge.run_with_cache(torch.tensor(tokens[:2]))
    for layer in range(2):
        np.testing.assert_allclose(patterns[:, layer], cache[f"blocks.{layer}.attn.hook_pattern"].numpy(), atol=1e-3)
    assert repeated_tokens(13, 8, 4).tolist() == tokens.tolist()
