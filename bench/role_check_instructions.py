"""The role check's cost (issue 29): instructions per operation of a connection signed in
with the worker role against an unlimited one (no token), same checkout, under callgrind.

The unlimited path is what hot_path_instructions.py compares against an older commit; a
role-limited connection asks `Grant.refusal` once per command besides (the plain PUT's
fast path does not: a worker may PUT to every queue).

    .venv/bin/python bench/role_check_instructions.py     # about 4 minutes
"""
from __future__ import annotations

import argparse
import os
import sys
import tempfile
from pathlib import Path

from hot_path_instructions import LABELS, LOADS, WORKLOAD, code_at, per_op

GRANT = '''    conn.connection_made(transport)
    if ROLE == "worker":
        from queue_server.server import auth
        from queue_server.server.grants import ROLE_RIGHTS, Grant, Role
        auth.take_grant(conn, Grant(Role.WORKER, ROLE_RIGHTS[Role.WORKER]))
'''


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--small", type=int, default=2000)
    parser.add_argument("--large", type=int, default=8000)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="slotmap-role-ir-") as root:
        code = code_at(None, root)
        scripts = {}
        for role in ("none", "worker"):
            scripts[role] = os.path.join(root, f"workload_{role}.py")
            text = WORKLOAD.replace("    conn.connection_made(transport)\n", GRANT)
            Path(scripts[role]).write_text(f"ROLE = {role!r}\n" + text)
        cost = {(role, load): per_op(code, script, load, args.small, args.large)
                for role, script in scripts.items() for load in LOADS}
    for role in scripts:
        cost[role, "getdone"] -= cost[role, "pipe"]
    print("instructions per operation (callgrind): unlimited connection vs worker role")
    print("| load | unlimited | worker | worker/unlimited |\n| --- | ---: | ---: | ---: |")
    for load in LOADS:
        plain, worker = cost["none", load], cost["worker", load]
        print(f"| {LABELS[load]} | {plain:,.0f} | {worker:,.0f} | {worker / plain:.3f} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
