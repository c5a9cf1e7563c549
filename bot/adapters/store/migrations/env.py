"""Alembic environment: the connection is handed in by bot.adapters.store.db (no alembic.ini lookup of URLs)."""

from alembic import context

from bot.adapters.store.models import Base

connection = context.config.attributes["connection"]
context.configure(connection=connection, target_metadata=Base.metadata, render_as_batch=True)
with context.begin_transaction():
    context.run_migrations()
