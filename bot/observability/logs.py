"""Structured logs: one JSON object per line, with the delivery, job, bisection and step in context.

    with bind(bisection_id=row.id):          # every log line inside carries "bisection_id"
        log.info("dispatching %d steps", n)

Context lives in contextvars: a request's task and a worker thread each see their own. A new thread
starts with an empty context; hand it the current one with `carry(fn)`.

Secrets (the webhook secret, the GitHub token, the App's private key, tokens seen on API requests)
are registered with `register_secret` and replaced by *** in every line our handler writes.
"""

from __future__ import annotations

import json
import logging
import os
import sys
import threading
from collections import OrderedDict
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar, copy_context
from datetime import UTC, datetime
from typing import Any, TypeVar

CONTEXT_FIELDS = ("delivery_id", "job_id", "bisection_id", "step_id")
_VARS: dict[str, ContextVar] = {name: ContextVar(f"revert_bisect_{name}", default=None) for name in CONTEXT_FIELDS}

T = TypeVar("T")


@contextmanager
def bind(**fields: Any) -> Iterator[None]:
    """Put `delivery_id`, `job_id`, `bisection_id` and/or `step_id` in the context of every log line
    written inside the block (None leaves a field unset); the previous values come back on exit."""
    unknown = set(fields) - set(CONTEXT_FIELDS)
    if unknown:
        raise TypeError(f"bind() takes {', '.join(CONTEXT_FIELDS)}; not {', '.join(sorted(unknown))}")
    tokens = [(_VARS[name], _VARS[name].set(value)) for name, value in fields.items()]
    try:
        yield
    finally:
        for var, token in reversed(tokens):
            var.reset(token)


def current() -> dict[str, Any]:
    """The context fields set here, e.g. {"delivery_id": "...", "job_id": 3}."""
    return {name: value for name, var in _VARS.items() if (value := var.get()) is not None}


def carry(fn: Callable[..., T]) -> Callable[..., T]:
    """`fn`, run in a copy of the caller's context (for threading.Thread(target=carry(fn)))."""
    ctx = copy_context()
    return lambda *args, **kwargs: ctx.run(fn, *args, **kwargs)


# -- secrets --

_MIN_SECRET = 4  # shorter values would mangle every line and protect nothing
_lock = threading.Lock()
_secrets: set[str] = set()
_transient: OrderedDict[str, None] = OrderedDict()  # tokens seen at run time (installation tokens, JWTs), newest last
_TRANSIENT_MAX = 256
_ordered: tuple[str, ...] = ()


def register_secret(value: str | None, *, transient: bool = False) -> None:
    """Redact `value` from every log line from now on; a multi-line value (a PEM key) line by line too.

    `transient`: a short-lived token; only the newest few hundred are kept."""
    global _ordered
    if not value or len(value.strip()) < _MIN_SECRET:
        return
    parts = {value, value.strip()}
    if "\n" in value.strip():
        parts |= {
            line.strip()
            for line in value.splitlines()
            if len(line.strip()) >= 16 and not line.strip().startswith("-----")
        }
    with _lock:
        if parts <= _secrets or transient and parts <= _transient.keys():
            for part in parts & _transient.keys():
                _transient.move_to_end(part)
            return
        if transient:
            for part in parts:
                _transient[part] = None
                _transient.move_to_end(part)
            while len(_transient) > _TRANSIENT_MAX:
                _transient.popitem(last=False)
        else:
            _secrets.update(parts)
        _ordered = tuple(sorted(_secrets | set(_transient), key=len, reverse=True))


def redact(text: str) -> str:
    for secret in _ordered:
        if secret in text:
            text = text.replace(secret, "***")
    return text


