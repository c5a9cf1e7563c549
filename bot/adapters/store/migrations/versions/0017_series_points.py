"""series_points: the benchmarks' series read from CI, one row per (repository, test, metric, run): the run's
newest attempt, its commit, when it was created (the series' order), the reading (NULL: the run reported none) and
the run's page

Revision ID: 0017
Revises: 0016
"""

import sqlalchemy as sa
from alembic import op

revision = "0017"
down_revision = "0016"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "series_points",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("repository", sa.String(length=255), nullable=False),
        sa.Column("test", sa.String(length=128), nullable=False),
        sa.Column("metric", sa.String(length=128), nullable=False),
        sa.Column("run_id", sa.BigInteger(), nullable=False),
        sa.Column("run_attempt", sa.Integer(), nullable=False),
        sa.Column("sha", sa.String(length=64), nullable=False),
        sa.Column("started_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("value", sa.Float(), nullable=True),
        sa.Column("url", sa.Text(), nullable=True),
        sa.Column("recorded_at", sa.DateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint("id"),
        sa.UniqueConstraint("repository", "test", "metric", "run_id", name="uq_series_points_run"),
    )
    op.create_index("ix_series_points_series", "series_points", ["repository", "test", "metric", "started_at"])


def downgrade() -> None:
    op.drop_index("ix_series_points_series", table_name="series_points")
    op.drop_table("series_points")
