"""JSON bodies in GitHub's shapes; every URL from the request's own base URL (`base`): core.py (users,
repositories, commits, refs), issues.py (issues, pull requests, comments, reactions; references)."""

from .core import DOCS, node_id
from .issues import REF_PATTERN, Renderer, references

__all__ = ["DOCS", "REF_PATTERN", "Renderer", "node_id", "references"]
