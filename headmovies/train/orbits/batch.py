"""Many orbit runs in one process: B instances of `OrbitTask` trained as one batched computation
(docs/sweeps.md, "Many models per process").

Each instance is a real `OrbitTask` (its *view*), built exactly as the training loop builds a
single run (under `torch.manual_seed(cfg.seed)`), so its initial weights, data split and
generator are that run's. The batch stacks the views' parameters along a leading instance axis
and takes each step for all of them at once: the n^3 grid attention (the single run's kernel,
`attention.GRID_KERNELS[grid_kernel]`, with an instance axis: [B, H, n, n] tables -> [B, n, n, n,
n] logits), the losses over it (`losses.FusedGridLosses` or `losses.grid_losses`, the same way)
and one AdamW (elementwise: B independent optimizers; the foreach form over the stacked parameters,
the fused form over each instance's slice of them). The fused and
eager kernels train batched; instances of a batch share one. The per-instance losses are summed, so each
instance's gradient is its own. The small parts (each instance's circuits, OV-bias penalty and
sequence term) run the single run's own operations per instance, and each instance's weights
are leaves of their own during a step: then every instance equals its single run bit for bit
(tests/integration/test_sweep.py, `bench/batch_speed.py --check`; the price on tiny models:
docs/benchmarks.md).

Evaluation, snapshots, pruning and checkpoints copy an instance's slice into its view and run the
single-run code, so each instance's run file and checkpoint are ordinary ones (a batched run
resumes as a single run).

What instances of one batch must share (`batch_key`): the shapes, the optimizer schedule (one
AdamW learning rate and weight decay per step), the sequence term's lengths and batch, and the
snapshot schedule and the grid kernel. Everything else may differ per instance: seed, init_scale, split, train_frac,
the loss weights and their ramps (eq_*, ov_bias_weight, refine_eq_weight, ...), refine_prune.
Of the levers (`OrbitConfig.levers`; docs/experiments.md, "Levers"), score_scale (per instance, in its circuits),
qk_init (its initial weights) and qk_decay (shared: W_Q and W_K in an AdamW group without weight
decay, as `task.param_groups`) train batched; a run with frozen_embed or impose_orbit_at set trains
alone (`batch_key` None), as does grid_kernel=compiled, and a batch refuses them (ValueError).
"""

from __future__ import annotations

import torch

from headmovies.tasks.orbits import M_SHIFT
from headmovies.train.orbits.attention import GRID_KERNELS
from headmovies.train.orbits.config import OrbitConfig
from headmovies.train.orbits.losses import (
    FusedGridLosses,
    grid_losses,
    ov_bias_penalty,
    seq_eq_loss,
    seq_eq_loss_fused,
)
from headmovies.train.orbits.model import qk_ov, qk_ov_factors
from headmovies.train.orbits.task import OrbitTask, decay_groups, make_adamw, set_hyperparameters

# Config keys every instance of a batch shares; the rest may differ per instance.
SHARED_KEYS = (
    "p",
    "n_heads",
    "d_model",
    "d_head",
    "residual",  # shapes
    "epochs",
    "lr",
    "lr_schedule",
    "weight_decay",
    "qk_decay",  # the optimizer's
    "refine_start",
    "refine_lr",
    "refine_weight_decay",  # schedule
    "eq_seq_lens",
    "refine_seq_lens",
    "eq_seq_batch",  # sequence term
    "early_every",
    "switch_epoch",
    "late_every",
    "log_early",  # snapshots
    "grid_kernel",
)

PARAMS = ("W_E", "W_Q", "W_K", "W_V", "W_O", "W_U")  # `model.AttentionLayer`'s parameters, in its order


# On a CPU batching pays for small models (it shares the per-operation overhead) while a batch's
# grid tensors (instances x heads x n^3 cells, 1 MB at 2^18) stay near the cache; beyond that each
# element costs more than alone (docs/benchmarks.md, "Many models per process").
BATCH_ELEMENTS = 2**18
MAX_BATCH = 32


