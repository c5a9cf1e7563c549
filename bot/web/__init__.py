"""The web dashboard: bisections, their timeline, metric chart, posterior and rounds; a JSON API with the same data."""

from bot.web.routes import install

__all__ = ["install"]
