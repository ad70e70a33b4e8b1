"""Starting, watching and stopping the servers the benchmarks measure.

Every server started here is registered; `stop_all()` (called from the
benchmarks' `finally`, from atexit and on SIGTERM/SIGINT) kills each one by
its own process group and removes the temporary directories made for it.
"""
from __future__ import annotations

import atexit
import contextlib
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
BEANSTALKD_INSTALL_HINT = (
    "beanstalkd not found: install it with `apt-get update && apt-get install -y beanstalkd` "
    "(Debian/Ubuntu; the package is named beanstalkd), or pass --beanstalkd PATH. "
    "The beanstalkd peer is skipped."
)

_servers: list[ManagedServer] = []
server_cpu_seconds = 0.0  # CPU used by the servers we started and stopped (for the load note)
_tmpdirs: list[str] = []
_tmp_root: str | None = None


def set_tmp_root(path: str | None) -> None:
    global _tmp_root
    _tmp_root = path
    if path:
        os.makedirs(path, exist_ok=True)


def make_tmpdir(prefix: str) -> str:
    d = tempfile.mkdtemp(prefix=f"slotmap-bench-{prefix}-", dir=_tmp_root)
    _tmpdirs.append(d)
    return d


def remove_tmpdir(d: str) -> None:
    if d in _tmpdirs:
        _tmpdirs.remove(d)
    shutil.rmtree(d, ignore_errors=True)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def find_beanstalkd(explicit: str | None = None) -> str | None:
    if explicit:
        return explicit if os.access(explicit, os.X_OK) else None
    return shutil.which("beanstalkd") or next(
        (p for p in ("/usr/bin/beanstalkd", "/usr/local/bin/beanstalkd") if os.access(p, os.X_OK)),
        None,
    )


def beanstalkd_version(path: str) -> str:
    try:
        out = subprocess.run([path, "-v"], capture_output=True, text=True, timeout=5, check=False)
        return (out.stdout or out.stderr).strip()
    except (OSError, subprocess.SubprocessError):
        return "beanstalkd (version unknown)"


SLOTMAP_CMD: list[str] | None = None  # overrides the command below (--ours-cmd)
SLOTMAP_CODE: str | None = None  # a frozen copy of the checkout to run our server from
_SNAPSHOT_IGNORE = shutil.ignore_patterns(
    ".git", ".venv", "var", "__pycache__", "*.egg-info", "node_modules", ".mypy_cache",
    ".ruff_cache", ".pytest_cache", ".hypothesis", "tests", "bench", "docs", ".ci")


def freeze_code() -> str:
    """Copies the checkout's Python packages to a temp dir; our server runs from there.

    Others commit to the checkout while a long run goes on: without a frozen
    copy the sections of one run could measure different server code.
    The caller removes the dir with `remove_code_snapshot()`.
    """
    global SLOTMAP_CODE
    dst = tempfile.mkdtemp(prefix="slotmap-bench-code-", dir=_tmp_root)
    shutil.copytree(REPO, os.path.join(dst, "src"), ignore=_SNAPSHOT_IGNORE)
    SLOTMAP_CODE = os.path.join(dst, "src")
    return dst


def remove_code_snapshot() -> None:
    global SLOTMAP_CODE
    if SLOTMAP_CODE:
        shutil.rmtree(os.path.dirname(SLOTMAP_CODE), ignore_errors=True)
        SLOTMAP_CODE = None


def code_state() -> str:
    """`<commit>` plus the server paths with uncommitted changes, if any."""
    def git(*a: str) -> str:
        try:
            return subprocess.run(["git", "-C", str(REPO), *a], capture_output=True, text=True,
                                  timeout=10, check=False).stdout
        except (OSError, subprocess.SubprocessError):
            return ""
    commit = git("rev-parse", "--short", "HEAD").strip() or "?"
    dirty = git("status", "--porcelain", "--", "queue_server", "config", "deploy")
    files = [line[3:] for line in dirty.splitlines() if len(line) > 3]
    if files:
        return f"{commit} + uncommitted changes in {', '.join(files)}"
    return commit


def slotmap_command() -> list[str]:
    if SLOTMAP_CMD:
        return list(SLOTMAP_CMD)
    if SLOTMAP_CODE:
        py = REPO / ".venv" / "bin" / "python"
        return [str(py) if py.exists() else sys.executable, "-m", "deploy.cli"]
    exe = REPO / ".venv" / "bin" / "slotmap"
    if exe.exists():
        return [str(exe)]
    found = shutil.which("slotmap")
    if found:
        return [found]
    return [sys.executable, "-m", "deploy.cli"]


