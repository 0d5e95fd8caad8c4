"""The exact measurements of the sampler, measure and probe, again with two busy loops on the
machine (issue 24 item 9): the same values, no tolerance widened."""

from __future__ import annotations

from collections.abc import Callable

import pytest
import test_cli
import test_regressions
import test_sampler

from cpu_load import busy_loops

pytestmark = [pytest.mark.root, pytest.mark.timeout(240)]

CASES: dict[str, Callable[[None, None], None]] = {
    "sampler peak and timeline": test_sampler.test_peak_and_timeline_are_exact,
    "sampler owners": test_sampler.test_owner_attribution_sees_unlinked_files,
    "measure 40 MiB peak": test_cli.test_measure_json_peak_and_recommendation,
    "probe 40 MiB minimum": test_cli.test_probe_finds_a_deterministic_minimum,
    "probe refused up front": test_regressions.test_probe_with_an_allocation_refused_up_front,
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_exact_under_two_busy_loops(name: str, root_only: None, no_leftovers: None) -> None:
    with busy_loops(2):
        CASES[name](root_only, no_leftovers)
