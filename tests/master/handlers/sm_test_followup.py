"""Test handler module for issue 18: a two-step chain (resize, then notify) whose first step fails
once after putting its follow-up job. The child's key comes from the parent's, so the retry puts
no second child."""
from __future__ import annotations

import json

from slot.handler import Handler, SlotJob, handler


@handler("followup_resize")
class Resize(Handler):
    batch_size = 1

    def handle_job(self, job: SlotJob) -> None:
        request = job.json()
        self.put("followup_notify", json.dumps({"image": request["image"], "size": "small"}),
                 key=f"{job.key}:notify")
        if job.attempt == 1:
            raise RuntimeError("the resize failed once after its follow-up was put")
