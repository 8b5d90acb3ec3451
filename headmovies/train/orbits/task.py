"""The orbit experiment (source 000; docs/experiments.md) as a registered Task: one 32-head
self-attention layer (`model.AttentionLayer`), penalised toward C_n-equivariance
(`losses`), learning (x1, x2, x3) -> (x2+x3, x3+x1, x1+x2) mod n; its two-phase schedule,
head pruning, and the step that may compute its grid term in a second thread (`Task.overlap`).
"""

from __future__ import annotations

import json
import math
import os
import threading
from concurrent.futures import Future, ThreadPoolExecutor

import numpy as np
import torch

from headmovies.errors import UserError
from headmovies.tasks.orbits import M_SHIFT, cell_weights, make_split
from headmovies.train.allocator import keep_freed_memory
from headmovies.train.orbits.config import OrbitConfig, seq_lengths
from headmovies.train.orbits.eq_errors import eq_error_pooled, eq_error_worst_input
from headmovies.train.orbits.impose import RULE, impose_orbits
from headmovies.train.orbits.losses import (
    FusedGridLosses,
    grid_losses,
    orbit_gather_index,
    ov_bias_penalty,
    seq_eq_loss,
    seq_eq_loss_fused,
)
from headmovies.train.orbits.model import AttentionLayer
from headmovies.train.task import Task

_GRID_POOL: ThreadPoolExecutor | None = None
# a forked child has the pool object but not its thread: make it start a new one
os.register_at_fork(after_in_child=lambda: globals().__setitem__("_GRID_POOL", None))


def _grid_pool() -> ThreadPoolExecutor:
    """The one thread that computes grid terms under `Task.overlap`, on one torch thread."""
    global _GRID_POOL
    if _GRID_POOL is None:
        _GRID_POOL = ThreadPoolExecutor(
            1, thread_name_prefix="grid-term", initializer=torch.set_num_threads, initargs=(1,)
        )
    return _GRID_POOL


def _use_threads(n: int) -> None:
    """torch intra-op threads of this thread, set only when they change (a step asks every time)."""
    if torch.get_num_threads() != n:
        torch.set_num_threads(n)


class _Precomputed(torch.autograd.Function):
    """A loss term on the circuits (M, R) whose gradients another thread computes: forward
    returns 0 (a step never reads its loss's value), backward sets `waiting` (this thread's core
    is free from now on) and waits for the future's (dM, dR)."""

    @staticmethod
    def forward(ctx, M: torch.Tensor, R: torch.Tensor, future: Future, waiting: threading.Event) -> torch.Tensor:
        ctx.future, ctx.waiting = future, waiting
        return M.new_zeros(())

    @staticmethod
    def backward(ctx, grad: torch.Tensor):
        ctx.waiting.set()
        dM, dR = ctx.future.result()
        if not bool(grad == 1):  # a step's loss is a plain sum: grad is exactly 1
            dM, dR = grad * dM, grad * dR
        return dM, dR, None, None


def decay_groups(params: list, qk: list, qk_decay: bool = True) -> list:
    """AdamW parameter groups: `params` as one group; with qk_decay false the tensors of `qk`
    (W_Q and W_K) in a second group marked no_decay (weight decay 0 at every step,
    `set_hyperparameters`). A single run's and a batch's (`batch.OrbitBatch`) optimizer."""
    if qk_decay:
        return params
    return [
        {"params": [p for p in params if all(p is not q for q in qk)]},
        {"params": qk, "weight_decay": 0.0, "no_decay": True},
    ]


def set_hyperparameters(optimizer: torch.optim.Optimizer, lr: float, weight_decay: float) -> None:
    """Set every group's lr and weight decay (0 in a no_decay group, `decay_groups`)."""
    for group in optimizer.param_groups:
        group["lr"], group["weight_decay"] = lr, 0.0 if group.get("no_decay") else weight_decay


def make_adamw(groups: list, cfg: OrbitConfig) -> torch.optim.AdamW:
    """AdamW over `groups` at cfg's lr and weight decay: with the fused kernels its fused form (one
    pass over each tensor, 3x faster at these sizes, its own rounding), otherwise the foreach form
    that every eager-kernel run was trained with (the same bits as the for-loop form)."""
    fused = cfg.grid_kernel == "fused"
    return torch.optim.AdamW(
        groups, lr=cfg.lr, weight_decay=cfg.weight_decay, fused=True if fused else None, foreach=None if fused else True
    )


