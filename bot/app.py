"""The service: routers composed in one place; settings and handlers are handed in, not imported."""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from contextlib import asynccontextmanager

from fastapi import FastAPI
from fastapi.responses import JSONResponse

from bot.adapters.dispatch.actions import wake_for
from bot.adapters.git.relanded import RelandedInClones
from bot.adapters.github.failures import classify
from bot.adapters.policy_files import by_repository, check_dir
from bot.adapters.store.db import connect
from bot.adapters.store.deliveries import Jobs
from bot.adapters.store.flakes import Flakes
from bot.adapters.store.holds import Holds
from bot.adapters.store.queries import Bisections, Queue
from bot.adapters.store.recorder import Recorder
from bot.adapters.store.series import SeriesOrigins, SeriesPoints
from bot.domain.liveness import troubles
from bot.ingress.jobs.series import at_start
from bot.ingress.webhooks.router import router as webhooks
from bot.ingress.worker import Handler, Worker
from bot.observability import observe
from bot.observability.github_api import install as install_github_api
from bot.observability.reachability import of as reachability_of
from bot.observability.reachability import probe as probe_github
from bot.settings import BotSettings, default_workspace
from bot.web import install as install_dashboard
from bot.web.series_routes import install as install_series


def create_app(
    settings: BotSettings,
    handlers: Mapping[str, Handler] | None = None,
    on_worker_death: Callable[[str], None] | None = None,
) -> FastAPI:
    """The app; with `handlers` (None: built from settings) worker threads run the queued jobs. A worker loop that
    dies fails /healthz and is reported to `on_worker_death` (`serve` then exits, for its supervisor to restart)."""
    engine = connect(settings.db)
    install_github_api()  # every PyGithub client built from here on (the handlers', their tokens') is counted
    if handlers is None:
        from bot.wiring import handlers as build_handlers

        handlers = build_handlers(settings, engine)
    api = settings.github_url

    def probe() -> bool:  # while jobs are parked: does GitHub answer again?
        return probe_github(api, timeout=min(5.0, settings.github_timeout_s))

    reach = reachability_of(api)  # this GitHub's: its outage parks this app's jobs, no other host's
    jobs = Jobs(engine, lease_s=settings.job_lease_s)
    worker = Worker(jobs, handlers, classify=classify, probe=probe, reach=reach) if handlers else None
    if worker:
        worker.on_death = on_worker_death
    recorder = Recorder(engine, queued=worker.wake if worker else None)

    @asynccontextmanager
    async def lifespan(_app: FastAPI):
        if worker:
            worker.start()
            at_start(handlers)  # the benchmarks' series synced once, on a thread of its own: a new policy's backfill
        yield
        recorder.stop()  # what was handed over is stored (and answered) first
        if worker:
            worker.stop()

    app = FastAPI(title="revert-bisect", version="0.1.0", lifespan=lifespan)
    app.state.settings = settings
    app.state.deliveries = recorder  # the request awaits the commit of the batch that stores its delivery
    app.state.wake_runs = wake_for  # a delivery about a step's run wakes the backend polling it
    app.include_router(webhooks)
    # the dashboard (/, /bisections/{id}, /trust) and its JSON API, over the store's reads and the bot's clones
    relanded = RelandedInClones(default_workspace(settings))
    install_dashboard(app, Bisections(engine), Queue(engine), Holds(engine), Flakes(engine), relanded)
    # the benchmarks' series (/series): which way each metric is worse, from the policies that load
    install_series(app, SeriesPoints(engine), SeriesOrigins(engine), by_repository(check_dir(settings.policies)[0]))
    observe(app, engine, settings)  # /readyz, /metrics (app.state.metrics), JSON logs with secrets redacted

    @app.get("/healthz")
    def healthz() -> JSONResponse:
        """Alive: 200; 503 with the reasons when a worker loop died or is stuck, or the recorder is gone."""
        failed = troubles(worker.loops(), time.monotonic(), settings.worker_stuck_s) if worker else []
        if not recorder.alive():
            failed.append("the delivery recorder's thread is gone")
        body = {"status": "failing" if failed else "ok", "worker": bool(worker)}
        return JSONResponse({**body, "failed": failed} if failed else body, status_code=503 if failed else 200)

    return app
