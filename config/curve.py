"""CURVE key files for the master link and the pulsar: this process's keys, the servers' key, the admitted clients.

Two ways to deploy (docs/SECURITY.md):
- one cluster key: the same `curve_secret_file` on the manager, the pulsar and every
  host; the servers admit exactly that key;
- per-host keys: the servers keep their own secret, each host its own
  (`curve_secret_file`) plus the servers' public key (`curve_server_key_file`), and the
  servers admit the public keys in `curve_authorized_keys_dir`. Removing a host's
  `.key` file shuts that host out without touching the others. A key speaks only for
  the host it is named after (`alpha.key` for host alpha): the manager drops a report
  naming another host.

A key file is either a bare z85 key (40 characters, what `--new-curve-secret` writes) or
a ZeroMQ certificate (`public-key = "..."` / `secret-key = "..."`, what `--new-host-key`
and zmq.auth.create_certificates write).
"""
from __future__ import annotations

import datetime
import functools
import logging
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

import zmq
import zmq.auth

from config.errors import ConfigError
from config.secret_files import read_private_text

if TYPE_CHECKING:
    from config.models import ClusterConfig

log = logging.getLogger(__name__)

Z85_KEY_CHARS = 40
CURVE_DOMAIN = "slotmap"
_CERTIFICATE = """#   ****  Generated on {when} by slotmap  ****
#   ZeroMQ CURVE {kind} Certificate{warning}

metadata
    host = "{name}"
curve
    public-key = "{public}"
{secret}"""


@dataclass(frozen=True, slots=True)
class CurveKeys:
    """A key pair: the server's own, or a client's (one shared cluster key, or a host's)."""

    public: bytes
    secret: bytes = field(repr=False)  # a repr may reach a log line

    @classmethod
    def from_file(cls, path: str | Path) -> CurveKeys:
        try:
            text = read_private_text(path, "curve_secret_file", encoding="ascii")
        except ValueError as exc:
            raise ConfigError(str(exc)) from None
        if "secret-key" in text or "public-key" in text:
            public, secret = _load_certificate(path)
            if secret is None:
                raise ConfigError(
                    f"{path}: a public key certificate; curve_secret_file needs the secret one (*.key_secret)"
                )
            return cls(public=public, secret=secret)
        secret = _z85_key(text, path)
        try:
            return cls(public=zmq.curve_public(secret), secret=secret)
        except (zmq.ZMQError, ValueError) as exc:
            raise ConfigError(f"{path}: not a z85 CURVE secret: {exc}") from exc


@dataclass(frozen=True, slots=True)
class ClientCurve:
    """What a client (a master, a slot's permit client) presents, and whom it expects."""

    keys: CurveKeys
    server_public: bytes

    def apply(self, socket: zmq.Socket[bytes]) -> None:
        socket.curve_secretkey = self.keys.secret
        socket.curve_publickey = self.keys.public
        socket.curve_serverkey = self.server_public


def public_key_from_file(path: str | Path) -> bytes:
    text = _read_key_file(path, "curve_server_key_file")
    if "public-key" in text:
        return _load_certificate(path)[0]
    return _z85_key(text, path)


def server_keys(config: ClusterConfig) -> CurveKeys | None:
    """The manager's and pulsar's keys; None when CURVE is off (no curve_secret_file)."""
    return CurveKeys.from_file(config.curve_secret_file) if config.curve_secret_file else None


def client_curve(config: ClusterConfig) -> ClientCurve | None:
    """A client's CURVE settings; the server key defaults to the shared cluster key's public half.

    Read once per pair of files and kept: a master asks at every fork, and a key file
    moved away while it runs must not make a fork fail (new keys need a restart)."""
    if not config.curve_secret_file:
        return None
    return _client_curve(config.curve_secret_file, config.curve_server_key_file)


@functools.lru_cache(maxsize=8)
def _client_curve(secret_file: str, server_key_file: str | None) -> ClientCurve:
    keys = CurveKeys.from_file(secret_file)
    server = public_key_from_file(server_key_file) if server_key_file else keys.public
    return ClientCurve(keys=keys, server_public=server)


