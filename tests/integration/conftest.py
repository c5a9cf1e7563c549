"""Fixtures of the integration tests that hold the sandbox's Actions to GitHub's behaviour."""

from __future__ import annotations

import pytest

from sandbox import SandboxState


@pytest.fixture
def state(tmp_path):
    """A sandbox of its own (no server): its Actions engine runs the workflow files, and is shut down after."""
    state = SandboxState(tmp_path / "gh")
    yield state
    state.actions.shutdown()
