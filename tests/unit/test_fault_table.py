"""The fault table in docs/run-file.md is generated from tests/faults.py and the `@injects`
marks of the fault tests, so the promise and the tests cannot drift apart. Regenerate it with
`python tests/faults.py --write`."""

from __future__ import annotations

from faults import FAULTS, counts, documented, fault_test_files, table


def test_every_fault_record_is_injected_by_a_test_and_every_mark_has_a_record():
    n = counts()
    assert len(fault_test_files()) >= 2  # the scan found the fault tests
    assert sorted(set(n) - set(FAULTS)) == [], "marks without a record in tests/faults.py"
    assert [k for k in FAULTS if not n.get(k)] == [], "records no test injects"


def test_the_documented_fault_table_is_the_generated_one():
    assert documented() == table(counts()), "run `python tests/faults.py --write`"
