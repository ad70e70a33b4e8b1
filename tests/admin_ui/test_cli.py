"""`slotmap admin` as a real process: serves the config's database, stops on SIGTERM, refuses bad configs."""
from __future__ import annotations

import subprocess
from pathlib import Path

import admin_sample
from admin_proc import slotmap_command, start_admin


def test_slotmap_admin_serves_the_configs_database_and_stops_on_sigterm(
    database_url: str, tmp_path: Path,
) -> None:
    config = tmp_path / "cluster.toml"
    config.write_text(admin_sample.config_toml(database_url, token="from-file"))
    admin = start_admin(config, tmp_path, env={"SLOTMAP_ADMIN_TOKEN": "from-env"})
    try:
        body = admin.get("/api/queues").json()
        assert {row["queue"] for row in body["queues"]} == {spec.name for spec in admin_sample.QUEUES}
        assert body["unreported"] == [admin_sample.CONFIGURED_ONLY]
        assert "Queues" in admin.get("/queues").text
        assert admin.get("/metrics").text.count("slotmap_queue_slots{") == len(admin_sample.QUEUES)
        # The environment's token wins over the file's.
        assert admin.get("/api/health", headers={"Authorization": "Bearer from-env"}).status_code == 200
        refused = httpx_post(admin.url + "/api/queues/mail_send/pause", "from-file")
        assert refused == 401
        assert httpx_post(admin.url + "/api/queues/mail_send/pause", "from-env") == 200
    finally:
        code = admin.stop()
    assert code == 0, admin.log_text()
    assert "dashboard on http://127.0.0.1" in admin.log_text()


def httpx_post(url: str, token: str) -> int:
    import httpx

    return httpx.post(url, headers={"Authorization": f"Bearer {token}"}, timeout=5.0).status_code


def test_a_bad_config_exits_2_naming_the_key(tmp_path: Path) -> None:
    config = tmp_path / "bad.toml"
    config.write_text('[admin]\nlisten = "nowhere"\n')
    result = subprocess.run([*slotmap_command(), "admin", "--config", str(config)],
                            capture_output=True, text=True, timeout=30)
    assert result.returncode == 2
    assert "admin.listen" in result.stderr