class AuthorizedKeys:
    """ZAP credentials check: the servers' own public key, plus every `*.key` certificate
    of `directory`, which is read again when its modification time changes (a host
    added or removed takes effect at its next connection, without a restart)."""

    def __init__(self, own_public: bytes, directory: str | Path | None = None) -> None:
        self.own_public = own_public
        self.directory = Path(directory) if directory is not None else None
        self._mtime_ns: int | None = None
        # Public key (z85) -> the host it is named after (its file name without .key).
        self._keys: dict[bytes, str] = {}
        self._refused_logged: set[bytes] = set()
        if self.directory is not None:
            if not self.directory.is_dir():
                raise ConfigError(f"curve_authorized_keys_dir {self.directory}: not a directory")
            self._reload()

    def owner(self, key: bytes) -> str | None:
        """The host a per-host key speaks for; None for the servers' own (cluster) key."""
        return None if key == self.own_public else self._keys.get(key)

    def callback(self, domain: str, key: bytes) -> bool:
        if key == self.own_public:
            return True
        self._reload()
        if key in self._keys:
            return True
        # Once per key: a peer that retries must not flood the log.
        if key not in self._refused_logged and len(self._refused_logged) < 1000:
            self._refused_logged.add(key)
            log.warning("refused a CURVE client with an unknown public key %s", key.decode(errors="replace"))
        return False

    def _reload(self) -> None:
        if self.directory is None:
            return
        try:
            mtime_ns = self.directory.stat().st_mtime_ns
        except OSError as exc:
            log.error("cannot read curve_authorized_keys_dir %s (%s); keeping the %d keys read before",
                      self.directory, exc.strerror, len(self._keys))
            return
        if mtime_ns == self._mtime_ns:
            return
        keys: dict[bytes, str] = {}
        for path in sorted(self.directory.glob("*.key")):
            try:
                keys[_load_certificate(path)[0]] = path.stem
            except ConfigError as exc:
                log.error("skipping an authorized key: %s", exc)
        self._keys, self._mtime_ns = keys, mtime_ns
        log.info("CURVE: %d authorized client keys in %s", len(keys), self.directory)


def write_secret(path: str | Path) -> bytes:
    """A fresh bare z85 secret in a new file (mode 0600); ConfigError if the file exists."""
    secret = zmq.curve_keypair()[1]
    _create(Path(path), secret.decode() + "\n", mode=0o600)
    return secret


def write_host_key(directory: str | Path, name: str) -> tuple[Path, Path]:
    """`<name>.key` (public, for curve_authorized_keys_dir / curve_server_key_file) and
    `<name>.key_secret` (0600, for that machine's curve_secret_file), as ZeroMQ certificates."""
    if not name or "/" in name or name.startswith("."):
        raise ConfigError(f"key name {name!r}: expected a plain file name such as the host's name")
    public, secret = zmq.curve_keypair()
    folder = Path(directory)
    when = datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds")
    public_path, secret_path = folder / f"{name}.key", folder / f"{name}.key_secret"
    common = dict(when=when, name=name, public=public.decode())
    _create(secret_path, _CERTIFICATE.format(
        kind="**Secret**", warning="\n#   DO NOT PROVIDE THIS FILE TO OTHER USERS nor change its permissions.",
        secret=f'    secret-key = "{secret.decode()}"\n', **common), mode=0o600)
    _create(public_path, _CERTIFICATE.format(kind="**Public**", warning="", secret="", **common), mode=0o644)
    return public_path, secret_path


def _create(path: Path, text: str, *, mode: int) -> None:
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, mode)
    except FileExistsError:
        raise ConfigError(
            f"{path} already exists: a key is never overwritten (remove the file first to replace it)"
        ) from None
    except OSError as exc:
        raise ConfigError(f"cannot create {path}: {exc.strerror}") from exc
    with os.fdopen(fd, "w") as file:
        file.write(text)


def _read_key_file(path: str | Path, what: str) -> str:
    try:
        return Path(path).read_text(encoding="ascii")
    except FileNotFoundError:
        raise ConfigError(f"{what} {path}: no such file") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise ConfigError(f"{what} {path}: cannot read: {exc}") from exc


def _z85_key(text: str, path: str | Path) -> bytes:
    key = text.strip().encode()
    if len(key) != Z85_KEY_CHARS:
        raise ConfigError(f"{path}: expected a {Z85_KEY_CHARS}-character z85 key or a ZeroMQ certificate")
    return key


def _load_certificate(path: str | Path) -> tuple[bytes, bytes | None]:
    try:
        public, secret = zmq.auth.load_certificate(str(path))
    except (OSError, ValueError) as exc:
        raise ConfigError(f"{path}: not a ZeroMQ certificate: {exc}") from exc
    if public is None or len(public) != Z85_KEY_CHARS:
        raise ConfigError(f"{path}: no public-key in the certificate")
    return public, secret
