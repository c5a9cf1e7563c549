"""flakes: a watched test that failed and then passed on the same commit (a re-run attempt, the suite runner's own
retry), one row per (repository, test, run), for the trust report's flakes seen per test

Revision ID: 0013
Revises: 0012
"""

import sqlalchemy as sa
from alembic import op

revision = "0013"
down_revision = "0012"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "flakes",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("repository", sa.String(length=255), nullable=False),
        sa.Column("test", sa.String(length=128), nullable=False),
        sa.Column("run_id", sa.Integer(), nullable=False),
        sa.Column("sha", sa.String(length=64), nullable=False),
        sa.Column("how", sa.Text(), nullable=False),
        sa.Column("url", sa.Text(), nullable=True),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint("id"),
        sa.UniqueConstraint("repository", "test", "run_id", name="uq_flakes_run_test"),
    )
    op.create_index("ix_flakes_repository", "flakes", ["repository"])


def downgrade() -> None:
    op.drop_index("ix_flakes_repository", table_name="flakes")
    op.drop_table("flakes")
