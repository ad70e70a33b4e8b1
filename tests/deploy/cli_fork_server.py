"""Runs `slotmap` commands for tests/procs.py's CliForks: imports the CLI and the command
modules named on its command line once, then forks one child per request, so each command
pays a fork instead of a Python start and its imports.

Each request is a JSON line on stdin, {"args", "cwd", "env", "stdout", "stderr", "modules"}:
the server imports `modules` (what the command will import) before it forks, once; the child
runs `slotmap ARGS` in `cwd` with exactly `env`, its output in the two files, and exits as
the console script would (a traceback and exit 1 on an uncaught exception). The reply is a
JSON line on stdout, {"returncode"}.
"""
from __future__ import annotations

import importlib
import json
import os
import sys
import traceback

from deploy import cli


def exit_code(exc: SystemExit) -> int:
    """What the interpreter makes of SystemExit: None is 0, a text is printed and is 1."""
    if exc.code is None:
        return 0
    if isinstance(exc.code, int):
        return exc.code
    print(exc.code, file=sys.stderr)
    return 1


def run_child(request: dict[str, object]) -> int:
    os.chdir(str(request["cwd"]))
    os.environ.clear()
    os.environ.update(request["env"])  # type: ignore[arg-type]
    for fd, path in ((1, request["stdout"]), (2, request["stderr"])):
        target = os.open(str(path), os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        os.dup2(target, fd)
        os.close(target)
    null = os.open(os.devnull, os.O_RDONLY)
    os.dup2(null, 0)
    sys.argv = ["slotmap", *request["args"]]  # type: ignore[misc]
    try:
        return cli.main()
    except SystemExit as exc:
        return exit_code(exc)
    except BaseException:
        traceback.print_exc()
        return 1


def serve() -> None:
    for name in sys.argv[1:]:
        importlib.import_module(name)
    print(json.dumps({"ready": True}), flush=True)
    for line in sys.stdin:
        request = json.loads(line)
        for name in request.get("modules", ()):
            importlib.import_module(name)
        sys.stdout.flush()
        sys.stderr.flush()
        pid = os.fork()
        if pid == 0:
            code = 1
            try:
                code = run_child(request)
            finally:
                sys.stdout.flush()
                sys.stderr.flush()
                os._exit(code)
        _, status = os.waitpid(pid, 0)
        print(json.dumps({"returncode": os.waitstatus_to_exitcode(status)}), flush=True)


if __name__ == "__main__":
    serve()
