"""Who may read jobs: their data and errors hold whatever producers and handlers put there
(names, addresses, a secret in a traceback), more than the counts every other page shows."""
from __future__ import annotations

from typing import Annotated

from fastapi import Depends

from admin_ui.auth import Access
from admin_ui.deps import get_access
from admin_ui.errors import NotAuthenticated


def jobs_reader(access: Annotated[Access, Depends(get_access)]) -> Access:
    """With a token configured, listing or showing jobs needs the operator's or the admin's
    (the viewer's with viewer_job_data) even when reads are open (no token: a local,
    read-only dashboard shows them like everything else)."""
    if not access.can_read_jobs:
        raise NotAuthenticated("job data and errors need the operator or admin token"
                               + (" (signed in as viewer; [admin] viewer_job_data allows it)"
                                  if access.role == "viewer" else ""), why="job-data")
    return access


JobsReaderDep = Annotated[Access, Depends(jobs_reader)]
