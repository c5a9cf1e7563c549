"""The `/revert-bisect` grammar, its generated help, and the webhook signature."""

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from bot.domain.commands import Cancel, Help, Invalid, Start, Status, help_text, parse
from bot.ingress.webhooks.signature import sign, verify


@pytest.mark.parametrize(
    "body, command",
    [
        ("/revert-bisect kl-decode", Start("kl-decode")),
        (
            "/revert-bisect kl good=ABCDEF1 bad=0123456789abcdef0123456789abcdef01234567 "
            "follow-up=#123 dry-run\nthanks!",
            Start("kl", good="abcdef1", bad="0123456789abcdef0123456789abcdef01234567", followup=123, dry_run=True),
        ),
        ("  /revert-bisect status  ", Status()),
        ("/revert-bisect cancel", Cancel()),
        ("/revert-bisect help", Help()),
        ("please /revert-bisect kl", None),  # only the first line, only at its start
        ("\n/revert-bisect kl", None),
        ("/revert-bisectkl", None),
        ("LGTM", None),
        (None, None),
    ],
)
def test_parse(body, command):
    assert parse(body) == command


@pytest.mark.parametrize(
    "body, reason",
    [
        ("/revert-bisect", "names no test"),
        ("/revert-bisect kl good=zzzzzzz", "7 to 40 hex digits"),
        ("/revert-bisect kl good=abc", "7 to 40 hex digits"),
        ("/revert-bisect kl follow-up=12x", "issue or PR number"),
        ("/revert-bisect kl --force", "unknown option"),
        ("/revert-bisect kl;rm -rf /", "a test id is"),
        ("/revert-bisect status now", "takes no arguments"),
        ("/revert-bisect " + "x" * 2000, "longer than"),
    ],
)
def test_invalid_commands_say_why_and_show_help(body, reason):
    result = parse(body)
    assert isinstance(result, Invalid) and reason in result.reason
    assert "/revert-bisect <test>" in result.reply  # the usage comes with the refusal


@pytest.mark.parametrize("body", ["/revert-bisect kl x`@alice`y", "/revert-bisect status ``@bob``"])
def test_a_reply_quoting_the_comment_pings_no_one(body):
    """The refusal quotes the commenter's words in a code span that their backticks cannot close."""
    from markdown_it import MarkdownIt

    result = parse(body)
    assert isinstance(result, Invalid)
    inline = next(t for t in MarkdownIt("commonmark").parse(result.reply) if t.type == "inline")
    assert not any("@" in c.content for c in inline.children if c.type == "text")
    assert any(c.type == "code_inline" and c.content in body for c in inline.children)


def test_help_is_generated_from_the_definitions():
    text = help_text()
    for usage in ("/revert-bisect <test>", "/revert-bisect status", "/revert-bisect cancel", "/revert-bisect help"):
        assert usage in text
    assert "write, maintain or admin" in text and "anyone" in text


@given(st.text(max_size=300))
@settings(max_examples=500, deadline=None)
def test_no_input_makes_the_parser_raise(text):
    for body in (text, "/revert-bisect " + text, "/revert-bisect kl " + text):
        result = parse(body)
        assert result is None or isinstance(result, (Start, Status, Cancel, Help, Invalid))
        if isinstance(result, Start):
            assert all(ch.isalnum() or ch in "_.:/-" for ch in result.test)


def test_githubs_published_signature_vector():
    header = "sha256=757107ea0eb2509fc211221cce984b8a37570b6d7586c22c46f4379c8b043e17"
    assert sign(b"It's a Secret to Everybody", b"Hello, World!") == header
    assert verify(b"It's a Secret to Everybody", b"Hello, World!", header)


@pytest.mark.parametrize(
    "header",
    [None, "", "sha256=", "sha1=757107ea", "sha256=757107ea0eb2509fc211221cce984b8a37570b6d7586c22c46f4379c8b043e18"],
)
def test_bad_signatures_are_refused(header):
    assert not verify(b"It's a Secret to Everybody", b"Hello, World!", header)
    assert not verify(b"", b"Hello, World!", sign(b"", b"Hello, World!"))  # no secret configured: refuse everything
