"""The repeated-block task of the induction experiments (source 003; docs/experiments.md).

26 letters; each sequence (24 tokens) is one block of 6 letters repeated 4 times, a fresh
block per sequence (letters distinct within a block by default). Next-token loss. From the
second repeat on every letter is predictable by looking back one block length: that is what
an induction head does. Sinusoidal positions (Vaswani et al. 2017) reach Q and K only: by
default added to the query and key vectors, optionally to the inputs of W_Q and W_K.
"""

from __future__ import annotations

import numpy as np

from headmovies.errors import UserError

EXPERIMENTS = ("induction-1l", "induction-smeared", "induction-2l")
ALPHABET = "ABCDEFGHIJKLMNOPQRSTUVWXYZ"
# Where W_pos enters: the query/key vectors (the default: source 003's wording, "added to Q and K",
# read literally) or the inputs of W_Q/W_K (docs/experiments.md, "Induction (source 003)").
POSITIONS = ("qk_vector", "qk_input")
DEFAULT_POSITIONS = POSITIONS[0]
LEGACY_POSITIONS = "qk_input"  # run files whose config has no `positions` key were trained so


def positions_of(config: dict) -> str:
    """Where W_pos entered in a run, from its stored config (`LEGACY_POSITIONS` for files made
    before the option existed)."""
    return config.get("positions", LEGACY_POSITIONS)


SOURCE_PROMPTS = (
    "ABCDEF",
    "ABCDEFABCDEF",
    "XYZRSTXYZRST",
    "ABCDEFXYZRST",
    "QWERTYXYZRST",
    "ABCXYZABCDEF",
    "AAABBBAAABBB",
)
BLOCK_LENGTHS = (4, 5, 6, 7, 8)  # out-of-distribution lengths tell induction from "look 5 back"


def sinusoidal_table(seq_len: int, width: int, base: float = 10000.0) -> np.ndarray:
    """W_pos [seq_len, width] float32: sin(t / base^(2i/width)) at column 2i, cos at 2i+1
    (Vaswani et al. 2017, §3.5). Training stores it in the run file; rendering reads it there."""
    t = np.arange(seq_len, dtype=np.float64)[:, None]
    freq = base ** (-np.arange(0, width, 2, dtype=np.float64) / width)
    table = np.zeros((seq_len, width))
    table[:, 0::2] = np.sin(t * freq)
    table[:, 1::2] = np.cos(t * freq)
    return table.astype(np.float32)


def repeat_blocks(block, seq_len: int):
    """[n, seq_len]: each row's block [n, L] repeated and cut to seq_len. Works on numpy arrays
    and torch tensors alike (training draws blocks with torch, rendering with numpy)."""
    L = block.shape[1]
    return block[:, [t % L for t in range(seq_len)]]


def sample_sequences(
    rng: np.random.Generator, n: int, n_vocab: int, seq_len: int, block_len: int, distinct: bool = True
) -> np.ndarray:
    """int64 [n, seq_len]: a fresh block of `block_len` letters per row repeated (and cut) to
    seq_len; letters distinct within a block unless `distinct` is false. The distribution the
    trainer draws from (with torch's generator instead of `rng`)."""
    if distinct:
        block = np.argsort(rng.random((n, n_vocab)), axis=1)[:, :block_len]
    else:
        block = rng.integers(0, n_vocab, (n, block_len))
    return repeat_blocks(block, seq_len).astype(np.int64)


def encode_prompt(text: str, n_vocab: int = 26, seq_len: int = 24) -> np.ndarray:
    """'ABCDEF' -> int64 [6]. Raises UserError for an empty prompt, a character outside the
    first n_vocab capital letters, or more letters than the context holds."""
    letters = ALPHABET[:n_vocab]
    if not text:
        raise UserError("the prompt is empty; give letters such as --prompt ABCDEF")
    bad = sorted({c for c in text if c not in letters})
    if bad:
        raise UserError(
            f"prompt {text!r} has characters outside the alphabet {letters[0]}-{letters[-1]}: "
            f"{''.join(bad)!r}; use capital letters only"
        )
    if len(text) > seq_len:
        raise UserError(
            f"prompt {text!r} has {len(text)} letters, longer than the context of {seq_len}; "
            f"shorten it to at most {seq_len}"
        )
    return np.array([letters.index(c) for c in text], dtype=np.int64)


def decode(tokens) -> str:
    """Token ids -> letters."""
    return "".join(ALPHABET[int(t)] for t in tokens)


def correct_completion(prompt: str, block_len: int = 6, length: int = 24) -> str | None:
    """The continuation to `length` letters if the prompt is a block of `block_len` letters
    repeated (prompt[i] == prompt[i - block_len]); None (no correct answer) otherwise."""
    if len(prompt) < block_len or any(prompt[i] != prompt[i - block_len] for i in range(block_len, len(prompt))):
        return None
    return "".join(prompt[i % block_len] for i in range(len(prompt), length))
