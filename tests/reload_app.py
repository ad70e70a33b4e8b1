"""A handler module written to disk by the code reload tests (tests/master/test_code_reload.py,
tests/manager/test_reload_managed.py) and rewritten between SIGHUPs: queue `roll`, jobs that
log their start and end with the code's VERSION, the slot's pid, the job's key and attempt."""
from __future__ import annotations

from pathlib import Path

MODULE = "sm_reload_app"
HANDLER = '''
import json, os, time
from slot.handler import Handler, handler

VERSION = {version!r}
{extra}

@handler("roll")
class Roll(Handler):
    batch_size = 5

    def setup(self):
        if {setup_fails!r}:
            raise RuntimeError("setup refused by the new code")

    def handle_job(self, job):
        request = job.json()
        with open(request["log"], "a") as file:
            file.write(f"start {{VERSION}} {{os.getpid()}} {{job.key}} {{job.attempt}}\\n")
        time.sleep(request.get("sleep_s", 0.5))
        with open(request["log"], "a") as file:
            file.write(f"end {{VERSION}} {{os.getpid()}} {{job.key}} {{job.attempt}}\\n")
'''


def write_app(folder: Path, version: str, *, setup_fails: bool = False, extra: str = "") -> None:
    folder.mkdir(exist_ok=True)
    (folder / f"{MODULE}.py").write_text(
        HANDLER.format(version=version, setup_fails=setup_fails, extra=extra))


def lines(log: Path, what: str) -> list[list[str]]:
    """The log's lines of one kind ("start", "end"), split: kind, version, pid, key, attempt."""
    if not log.exists():
        return []
    return [line.split() for line in log.read_text().splitlines() if line.startswith(what + " ")]
