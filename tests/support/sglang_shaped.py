"""A small git repository shaped like SGLang where it matters to a bisect step (read from SGLang's sources: the mirror
of sgl-project/sglang to 2026-08 and the 0.5.20/0.5.23 wheels):

- `python/sglang/srt/server_args.py` parses the server's flags with argparse: an unknown flag exits 2 before the
  server is up. Commit `rename` renames `--mamba-scheduler-strategy` to `--mamba-radix-cache-strategy` (sglang 0.5.20
  dropped the old name) and updates the test file's flags in the same commit.
- `test/registered/models_e2e/test_qwen3_next_models.py`: four unittest classes (page size 1 and 2, each also in an
  AllocFail variant that sets env vars on its server), the KL mixin's prefill and decode cache-hit methods, a GSM8K
  method on the non-AllocFail ones; every class starts its "server" (the commit's own flag parser, in a process of
  its own) in setUpClass; `python3 <file>` from test/, as run_suite runs it. KL methods print `avg_kl_div=<v>` and
  fail with `avg_kl_div=<v> > threshold=0.002 for <model> <test>` unless `<`.
- Commit `culprit` breaks decode cache hits at page size 1 (both classes of that page size read 0.0065); commit
  `gsm8k` (later) breaks GSM8K at page size 2. The decode method runs before the prefill one (unittest sorts names),
  so the file's last `avg_kl_div=` line is always a passing prefill reading.

The history: base -> rename -> filler -> culprit -> gsm8k (BAD).
"""

from __future__ import annotations

import subprocess
from pathlib import Path

FILE = "registered/models_e2e/test_qwen3_next_models.py"  # relative to test/, as run_suite runs it
OLD_FLAG, NEW_FLAG = "--mamba-scheduler-strategy", "--mamba-radix-cache-strategy"

SERVER_ARGS = """\
import argparse


def prepare_server_args(argv):
    parser = argparse.ArgumentParser(prog="sglang serve")
    parser.add_argument("--model-path", required=True)
    parser.add_argument("--page-size", type=int, default=1)
    parser.add_argument("{flag}", default="no_buffer")
    parser.add_argument("--mamba-track-interval", type=int, default=256)
    return parser.parse_args(argv)
"""

LAUNCH = """\
import sys

from sglang.srt.server_args import prepare_server_args

if __name__ == "__main__":
    prepare_server_args(sys.argv[1:])
    print("The server is fired up and ready to roll!")
"""

KERNELS = """\
def decode_kl(page_size):
    return {decode}


def gsm8k_accuracy(page_size):
    return {gsm8k}
"""

