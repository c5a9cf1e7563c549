"""A stateful local stand-in for the GitHub REST API subset the bot calls, plus git smart HTTP.

state = SandboxState()
seeded = seed_from_scenario(state, scenario_dir)      # or state.create_repo(...), add_user(...), ...
base_url, stop = run_in_thread(state)                 # Github(base_url=base_url, auth=Auth.Token(...))
state.faults.set(0.2, kinds=("5xx", "403-ratelimit"), seed=1)
"""

from .app import create_sandbox
from .net import free_port
from .server import run_in_thread
from .state import Faults, SandboxState, Seeded, seed_from_scenario

__all__ = [
    "Faults",
    "SandboxState",
    "Seeded",
    "create_sandbox",
    "free_port",
    "run_in_thread",
    "seed_from_scenario",
]
