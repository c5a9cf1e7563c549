"""what the kill switch held back, for the dashboard

Revision ID: 0010
Revises: 0009
"""

import sqlalchemy as sa
from alembic import op

revision = "0010"
down_revision = "0009"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "holds",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("key", sa.String(length=512), nullable=False),
        sa.Column("repository", sa.String(length=255), nullable=False),
        sa.Column("guard", sa.String(length=32), nullable=False),
        sa.Column("what", sa.Text(), nullable=False),
        sa.Column("link", sa.Text(), nullable=True),
        sa.Column("issue", sa.Integer(), nullable=True),
        sa.Column("culprit", sa.String(length=64), nullable=True),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint("id"),
        sa.UniqueConstraint("key", name="uq_holds_key"),
    )
    op.create_index("ix_holds_repository", "holds", ["repository"])


def downgrade() -> None:
    op.drop_index("ix_holds_repository", table_name="holds")
    op.drop_table("holds")
