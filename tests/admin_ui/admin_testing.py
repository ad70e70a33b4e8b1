"""Helpers shared by the dashboard tests: settings over the sample, the test client type, polling."""
from __future__ import annotations

import dataclasses
import time
import tomllib
import warnings
from collections.abc import Callable
from typing import TypeVar

import admin_sample

from admin_ui.settings import AdminSettings
from config.load import parse_config

with warnings.catch_warnings():
    warnings.simplefilter("ignore")  # starlette's TestClient warns about httpx on some versions
    from fastapi.testclient import TestClient

CLOCK = admin_sample.NOW + 2.0
MakeClient = Callable[..., TestClient]
T = TypeVar("T")

__all__ = ["CLOCK", "MakeClient", "TestClient", "poll_until", "sample_settings"]


def sample_settings(**overrides: object) -> AdminSettings:
    """Settings from the sample's config, with the clock stopped just after the newest sample."""
    config = parse_config(tomllib.loads(admin_sample.config_toml("sqlite://")))
    fields: dict[str, object] = {"clock": lambda: CLOCK, **overrides}
    return dataclasses.replace(AdminSettings.from_config(config), **fields)  # type: ignore[arg-type]


def poll_until(probe: Callable[[], T | None], *, deadline_s: float, what: str,
               interval_s: float = 0.05) -> T:
    """probe() until it returns something truthy; AssertionError naming `what` at the deadline."""
    deadline = time.monotonic() + deadline_s
    while True:
        result = probe()
        if result:
            return result
        if time.monotonic() > deadline:
            raise AssertionError(f"{what}: not within {deadline_s}s")
        time.sleep(interval_s)