def param_groups(model: AttentionLayer, qk_decay: bool = True) -> list:
    """The optimizer's parameters: the trainable ones in the model's order (frozen W_E, W_U of
    frozen_embed left out), W_Q and W_K in a no_decay group of their own with qk_decay false."""
    return decay_groups([p for p in model.parameters() if p.requires_grad], [model.W_Q, model.W_K], qk_decay)


class OrbitTask(Task[OrbitConfig]):
    model: AttentionLayer
    name = "orbits"
    description = "source 000: 32-head equivariance-penalised attention layer on modular addition (C_24)"
    Config = OrbitConfig

    def __init__(self, cfg: OrbitConfig):
        super().__init__(cfg)
        keep_freed_memory()  # a step's grid tensors reuse freed memory, without page faults
        n = cfg.p
        self.model = AttentionLayer(
            n,
            cfg.n_heads,
            cfg.d_model,
            cfg.d_head,
            cfg.residual,
            cfg.init_scale,
            cfg.score_scale,
            cfg.qk_init,
            cfg.frozen_embed,
            cfg.grid_kernel,
        )
        self.optimizer = make_adamw(param_groups(self.model, cfg.qk_decay), cfg)
        self.train_idx, self.heldout_idx = make_split(n, cfg.train_frac, cfg.split, cfg.seed)
        self.gather = orbit_gather_index(n, M_SHIFT)
        self.inverse = torch.argsort(self.gather)  # the permutation undoing `gather`
        g = self.gather.view(n, n * n, n)[:, :, 0] // n  # cell index of (a, orbit)
        w_train = torch.from_numpy(cell_weights(self.train_idx, n)).float()
        w_held = torch.from_numpy(cell_weights(self.heldout_idx, n)).float()
        self.w_train, self.w_held = w_train, w_held
        eq_w = w_train + w_held if cfg.eq_inputs == "all" else w_train
        self.w_eq = eq_w.reshape(-1)[g]  # (a, orbit)
        b, c = np.meshgrid(np.arange(n), np.arange(n), indexing="ij")
        self.target = torch.from_numpy((b + c) % n).expand(n, n, n)  # target of cell (a,b,c)
        self.seq_lens = (seq_lengths(cfg.eq_seq_lens), seq_lengths(cfg.refine_seq_lens))  # per phase
        self.overlapped_steps = 0  # steps whose grid term ran in the second thread (`Task.overlap`)
        self.imposed: dict[int, list[int]] = {}  # {omega: heads} projected at impose_orbit_at

    FORK_KEYS = (
        "epochs",
        "refine_lr",
        "refine_weight_decay",
        "refine_eq_weight",
        "refine_ramp",
        "refine_seq_lens",
        "refine_prune",
        "refine_ov_bias_weight",
    )

    @classmethod
    def fork_epoch(cls, cfg: OrbitConfig) -> int:
        """refine_start: the second phase starts from the weights alone (fresh AdamW moments, see
        `step`), provided the first phase drew nothing from the generator (no eq_seq_lens)."""
        if not cfg.refines():
            raise UserError(
                f"only a run with a second phase can fork (0 < refine_start < epochs); this one has "
                f"refine_start={cfg.refine_start}, epochs={cfg.epochs}"
            )
        if seq_lengths(cfg.eq_seq_lens):
            raise UserError(
                f"a run with a first-phase sequence term (eq_seq_lens={cfg.eq_seq_lens!r}) cannot fork: "
                "its random sequences are not in the source's run file"
            )
        return cfg.refine_start

    def _losses(self, logits: torch.Tensor, with_eq: bool = True):
        """`losses.grid_losses` of this run: (logp, nll, ce, eq) of grid logits [n, n, n, n]."""
        return grid_losses(logits, self.target, self.w_train, self.gather, self.w_eq, with_eq)

    def _train_losses(self, logits: torch.Tensor, with_eq: bool = True) -> tuple[torch.Tensor, torch.Tensor]:
        """(ce, eq) of grid logits for a training step: with grid_kernel "fused" through
        `losses.FusedGridLosses` (its backward written out), otherwise `_losses`' autograd form."""
        if self.cfg.grid_kernel == "fused":
            return FusedGridLosses.apply(
                logits, self.target, self.w_train, self.gather, self.inverse, self.w_eq, with_eq
            )
        return self._losses(logits, with_eq)[2:]

    def schedule(self, epoch: int) -> tuple[float, float, float, list[int], float]:
        """(lr, weight decay, lambda, sequence lengths, mu) of the step taken after `epoch` steps.

        First phase (to refine_start, or to `epochs` without a second phase): lr, weight_decay,
        lambda = 0 before eq_start then a linear ramp of eq_ramp epochs to eq_weight,
        eq_seq_lens, ov_bias_weight. Second phase: refine_lr, refine_weight_decay, lambda ramped
        from 0 to refine_eq_weight over refine_ramp epochs, refine_seq_lens,
        refine_ov_bias_weight. With lr_schedule "cosine" each phase's lr decays to 0 at its own end."""
        cfg = self.cfg
        if cfg.refines() and epoch >= cfg.refine_start:
            e, length = epoch - cfg.refine_start, cfg.epochs - cfg.refine_start
            lam = cfg.refine_eq_weight * min(1.0, (e + 1) / max(1, cfg.refine_ramp))
            return (
                self._cosine(cfg.refine_lr, e, length),
                cfg.refine_weight_decay,
                lam,
                self.seq_lens[1],
                cfg.refine_ov_bias_weight,
            )
        length = cfg.refine_start if cfg.refines() else cfg.epochs
        lam = (
            0.0 if epoch < cfg.eq_start else cfg.eq_weight * min(1.0, (epoch - cfg.eq_start + 1) / max(1, cfg.eq_ramp))
        )
        return self._cosine(cfg.lr, epoch, length), cfg.weight_decay, lam, self.seq_lens[0], cfg.ov_bias_weight

    def _cosine(self, lr: float, epoch: int, length: int) -> float:
        if self.cfg.lr_schedule == "cosine":
            return lr * 0.5 * (1 + math.cos(math.pi * min(epoch, length) / max(1, length)))
        return lr

    def _seq_eq_loss(self, L: int) -> torch.Tensor:
        """`seq_eq_loss` on eq_seq_batch fresh random sequences of length L (from the task's generator)."""
        x = torch.randint(0, self.cfg.p, (self.cfg.eq_seq_batch, L), generator=self.generator)
        direct = (self.model.W_E, self.model.W_U) if self.model.residual else None
        if self.cfg.grid_kernel == "fused":
            return seq_eq_loss_fused(*self.model.circuit_factors(), x, direct)
        M, R = self.model.circuits()
        return seq_eq_loss(M, R, x, direct)

    @torch.no_grad()
    def prune_heads(self, fraction: float) -> list[int]:
        """Zero W_V and W_O of every head whose class-centred OV circuit has Frobenius norm below
        `fraction` x the largest head's; returns those heads. They stay zero: with W_V = W_O = 0
        a head gets no gradient, and AdamW (with fresh moments) and weight decay keep zeros."""
        if fraction <= 0:
            return []
        OV = self.model.circuits()[1].mT  # (H, n, n_out) key-major
        norm = (OV - OV.mean(-1, keepdim=True)).flatten(1).norm(dim=1)
        weak = torch.nonzero(norm < fraction * norm.max()).flatten()
        self.model.W_V[weak] = 0
        self.model.W_O[weak] = 0
        return weak.tolist()

    def step(self, epoch: int) -> None:
        lr, weight_decay, lam, lengths, mu = self.schedule(epoch - 1)
        if self.cfg.refines() and epoch - 1 == self.cfg.refine_start:
            self.optimizer.state.clear()  # second phase: fresh AdamW moments (a fine-tune)
            self.prune_heads(self.cfg.refine_prune)
        self.set_hyperparameters(lr, weight_decay)
        with_seq = lam > 0 and bool(lengths)
        overlapped = self.overlap and with_seq and not self.model.residual
        # epochs with sequence terms on one thread, a term each when overlapped: more threads split
        # the OV gradient's product differently (other bits); `threads` for the grid term alone
        _use_threads(1 if with_seq else self.threads)
        if overlapped:
            # the grid term in a second thread while this one does the sequence terms: its
            # gradients w.r.t. (M, R) enter the graph where the grid term's would, so autograd
            # adds the same terms in the same order (the same bits; tests/integration/test_pipeline.py)
            waiting = threading.Event()
            grid = _grid_pool().submit(self._grid_term_grads, lam, waiting)
            loss = _Precomputed.apply(*self.model.circuits(), grid, waiting)
            self.overlapped_steps += 1
        else:
            ce, eq = self._train_losses(self.model.grid_logits(), with_eq=lam > 0)
            loss = ce + lam * eq
        if lam > 0:
            for L in lengths:
                loss = loss + lam * self._seq_eq_loss(L)
        if mu > 0:
            loss = loss + mu * ov_bias_penalty(self.model.circuits()[1], M_SHIFT)
        self.optimizer.zero_grad(set_to_none=True)
        loss.backward()
        self.optimizer.step()
        if self.cfg.impose_orbit_at and epoch == self.cfg.impose_orbit_at:
            # the experiment of impose.py, labelled: after this step, so that the snapshot of epoch
            # E shows the imposed orbits and training goes on from them
            self.imposed = impose_orbits(self.model, M_SHIFT)
            self.optimizer.state.clear()  # the old moments belong to the old weights

    def set_hyperparameters(self, lr: float, weight_decay: float) -> None:
        """Set every optimizer group's lr and weight decay (0 in the no_decay group of qk_decay=false)."""
        set_hyperparameters(self.optimizer, lr, weight_decay)

    def _grid_term_grads(self, lam: float, waiting: threading.Event | None = None) -> tuple[torch.Tensor, torch.Tensor]:
        """Gradients of ce + lam * eq w.r.t. the circuits (M, R): `step`'s grid term, run alone.

        On one torch thread, widened to `threads` for the grid attention's backward (most of the
        term) once `waiting` is set (the other thread has nothing left to do but wait for this
        one): the grid term's bits do not depend on the thread count (tested), so a step with
        sequence terms keeps both cores busy to its end."""
        _use_threads(1)
        with torch.no_grad():
            M, R = self.model.circuits()
        M.requires_grad_(), R.requires_grad_()

        def widen(*_) -> None:
            if waiting is not None and waiting.is_set():
                _use_threads(self.threads)

        with torch.enable_grad():
            logits = self.model.grid_attention.apply(M, R)
            logits.register_hook(widen)  # runs just before the grid attention's backward
            ce, eq = self._train_losses(logits)
            widen()
            dM, dR = torch.autograd.grad(ce + lam * eq, (M, R))
            return dM, dR

    @torch.no_grad()
    def evaluate(self) -> dict[str, float]:
        logits = self.model.grid_logits()
        logp, nll, ce, eq = self._losses(logits)
        correct = (logits.argmax(-1) == self.target).float()
        held = self.w_held.sum().clamp_min(1)
        return {
            "train_loss": float(ce),
            "train_acc": float((self.w_train * correct).sum() / self.w_train.sum()),
            "heldout_loss": float((self.w_held * nll).sum() / held),
            "heldout_acc": float((self.w_held * correct).sum() / held),
            "eq_loss": float(eq),
            "eq_error_pooled": eq_error_pooled(logp, self.gather),
            "eq_error_worst_input": eq_error_worst_input(logp, self.gather)[0],
        }

    def split(self) -> dict[str, np.ndarray]:
        return {"train": self.train_idx, "heldout": self.heldout_idx}

    def attrs(self) -> dict:
        """Root attributes: the group (n, m) and, for an imposed-orbit run, `imposed_orbits`
        (JSON {"epoch": E, "rule": impose.RULE}): its orbits at E are imposed, not emergent."""
        out: dict = {"n": self.cfg.p, "m": M_SHIFT}
        if self.cfg.impose_orbit_at:
            out["imposed_orbits"] = json.dumps({"epoch": self.cfg.impose_orbit_at, "rule": RULE})
        return out

    def progress(self, metrics: dict[str, float]) -> dict[str, str]:
        return {
            "loss": f"{metrics['train_loss']:.3g}",
            "train": f"{metrics['train_acc']:.3f}",
            "held": f"{metrics['heldout_acc']:.3f}",
            "eq_pooled": f"{metrics['eq_error_pooled']:.1e}",
            "eq_worst": f"{metrics['eq_error_worst_input']:.1e}",
        }

    def summary(self, metrics: dict[str, float]) -> str:
        return (
            f"train acc {metrics['train_acc']:.2%}, held-out acc {metrics['heldout_acc']:.2%}, "
            f"equivariance error {metrics['eq_error_pooled']:.2e} pooled, "
            f"{metrics['eq_error_worst_input']:.2e} worst input"
        )