class ServerFailed(RuntimeError):
    pass


class ManagedServer:
    """One server process in its own process group, with a log file."""

    def __init__(self, name: str, cmd: list[str], port: int, workdir: str,
                 cwd: str | None = None, env: dict[str, str] | None = None) -> None:
        self.name = name
        self.cmd = cmd
        self.port = port
        self.host = "127.0.0.1"
        self.workdir = workdir  # removed on stop
        self.log_path = os.path.join(workdir, "server.log")
        self.proc: subprocess.Popen[bytes] | None = None
        self.cwd = cwd
        self.env = env

    @property
    def pid(self) -> int:
        assert self.proc is not None
        return self.proc.pid

    def start(self, timeout: float = 30.0) -> ManagedServer:
        with open(self.log_path, "wb") as log:
            self.proc = subprocess.Popen(
                self.cmd, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                start_new_session=True, cwd=self.cwd, env=self.env,
            )
        _servers.append(self)
        deadline = time.monotonic() + timeout
        while True:
            if self.proc.poll() is not None:
                raise ServerFailed(f"{self.name} exited with {self.proc.returncode} at start:\n"
                                   f"$ {' '.join(self.cmd)}\n{self.log_tail()}")
            try:
                with socket.create_connection((self.host, self.port), timeout=1):
                    return self
            except OSError as exc:
                if time.monotonic() > deadline:
                    self.stop(remove=False)
                    raise ServerFailed(f"{self.name} did not listen on {self.port} within "
                                       f"{timeout}s:\n{self.log_tail()}") from exc
                time.sleep(0.05)

    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def log_tail(self, n: int = 30) -> str:
        try:
            with open(self.log_path, "rb") as f:
                lines = f.read().decode(errors="replace").splitlines()
            return "\n".join(lines[-n:])
        except OSError:
            return "(no log)"

    def stop(self, remove: bool = True, graceful: bool = True) -> None:
        """Stops the process (SIGTERM, then SIGKILL after 10 s); removes its dir.

        The signal goes to the process group made by start_new_session while
        its leader (our child) is still alive and unreaped, so the group id
        cannot belong to anyone else; descendants seen before the signal are
        killed too if they outlive it (psutil checks they are the same
        processes).
        """
        global server_cpu_seconds
        p = self.proc
        if p is not None and p.poll() is None:
            server_cpu_seconds += tree_cpu_seconds(p.pid)
            kids = []
            with contextlib.suppress(Exception):
                import psutil
                kids = psutil.Process(p.pid).children(recursive=True)
            sig_first = signal.SIGTERM if graceful else signal.SIGKILL
            try:
                os.killpg(p.pid, sig_first)
            except (ProcessLookupError, PermissionError):
                p.send_signal(sig_first)
            try:
                p.wait(timeout=10)
            except subprocess.TimeoutExpired:
                try:
                    os.killpg(p.pid, signal.SIGKILL)
                except (ProcessLookupError, PermissionError):
                    p.kill()
                p.wait(timeout=10)
            for k in kids:
                with contextlib.suppress(Exception):
                    if k.is_running():
                        k.kill()
        if self in _servers:
            _servers.remove(self)
        if remove:
            remove_tmpdir(self.workdir)


def start_beanstalkd(path: str, binlog: bool = False, fsync_ms: int | None = None,
                     never_fsync: bool = False, workdir: str | None = None,
                     binlog_dir: str | None = None, name: str = "beanstalkd") -> ManagedServer:
    workdir = workdir or make_tmpdir("beanstalkd")
    port = free_port()
    cmd = [path, "-l", "127.0.0.1", "-p", str(port)]
    if binlog:
        bdir = binlog_dir or os.path.join(workdir, "binlog")
        os.makedirs(bdir, exist_ok=True)
        cmd += ["-b", bdir]
        if never_fsync:
            cmd += ["-F"]
        elif fsync_ms is not None:
            cmd += ["-f", str(fsync_ms)]
    return ManagedServer(name, cmd, port, workdir).start()