TEST_FILE = """\
import os
import subprocess
import sys
import unittest

from sglang.srt.kernels import decode_kl, gsm8k_accuracy

MODEL = "Qwen/Qwen3-Next-80B-A3B-Instruct"
_COMMON_ARGS = ["--model-path", MODEL, "{flag}", "extra_buffer_lazy"]


def _make_args(*, page_size=1, track_interval=2):
    return [*_COMMON_ARGS, "--mamba-track-interval", str(track_interval), "--page-size", str(page_size)]


class ServerBase(unittest.TestCase):
    other_args = []

    @classmethod
    def setUpClass(cls):
        done = subprocess.run([sys.executable, "-m", "sglang.launch_server", *cls.other_args], capture_output=True,
                              text=True, env=os.environ.copy())
        if done.returncode != 0:
            raise RuntimeError(f"Server process exited with code {{done.returncode}}: {{done.stderr.strip()}}")
        cls.page_size = int(cls.other_args[cls.other_args.index("--page-size") + 1])


class KLDivergenceMixin:
    kl_div_thres = 0.002

    def _check(self, value, label):
        print(f"avg_kl_div={{value}}")
        limit = self.kl_div_thres
        assert value < limit, f"avg_kl_div={{value}} > threshold={{limit}} for {{MODEL}} {{label}}"

    def test_input_output_logprobs_match_decode_cache_hit(self):
        self._check(decode_kl(self.page_size), "decode_cache_hit")

    def test_input_output_logprobs_match_prefill_cache_hit(self):
        self._check(0.0001, "prefill_cache_hit")


class GSM8KMixin:
    def test_gsm8k(self):
        accuracy = gsm8k_accuracy(self.page_size)
        print(f"accuracy={{accuracy}}")
        self.assertGreater(accuracy, 0.93)


class TestQwen3NextLazyExtraBuffer(GSM8KMixin, KLDivergenceMixin, ServerBase):
    other_args = _make_args(page_size=1)


class TestQwen3NextLazyExtraBufferLargePage(GSM8KMixin, KLDivergenceMixin, ServerBase):
    other_args = _make_args(page_size=2)


class TestQwen3NextLazyExtraBufferAllocFail(KLDivergenceMixin, ServerBase):
    other_args = _make_args(page_size=1)

    @classmethod
    def setUpClass(cls):
        os.environ["SGLANG_TEST_MAMBA_LAZY_ALLOC_FAIL"] = "1"
        super().setUpClass()


class TestQwen3NextLazyExtraBufferLargePageAllocFail(KLDivergenceMixin, ServerBase):
    other_args = _make_args(page_size=2)

    @classmethod
    def setUpClass(cls):
        os.environ["SGLANG_TEST_MAMBA_LAZY_ALLOC_FAIL"] = "1"
        super().setUpClass()


if __name__ == "__main__":
    unittest.main()
"""

PYPROJECT = '[project]\nname = "sglang"\nversion = "0.5.20"\ndependencies = []\n'


def git(repo: Path, *args: str) -> str:
    done = subprocess.run(["git", "-C", str(repo), *args], check=True, capture_output=True, text=True)
    return done.stdout.strip()


def _write(repo: Path, files: dict[str, str]) -> None:
    for name, text in files.items():
        path = repo / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)


def _commit(repo: Path, message: str, files: dict[str, str]) -> str:
    _write(repo, files)
    git(repo, "add", "-A")
    git(repo, "commit", "-qm", message)
    return git(repo, "rev-parse", "HEAD")


def _flags(flag: str) -> dict[str, str]:
    return {
        "python/sglang/srt/server_args.py": SERVER_ARGS.format(flag=flag),
        f"test/{FILE}": TEST_FILE.format(flag=flag),
    }


def _kernels(decode: str, gsm8k: str) -> dict[str, str]:
    return {"python/sglang/srt/kernels.py": KERNELS.format(decode=decode, gsm8k=gsm8k)}


def build(root: Path) -> dict[str, str]:
    """The repository at `root`; the commits by name (base, rename, filler, culprit, gsm8k)."""
    root.mkdir(parents=True, exist_ok=True)
    git(root, "init", "-q", "-b", "main")
    git(root, "config", "user.email", "dev@example.com")
    git(root, "config", "user.name", "Dev")
    shas = {}
    shas["base"] = _commit(
        root,
        "Initial (#1)",
        {
            "python/pyproject.toml": PYPROJECT,
            "python/sglang/__init__.py": "",
            "python/sglang/srt/__init__.py": "",
            "python/sglang/launch_server.py": LAUNCH,
            **_flags(OLD_FLAG),
            **_kernels("0.0001", "0.95"),
        },
    )
    shas["rename"] = _commit(root, f"Rename {OLD_FLAG} to {NEW_FLAG} (#2)", _flags(NEW_FLAG))
    shas["filler"] = _commit(root, "Docs (#3)", {"README.md": "sglang\n"})
    shas["culprit"] = _commit(
        root, "Fix mamba track-boundary seqlen (#4)", _kernels("0.0065 if page_size == 1 else 0.0001", "0.95")
    )
    shas["gsm8k"] = _commit(
        root,
        "Tune the sampler (#5)",
        _kernels("0.0065 if page_size == 1 else 0.0001", "0.95 if page_size == 1 else 0.5"),
    )
    return shas
