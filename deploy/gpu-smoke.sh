#!/usr/bin/env bash
# The bot's step machinery end to end on a real GPU (deploy/README.md, "GPU smoke test"); not run in CI.
#
# On a machine with one NVIDIA GPU and PyPI access: installs sglang ($SGLANG_SPEC, default `sglang`) into a venv
# of its own and this checkout (--no-deps) into another, as the step workflow does; writes a tiny Qwen3-Next
# (one linear-attention and one full-attention layer, dummy weights); commits a unittest file that serves it
# with `sglang.launch_server` and sends one /generate to a scratch git repository; then runs
# `python -m runners.step` on that commit twice and checks the verdicts:
#   1. the server flags as given ($SMOKE_SERVER_FLAGS, default --mamba-radix-cache-strategy extra_buffer_lazy):
#      `good`;
#   2. a flag sglang removed (--mamba-scheduler-strategy, gone since 0.5.20): `infra`, the reason naming
#      setUpClass (the server exits before it is healthy, so the case never ran: no evidence against the commit).
# Exits 0 when both verdicts are as expected, 1 with a message otherwise. Work files stay in $SMOKE_WORKDIR
# (default: a new temporary directory), printed at the start.
set -euo pipefail

checkout="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
SGLANG_SPEC="${SGLANG_SPEC:-sglang}"
SMOKE_SERVER_FLAGS="${SMOKE_SERVER_FLAGS:---mamba-radix-cache-strategy extra_buffer_lazy}"
REMOVED_FLAG="--mamba-scheduler-strategy extra_buffer_lazy"
python="${PYTHON:-python3}"

die() {
  echo "gpu-smoke: FAILED: $*" >&2
  exit 1
}

command -v uv >/dev/null || die "uv is not installed (pip install uv, or the standalone installer)"
command -v git >/dev/null || die "git is not installed"
command -v nvidia-smi >/dev/null || die "nvidia-smi is missing: this needs an NVIDIA GPU and its driver"
nvidia-smi -L | grep -q '^GPU ' || die "nvidia-smi lists no GPU"
"$python" -c 'import sys; sys.exit(sys.version_info < (3, 11))' ||
  die "$python is older than 3.11 (sglang and the runner package need Python >= 3.11; set PYTHON=...)"

work="${SMOKE_WORKDIR:-$(mktemp -d "${TMPDIR:-/tmp}/revert-bisect-gpu-smoke.XXXXXX")}"
mkdir -p "$work"
echo "gpu-smoke: working in $work"
export REVERT_BISECT_RUNNER_CACHE="$work/runner-cache"

# -- the two venvs: sglang (the code under test's interpreter) and the runner package (as the step workflow) --
VENV_SGLANG="$work/venv-sglang"
VENV_RB="$work/venv-revert-bisect"
echo "gpu-smoke: installing $SGLANG_SPEC"
uv venv --quiet --python "$python" "$VENV_SGLANG"
uv pip install --python "$VENV_SGLANG/bin/python" "$SGLANG_SPEC"
echo "gpu-smoke: installing the runner package from $checkout"
uv venv --quiet --python "$python" "$VENV_RB"
uv pip install --quiet --python "$VENV_RB/bin/python" --no-deps "$checkout" "packaging>=23"

# -- a tiny Qwen3-Next: layer 0 linear attention (gated delta net, a mamba state), layer 1 full attention --
model="$work/model"
mkdir -p "$model"
cat >"$model/config.json" <<'EOF'
{
  "architectures": ["Qwen3NextForCausalLM"],
  "model_type": "qwen3_next",
  "torch_dtype": "bfloat16",
  "vocab_size": 151936,
  "bos_token_id": 151643,
  "eos_token_id": 151645,
  "hidden_size": 512,
  "intermediate_size": 1024,
  "num_hidden_layers": 2,
  "full_attention_interval": 2,
  "num_attention_heads": 4,
  "num_key_value_heads": 2,
  "head_dim": 128,
  "hidden_act": "silu",
  "rms_norm_eps": 1e-06,
  "max_position_embeddings": 4096,
  "rope_theta": 10000000,
  "partial_rotary_factor": 0.25,
  "attention_bias": false,
  "attention_dropout": 0.0,
  "tie_word_embeddings": false,
  "linear_conv_kernel_dim": 4,
  "linear_key_head_dim": 128,
  "linear_value_head_dim": 128,
  "linear_num_key_heads": 2,
  "linear_num_value_heads": 4,
  "decoder_sparse_step": 1,
  "mlp_only_layers": [],
  "num_experts": 8,
  "num_experts_per_tok": 2,
  "moe_intermediate_size": 256,
  "shared_expert_intermediate_size": 256,
  "norm_topk_prob": true,
  "output_router_logits": false,
  "router_aux_loss_coef": 0.001
}
EOF

# -- the scratch repository: one unittest file, as a repository's CI would run it --
repo="$work/repo"
rm -rf "$repo"
mkdir -p "$repo/test"
cat >"$repo/test/test_gpu_smoke.py" <<'EOF'
"""A tiny Qwen3-Next with dummy weights, served by SGLang on one GPU, answers one /generate."""

import json
import os
import shlex
import signal
import socket
import subprocess
import sys
import tempfile
import time
import unittest
import urllib.error
import urllib.request

