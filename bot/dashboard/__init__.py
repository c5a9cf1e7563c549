"""The web dashboard: bisections, their timeline, metric chart, posterior and rounds; a JSON API with the same data."""

from bot.dashboard.routes import install

__all__ = ["install"]
