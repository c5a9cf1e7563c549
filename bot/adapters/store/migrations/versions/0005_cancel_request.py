"""a cancel request on a bisection, seen by whichever process drives it

Revision ID: 0005
Revises: 0004
"""

import sqlalchemy as sa
from alembic import op

revision = "0005"
down_revision = "0004"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("bisections", schema=None) as batch_op:
        batch_op.add_column(sa.Column("cancel_requested_by", sa.String(length=255), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("bisections", schema=None) as batch_op:
        batch_op.drop_column("cancel_requested_by")