def start_slotmap(fsync: str, workdir: str | None = None, data_dir: str | None = None,
                  extra: list[str] | None = None, name: str | None = None,
                  timeout: float = 60.0) -> ManagedServer:
    workdir = workdir or make_tmpdir(f"slotmap-{fsync}")
    ddir = data_dir or os.path.join(workdir, "data")
    os.makedirs(ddir, exist_ok=True)
    port = free_port()
    cmd = slotmap_command() + ["queue-server", "--listen", f"127.0.0.1:{port}",
                               "--data-dir", ddir, "--fsync", fsync] + (extra or [])
    env = None
    cwd = str(REPO)
    if SLOTMAP_CODE and not SLOTMAP_CMD:
        env = dict(os.environ)
        env["PYTHONPATH"] = SLOTMAP_CODE + (os.pathsep + env["PYTHONPATH"]
                                            if env.get("PYTHONPATH") else "")
        cwd = SLOTMAP_CODE
    return ManagedServer(name or f"slotmap(fsync={fsync})", cmd, port, workdir,
                         cwd=cwd, env=env).start(timeout=timeout)


def start_floor() -> ManagedServer:
    """bench/floor_server.py: a uvloop server that answers without doing anything."""
    workdir = make_tmpdir("floor")
    port = free_port()
    py = REPO / ".venv" / "bin" / "python"
    cmd = [str(py) if py.exists() else sys.executable,
           str(Path(__file__).resolve().parent / "floor_server.py"), str(port)]
    return ManagedServer("floor (uvloop, no work)", cmd, port, workdir).start()


def stop_all() -> None:
    # stop() removes the server from _servers: take them off one by one
    while _servers:
        s = _servers.pop()
        try:
            s.stop()
        except Exception as exc:
            print(f"warning: stopping {s.name}: {exc}", file=sys.stderr)
    while _tmpdirs:
        remove_tmpdir(_tmpdirs[-1])


def _on_signal(signum: int, frame: object) -> None:
    raise SystemExit(128 + signum)


def install_cleanup() -> None:
    atexit.register(stop_all)
    atexit.register(remove_code_snapshot)
    signal.signal(signal.SIGTERM, _on_signal)
    signal.signal(signal.SIGINT, _on_signal)


# --------------------------------------------------------------------------
# Memory of a process (and its descendants)
# --------------------------------------------------------------------------

def _read_kb(path: str, key: str) -> int | None:
    try:
        with open(path) as f:
            for line in f:
                if line.startswith(key + ":"):
                    return int(line.split()[1])
    except OSError:
        return None
    return None


def _descendants(pid: int) -> list[int]:
    try:
        import psutil  # a project dependency; optional here
        return [c.pid for c in psutil.Process(pid).children(recursive=True)]
    except Exception:
        return []


def memory_kb(pid: int) -> dict[str, int]:
    """VmRSS (status) and Rss/Pss (smaps_rollup) of the process itself, in KiB.

    Only the server process: a child it forked (a snapshot writer) shares its
    pages copy-on-write and would be counted twice. `children` says how many
    descendants existed at the time.
    """
    out = {"VmRSS": _read_kb(f"/proc/{pid}/status", "VmRSS") or 0,
           "Rss": _read_kb(f"/proc/{pid}/smaps_rollup", "Rss") or 0,
           "Pss": _read_kb(f"/proc/{pid}/smaps_rollup", "Pss") or 0,
           "children": len(_descendants(pid))}
    return out


def fs_type(path: str) -> str:
    """The filesystem type holding path (from /proc/mounts, longest prefix)."""
    path = os.path.realpath(path)
    best = ("", "?")
    try:
        with open("/proc/mounts") as f:
            for line in f:
                parts = line.split()
                mnt, typ = parts[1], parts[2]
                if (path == mnt or path.startswith(mnt.rstrip("/") + "/")) and len(mnt) > len(best[0]):
                    best = (mnt, typ)
    except OSError:
        pass
    return best[1]


def tree_cpu_seconds(pid: int) -> float:
    """user+system CPU seconds of a process and its live descendants."""
    try:
        import psutil
        proc = psutil.Process(pid)
        total = sum(proc.cpu_times()[:2])
        for k in proc.children(recursive=True):
            try:
                total += sum(k.cpu_times()[:2])
            except psutil.Error:
                pass
        return total
    except Exception:
        return 0.0


def machine_busy_seconds() -> float:
    """CPU seconds all cores spent busy since boot (from /proc/stat)."""
    with open("/proc/stat") as f:
        parts = f.readline().split()[1:]
    vals = [int(x) for x in parts]
    idle = vals[3] + (vals[4] if len(vals) > 4 else 0)
    return (sum(vals[:8]) - idle) / os.sysconf("SC_CLK_TCK")
