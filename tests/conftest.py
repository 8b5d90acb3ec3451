"""Shared test setup. The tests sit in three folders, and each test is marked by its folder
(`pytest -m unit`, `-m "not integration"`, ...):

    unit/          in one process, no Chromium, Ray or TransformerLens: `make test-fast`
    integration/   train, encode, run the CLI in fresh processes, or use Ray or TransformerLens
    browser/       drive Chromium through Playwright

`slow` (seconds each) and `ray` stay marked test by test; a test anywhere that uses Chromium
(the `browser` fixture, directly or through another) is marked `browser` too. Helpers live here
in tests/ and are imported one way, by module name (`from equivariant import equivariant_run`):
pyproject.toml's `pythonpath` puts this folder, and each test folder, on sys.path."""

from __future__ import annotations

import os
import signal
from pathlib import Path

import pytest

# Tiny models: a second thread only adds OpenMP waits on a shared 2-core machine (30x slower
# measured with spinning threads). Subprocesses started by tests inherit these.
os.environ.setdefault("OMP_NUM_THREADS", "1")
os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")


def sigint_as_at_a_terminal() -> None:
    """`preexec_fn` for a child that a test stops with SIGINT (Ctrl-C): SIGINT back to its
    default, so that Python turns it into KeyboardInterrupt. A test run started in the
    background by a non-interactive shell (`make test &`) ignores SIGINT, children inherit
    that, and Python leaves an ignored SIGINT ignored: the child would never stop."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)


@pytest.fixture(autouse=True, scope="session")
def one_torch_thread():
    """One torch thread in the test process (torch is imported only if a test needs it)."""
    import sys

    if "torch" in sys.modules:
        sys.modules["torch"].set_num_threads(1)


CHROMIUM = os.environ.get("HEADMOVIES_CHROMIUM", "/usr/bin/chromium")
ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--no-first-run",
    "--disable-dev-shm-usage",
]


@pytest.fixture(scope="session")
def browser():
    """Debian's Chromium (/usr/bin/chromium, or $HEADMOVIES_CHROMIUM; `make test` installs it)
    driven by Playwright, which cannot download its own browsers here; one for the session, as
    Playwright's sync API runs one instance at a time (tests/test_browser.py, test_viewer_page.py)."""
    if not os.access(CHROMIUM, os.X_OK):
        pytest.fail(
            f"the browser tests need Chromium at {CHROMIUM}: install it (Debian: apt-get install chromium; "
            "`make test` does this when run as root) or point HEADMOVIES_CHROMIUM at it",
            pytrace=False,
        )
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        b = p.chromium.launch(executable_path=CHROMIUM, args=ARGS)
        yield b
        b.close()


@pytest.fixture
def open_page(browser):
    """open_page(url) -> (page, errors, requests) at 1440x900, offline; console errors and
    JavaScript errors are collected, and every URL the page asks for."""
    contexts = []

    def opener(url):
        ctx = browser.new_context(viewport={"width": 1440, "height": 900}, device_scale_factor=1, offline=True)
        contexts.append(ctx)
        page = ctx.new_page()
        errors, requests = [], []
        page.on("pageerror", lambda e: errors.append(str(e)))
        page.on("console", lambda m: errors.append(m.text) if m.type == "error" else None)
        page.on("request", lambda r: requests.append(r.url))
        page.goto(url)
        page.wait_for_selector("body[data-state=ready]", timeout=15000)
        return page, errors, requests

    yield opener
    for ctx in contexts:
        ctx.close()


LAST = "test_no_fault_counts_as_covered_when_every_test_of_it_was_skipped"  # tests/unit/test_fault_table.py
FOLDERS = ("unit", "integration", "browser")  # test folder -> the marker of its tests


def pytest_collection_modifyitems(items):
    """Each test gets its folder's marker; a test that uses Chromium is marked `browser`. A unit
    test that needs Chromium or Ray is a usage error: `make test-fast` installs neither. The
    fault table's check of skipped fault tests runs last: it reads their outcomes."""
    for item in items:
        folder = Path(str(item.path)).parent.name
        if folder in FOLDERS:
            item.add_marker(folder)
        if "browser" in getattr(item, "fixturenames", ()):
            item.add_marker(pytest.mark.browser)
        if folder == "unit" and {"browser", "ray"} & {m.name for m in item.iter_markers()}:
            raise pytest.UsageError(f"{item.nodeid} needs Chromium or Ray: it belongs in tests/integration or browser")
    last = [item for item in items if item.name == LAST]
    items[:] = [item for item in items if item.name != LAST] + last


# {fault key: {test id: (outcome, skip reason)}} of the tests marked `@injects(key)` run so far
_FAULT_OUTCOMES: dict[str, dict[str, tuple[str, str]]] = {}


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    report = (yield).get_result()
    keys = getattr(getattr(item, "function", None), "faults", ())
    if keys and (report.when == "call" or (report.when == "setup" and not report.passed)):
        reason = str(report.longrepr[2]) if report.skipped and isinstance(report.longrepr, tuple) else ""
        for key in keys:
            _FAULT_OUTCOMES.setdefault(key, {})[item.nodeid] = (report.outcome, reason)


@pytest.fixture
def fault_outcomes() -> dict[str, dict[str, tuple[str, str]]]:
    """{fault key: {test id: (outcome, skip reason)}} of the fault tests run so far this session."""
    return _FAULT_OUTCOMES
