"""What holds a secret leaves it out of its repr (a log line, an error's text or a traceback's
locals may show one): the config, the queue server's settings, the dashboard's settings, a
CURVE key pair."""
from __future__ import annotations

import zmq

from admin_ui.settings import AdminSettings
from config.curve import CurveKeys
from config.models import ClusterConfig
from queue_server.server.settings import ServerSettings

SECRETS = ("queue-sekrit-1", "admin-sekrit-2", "db-sekrit-3")


def test_no_repr_shows_a_token_or_a_database_password() -> None:
    config = ClusterConfig.model_validate({
        "queue_server": {"token": SECRETS[0]}, "admin": {"token": SECRETS[1]},
        "manager": {"database_url": f"postgresql://slotmap:{SECRETS[2]}@db/slotmap"},
    })
    assert config.queue_server.token == SECRETS[0]
    shown = [repr(config), repr(ServerSettings(token=SECRETS[0])),
             repr(AdminSettings(token=SECRETS[1], queue_token=SECRETS[0]))]
    for text in shown:
        assert not any(secret in text for secret in SECRETS), text


def test_a_curve_key_pair_shows_its_public_key_only() -> None:
    public, secret = zmq.curve_keypair()
    shown = repr(CurveKeys(public, secret))
    assert secret.decode() not in shown and public.decode() in shown
