"""The base of every JSON frame between processes (beacons, host reports, manager link, pulsar).

It lives here, the lowest layer, because each frame belongs to the layer that sends it (slot,
master, pulsar) and they share nothing else below this. A frame is compact JSON validated by
pydantic: one `encode()`, and one `decode()` that raises its family's named error.
"""
from __future__ import annotations

from typing import ClassVar, Self

from pydantic import BaseModel, ConfigDict, ValidationError


class Frame(BaseModel):
    # No float field of any frame takes NaN or an infinity (JSON's `NaN`, `Infinity`): one
    # such number from a peer used to fail every plan (issue 16). Each field adds its range.
    model_config = ConfigDict(extra="forbid", frozen=True, allow_inf_nan=False)
    # What decode() raises; each family of frames names its own (callers catch only theirs).
    DECODE_ERROR: ClassVar[type[Exception]] = ValueError
    # Fields added after the first release, sent only when they differ from their default,
    # so a peer of the release before (extra fields forbidden) reads every frame it can act on.
    LATER_FIELDS: ClassVar[frozenset[str]] = frozenset()

    def encode(self) -> bytes:
        fields = type(self).model_fields
        unsent = {name for name in self.LATER_FIELDS
                  if getattr(self, name) == fields[name].get_default(call_default_factory=True)}
        return self.model_dump_json(exclude=unsent or None).encode()

    @classmethod
    def decode(cls, frame: bytes) -> Self:
        try:
            return cls.model_validate_json(frame)
        except ValidationError as exc:
            raise cls.DECODE_ERROR(f"bad {cls.__name__} frame ({len(frame)} bytes): {exc}") from exc
