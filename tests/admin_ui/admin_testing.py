"""Helpers shared by the dashboard tests: settings over the sample, the test client type, polling."""
from __future__ import annotations

import dataclasses
import tomllib
import warnings
from collections.abc import Callable
from typing import TypeVar

import admin_sample
import polling

from admin_ui.settings import AdminSettings
from config.load import parse_config

with warnings.catch_warnings():
    warnings.simplefilter("ignore")  # starlette's TestClient warns about httpx on some versions
    from fastapi.testclient import TestClient

CLOCK = admin_sample.NOW + 2.0
TEST_CLIENT_HOSTS = frozenset({"testserver"})
MakeClient = Callable[..., TestClient]
T = TypeVar("T")

# (value, kind, shown): test_format checks the server, test_browser the page's script.
FORMAT_CASES: list[tuple[float | None, str, str]] = [
    (1234567, "int", "1,234,567"), (0, "int", "0"), (2.5, "int", "3"),
    (1.37, "pct", "137%"), (0.005, "pct", "1%"), (1e6, "pct", "\u221e"),
    (0.25, "f1", "0.3"), (0.05, "f1", "0.1"), (1419.06, "f1", "1419.1"), (4.125, "f2", "4.13"),
    (0, "secs", "0"), (0.000037, "secs", "37 \u00b5s"), (0.058, "secs", "58 ms"), (9.75, "secs", "9.8 s"),
    (52 * 2**20, "bytes", "52.0 MiB"), (32 * 2**30, "bytes", "32.0 GiB"), (512, "bytes", "512 B"),
    (0, "cell", ""), (3, "cell", "3"),
    (1717243200.9, "time", "2024-06-01 12:00:00"), (59.9, "age", "59 s ago"), (125, "age", "2 min ago"),
    (7300, "age", "2 h ago"), (None, "int", "\u2013"),
]

__all__ = ["FORMAT_CASES", "CLOCK", "TEST_CLIENT_HOSTS", "MakeClient", "TestClient", "poll_until", "sample_settings"]


def sample_settings(**overrides: object) -> AdminSettings:
    """Settings from the sample's config, with the clock stopped just after the newest sample."""
    config = parse_config(tomllib.loads(admin_sample.config_toml("sqlite://")))
    # No queue server unless a test starts one (127.0.0.1:7400 may be anyone's); the
    # TestClient's requests name the host "testserver".
    fields: dict[str, object] = {"clock": lambda: CLOCK, "queue_servers": (),
                                 "allowed_hosts": TEST_CLIENT_HOSTS, **overrides}
    return dataclasses.replace(AdminSettings.from_config(config), **fields)  # type: ignore[arg-type]


def poll_until(probe: Callable[[], T | None], *, deadline_s: float, what: str,
               interval_s: float = 0.05) -> T:
    """polling.poll_until with the dashboard tests' keyword for the deadline."""
    return polling.poll_until(probe, deadline_s, what=what, interval_s=interval_s)  # type: ignore[return-value]
