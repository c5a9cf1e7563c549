"""revert verification: the branch head a culprit's revert is proven on, and that revert

Revision ID: 0002
Revises: 0001
"""

import sqlalchemy as sa
from alembic import op

revision = "0002"
down_revision = "0001"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("bisections", schema=None) as batch_op:
        batch_op.add_column(sa.Column("head", sa.String(length=64), nullable=True))
        batch_op.add_column(sa.Column("revert", sa.String(length=64), nullable=True))
        batch_op.add_column(sa.Column("revert_error", sa.Text(), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("bisections", schema=None) as batch_op:
        batch_op.drop_column("revert_error")
        batch_op.drop_column("revert")
        batch_op.drop_column("head")
