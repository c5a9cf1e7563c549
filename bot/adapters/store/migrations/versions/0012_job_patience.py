"""patience with GitHub: a job waits until `not_before` (a backoff, a Retry-After) before it is claimed again, or
is parked (state 'parked', since `parked_at`) until GitHub answers; `waits` counts the times it waited without
using up an attempt (an outage, a rate limit)

Revision ID: 0012
Revises: 0011
"""

import sqlalchemy as sa
from alembic import op

revision = "0012"
down_revision = "0011"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("jobs", schema=None) as batch_op:
        batch_op.add_column(sa.Column("not_before", sa.DateTime(timezone=True), nullable=True))
        batch_op.add_column(sa.Column("parked_at", sa.DateTime(timezone=True), nullable=True))
        batch_op.add_column(sa.Column("waits", sa.Integer(), nullable=False, server_default="0"))


def downgrade() -> None:
    with op.batch_alter_table("jobs", schema=None) as batch_op:
        batch_op.drop_column("waits")
        batch_op.drop_column("parked_at")
        batch_op.drop_column("not_before")