def _redact_value(value: Any) -> Any:
    if isinstance(value, str):
        return redact(value)
    if isinstance(value, dict):
        return {k: _redact_value(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_redact_value(v) for v in value]
    return value


class RedactFilter(logging.Filter):
    """Replaces secrets in the record itself (message and traceback), so later handlers get it clean too."""

    def filter(self, record: logging.LogRecord) -> bool:
        if not _ordered:
            return True
        try:
            message = record.getMessage()
        except Exception:  # a malformed call: leave it to the formatter's own error report
            return True
        clean = redact(message)
        if clean != message:
            record.msg, record.args = clean, None
        if record.exc_info and not record.exc_text:
            record.exc_text = logging.Formatter().formatException(record.exc_info)
        if record.exc_text:
            record.exc_text = redact(record.exc_text)
        if record.stack_info:
            record.stack_info = redact(record.stack_info)
        return True


_REDACT = RedactFilter()


def install_redaction() -> None:
    """Redact each record as it is made, so every handler (not only ours) gets it clean (idempotent).

    Fields passed with `extra=` are set after that: only our formatters redact those."""
    previous = logging.getLogRecordFactory()
    if getattr(previous, "_revert_bisect", False):
        return

    def factory(*args, **kwargs) -> logging.LogRecord:
        record = previous(*args, **kwargs)
        _REDACT.filter(record)
        return record

    factory._revert_bisect = True  # type: ignore[attr-defined]
    logging.setLogRecordFactory(factory)


class ContextFilter(logging.Filter):
    """Copies the bound context fields onto the record (an explicit `extra=` wins)."""

    def filter(self, record: logging.LogRecord) -> bool:
        for name, var in _VARS.items():
            value = var.get()
            if value is not None and getattr(record, name, None) is None:
                setattr(record, name, value)
        return True


# -- formatters --

_STANDARD = set(vars(logging.LogRecord("", 0, "", 0, "", None, None))) | {
    "message",
    "asctime",
    "color_message",
    "taskName",
}


def _jsonable(value: Any) -> Any:
    try:
        json.dumps(value)
        return value
    except (TypeError, ValueError):
        return repr(value)


class JsonFormatter(logging.Formatter):
    """{"ts", "level", "logger", "message", context fields, extra fields, "exc"} on one line."""

    def format(self, record: logging.LogRecord) -> str:
        doc: dict[str, Any] = {
            "ts": datetime.fromtimestamp(record.created, UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z"),
            "level": record.levelname,
            "logger": record.name,
            "message": record.getMessage(),
        }
        for name in CONTEXT_FIELDS:
            value = getattr(record, name, None)
            if value is None:
                value = _VARS[name].get()
            if value is not None:
                doc[name] = value
        for key, value in record.__dict__.items():
            if key not in _STANDARD and key not in doc and not key.startswith("_"):
                doc[key] = _jsonable(value)
        if record.exc_info and not record.exc_text:
            record.exc_text = self.formatException(record.exc_info)
        if record.exc_text:
            doc["exc"] = record.exc_text
        if record.stack_info:
            doc["stack"] = record.stack_info
        return json.dumps(_redact_value(doc), ensure_ascii=False, default=repr)


class TextFormatter(logging.Formatter):
    """`2024-01-01 12:00:00,000 INFO revert_bisect.worker [delivery_id=... job_id=3] message`."""

    def __init__(self) -> None:
        super().__init__("%(asctime)s %(levelname)s %(name)s%(context)s %(message)s")

    def format(self, record: logging.LogRecord) -> str:
        fields = {name: getattr(record, name, None) or _VARS[name].get() for name in CONTEXT_FIELDS}
        shown = " ".join(f"{k}={v}" for k, v in fields.items() if v is not None)
        record.context = f" [{shown}]" if shown else ""
        try:
            return redact(super().format(record))
        finally:
            del record.context


class _StderrHandler(logging.StreamHandler):
    """Writes to whatever sys.stderr is at the time (it may be replaced, e.g. by a test runner)."""

    def __init__(self) -> None:
        logging.Handler.__init__(self)

    @property
    def stream(self):  # type: ignore[override]
        return sys.stderr

    @stream.setter
    def stream(self, _value) -> None:
        pass


FORMATS = ("json", "text")


def setup_logging(fmt: str = "json", level: int | str = logging.INFO, stream=None) -> logging.Handler:
    """The root logger writes through one handler of ours (replacing an earlier one): `fmt` lines on
    `stream` (default: stderr), context fields added, secrets redacted. Returns the handler."""
    if fmt not in FORMATS:
        raise ValueError(f"log format {fmt!r}: use one of {', '.join(FORMATS)}")
    root = logging.getLogger()
    for old in [h for h in root.handlers if getattr(h, "_revert_bisect", False)]:
        root.removeHandler(old)
    handler: logging.Handler = logging.StreamHandler(stream) if stream is not None else _StderrHandler()
    handler._revert_bisect = True  # type: ignore[attr-defined]
    handler.addFilter(ContextFilter())
    handler.addFilter(RedactFilter())
    handler.setFormatter(JsonFormatter() if fmt == "json" else TextFormatter())
    root.addHandler(handler)
    root.setLevel(level)
    install_redaction()
    return handler


def ensure_logging() -> None:
    """setup_logging($REVERT_BISECT_LOG_FORMAT, default json) unless logging is configured already
    (then only the redaction is added)."""
    install_redaction()
    if not logging.getLogger().handlers:
        setup_logging(os.environ.get("REVERT_BISECT_LOG_FORMAT", "json"))
