"""Least privilege (issue 29, issue 25 point 6): every command of PROTOCOL.md under every
role, answered or refused as docs/SECURITY.md's table says. The cases are read from that
table, so the table and the server cannot drift; a command the parser knows but the table
does not list fails the first test."""
from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from queue_server.protocol.commands import _PARSERS

SECURITY_MD = Path(__file__).resolve().parents[2] / "docs" / "SECURITY.md"
PROTOCOL_MD = Path(__file__).resolve().parents[2] / "docs" / "PROTOCOL.md"
ROLES = ("producer", "worker", "operator", "cluster", "admin")
TOKENS = {role: f"{role}_T0ken_{index}xyz" for index, role in enumerate(ROLES)}
ROW = re.compile(r"\| `([^`]+)`(?: \+ `([^`]*)`)? \|((?: (?:yes|no) \|){5})")
ROLE_REFUSAL = re.compile(rb"403 Forbidden: .*(needs |among the )")


def table_rows() -> list[tuple[bytes, bytes | None, dict[str, bool]]]:
    rows = []
    for match in ROW.finditer(SECURITY_MD.read_text()):
        line, data, cells = match.groups()
        verdicts = [cell.strip() == "yes" for cell in cells.strip(" |").split("|")]
        rows.append((line.encode(), None if data is None else data.encode(), dict(zip(ROLES, verdicts, strict=True))))
    return rows


def role_config(tmp: Path, **extra: str) -> str:
    """A [queue_server] with a token file per role (mode 0600: conftest's umask)."""
    lines = ["[queue_server]"]
    for role in ROLES:
        path = tmp / f"{role}.token"
        path.write_text(TOKENS[role] + "\n")
        lines.append(f'{"token_file" if role == "admin" else role + "_token_file"} = "{path}"')
    lines += [f"{key} = {value}" for key, value in extra.items()]
    return "\n".join(lines) + "\n"


def signed_in(server, role: str):  # type: ignore[no-untyped-def]
    client = server.connect()
    client.send(f"AUTH {TOKENS[role]}\r\n".encode())
    client.expect(b"200 OK\r\n")
    return client


def test_the_table_lists_every_command_the_server_parses():
    words = {line.split()[0] for line, _, _ in table_rows()}
    missing = sorted(word.decode() for word in _PARSERS if word not in words)
    assert not missing, f"docs/SECURITY.md's roles table lacks {missing}"
    protocol = PROTOCOL_MD.read_text()
    assert all(re.search(rf"\b{word.decode()}\b", protocol) for word in _PARSERS)


def test_every_command_under_every_role_is_answered_or_refused_as_the_table_says(
        start_module_server, tmp_path_factory):
    server = start_module_server(config=role_config(tmp_path_factory.mktemp("roles")))
    wrong = []
    rows = table_rows()
    assert rows[-1][0] == b"SHUTDOWN", "SHUTDOWN must stay last: the admin's stops the server"
    for line, data, allowed in rows:
        for role in ROLES:
            client = signed_in(server, role)
            request = line.replace(b"<own token>", TOKENS[role].encode())
            client.send(request + b"\r\n" + (b"" if data is None else data + b"\r\n"))
            reply = client.line()
            refused = ROLE_REFUSAL.match(reply) is not None
            if refused == allowed[role]:
                wrong.append(f"{role}: {request.decode()!r} -> {reply!r}")
            client.close()
    assert not wrong, "\n".join(wrong)
    assert server.wait_exit() == 0  # the admin's SHUTDOWN, the last row


@pytest.fixture(scope="module")
def globbed(start_module_server, tmp_path_factory):
    return start_module_server(config=role_config(
        tmp_path_factory.mktemp("globs"), worker_queues='["mail*", "thumbs"]',
        producer_queues='["mail*"]'))


def test_a_role_bound_to_queues_touches_only_those(globbed):
    worker = signed_in(globbed, "worker")
    assert worker.request(b"PUT mail_out 0 1\r\nx") == b"200 OK"  # (the fast path is not taken)
    assert worker.request(b"GET mail_out").startswith(b"200 OK mail_out ")
    worker.exact(1)
    assert worker.request(b"GET thumbs") == b"404 Queue Empty"
    assert worker.request(b"GET secrets") == b"403 Forbidden: queue secrets is not among the worker role's queues"
    assert worker.request(b"GET") == (b"403 Forbidden: GET without queue names: the worker role may "
                                      b"touch only mail*, thumbs")
    assert worker.request(b"GET mail_out|secrets").startswith(b"403 Forbidden: queue secrets")
    producer = signed_in(globbed, "producer")
    assert producer.request(b"PUT thumbs 0 1\r\nx") == b"403 Forbidden: queue thumbs is not among the producer role's queues"
    assert producer.request(b"PUT mail 0 1 NEW WAIT thumbs\r\nx").startswith(b"403 Forbidden: queue thumbs")
    assert producer.request(b"PING") == b"200 PONG"  # the connection stays open


def test_refusals_are_counted_and_logged_once_per_connection_and_reason(globbed):
    producer = signed_in(globbed, "producer")
    for _ in range(3):
        assert producer.request(b"SHUTDOWN") == b"403 Forbidden: SHUTDOWN needs the admin role"
    assert producer.request(b"RETRY mail k1") == b"403 Forbidden: RETRY needs the operator role"
    operator = signed_in(globbed, "operator")
    info = operator.request(b"INFO")
    assert json.loads(operator.exact(int(info.split()[2])))["refused"]["producer"] >= 4
    log = globbed.output_text()
    assert log.count("SHUTDOWN needs the admin role") == 1
    assert log.count("RETRY needs the operator role") == 1
    assert TOKENS["producer"] not in log


def test_one_token_for_two_roles_is_refused_at_start(tmp_path):
    from config.models import QueueServerConfig
    from queue_server.server.cli import role_tokens

    path = tmp_path / "same.token"
    path.write_text("same_token_1\n")
    config = QueueServerConfig(worker_token_file=str(path), producer_token_file=str(path))
    with pytest.raises(ValueError, match="same token"):
        role_tokens(config, None)
