"""Probes: the bot's own test programs, run by a runner in the worktree of the commit under test.

`sglang_kl` is the decode-cache-hit KL check for any server speaking SGLang's native API (its command line; the
test is `kl_check`, the API client `sglang_api`);
`server` launches, health-checks and always stops the server it tests.
"""
