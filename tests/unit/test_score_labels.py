"""Labels of heads that coincide in score space (render/generic/score_space.py): one label per
group of dots closer than LABEL_NEAR pixels, "L0H0,1,3", as the viewer's scatter.js draws them."""

from __future__ import annotations

import numpy as np

from headmovies.render.core.frame_states import FrameState
from headmovies.render.generic.score_space import LABEL_NEAR, ScoreFigure, join_labels, label_groups


def test_dots_closer_than_the_limit_share_a_group_in_order():
    points = np.array([[0, 0], [5, 5], [100, 0], [LABEL_NEAR, 0], [100, LABEL_NEAR - 1]], float)
    assert label_groups(points) == [[0, 1], [2, 4], [3]]
    assert label_groups(points[:0]) == []


def test_labels_join_on_their_common_prefix():
    assert join_labels(["L0H0"]) == "L0H0"
    assert join_labels(["L0H0", "L0H2", "L0H3"]) == "L0H0,2,3"
    assert join_labels(["L1H10", "L1H2"]) == "L1H10,2"
    assert join_labels(["a", "b2"]) == "a · b2"


def test_the_movie_draws_one_label_for_heads_at_one_point():
    """Layer 0: heads 0, 1, 3 at one point (as at initialisation), head 2 far away; layer 1 apart."""
    fig = ScoreFigure([4, 2], "header", (1.0, 1.0), None, panel_px=200)
    z = np.array([0.1 + 0.1j, 0.1 + 0.1j, 0.8 + 0.6j, 0.101 + 0.1j, 0.2 + 0.2j, 0.6 + 0.7j])[None, :]
    state = FrameState(3, z, z[None], np.zeros(1), np.ones(1), np.ones(1), "", None)
    frame = fig.render(state)
    assert frame.shape[2] == 4
    shown = [[t.get_text() for t in layer if t.get_visible()] for layer in fig.labels]
    assert shown == [["L0H0,1,3", "L0H2"], ["L1H0", "L1H1"]]
    fig.close()


def test_the_score_summary_names_the_strongest_head_and_when_a_head_first_was_strong():
    """Two layers, layer 1 with one head (NaN pads the other); induction strong (>= 0.25) first at
    the second snapshot (epoch 10), previous-token never (>= 0.5)."""
    from headmovies.render.generic.figures import score_summary

    nan = np.nan
    induction = np.array([[[0.1, 0.0], [0.2, nan]], [[0.1, 0.3], [0.2, nan]], [[0.1, 0.2], [0.4, nan]]])
    previous = np.full_like(induction, 0.1)
    previous[:, 1, 1] = nan
    got = score_summary(np.array([0, 10, 20]), {"induction": induction, "previous_token": previous})
    assert list(got) == ["previous_token", "induction"]
    assert got["induction"] == {
        "final": {"L0H0": 0.1, "L0H1": 0.2, "L1H0": 0.4},
        "strongest": "L1H0",
        "first_epoch_strong": 10,
    }
    assert got["previous_token"]["first_epoch_strong"] is None
