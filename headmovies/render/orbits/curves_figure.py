"""The training curves of a run (the `curves` figure): loss, accuracy and both equivariance
errors (pooled, worst input; docs/math.md) over epochs, log scales where they fit."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
from matplotlib.figure import Figure

from headmovies.errors import UserError
from headmovies.render.core.timeline import Event

MARK_COLOUR = "#606060"

PRETTY = {
    "train_loss": "train cross-entropy",
    "heldout_loss": "held-out cross-entropy",
    "eq_loss": "equivariance loss",
    "train_acc": "train",
    "heldout_acc": "held-out",
    "eq_error_pooled": "pooled",
    "eq_error_worst_input": "worst input",
}
EQ_ERRORS = ("eq_error_pooled", "eq_error_worst_input")  # docs/math.md, "Equivariance loss and equivariance errors"


def _label(key: str) -> str:
    return PRETTY.get(key, key.replace("_", " "))


def _colour(key: str) -> str | None:
    """Train blue, held-out orange, equivariance green in every panel."""
    for prefix, colour in (("train", "C0"), ("heldout", "C1"), ("eq", "C2")):
        if key.startswith(prefix):
            return colour
    return None


def curves_figure(metrics: dict[str, np.ndarray], title: str = "", marks: Sequence[Event] = ()) -> Figure:
    """Loss and equivariance error (log y) and accuracy (%, linear) over epochs, each curve
    labelled with its final value. metrics: `Run.metrics()` ({'epoch': [K], name: [K]}).
    marks: changes of the training (`events.phase_marks`: the penalty on, phase 2), a dashed
    vertical in every panel, numbered; the figure's note under the panels says what each is."""
    epoch = metrics["epoch"]
    groups = [
        ("loss", [k for k in sorted(metrics) if k.endswith("loss")], True),
        ("accuracy", [k for k in sorted(metrics) if k.endswith("_acc")], False),
        ("equivariance error", [k for k in EQ_ERRORS if k in metrics], True),
    ]
    groups = [g for g in groups if g[1]]
    if not groups:
        raise UserError("the run logged no loss, accuracy or equivariance-error metrics to plot")
    fig = Figure(figsize=(4.2 * len(groups), 3.4), layout="constrained")
    for ax, (label, keys, log) in zip(fig.subplots(1, len(groups), squeeze=False)[0], groups):
        for k in keys:
            y = np.asarray(metrics[k], float)
            if log:
                ok = y > 0  # log axes cannot show 0
                ax.plot(
                    epoch[ok],
                    y[ok],
                    lw=1.5,
                    color=_colour(k),
                    ls="--" if k == "eq_error_worst_input" else "-",
                    label=f"{_label(k)} (final {y[-1]:.2g})",
                )
            else:
                ax.plot(epoch, 100 * y, lw=1.5, color=_colour(k), label=f"{_label(k)} (final {100 * y[-1]:.1f}%)")
        if log:
            ax.set_yscale("log")
        else:
            ax.set_ylim(-2, 102)
            ax.set_ylabel("%")
        ax.set_title(label, fontsize=10)
        ax.set_xlabel("epoch")
        ax.grid(alpha=0.3, which="both" if log else "major", lw=0.5)
        for i, e in enumerate(marks):
            ax.axvline(e.epoch, color=MARK_COLOUR, ls="--", lw=1.0, zorder=1)
            ax.text(
                e.epoch, 1.0, f" {i + 1}", transform=ax.get_xaxis_transform(), va="top", fontsize=8, color=MARK_COLOUR
            )
        ax.legend(fontsize=8, frameon=False)
    if marks:
        fig.supxlabel(
            "   ".join(f"{i + 1}: epoch {e.epoch:,}, {e.label}" for i, e in enumerate(marks)),
            fontsize=8,
            color="#404040",
        )
    if title:
        fig.suptitle(title, fontsize=10, color="#404040")
    return fig
