"""Process helpers the manager and master tests share: `slotmap` children, polling, TOML.

Imported by name (`import procs`): tests/conftest.py puts this folder on sys.path.
Every child runs in its own session, so `kill_session` takes its slots down with it.
"""
from __future__ import annotations

import contextlib
import importlib.util
import json
import os
import select
import signal
import subprocess
import sys
import uuid
from collections.abc import Callable, Iterator, Mapping, Sequence
from pathlib import Path
from types import ModuleType
from typing import Any, TypeVar
from urllib.parse import quote

from polling import DEADLINE_S
from polling import poll_until as poll_until

from deploy.replicas import toml_value as toml_value
from master.report import HostReport

T = TypeVar("T")
REPO_ROOT = Path(__file__).resolve().parents[1]
EXIT_DEADLINE_S = 10.0
_PROBE = """
import importlib, json, sys
importlib.import_module(sys.argv[1])
print(json.dumps([name for name in sys.argv[2:] if name in sys.modules]))
"""


def modules_loaded_by(module: str, candidates: Sequence[str]) -> list[str]:
    """Which of `candidates` `import module` loads, in a fresh interpreter."""
    result = subprocess.run([sys.executable, "-c", _PROBE, module, *candidates], cwd=REPO_ROOT,
                            capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, result.stderr
    loaded: list[str] = json.loads(result.stdout)
    return loaded


# One interpreter for many modules: it loads what the modules load from outside this
# repository (SQLAlchemy, pydantic, ...) once, checks that this loaded no code of the
# repository and none of the candidates, then forks a child per module. Each child imports its
# module on a sys.modules holding no repository code, as a fresh interpreter would, at the cost
# of a fork instead of a start and the third-party imports (77 modules: 45 s -> a few).
_FORK_PROBE = """
import importlib, json, os, sys
repo, candidates, modules = json.loads(sys.stdin.read())

def loaded(names):
    return [name for name in names if name in sys.modules]

def in_child(work):
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:
        os.close(read)
        try:
            out = {"value": work()}
        except BaseException as exc:
            out = {"error": f"{type(exc).__name__}: {exc}"}
        with os.fdopen(write, "w") as pipe:
            pipe.write(json.dumps(out))
        os._exit(0)
    os.close(write)
    with os.fdopen(read) as pipe:
        text = pipe.read()
    os.waitpid(pid, 0)
    return json.loads(text)

def of_repo(module):
    paths = [getattr(module, "__file__", None) or "", *(getattr(module, "__path__", None) or [])]
    return any(os.path.realpath(path).startswith(repo + os.sep)
               and os.sep + ".venv" + os.sep not in path for path in paths if path)

def outside():
    for name in modules:
        importlib.import_module(name)
    return sorted(name for name, module in list(sys.modules.items())
                  if not of_repo(module) and not any(name == c or name.startswith(c + ".") for c in candidates))

found = in_child(outside)
for name in found.get("value", []):
    try:
        importlib.import_module(name)
    except Exception:
        pass  # only a head start: the child imports it again if its module needs it
early = sorted(name for name, module in list(sys.modules.items()) if of_repo(module)) + loaded(candidates)
def probe(name):
    importlib.import_module(name)
    return loaded(candidates)
print(json.dumps({"early": early, "modules": {} if early else
                  {name: in_child(lambda name=name: probe(name)) for name in modules}}))
"""


def modules_loaded_by_each(modules: Sequence[str], candidates: Sequence[str]) -> dict[str, list[str]]:
    """For each of `modules`: which of `candidates` `import module` loads on a sys.modules holding
    no code of this repository (a forked child each: see _FORK_PROBE)."""
    result = subprocess.run([sys.executable, "-c", _FORK_PROBE], cwd=REPO_ROOT, capture_output=True,
                            text=True, timeout=600,
                            input=json.dumps([os.path.realpath(REPO_ROOT), list(candidates), list(modules)]))
    assert result.returncode == 0, result.stderr
    answers: dict[str, Any] = json.loads(result.stdout)
    assert not answers["early"], f"the shared imports loaded {answers['early']}"
    failed = {name: answer["error"] for name, answer in answers["modules"].items() if "error" in answer}
    assert not failed, f"modules that do not import: {failed}"
    return {name: answer["value"] for name, answer in answers["modules"].items()}


def import_by_path(name: str, path: Path) -> ModuleType:
    """The module in `path` under `name`, once: a helper other test folders import by that name."""
    loaded = sys.modules.get(name)
    if loaded is not None:
        return loaded
    spec = importlib.util.spec_from_file_location(name, path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


server_proc = import_by_path("server_proc", REPO_ROOT / "tests" / "queue_server" / "server_proc.py")
slotmap_command = server_proc.slotmap_command
free_port = server_proc.free_port


@contextlib.contextmanager
def pg_schema(dsn: str, prefix: str) -> Iterator[str]:
    """`dsn` in a PostgreSQL schema of its own (the manager's tables, lock and authority row
    are per schema, so tests running at once touch no other's), dropped at the end."""
    from sqlalchemy import create_engine, text

    schema = f"{prefix}_{uuid.uuid4().hex[:12]}"
    admin = create_engine(dsn, isolation_level="AUTOCOMMIT")
    with admin.connect() as connection:
        connection.execute(text(f'CREATE SCHEMA "{schema}"'))
    try:
        separator = "&" if "?" in dsn else "?"
        yield f"{dsn}{separator}options={quote(f'-csearch_path={schema}')}"
    finally:
        with admin.connect() as connection:
            connection.execute(text(f'DROP SCHEMA "{schema}" CASCADE'))
        admin.dispose()


def to_toml(sections: Mapping[str, Mapping[str, Any]]) -> str:
    lines: list[str] = []
    for name, values in sections.items():
        lines.append(f"[{name}]")
        lines += [f"{key} = {toml_value(value)}" for key, value in values.items()]
        lines.append("")
    return "\n".join(lines)


def spawn_slotmap(args: Sequence[str], *, log_path: Path, cwd: Path,
                  pythonpath: Sequence[Path] = (), unbuffered: bool = True) -> subprocess.Popen[bytes]:
    """`slotmap <args>` in a session of its own, output appended to `log_path`.

    `pythonpath` comes after the repository (handler modules for a master); `unbuffered`
    False: Python's own buffering of output to a file, as under systemd.
    """
    path = os.pathsep.join(str(p) for p in (REPO_ROOT, *pythonpath))
    env = dict(os.environ, PYTHONPATH=path)
    env.pop("PYTHONUNBUFFERED", None)
    if unbuffered:
        env["PYTHONUNBUFFERED"] = "1"
    with open(log_path, "ab") as log:
        return subprocess.Popen(
            [*server_proc.slotmap_command(), *args],
            stdout=log, stderr=subprocess.STDOUT, cwd=cwd, env=env, start_new_session=True,
        )


def kill_session(process: subprocess.Popen[bytes]) -> None:
    """SIGKILL the process and everything in its session (a master's slots), then reap it."""
    with contextlib.suppress(ProcessLookupError):
        os.killpg(process.pid, signal.SIGKILL)
    process.wait(timeout=EXIT_DEADLINE_S)


def wait_listening(process: subprocess.Popen[bytes], port: int, log_path: Path, *, what: str) -> bool:
    """True once `process` itself listens on `port`, a port from free_port(); False when it
    exited because the port was in use (another process took it first: the caller may pick
    another); AssertionError with its log when it exits otherwise or does not listen within
    DEADLINE_S. Only a process's own socket counts: its peers would talk to whoever holds
    the port (a server of another suite on the machine)."""
    poll_until(lambda: process.poll() is not None or server_proc.listens_on(process, port),
               timeout_s=DEADLINE_S, what=lambda: f"{what} listening on port {port}\n{log_lines(log_path, 30)}")
    if process.poll() is None:
        return True
    last_lines = log_lines(log_path, 5)
    assert "address already in use" in last_lines.lower(), (
        f"{what} exited with {process.returncode} before listening on port {port}\n{log_lines(log_path, 30)}")
    return False


def read_report(path: Path) -> HostReport | None:
    """The master's last report file; None before it wrote one."""
    try:
        return HostReport.decode(path.read_bytes())
    except FileNotFoundError:
        return None


def log_lines(path: Path, lines: int) -> str:
    """The last `lines` lines of a child's log."""
    return "\n".join(path.read_text(errors="replace").splitlines()[-lines:])


# A `slotmap` command run for a test: CliRun(*args, cwd=folder, env=more variables).
CliRun = Callable[..., "subprocess.CompletedProcess[str]"]


class CliForks:
    """`slotmap` commands forked from one process that imported the CLI once
    (tests/deploy/cli_fork_server.py): for tests of what a command answers, where starting
    a Python per command would cost more than the test. Each command is still a process of
    its own, with its own exit code, output, folder and environment."""

    def __init__(self, folder: Path, modules: Sequence[str] = ()) -> None:
        self.folder = folder
        self.count = 0
        env = dict(os.environ, PYTHONPATH=str(REPO_ROOT), PYTHONUNBUFFERED="1")
        self.process = subprocess.Popen(
            [sys.executable, str(REPO_ROOT / "tests" / "deploy" / "cli_fork_server.py"), *modules],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, cwd=REPO_ROOT, env=env, text=True,
            start_new_session=True)
        self._reply(DEADLINE_S * 2)

    def _reply(self, timeout_s: float) -> dict[str, Any]:
        assert self.process.stdout is not None
        ready, _, _ = select.select([self.process.stdout], [], [], timeout_s)
        line = self.process.stdout.readline() if ready else ""
        if not line:
            self.close()
            raise AssertionError(f"the CLI fork server gave no reply within {timeout_s} s "
                                 f"(exit {self.process.returncode})")
        reply: dict[str, Any] = json.loads(line)
        return reply

    def run(self, *args: str, cwd: Path, env: Mapping[str, str] | None = None,
            timeout_s: float = DEADLINE_S, modules: Sequence[str] = ()) -> subprocess.CompletedProcess[str]:
        """`slotmap ARGS` in `cwd`, the tests' environment with `env` over it; `modules`, what
        the command imports, are imported by the server first (once), not by each command."""
        assert self.process.stdin is not None
        self.count += 1
        out, err = self.folder / f"cli{self.count}.out", self.folder / f"cli{self.count}.err"
        request = {"args": list(args), "cwd": str(cwd), "stdout": str(out), "stderr": str(err),
                   "env": {**os.environ, "PYTHONPATH": str(REPO_ROOT), **(env or {})},
                   "modules": list(modules)}
        self.process.stdin.write(json.dumps(request) + "\n")
        self.process.stdin.flush()
        returncode = self._reply(timeout_s)["returncode"]
        return subprocess.CompletedProcess(["slotmap", *args], returncode,
                                           out.read_text(errors="replace"), err.read_text(errors="replace"))

    def close(self) -> None:
        kill_session(self.process)
        for stream in (self.process.stdin, self.process.stdout):
            if stream is not None:
                stream.close()
