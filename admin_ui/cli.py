"""`slotmap admin --config FILE`: serve the dashboard, JSON API and /metrics (default http://127.0.0.1:8400)."""
from __future__ import annotations

import argparse
import logging
import signal
from pathlib import Path
from types import FrameType

LOG_FORMAT = "%(asctime)s %(process)d %(name)s %(levelname)s %(message)s"
log = logging.getLogger("slotmap.admin")


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = subparsers.add_parser(
        "admin", help="serve the dashboard: queues, slot map, hosts, events, JSON API, /metrics"
    )
    parser.add_argument("--config", help="cluster config (TOML); embedded defaults when omitted")
    parser.add_argument("--listen", metavar="HOST:PORT", help="default [admin] listen, 127.0.0.1:8400")
    parser.add_argument("--database-url", help="default [manager] database_url; one with a password is "
                        "refused (a command line is visible in ps): give it in the config")
    parser.add_argument(
        "--protect-reads", action="store_true", default=None,
        help="with a token, reading pages, the API and /metrics needs it too (default: anyone may read)",
    )
    parser.add_argument("--refresh-s", type=float, default=None,
                        help="how often open pages fetch fresh numbers (0: never; default [admin] refresh_s, 5)")
    parser.add_argument("--log-level", default="INFO", choices=["DEBUG", "INFO", "WARNING", "ERROR"])
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    # Every `slotmap` command builds the whole parser: FastAPI, uvicorn and SQLAlchemy load
    # only when the dashboard really runs.
    import uvicorn

    from admin_ui.app import create_app
    from admin_ui.auth import admin_token
    from admin_ui.settings import AdminSettings
    from config.endpoints import parse_host_port
    from config.errors import ConfigError
    from config.load import has_password, load_config, without_password
    from config.preflight import check_host_bindable
    from manager.storage.store import Store

    logging.basicConfig(level=args.log_level, format=LOG_FORMAT)
    config = load_config(args.config)
    try:
        host, port = parse_host_port(args.listen or config.admin.listen)
    except ValueError as exc:
        raise ConfigError(f"--listen: {exc}") from exc
    check_host_bindable(host, what=f"listen {host}:{port}")
    if args.database_url and has_password(args.database_url):
        raise ConfigError("--database-url holds a password, which `ps` shows to every user: put the URL "
                          "in [manager] database_url of a config only its owner may read (chmod 600)")
    database_url = args.database_url or config.manager.database_url
    # The environment or a token file beat the config so a token need not sit in a
    # world-readable config (admin_ui/auth.py: admin_token).
    token = admin_token(config)
    settings = AdminSettings.from_config(
        config, token=token,
        protect_reads=config.admin.protect_reads if args.protect_reads is None else args.protect_reads,
        refresh_s=config.admin.refresh_s if args.refresh_s is None else args.refresh_s,
        listen_host=host, config_file=None if args.config is None else Path(args.config).resolve(),
    )
    app = create_app(Store.connect(database_url), settings)
    log.info("dashboard on http://%s:%d/ reading %s (%s)", host, port, without_password(database_url),
             "read-only: no admin token" if token is None else "actions need the admin token")
    log.info("answering to Host %s; X-Forwarded-For believed from %s", ", ".join(sorted(settings.allowed_hosts)),
             ", ".join(config.admin.trusted_proxies) or "nobody (no trusted_proxies)")
    # uvicorn stops gracefully on SIGTERM/SIGINT, then re-raises the signal: these handlers
    # receive it, so a requested stop exits 0 like the other slotmap processes.
    signal.signal(signal.SIGTERM, _on_stop_signal)
    signal.signal(signal.SIGINT, _on_stop_signal)
    # uvicorn believes X-Forwarded-For from 127.0.0.1 unless told otherwise: any local
    # process (or a proxy passing the header through) could then pick its address and
    # get a fresh wrong-token allowance per request. Only [admin] trusted_proxies count.
    proxies = config.admin.trusted_proxies
    uvicorn.run(app, host=host, port=port, log_level=args.log_level.lower(), access_log=False,
                log_config=None, proxy_headers=bool(proxies), forwarded_allow_ips=list(proxies))
    return 0


def _on_stop_signal(signum: int, frame: FrameType | None) -> None:
    log.info("stopped by %s", signal.Signals(signum).name)
