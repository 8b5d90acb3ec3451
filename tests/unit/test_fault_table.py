"""The fault table in docs/run-file.md is generated from tests/faults.py and the `@injects`
marks of the fault tests, so the promise and the tests cannot drift apart; and a fault whose
every test was skipped in a session (a tool missing) fails that session, though the table counts
its tests. Regenerate the table with `python tests/faults.py --write`."""

from __future__ import annotations

import pytest
from faults import FAULTS, counts, documented, fault_test_files, table


def test_every_fault_record_is_injected_by_a_test_and_every_mark_has_a_record():
    n = counts()
    assert len(fault_test_files()) >= 2  # the scan found the fault tests
    assert sorted(set(n) - set(FAULTS)) == [], "marks without a record in tests/faults.py"
    assert [k for k in FAULTS if not n.get(k)] == [], "records no test injects"


def test_the_documented_fault_table_is_the_generated_one():
    assert documented() == table(counts()), "run `python tests/faults.py --write`"


def test_no_fault_counts_as_covered_when_every_test_of_it_was_skipped(fault_outcomes):
    """Runs last (tests/conftest.py): a fault whose every test that ran in this session skipped
    (strace or gcc missing, say) is not covered, though the table counts its tests."""
    if not fault_outcomes:
        pytest.skip("no fault test ran in this session")
    skipped = {
        key: sorted({reason.removeprefix("Skipped: ") for _, reason in runs.values()})
        for key, runs in fault_outcomes.items()
        if all(outcome == "skipped" for outcome, _ in runs.values())
    }
    assert skipped == {}, f"faults whose every test was skipped (install what they need: `make test` does): {skipped}"
