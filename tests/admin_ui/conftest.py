"""Fixtures: a real SQLite file filled through manager.storage.db's models, the dashboard app over it, and
the browser tests' headless Chromium."""
from __future__ import annotations

import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING

import admin_sample
import pytest
from admin_proc import reap_stopped
from admin_testing import MakeClient, TestClient, sample_settings
from browser_chromium import launched_browser
from sqlalchemy.engine import Engine

from admin_ui.app import create_app
from manager.storage.db import make_engine
from manager.storage.store import Store

if TYPE_CHECKING:
    from playwright.sync_api import Browser


@pytest.fixture(scope="session")
def _sample_file(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("admin_sample") / "slotmap.db"
    admin_sample.make_database(path)
    return path


@pytest.fixture
def database_url(_sample_file: Path, tmp_path: Path) -> str:
    """A private copy of the sample database (tests may write to it)."""
    path = tmp_path / "slotmap.db"
    shutil.copyfile(_sample_file, path)
    return f"sqlite:///{path}"


@pytest.fixture(scope="module")
def module_database_url(_sample_file: Path, tmp_path_factory: pytest.TempPathFactory) -> str:
    """A copy of the sample database for a whole module (its tests share one dashboard)."""
    path = tmp_path_factory.mktemp("module_db") / "slotmap.db"
    shutil.copyfile(_sample_file, path)
    return f"sqlite:///{path}"


@pytest.fixture
def engine(database_url: str) -> Iterator[Engine]:
    engine = make_engine(database_url)
    yield engine
    engine.dispose()


@pytest.fixture
def make_client(engine: Engine) -> Iterator[MakeClient]:
    """Factory: make_client(token=..., protect_reads=...) -> a TestClient over the sample database."""
    clients: list[TestClient] = []

    def make(**overrides: object) -> TestClient:
        client = TestClient(create_app(Store(engine), sample_settings(**overrides)))
        clients.append(client)
        return client

    yield make
    for client in clients:
        client.close()


@pytest.fixture
def client(make_client: MakeClient) -> TestClient:
    return make_client()


@pytest.fixture(scope="module")
def browser() -> Iterator[Browser]:
    """A headless Chromium for one test module (closed after it)."""
    with launched_browser() as launched:
        yield launched


@pytest.fixture(scope="session", autouse=True)
def _reap_dashboards() -> Iterator[None]:
    """No dashboard told to stop_later outlives the session."""
    yield
    reap_stopped()
