"""The API's 422 for a request that fails validation, also when the input it quotes is not
valid JSON: a body's `1e400` reads as inf and `NaN` as nan, which FastAPI's own answer put
back in its `input` field and then could not encode (a 500 instead of the 422)."""
from __future__ import annotations

import math

from fastapi import Request
from fastapi.encoders import jsonable_encoder
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse


def _finite(value: object) -> object:
    """`value` with every inf or nan float replaced by its text ("inf", "nan")."""
    if isinstance(value, float) and not math.isfinite(value):
        return str(value)
    if isinstance(value, dict):
        return {key: _finite(item) for key, item in value.items()}
    if isinstance(value, list):
        return [_finite(item) for item in value]
    return value


def handle_validation_error(request: Request, exc: Exception) -> JSONResponse:
    """FastAPI's answer (422, `detail`: the errors), its quoted inputs made encodable."""
    assert isinstance(exc, RequestValidationError)
    return JSONResponse({"detail": _finite(jsonable_encoder(exc.errors()))}, status_code=422)
