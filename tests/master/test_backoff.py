"""Restart backoff: a handler that dies at start cannot fork-bomb the host."""
from __future__ import annotations

from master.backoff import BootBackoff


def test_each_failed_start_doubles_the_wait_up_to_the_maximum() -> None:
    backoff = BootBackoff(quick_death_s=5.0, base_s=0.5, max_s=4.0)
    delays = [
        backoff.record_exit("q", lived_s=0.1, failed=True, boot_failure=False, now=float(n))
        for n in range(6)
    ]
    assert delays == [0.5, 1.0, 2.0, 4.0, 4.0, 4.0]
    assert not backoff.ready("q", 5.0 + 3.9)
    assert backoff.ready("q", 5.0 + 4.0)


def test_a_slot_that_lived_long_resets_its_queue() -> None:
    backoff = BootBackoff(quick_death_s=5.0)
    backoff.record_exit("q", lived_s=0.1, failed=True, boot_failure=False, now=0.0)
    assert backoff.record_exit("q", lived_s=60.0, failed=True, boot_failure=False, now=70.0) == 0.0
    assert backoff.failures("q") == 0 and backoff.ready("q", 70.0)


def test_a_boot_failure_backs_off_even_after_a_long_setup() -> None:
    backoff = BootBackoff(quick_death_s=5.0, base_s=0.5)
    assert backoff.record_exit("q", lived_s=30.0, failed=True, boot_failure=True, now=0.0) == 0.5


def test_other_queues_are_not_slowed_down() -> None:
    backoff = BootBackoff()
    backoff.record_exit("broken", lived_s=0.0, failed=True, boot_failure=True, now=0.0)
    assert backoff.ready("healthy", 0.0)
    assert not backoff.ready("broken", 0.0)