# Optional keys (`OrbitConfig.OMIT_AT_DEFAULT`) the batch does not implement: runs that set one
# train alone (two levers), and the grid kernels it does (the others train alone)
UNBATCHED_LEVERS = ("frozen_embed", "impose_orbit_at")
BATCHED_KERNELS = ("fused", "eager")


def unbatched_levers(cfg: OrbitConfig) -> list[str]:
    """'key=value' of each key of UNBATCHED_LEVERS that `cfg` sets away from its default, and of
    a grid_kernel the batch does not compute."""
    default = OrbitConfig()
    levers = [f"{k}={getattr(cfg, k)}" for k in UNBATCHED_LEVERS if getattr(cfg, k) != getattr(default, k)]
    return levers + ([] if cfg.grid_kernel in BATCHED_KERNELS else [f"grid_kernel={cfg.grid_kernel}"])


def batch_key(cfg: OrbitConfig) -> tuple | None:
    """Runs with equal keys can share a batch; None: this run trains alone (frozen_embed or
    impose_orbit_at set: the batch implements neither)."""
    if unbatched_levers(cfg):
        return None
    return tuple(getattr(cfg, k) for k in SHARED_KEYS)


def max_batch(cfg: OrbitConfig) -> int:
    """Most instances of this config worth training as one batch on a CPU (1 for the default
    32 heads of C_24: there batching does not pay)."""
    return max(1, min(MAX_BATCH, BATCH_ELEMENTS // (cfg.n_heads * cfg.p**3)))


def _grad_or_zeros(w: torch.Tensor) -> torch.Tensor:
    """w's gradient, zeros where it got none."""
    return w.grad if w.grad is not None else torch.zeros_like(w)


class OrbitBatch:
    """B orbit runs as one computation. `views[i]` is instance i as an `OrbitTask`; call
    `sync(i)` before reading its weights (evaluate, snapshot) or its state (checkpoint).

    cfgs: configs with equal `batch_key`s (ValueError otherwise). device: where the batched
    tensors live ("cpu" or e.g. "cuda"); views stay on the CPU."""

    def __init__(self, cfgs: list[OrbitConfig], device: str | torch.device = "cpu"):
        levers = sorted({lever for c in cfgs for lever in unbatched_levers(c)})
        if levers:
            raise ValueError(
                f"batched training does not implement {', '.join(levers)}: such runs train alone "
                "(the sweep plans them so)"
            )
        if not cfgs or len({batch_key(c) for c in cfgs}) != 1:
            raise ValueError("a batch needs one or more configs that agree on " + ", ".join(SHARED_KEYS))
        self.cfg = cfgs[0]  # for the shared keys
        self.device = torch.device(device)
        self.views, self._rng = [], []
        for cfg in cfgs:  # as loop.train builds a single run
            torch.manual_seed(cfg.seed)
            self.views.append(OrbitTask(cfg))
            self._rng.append(torch.get_rng_state())
        views, dev = self.views, self.device
        self.params = [
            torch.nn.Parameter(torch.stack([getattr(v.model, k).detach() for v in views]).to(dev)) for k in PARAMS
        ]
        self.W_E, self.W_Q, self.W_K, self.W_V, self.W_O, self.W_U = self.params
        # fused AdamW's bits for an element depend on the tensor it lies in (equal inputs stepped
        # stacked and alone differ in the last bit): with the fused kernels it steps each instance's
        # slice (a leaf sharing the stacked memory) as a tensor of its own, as its single run does;
        # the foreach form (the eager kernel's) steps the stacks, as before
        fused = self.cfg.grid_kernel == "fused"
        self._slices = [[P[i].detach() for i in range(len(views))] for P in self.params] if fused else None
        stepped = self.params if self._slices is None else [s for slices in self._slices for s in slices]
        qk = [self.W_Q, self.W_K] if self._slices is None else self._slices[1] + self._slices[2]
        groups = decay_groups(stepped, qk, self.cfg.qk_decay)  # as the single run's
        self.optimizer = make_adamw(groups, self.cfg)
        self._leaves: list[list[torch.Tensor]] | None = None
        v0 = views[0]
        self.gather = v0.gather.to(dev)  # depends on n only
        self.inverse = v0.inverse.to(dev)
        self.target = v0.target.to(dev)
        self.w_train = torch.stack([v.w_train for v in views]).to(dev)  # (B, a, b, c)
        self.w_eq = torch.stack([v.w_eq for v in views]).to(dev)  # (B, a, orbit)

    key = staticmethod(batch_key)
    max_size = staticmethod(max_batch)

    def __len__(self) -> int:
        return len(self.views)

    def torch_rng(self, i: int) -> torch.Tensor:
        """The global torch RNG state right after instance i was built: what its single run's
        checkpoints hold (orbit training draws nothing from the global RNG after init)."""
        return self._rng[i]

    def _weights(self) -> list[list[torch.Tensor]]:
        """Per instance, its weights (W_E, W_Q, W_K, W_V, W_O, W_U): during a step, leaves of
        their own that share the stacked parameters' memory, so that each instance's gradients
        accumulate exactly as in its single run (a leaf sums the gradients of its uses in the
        order they arrive; one shared leaf would sum them in another order)."""
        return self._leaves if self._leaves is not None else [list(w) for w in zip(*self.params)]

    def circuits(self) -> tuple[torch.Tensor, torch.Tensor]:
        """`AttentionLayer.circuits` per instance: M [B, H, n, n], R [B, H, n_out, n] (a transposed
        view of the key-major product, as in the single run).

        Each instance's circuits come from the single run's own operations, stacked: on a CPU a
        batch of small matrix products (below ~400 multiply-adds per product) takes another
        kernel than one product and rounds differently. They cost little beside the n^3 grid."""
        Ms, OVs = zip(
            *(qk_ov(w[0], w[1], w[2], w[3], w[4], w[5], v.cfg.score_scale) for w, v in zip(self._weights(), self.views))
        )
        return torch.stack(Ms), torch.stack(OVs).transpose(2, 3)

    def grid_logits(self) -> torch.Tensor:
        """Logits G [B, a, b, c, class] of every instance."""
        M, R = self.circuits()
        out = GRID_KERNELS[self.cfg.grid_kernel].apply(M, R)  # (B, n, n, n, n_out)
        if self.cfg.residual:
            # per instance, as the single run adds it: the gradient of the direct path then sums
            # over (b, c) with the single run's shapes; a batched broadcast sums in another
            # order on some CPUs (seen on an AMD EPYC without AVX-512)
            out = torch.stack([o + (w[0] @ w[5])[:, None, None, :] for o, w in zip(out.unbind(0), self._weights())])
        return out

    def _losses(self, logits: torch.Tensor, with_eq: bool) -> tuple[torch.Tensor, torch.Tensor]:
        """Per-instance (ce, eq) [B] of `OrbitTask._train_losses`."""
        if self.cfg.grid_kernel == "fused":
            return FusedGridLosses.apply(
                logits, self.target, self.w_train, self.gather, self.inverse, self.w_eq, with_eq
            )
        return grid_losses(logits, self.target, self.w_train, self.gather, self.w_eq, with_eq)[2:]

    def step(self, epoch: int) -> None:
        """`OrbitTask.step` for every instance at once."""
        cfg = self.cfg
        sched = [v.schedule(epoch - 1) for v in self.views]  # (lr, wd, lambda, lengths, mu) each
        lr, weight_decay, _, lengths, _ = sched[0]  # shared (batch_key)
        lam = [s[2] for s in sched]
        mu = [s[4] for s in sched]
        if cfg.refines() and epoch - 1 == cfg.refine_start:
            self.optimizer.state.clear()
            self._prune()
        set_hyperparameters(self.optimizer, lr, weight_decay)
        self._leaves = [[P[i].detach().requires_grad_() for P in self.params] for i in range(len(self))]
        lam_t = torch.tensor(lam, device=self.device)
        ce, eq = self._losses(self.grid_logits(), with_eq=max(lam) > 0)
        loss = ce + lam_t * eq
        if max(lam) > 0:
            active = [i for i in range(len(self)) if lam[i] > 0]
            for L in lengths:
                loss = loss + lam_t * self._seq_eq_loss(L, active)
        if max(mu) > 0:
            OV = self.circuits()[1].mT  # per instance (small; batched reductions of tiny tables round differently)
            loss = loss + torch.tensor(mu, device=self.device) * torch.stack(
                [ov_bias_penalty(OV[i].mT, M_SHIFT) for i in range(len(self))]
            )
        loss.sum().backward()
        for j, P in enumerate(self.params):
            if self._slices is None:
                P.grad = torch.stack([_grad_or_zeros(w[j]) for w in self._leaves])
            else:
                for s, w in zip(self._slices[j], self._leaves):
                    s.grad = _grad_or_zeros(w[j])
        self._leaves = None
        self.optimizer.step()

    def _seq_eq_loss(self, L: int, active: list[int]) -> torch.Tensor:
        """[B]: `losses.seq_eq_loss` of each active instance on sequences drawn from its own
        generator (as its single run draws them), 0 for the others (which draw nothing)."""
        fused = self.cfg.grid_kernel == "fused"
        if not fused:
            M, R = self.circuits()
            OV = R.mT  # slice the key-major product, so gradients reach it in the single run's layout
        out = []
        for i, view in enumerate(self.views):
            if i not in active:
                out.append(self.W_E.new_zeros(()))
                continue
            x = torch.randint(0, self.cfg.p, (self.cfg.eq_seq_batch, L), generator=view.generator)
            w = self._weights()[i]
            direct = (w[0], w[5]) if self.cfg.residual else None
            if fused:  # as the single run: from this instance's own factors
                factors = qk_ov_factors(w[0], w[1], w[2], w[3], w[4], w[5], view.cfg.score_scale)
                out.append(seq_eq_loss_fused(*factors, x, direct))
            else:
                out.append(seq_eq_loss(M[i], OV[i].mT, x, direct))
        return torch.stack(out)

    @torch.no_grad()
    def _prune(self) -> None:
        """`OrbitTask.prune_heads` of each instance, run on its view."""
        for i, view in enumerate(self.views):
            self.sync(i, optimizer=False)
            view.prune_heads(view.cfg.refine_prune)
            self.W_V[i] = view.model.W_V.to(self.device)
            self.W_O[i] = view.model.W_O.to(self.device)

    @torch.no_grad()
    def sync(self, i: int, optimizer: bool = True) -> OrbitTask:
        """Copy instance i's weights (and AdamW state and hyperparameters) into `views[i]`;
        returns that view."""
        view = self.views[i]
        for name, P in zip(PARAMS, self.params):
            getattr(view.model, name).copy_(P[i])
        if optimizer:
            group = self.optimizer.param_groups[0]  # never the no_decay group
            view.set_hyperparameters(group["lr"], group["weight_decay"])
            view.optimizer.state.clear()
            index = {id(p): j for j, p in enumerate(view.model.parameters())}
            # in the order of the view's groups, as its own steps would have filled the state
            for p in (p for g in view.optimizer.param_groups for p in g["params"]):
                j = index[id(p)]
                if self._slices is None:
                    state = self.optimizer.state.get(self.params[j])
                    own = {k: v if k == "step" else v[i] for k, v in state.items()} if state else {}
                else:
                    own = self.optimizer.state.get(self._slices[j][i], {})
                if own:
                    view.optimizer.state[p] = {k: v.cpu().clone() if k != "step" else v.clone() for k, v in own.items()}
        return view
