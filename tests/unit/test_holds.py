"""What the kill switch held back (bot.service.holds, bot.adapters.store.holds): one comment per held-back thing on the
kill-switch issue, one record for the dashboard, however often a retried job says it again."""

from bot.adapters.policy_files import parse
from bot.adapters.store.db import connect
from bot.adapters.store.holds import Holds
from bot.service.holds import held_revert, held_start, hold

POLICY = parse(
    """
repository: o/r
watch: [{workflow: nightly}]
tests: [{id: kl, match: kl, probe: {name: command, command: [./t.sh]}}]
revert: {kill_switch_label: stop-bot}
""",
    "p.yaml",
)


class Forge:
    """comment_once as GitHub's adapter does it: one comment per (issue, key), edited in place."""

    site = "https://github.example/o/r"
    slug = "o/r"

    def __init__(self):
        self.comments: dict[tuple[int, str], str] = {}

    def comment_once(self, number: int, key: str, body: str):
        new = (number, key) not in self.comments
        self.comments[(number, key)] = body
        return len(self.comments), new


def test_a_held_red_run_is_said_once_on_the_kill_switch_issue_with_its_link(tmp_path):
    forge, holds = Forge(), Holds(connect(f"sqlite:///{tmp_path / 'h.db'}"))
    origin = dict(repo="o/r", test="kl", good="a" * 40, bad="b" * 40, run=4321)
    for _ in range(3):  # the nightly job retried
        hold(forge, holds, POLICY, 9, held_start(forge, origin, "o/r@kl:aaa..bbb", 9))
    [((issue, _), body)] = forge.comments.items()
    assert issue == 9
    assert body == (
        "This issue carries `stop-bot` (`revert.kill_switch_label`), so revert-bisect held back the bisection "
        f"of red run 4321 (`kl` failed over `{'a' * 12}..{'b' * 12}`), not started. "
        "See https://github.example/o/r/actions/runs/4321. "
        "Close the issue to let revert-bisect act again."
    )
    [row] = holds.recent()
    assert (row.repository, row.guard, row.issue, row.link) == (
        "o/r",
        "kill_switch",
        9,
        "https://github.example/o/r/actions/runs/4321",
    )


def test_each_held_thing_is_its_own_comment_and_record(tmp_path):
    forge, holds = Forge(), Holds(connect(f"sqlite:///{tmp_path / 'h.db'}"))
    asked = dict(repo="o/r", test="kl", thread=12, requested_by="maint")
    hold(forge, holds, POLICY, 9, held_start(forge, asked, "o/r#comment:1", 9))
    hold(forge, holds, POLICY, 9, held_revert(forge, "o/r", 3, "c" * 40, 77, 9))
    hold(forge, holds, POLICY, 9, held_revert(forge, "o/r", 3, "c" * 40, 77, 9))
    bodies = list(forge.comments.values())
    assert len(bodies) == 2
    assert (
        "held back the bisection of `kl` asked for by `@maint` in #12, not started. See https://github.example/o/r/issues/12."
        in bodies[0]
    )
    assert (
        f"held back the revert of `{'c' * 12}` (#77), found and proven by bisection #3, not opened. See https://github.example/o/r/pull/77."
        in bodies[1]
    )
    assert [(r.culprit, r.what.endswith("not opened")) for r in holds.recent()] == [("c" * 40, True), (None, False)]
