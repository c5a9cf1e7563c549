"""The revert PR's body never exceeds GitHub's 65,536 characters: the replay log, then the bisect table, shortened,
with where the whole of them is."""

from bot.domain.bisect.verdict import RawResult, Verdict
from bot.domain.outcome import AB as Proof
from bot.service.pr_body import AB, Culprit, FailingTest, RevertEvidence, Row, render

LIMIT = 65_536  # written out, not imported from the code under test


def evidence(log_lines: int, rows: int) -> RevertEvidence:
    culprit = "c" * 40
    table = [Row(f"{i:040x}", f"Change {i} " + "x" * 80, "good", "0.0003", 1000 + i) for i in range(rows)]
    table.append(Row(culprit, "The culprit", "bad x2", "0.0065, 0.0065", 31369))
    return RevertEvidence(
        repo_slug="o/r",
        branch="main",
        culprit=Culprit(culprit, "p" * 40, "The culprit", 31369, "ada"),
        test=FailingTest("kl", "avg_kl_div", 0.002),
        rows=table,
        ab=AB(
            Proof(passed=True, head_verdicts=["bad", "bad"], revert_verdicts=["good", "good"]),
            "h" * 40,
            "r" * 40,
            head_runs=((Verdict.BAD, RawResult(1, 0.0065)),) * 2,
            revert_runs=((Verdict.GOOD, RawResult(0, 0.0003)),) * 2,
        ),
        files=["a.py"],
        diffstat=" a.py | 2 +-",
        replay_log="\n".join(f"git bisect good {i:040x}  # a long comment " + "y" * 40 for i in range(log_lines)),
        bisection_id=7,
        confidence=0.999,
        runs=12,
        commits=rows + 1,
    )


def test_a_short_body_is_sent_whole():
    pr = render(evidence(10, 5), "revert-bisect/31369-ccccccc")
    assert len(pr.body) < LIMIT and "cut to fit" not in pr.body and pr.body.count("git bisect good") == 10


def test_a_long_replay_log_is_cut_with_where_the_whole_log_is():
    pr = render(evidence(3000, 5), "b")
    assert len(pr.body) <= LIMIT and 0 < pr.body.count("git bisect good") < 3000
    assert "cut to fit GitHub's 65,536-character limit" in pr.body and "/bisections/7" in pr.body
    assert pr.body.rstrip().endswith("</details>")  # still well-formed Markdown


def test_a_huge_bisect_table_keeps_the_culprits_row():
    pr = render(evidence(10, 2000), "b")
    assert len(pr.body) <= LIMIT and "`cccccccccccc` **culprit**" in pr.body


def test_fit_leaves_a_body_that_fits_and_cuts_one_that_does_not_closing_what_it_opened():
    from bot.domain.body_limit import fit

    assert fit("x" * LIMIT) == "x" * LIMIT
    cut = fit("<details>\n```\n" + "y" * LIMIT, "bisection #7")
    assert len(cut) <= LIMIT and cut.endswith("(cut to fit GitHub's limit of 65,536 characters: bisection #7)\n")
    assert cut.count("```") == 2 and "</details>" in cut
