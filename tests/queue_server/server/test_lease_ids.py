"""The era rule of lease ids (queue_server/server/lease_ids.py), pure: a deposed primary's
restarts stay below the next epoch's ids, and every id fits the protocol's 18 digits."""
from __future__ import annotations

from queue_server.protocol.numbers import ID_MAX
from queue_server.server import lease_ids
from queue_server.server.lease_ids import EPOCH_ERAS, ERA_IDS


def test_restarts_of_a_deposed_primary_stay_below_the_new_epochs_ids() -> None:
    old = lease_ids.for_epoch(1, 1)  # leased in epoch 1
    assert old == ERA_IDS * EPOCH_ERAS
    new = lease_ids.for_epoch(old + 5, 2)  # a replica of it, promoted in epoch 2
    assert new == 2 * ERA_IDS * EPOCH_ERAS
    for _ in range(1000):  # the old one restarting again and again, handing out meanwhile
        old = lease_ids.after_restart(old + 7)
        assert old < new
    assert lease_ids.for_epoch(new + 3, 2) == new + 3  # in its epoch already: no jump


def test_a_fresh_counter_starts_at_one_and_a_restart_moves_to_the_next_era() -> None:
    assert lease_ids.first_id(0) == 1
    assert lease_ids.after_restart(1) == ERA_IDS
    assert lease_ids.after_restart(ERA_IDS + 1) == 2 * ERA_IDS
    assert lease_ids.for_self_promotion(3 * ERA_IDS) == ERA_IDS * EPOCH_ERAS


def test_every_era_stays_within_the_id_bound() -> None:
    assert lease_ids.for_epoch(1, 10**9) + ERA_IDS - 1 <= ID_MAX
    assert lease_ids.after_restart(ID_MAX) <= ID_MAX
