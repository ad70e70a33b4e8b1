"""Every protocol case file (tests/queue_server/cases/) played against a real queue server."""
from __future__ import annotations

import pytest
from case_files import Case, all_cases, play

from tests.conftest import QueueServer


@pytest.mark.parametrize("case", all_cases(), ids=lambda case: case.name)
def test_protocol_case(queue_server: QueueServer, case: Case) -> None:
    play(case, queue_server.connect)
