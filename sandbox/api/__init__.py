"""The sandbox's HTTP surface: one APIRouter per resource, composed by `sandbox.app.create_sandbox`;
`deps` holds the typed dependencies (the sandbox's state, the repository and the caller's access)."""
