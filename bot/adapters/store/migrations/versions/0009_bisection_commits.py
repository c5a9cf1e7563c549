"""the range's first-parent commits (sha, author, subject), oldest first, kept with the bisection for
the dashboard's timeline

Revision ID: 0009
Revises: 0008
"""

import sqlalchemy as sa
from alembic import op

revision = "0009"
down_revision = "0008"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("bisections", schema=None) as batch_op:
        batch_op.add_column(sa.Column("commits", sa.JSON(), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("bisections", schema=None) as batch_op:
        batch_op.drop_column("commits")
