"""an indexed key for "what asked for this bisection", so a retried job or a repeated range finds it

Revision ID: 0006
Revises: 0005
"""

import sqlalchemy as sa
from alembic import op

revision = "0006"
down_revision = "0005"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("bisections", schema=None) as batch_op:
        batch_op.add_column(sa.Column("origin_key", sa.String(length=512), nullable=True))
        batch_op.create_index(batch_op.f("ix_bisections_origin_key"), ["origin_key"], unique=False)


def downgrade() -> None:
    with op.batch_alter_table("bisections", schema=None) as batch_op:
        batch_op.drop_index(batch_op.f("ix_bisections_origin_key"))
        batch_op.drop_column("origin_key")
