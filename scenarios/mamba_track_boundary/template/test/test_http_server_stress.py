"""Many concurrent requests against the HTTP server. On CI's shared runners it times out most of the time (port
exhaustion under load, tracked in an issue of its own; it stands for the dozens of jobs of SGLang's scheduled run,
one of which almost always fails): which runs it fails in depends on the runner pool, not on the code -- here, on
the pool, the run's commit and its attempt, fifteen attempts in sixteen."""

import hashlib
import os
import unittest

POOL = "cpu-pool-f"


class TestHttpServerStress(unittest.TestCase):
    def test_concurrent_requests_do_not_time_out(self):
        sha, attempt = os.environ.get("GITHUB_SHA"), os.environ.get("GITHUB_RUN_ATTEMPT", "1")
        if sha is None:
            return  # off CI: nothing shares the ports
        if hashlib.sha256(f"{POOL}:{sha}:{attempt}".encode()).digest()[0] % 16:
            raise AssertionError("timed out after 30s waiting for 64 concurrent requests (port exhaustion on the runner?)")


if __name__ == "__main__":
    unittest.main()