MODEL = os.environ["SMOKE_MODEL_DIR"]
FLAGS = shlex.split(os.environ.get("SMOKE_SERVER_FLAGS", "--mamba-radix-cache-strategy extra_buffer_lazy"))
HEALTH_TIMEOUT_S = 600


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class TestGpuSmoke(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        port = free_port()
        cls.base = f"http://127.0.0.1:{port}"
        cls.log = tempfile.NamedTemporaryFile("w+", prefix="sglang-server-", suffix=".log", delete=False)
        argv = [
            sys.executable, "-m", "sglang.launch_server", "--model-path", MODEL, "--load-format", "dummy",
            "--skip-tokenizer-init", "--tp-size", "1", *FLAGS, "--port", str(port), "--host", "127.0.0.1",
        ]
        print("launching:", shlex.join(argv), "log:", cls.log.name, flush=True)
        cls.server = subprocess.Popen(argv, stdout=cls.log, stderr=subprocess.STDOUT, start_new_session=True)
        deadline = time.monotonic() + HEALTH_TIMEOUT_S
        while True:
            code = cls.server.poll()
            if code is not None:
                cls.show_log()
                raise RuntimeError(f"the server exited with code {code} before it was healthy")
            try:
                with urllib.request.urlopen(cls.base + "/health_generate", timeout=30) as resp:
                    if resp.status == 200:
                        return
            except OSError:
                pass
            if time.monotonic() > deadline:
                cls.stop()
                cls.show_log()
                raise TimeoutError(f"the server was not healthy within {HEALTH_TIMEOUT_S} s")
            time.sleep(2)

    @classmethod
    def tearDownClass(cls):
        cls.stop()

    @classmethod
    def stop(cls):
        if cls.server.poll() is None:
            os.killpg(cls.server.pid, signal.SIGTERM)
            try:
                cls.server.wait(60)
            except subprocess.TimeoutExpired:
                os.killpg(cls.server.pid, signal.SIGKILL)
                cls.server.wait()

    @classmethod
    def show_log(cls):
        cls.log.flush()
        with open(cls.log.name, errors="replace") as f:
            print("".join(f.readlines()[-40:]), flush=True)

    def test_generate(self):
        body = {"input_ids": [151643, 9707, 11, 1879, 0], "sampling_params": {"max_new_tokens": 8, "temperature": 0}}
        request = urllib.request.Request(
            self.base + "/generate", json.dumps(body).encode(), {"Content-Type": "application/json"}
        )
        with urllib.request.urlopen(request, timeout=300) as resp:
            answer = json.loads(resp.read())
        print("generate:", json.dumps(answer)[:500], flush=True)
        ids = answer.get("output_ids")
        self.assertIsInstance(ids, list, answer)
        self.assertTrue(ids, answer)
        self.assertTrue(all(isinstance(i, int) for i in ids), answer)


if __name__ == "__main__":
    unittest.main()
EOF
git -C "$repo" init -q -b main
git -C "$repo" add -A
git -C "$repo" -c user.name=gpu-smoke -c user.email=gpu-smoke@localhost commit -qm "A GPU smoke test"
sha="$(git -C "$repo" rev-parse HEAD)"

# -- the steps: the spec (schema 1) as the bot sends it, run as the step workflow runs it --
spec() { # $1: step id, $2: the server flags
  "$VENV_RB/bin/python" - "$repo" "$sha" "$1" "$VENV_SGLANG/bin/python" "$model" "$2" <<'EOF'
import json
import sys

repo, sha, step, python, model, flags = sys.argv[1:]
print(json.dumps({
    "schema": 1, "repository": repo, "sha": sha, "step_id": int(step), "bisection_id": None, "test": "gpu-smoke",
    "command": [], "timeout_s": 1800, "metric_regex": None, "metric": {"name": None, "threshold": None},
    "revert": None, "env": None,
    "test_run": {
        "framework": "unittest", "file": "test_gpu_smoke.py", "cwd": "test", "python": python, "args": [],
        "env": {"SGLANG_IS_IN_CI": "true", "SMOKE_MODEL_DIR": model, "SMOKE_SERVER_FLAGS": flags},
        "cases": ["TestGpuSmoke.test_generate"], "transplant_from": None,
    },
    "needs": {"gpus": 1, "gpu_idle_timeout_s": 300, "hf_models": [], "files": []},
}))
EOF
}

field() { # $1: result.json, $2: a top-level key
  "$VENV_RB/bin/python" -c 'import json, sys; print(json.load(open(sys.argv[1])).get(sys.argv[2]) or "")' "$1" "$2"
}

step() { # $1: step id, $2: the server flags; prints result.json
  local out="$work/step-$1"
  rm -rf "$out"
  echo "gpu-smoke: step $1, server flags: $2"
  "$VENV_RB/bin/python" -m runners.step --spec "$(spec "$1" "$2")" --out "$out" ||
    die "runners.step exited $? for step $1 (its files: $out)"
  [ -f "$out/result.json" ] || die "step $1 wrote no result.json (its files: $out)"
  cat "$out/result.json"
  echo
}

step 1 "$SMOKE_SERVER_FLAGS"
verdict="$(field "$work/step-1/result.json" verdict)"
[ "$verdict" = good ] ||
  die "step 1 (flags: $SMOKE_SERVER_FLAGS): verdict '$verdict', expected 'good' (its files: $work/step-1)"

step 2 "$REMOVED_FLAG"
verdict="$(field "$work/step-2/result.json" verdict)"
reason="$(field "$work/step-2/result.json" infra_reason)"
[ "$verdict" = infra ] ||
  die "step 2 (the removed flag $REMOVED_FLAG): verdict '$verdict', expected 'infra' (its files: $work/step-2)"
case "$reason" in
  *setUpClass*) ;;
  *) die "step 2: the infra reason does not name setUpClass: '$reason' (its files: $work/step-2)" ;;
esac

echo "gpu-smoke: OK: step 1 good; step 2 infra ($reason)"
