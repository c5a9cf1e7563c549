"""bot.domain.markdown: text from elsewhere reads back as itself through a CommonMark + GFM-tables parser,
pings no one, and cannot break a table row, a code span or a fenced block."""

from __future__ import annotations

import re

import pytest
from markdown_it import MarkdownIt

from bot.domain.markdown import code, fence, text

PARSER = MarkdownIt("commonmark").enable(["table", "strikethrough"])
AT_LOGIN = re.compile(r"(?<!\w)@[\w-]")  # broader than GitHub's rule on purpose: anything that might ping

TITLES = [
    "[Deps] Require torch>=2.5",
    "Fix the scheduler's <b>bold</b> & <script>alert(1)</script> path",
    "Split a|b on | and ||",
    "Use `torch.compile` with ``double`` ticks and a trailing `",
    "*Speed* up __init__ ~~twice~~ with a_b_c and **x**",
    "Thanks @alice, @bob-smith and @org/team (cc @carol) but not me@example.com",
    "Escaped \\* and \\| and &gt; and &#39; already",
    "[link](https://example.com) ![img](x.png) <https://auto.link>",
    "multi\nline\r\ntitle",
    "see https://github.com/o/r/actions/runs/77?job_id=1&x=a_b (cancelled) and www.example.com/@alice",
]


def plain(inline) -> str:
    """What a reader sees of one inline token: its text and code spans, no markup."""
    out = []
    for child in inline.children or []:
        assert child.type not in ("html_inline", "link_open", "image"), (child.type, inline.content)
        if child.type in ("text", "code_inline"):
            out.append(child.content)
        elif child.type == "softbreak":
            out.append("\n")
    return "".join(out)


def mentions_outside_code(inline) -> list[str]:
    return [m for child in inline.children or [] if child.type == "text" for m in AT_LOGIN.findall(child.content)]


@pytest.mark.parametrize("title", TITLES)
def test_text_reads_back_as_itself_and_pings_no_one(title):
    tokens = PARSER.parse(f'Reverts it ("{text(title)}").')
    inlines = [t for t in tokens if t.type == "inline"]
    assert len(inlines) == 1 and [t.type for t in tokens] == ["paragraph_open", "inline", "paragraph_close"]
    assert plain(inlines[0]) == f'Reverts it ("{" ".join(title.split())}").'
    assert not any(c.type in ("em_open", "strong_open", "s_open") for c in inlines[0].children)
    assert mentions_outside_code(inlines[0]) == []
    if "&" not in title:
        assert "&" not in text(title)  # no entity (&gt;, &#39;) is made


@pytest.mark.parametrize("title", TITLES)
def test_text_is_one_table_cell(title):
    tokens = PARSER.parse(f"| a | b | c |\n|---|---|---|\n| x | #12 {text(title)} | {code(title, in_table=True)} |\n")
    row = [t for t in tokens if t.type == "inline"][3:]
    assert len(row) == 3  # the row keeps its column count
    flat = " ".join(title.split())
    assert plain(row[1]) == f"#12 {flat}"
    assert plain(row[2]) == re.sub(r"\r?\n", " ", title)
    assert mentions_outside_code(row[1]) == []


@pytest.mark.parametrize("value", ["plain", "a`b", "``x``", "`lead", "trail`", " both ", "a | b", ""])
def test_code_span_holds_its_content_exactly(value):
    tokens = PARSER.parse(f"x {code(value)} y")
    spans = [c for c in tokens[1].children if c.type == "code_inline"]
    assert len(spans) == 1 and spans[0].content == (value or " ")


def test_code_span_fence_follows_the_longest_backtick_run():
    assert code("x") == "`x`"
    assert code("a`b") == "``a`b``"
    assert code("a``b`c") == "```a``b`c```"
    assert code("`x") == "`` `x ``"
    assert code("a|b", in_table=True) == r"`a\|b`"


def test_mentions_are_code_spans_and_nothing_else_is_escaped_needlessly():
    assert text("Fix for @alice") == "Fix for `@alice`"
    assert text("mail me@example.com") == "mail me@example.com"  # an address is not a mention
    assert text("torch>=2.5 (scheduler's)") == r"torch\>=2.5 (scheduler's)"
    assert "&" not in text("a > b").replace("\\", "")
    assert (
        text("log at https://x.io/a_b*c (run 7)") == "log at https://x.io/a_b\\*c (run 7)"
    )  # linked as GitHub links it


def test_fence_is_longer_than_any_backtick_run_inside():
    body = "line one\n```\nnot the end\n````\nstill code"
    block = fence(body)
    assert block.startswith("`````\n") and block.endswith("\n`````")
    tokens = PARSER.parse(block)
    assert [t.type for t in tokens] == ["fence"] and tokens[0].content == body + "\n"
    assert fence("plain") == "```\nplain\n```"
