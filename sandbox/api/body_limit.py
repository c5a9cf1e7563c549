"""GitHub's limit on an issue's, a pull request's or a comment's body: 65,536 characters, else 422.

GitHub answers a longer body with 422 "Validation Failed" and an error whose message is "body is too long (maximum is
65536 characters)" (docs/github-contract.md, "Writes", has the sources). The sandbox refuses it the same way, so a
bot that would send one fails here as it would there."""

from __future__ import annotations

from .errors import ApiError, invalid

MAX_BODY = 65_536


def check_body(text: object, resource: str) -> None:
    """Refuse a body longer than GitHub takes, as GitHub does (`resource`: Issue, PullRequest, IssueComment)."""
    if isinstance(text, str) and len(text) > MAX_BODY:
        raise too_long(resource)


def too_long(resource: str) -> ApiError:
    return invalid(
        [
            {
                "resource": resource,
                "code": "custom",
                "field": "body",
                "message": f"body is too long (maximum is {MAX_BODY} characters)",
            }
        ]
    )
