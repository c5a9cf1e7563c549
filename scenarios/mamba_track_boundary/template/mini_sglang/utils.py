"""Small helpers shared by the engine modules."""

from __future__ import annotations

import logging
import sys


def get_logger(name: str) -> logging.Logger:
    logger = logging.getLogger(name)
    if not logging.getLogger().handlers and not logger.handlers:
        handler = logging.StreamHandler(sys.stderr)
        handler.setFormatter(logging.Formatter("[%(asctime)s] %(message)s", "%Y-%m-%d %H:%M:%S"))
        logger.addHandler(handler)
        logger.setLevel(logging.INFO)
        logger.propagate = False
    return logger


def as_list(value, n: int, name: str) -> list:
    """A per-request parameter given once for the batch, or once per request."""
    if isinstance(value, list):
        if len(value) != n:
            raise ValueError(f"{name} has {len(value)} entries for {n} requests")
        return value
    return [value] * n
