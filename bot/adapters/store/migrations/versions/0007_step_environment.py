"""the environment a step ran in (its key: the commit's dependency pins; whether it was reused), and
the reference a backend finds a step's run by again after a restart

Revision ID: 0007
Revises: 0006
"""

import sqlalchemy as sa
from alembic import op

revision = "0007"
down_revision = "0006"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("steps", schema=None) as batch_op:
        batch_op.add_column(sa.Column("env_key", sa.String(length=64), nullable=True))
        batch_op.add_column(sa.Column("env_reused", sa.Boolean(), nullable=True))
        batch_op.add_column(sa.Column("runner_ref", sa.String(length=128), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("steps", schema=None) as batch_op:
        batch_op.drop_column("runner_ref")
        batch_op.drop_column("env_reused")
        batch_op.drop_column("env_key")
