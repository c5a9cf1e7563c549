"""Example scenarios for revert-bisect: real git histories with a real regression to find."""
