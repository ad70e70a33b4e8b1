"""The patterns of names that travel between processes (queues, hosts): one place, no imports,
so the lightest frame module can check them (config/bounded.py) as the config does."""
from __future__ import annotations

QUEUE_NAME_PATTERN = r"^[A-Za-z0-9_]{1,128}$"
# A host's name in reports and the slot map: a DNS name (dots, dashes) or a short name;
# no spaces, quotes or markup, since it travels to logs, SQL and the dashboard.
HOST_NAME_PATTERN = r"^[A-Za-z0-9][A-Za-z0-9._-]{0,252}$"
