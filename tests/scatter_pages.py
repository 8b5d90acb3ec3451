"""What every scatter-viewer page (render/core/scatter_viewer.py: the induction, OV-coherent
and generic viewers) is checked for in Chromium, opened with the `open_page` fixture
(tests/conftest.py): offline, fits the screen, timeline, trails, play."""

from __future__ import annotations

import io
import json
import re

import numpy as np
from matplotlib.image import imread


def payload_of(text: str) -> dict:
    """The payload JSON inlined in a viewer page's text."""
    return json.loads(re.search(r'<script id="payload" type="application/json">(.*?)</script>', text, re.S).group(1))


def to_last(page) -> int:
    """Scrub to the last snapshot; its epoch."""
    epochs = page.evaluate("window.headmovies.epochs")
    page.locator("#scrubber").fill(str(epochs[-1]))
    assert page.get_attribute("#epoch", "data-snapshot") == str(len(epochs) - 1)
    return epochs[-1]


def check_opens_offline_and_fits(page, errors, requests, panels: int) -> None:
    assert errors == [] and all(u.startswith(("file://", "data:")) for u in requests), (errors, requests)
    assert page.locator(".panel canvas").count() == panels
    lead = page.inner_text("#lead")
    assert lead.startswith("How ") and not re.search(r"QK|OV|irrep|d_head", lead)  # plain words first
    timeline = page.locator("#timeline").bounding_box()
    assert timeline["y"] + timeline["height"] <= 900  # above the fold at 1440x900
    aside = page.locator("aside").bounding_box()
    assert aside["x"] < 1440 / 2 + 300 and aside["x"] + aside["width"] > 1100  # the right half is used
    shot = imread(io.BytesIO(page.screenshot()))
    assert shot.shape[:2] == (900, 1440)
    box = page.locator(".panel canvas").first.bounding_box()
    square = imread(io.BytesIO(page.screenshot(clip=box)))[..., :3]
    assert (square < 0.9).any(axis=-1).mean() > 0.002  # dots drawn, not a blank square


def check_timeline_and_trails(page, plane: int) -> None:
    """A click on the timeline moves to the snapshot at or before that epoch; the trails box
    takes the trails off the plane (one where the dots move) and puts them back."""
    epochs = page.evaluate("window.headmovies.epochs")
    box = page.locator("#timeline").bounding_box()
    left, right = box["x"] + 44, box["x"] + box["width"] - 16  # curves.js: the axis' margins
    page.mouse.click(left + 0.5 * (right - left), box["y"] + box["height"] / 2)
    t = int(page.get_attribute("#epoch", "data-snapshot"))
    middle = epochs[0] + 0.5 * (epochs[-1] - epochs[0])
    assert epochs[t] <= middle + 1 and (t == len(epochs) - 1 or epochs[t + 1] > middle - 1)
    to_last(page)
    panel = page.locator(".panel canvas").nth(plane).bounding_box()
    with_trails = imread(io.BytesIO(page.screenshot(clip=panel)))[..., :3]
    page.uncheck("#trails")
    without = imread(io.BytesIO(page.screenshot(clip=panel)))[..., :3]
    page.check("#trails")
    again = imread(io.BytesIO(page.screenshot(clip=panel)))[..., :3]
    assert (np.abs(with_trails - without).max(-1) > 0.05).sum() > 20 and np.array_equal(with_trails, again)


def check_play_moves(page) -> None:
    page.locator("#scrubber").fill(page.get_attribute("#scrubber", "min"))
    assert page.get_attribute("#epoch", "data-snapshot") == "0"
    page.click("#play")
    page.wait_for_function("document.getElementById('epoch').dataset.snapshot !== '0'", timeout=10000)
    page.click("#play")
    page.keyboard.press("ArrowLeft")
    assert page.inner_text("#play") == "▶ play"
