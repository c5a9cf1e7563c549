"""The sandbox's state (store.py), its fault injector (faults.py) and seeding from a scenario (seed.py)."""

from .faults import Faults
from .seed import NIGHTLY_WORKFLOW, STEP_WORKFLOW, Seeded, seed_from_scenario, step_runner_machine
from .store import PERMISSIONS, SandboxState

__all__ = [
    "NIGHTLY_WORKFLOW",
    "PERMISSIONS",
    "STEP_WORKFLOW",
    "Faults",
    "SandboxState",
    "Seeded",
    "seed_from_scenario",
    "step_runner_machine",
]
