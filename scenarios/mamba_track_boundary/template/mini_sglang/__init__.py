"""mini-sglang: a miniature serving engine for a recurrent (Mamba-like) language model."""

from .version import __version__

__all__ = ["__version__"]
