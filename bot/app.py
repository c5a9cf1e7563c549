"""The service: routers composed in one place; settings and the store are handed in, not imported."""

from __future__ import annotations

from fastapi import FastAPI

from bot.settings import BotSettings
from bot.store.db import connect
from bot.store.deliveries import Deliveries
from bot.webhooks.router import router as webhooks


def create_app(settings: BotSettings) -> FastAPI:
    app = FastAPI(title="revert-bisect", version="0.1.0")
    app.state.settings = settings
    app.state.deliveries = Deliveries(connect(settings.db))
    app.include_router(webhooks)

    @app.get("/healthz")
    def healthz() -> dict:
        return {"status": "ok"}

    return app
