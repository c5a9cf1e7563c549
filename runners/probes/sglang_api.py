"""SGLang's native /generate API as the KL probe calls it, every response checked field by field: a missing or
ill-shaped field is a ProtocolError (an infrastructure failure, never a verdict)."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

from runners.probes.server import HttpError, InfraError, ServerProcess, http_json, http_request


class ProtocolError(InfraError):
    """A response lacks a field or has one of the wrong shape."""


class Client:
    def __init__(
        self, base_url: str, timeout: float, server: ServerProcess | None = None, say: Callable[[str], None] = print
    ) -> None:
        self.base_url = base_url.rstrip("/")
        self.timeout = timeout
        self.server = server
        self.say = say

    def _call(self, phase: str, fn: Callable[[], Any]) -> Any:
        self.check_alive(phase)
        try:
            return fn()
        except HttpError as exc:
            if self.server is not None and exc.status is None:  # a dropped connection is often the server dying
                deadline = time.monotonic() + 2.0
                while self.server.describe_exit() is None and time.monotonic() < deadline:
                    time.sleep(0.05)
            self.check_alive(phase)
            raise InfraError(f"{phase}: {exc}") from None

    def check_alive(self, phase: str) -> None:
        gone = self.server.describe_exit() if self.server is not None else None
        if gone:
            raise InfraError(f"server {gone} during {phase}")

    def flush(self, phase: str) -> None:
        self._call(phase, lambda: http_request("POST", self.base_url + "/flush_cache?timeout=30", timeout=self.timeout))

    def generate(
        self,
        phase: str,
        input_ids: list[list[int]],
        max_new_tokens: int,
        return_logprob: bool,
        logprob_start_len: int = -1,
    ) -> list[dict]:
        body: dict[str, Any] = {
            "input_ids": input_ids,
            "sampling_params": {"temperature": 0.0, "max_new_tokens": max_new_tokens, "ignore_eos": True},
        }
        if return_logprob:
            body.update(
                {"return_logprob": True, "return_text_in_logprobs": False, "logprob_start_len": logprob_start_len}
            )
        response = self._call(phase, lambda: http_json("POST", self.base_url + "/generate", body, timeout=self.timeout))
        return check_results(response, len(input_ids), phase)


def check_results(response: Any, n: int, phase: str) -> list[dict]:
    if isinstance(response, dict) and "error" in response:
        error = response["error"]
        message = error.get("message") if isinstance(error, dict) else error
        raise InfraError(f"{phase}: the server answered with an error: {message}")
    if not isinstance(response, list):
        raise ProtocolError(
            f"{phase}: expected a list of {n} results for a batch of {n}, got {type(response).__name__}"
        )
    if len(response) != n:
        raise ProtocolError(f"{phase}: expected {n} results, got {len(response)}")
    for i, result in enumerate(response):
        reason = field_of(result, "meta_info.finish_reason", phase, i, (dict, type(None)))
        if isinstance(reason, dict) and reason.get("type") == "abort":
            raise InfraError(f"{phase}: request {i} was aborted by the server: {reason.get('message', reason)}")
    return response


_MISSING = object()


def field_of(result: Any, name: str, phase: str, i: int, kind: type | tuple[type, ...]) -> Any:
    """result[a][b]... for name 'a.b', or a ProtocolError naming the field."""
    value = result
    for part in name.split("."):
        value = value.get(part, _MISSING) if isinstance(value, dict) else _MISSING
        if value is _MISSING:
            raise ProtocolError(f"{phase}: response {i} has no field '{name}'")
    if (
        isinstance(value, bool)
        and bool not in (kind if isinstance(kind, tuple) else (kind,))
        or not isinstance(value, kind)
    ):
        raise ProtocolError(f"{phase}: response {i} field '{name}' is {type(value).__name__}, not {_kind_name(kind)}")
    return value


def _kind_name(kind) -> str:
    kinds = kind if isinstance(kind, tuple) else (kind,)
    return " or ".join("null" if k is type(None) else k.__name__ for k in kinds)


def token_ids_of(result: Any, phase: str, i: int) -> list[int]:
    ids = field_of(result, "output_ids", phase, i, list)
    if any(isinstance(t, bool) or not isinstance(t, int) for t in ids):
        raise ProtocolError(f"{phase}: response {i} field 'output_ids' holds something other than token ids")
    return ids


def logprob_values(result: Any, name: str, phase: str, i: int) -> list[float | None]:
    """The logprob column of meta_info.<name>: entries [logprob, token_id, text-or-None]."""
    entries = field_of(result, f"meta_info.{name}", phase, i, list)
    values = []
    for j, entry in enumerate(entries):
        if not isinstance(entry, (list, tuple)) or len(entry) < 2:
            raise ProtocolError(f"{phase}: response {i} field 'meta_info.{name}'[{j}] is not [logprob, token_id, ...]")
        value = entry[0]
        if value is not None and (isinstance(value, bool) or not isinstance(value, (int, float))):
            raise ProtocolError(f"{phase}: response {i} field 'meta_info.{name}'[{j}] has a non-numeric logprob")
        values.append(None if value is None else float(value))
    return values
