"""The dashboard's section of the cluster config ([admin]): where it listens, its tokens, who it trusts."""
from __future__ import annotations

import ipaddress

from pydantic import BaseModel, ConfigDict, Field, field_validator

from config.endpoints import check_host, check_token, parse_host_port


class AdminConfig(BaseModel):
    # strict, as every config table (config/models.py _Strict): no value is coerced to another type.
    model_config = ConfigDict(extra="forbid", strict=True)

    listen: str = Field(default="127.0.0.1:8400", description="HOST:PORT of the dashboard and its JSON API.")
    token: str | None = Field(
        default=None, repr=False,
        description="The dashboard's admin token (actions, and reads with protect_reads). Prefer "
                    "token_file or the SLOTMAP_ADMIN_TOKEN environment variable to keep it out of the config.",
    )
    token_file: str | None = Field(
        default=None,
        description="A file holding the admin token (first line); used when token is not set.",
    )
    # With a token: reading pages, the API and /metrics needs it too.
    protect_reads: bool = Field(default=False, description="With a token: reading pages, the API and /metrics needs it too (otherwise reads are open, actions need the token).")
    viewer_token_file: str | None = Field(default=None, description="A file holding the viewer token (first line, chmod 600): signs in to read, never to act; job data and errors only with viewer_job_data.")
    operator_token_file: str | None = Field(default=None, description="A file holding the operator token (first line, chmod 600): retry, delete, cancel, schedules, limiter resume, and job data.")
    viewer_job_data: bool = Field(default=False, description="The viewer token may also read jobs' data and errors (they hold whatever producers and handlers put there).")
    refresh_s: float = Field(default=5.0, ge=0, description="How often dashboard pages refresh themselves (0: never).")
    allowed_hosts: list[str] = Field(
        default_factory=list, max_length=100,
        description="Host names (or addresses) the dashboard answers to, as browsers send them in the "
                    "Host header (the port does not count); any other gets 400, which stops DNS "
                    "rebinding. Always allowed: the listen address, localhost, 127.0.0.1 and ::1. "
                    "Add the names and addresses users, scrapers or a reverse proxy reach it by (with a "
                    "wildcard listen such as 0.0.0.0, every one of them); \"*\" turns the check off.",
    )
    trusted_proxies: list[str] = Field(
        default_factory=list, max_length=100,
        description="Addresses or networks (10.0.0.5, 10.0.0.0/24) of reverse proxies whose "
                    "X-Forwarded-For and X-Forwarded-Proto are believed; empty: none, so the wrong-token "
                    "throttle counts each connection's own address and a client cannot pick another.",
    )

    @field_validator("listen")
    @classmethod
    def _listen_is_host_port(cls, value: str) -> str:
        parse_host_port(value)
        return value

    @field_validator("allowed_hosts")
    @classmethod
    def _hosts_are_names(cls, value: list[str]) -> list[str]:
        return [host if host == "*" else check_host(host.strip("[]")).rstrip(".").lower() for host in value]

    @field_validator("trusted_proxies")
    @classmethod
    def _proxies_are_networks(cls, value: list[str]) -> list[str]:
        for entry in value:
            try:
                ipaddress.ip_network(entry, strict=False)
            except ValueError:
                raise ValueError(f"{entry!r} is not an IP address or network (10.0.0.5, 10.0.0.0/24)") from None
        return value

    @field_validator("token")
    @classmethod
    def _token_is_sendable(cls, value: str | None) -> str | None:
        return None if value is None else check_token(value, what="admin.token")
