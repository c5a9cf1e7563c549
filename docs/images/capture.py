"""Make the README's pictures from a real demo: `python docs/images/capture.py` (needs /usr/bin/chromium).

Runs `revert-bisect demo --keep`, then takes the bisection page of the bot's dashboard and the revert
PR (its body rendered as GitHub renders Markdown) in headless Chromium, and stops the demo.
"""

from __future__ import annotations

import re
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import httpx
from markdown_it import MarkdownIt
from playwright.sync_api import sync_playwright

HERE = Path(__file__).resolve().parent
PAGE = """<!doctype html><meta charset="utf-8"><style>
body {{ font: 14px/1.5 -apple-system, "Segoe UI", "Noto Sans", Helvetica, Arial, sans-serif; \
color: #1f2328; margin: 0; }}
main {{ max-width: 900px; margin: 24px auto; }} h1 {{ font-weight: 400; font-size: 26px; margin: 0 0 4px; }}
.meta {{ color: #59636e; margin-bottom: 16px; }} \
.state {{ background: #1f883d; color: #fff; border-radius: 2em; padding: 4px 12px; }}
.box {{ border: 1px solid #d1d9e0; border-radius: 6px; }} \
.head {{ background: #f6f8fa; padding: 8px 16px; border-bottom: 1px solid #d1d9e0; }}
.body {{ padding: 16px; }} table {{ border-collapse: collapse; }} \
td, th {{ border: 1px solid #d1d9e0; padding: 4px 10px; }}
code {{ background: #eff1f3; padding: 2px 4px; border-radius: 4px; font-size: 85%; }} \
pre {{ background: #f6f8fa; padding: 12px; overflow: auto; }}
</style><main><h1>{title} <span style="color:#59636e">#{number}</span></h1>
<div class="meta"><span class="state">Open</span> {user} wants to merge into <code>{base}</code> \
from <code>{head}</code>
&middot; labels: {labels} &middot; review requested from {reviewers}</div>
<div class="box"><div class="head"><b>{user}</b> commented</div><div class="body">{body}</div></div></main>"""


def main() -> int:
    workdir = Path(tempfile.mkdtemp(prefix="revert-bisect-capture-")) / "demo"
    cli = Path(sys.executable).with_name("revert-bisect")
    said = workdir.with_name("demo.err")
    with open(said, "w") as err:
        demo = subprocess.Popen(
            [str(cli), "demo", "--keep", "--dir", str(workdir)], stdout=subprocess.PIPE, stderr=err, text=True
        )
    try:
        pr_url = demo.stdout.readline().strip()
        stderr = _read_until(said, "Both servers stay up")
        if not pr_url:
            print(stderr[-3000:], file=sys.stderr)
            return 1
        bot = re.search(r"revert-bisect bot (http://127\.0\.0\.1:\d+)", stderr).group(1)
        api, repo, number = re.match(r"(http://127\.0\.0\.1:\d+)/([^/]+/[^/]+)/pull/(\d+)", pr_url).groups()
        token = "sandbox-token-revert-bisect-bot"  # the sandbox's tokens are sandbox-token-<login>
        pr = httpx.get(f"{api}/repos/{repo}/pulls/{number}", headers={"Authorization": f"token {token}"}).json()
        html = PAGE.format(
            title=pr["title"],
            number=pr["number"],
            user=pr["user"]["login"],
            base=pr["base"]["ref"],
            head=pr["head"]["ref"],
            labels=", ".join(label["name"] for label in pr["labels"]) or "none",
            reviewers=", ".join(r["login"] for r in pr["requested_reviewers"]) or "no one",
            body=MarkdownIt("commonmark").enable("table").render(pr["body"]),
        )
        with sync_playwright() as p:
            browser = p.chromium.launch(executable_path="/usr/bin/chromium", args=["--no-sandbox", "--disable-gpu"])
            page = browser.new_page(viewport={"width": 1280, "height": 900})
            page.goto(f"{bot}/bisections/1")
            page.screenshot(path=str(HERE / "dashboard.png"))
            page.set_content(html)
            page.screenshot(path=str(HERE / "revert-pr.png"), full_page=True)
            browser.close()
        print(f"wrote {HERE / 'dashboard.png'} and {HERE / 'revert-pr.png'} from {pr_url}")
        return 0
    finally:
        demo.send_signal(signal.SIGINT)
        try:
            demo.wait(timeout=60)
        except subprocess.TimeoutExpired:
            demo.kill()


def _read_until(path: Path, marker: str, timeout: float = 60) -> str:
    deadline = time.monotonic() + timeout
    while marker not in path.read_text() and time.monotonic() < deadline:
        time.sleep(0.2)
    return path.read_text()


if __name__ == "__main__":
    sys.exit(main())
