"""GitHub's error bodies: `ApiError` raised by a route becomes `{"message", "documentation_url", "errors"}`."""

from __future__ import annotations

from fastapi.responses import JSONResponse

from ..render import DOCS


class ApiError(Exception):
    def __init__(
        self, status: int, message: str, errors: list[dict] | None = None, doc: str = DOCS, headers: dict | None = None
    ) -> None:
        super().__init__(message)
        self.status, self.message, self.errors, self.doc, self.headers = status, message, errors, doc, headers


def not_found() -> ApiError:
    return ApiError(404, "Not Found", doc=f"{DOCS}")


def invalid(errors: list[dict], message: str = "Validation Failed") -> ApiError:
    return ApiError(422, message, errors)


def respond(status: int, body, headers: dict | None = None) -> JSONResponse:
    return JSONResponse(body, status_code=status, headers=headers)
