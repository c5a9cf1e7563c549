"""several red tests in one bisection: each test's own state and outcome on the bisection, each test's result in a
step

Revision ID: 0014
Revises: 0013
"""

import sqlalchemy as sa
from alembic import op

revision = "0014"
down_revision = "0013"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("bisections", schema=None) as batch_op:
        batch_op.add_column(sa.Column("tests", sa.JSON(), nullable=True))
    with op.batch_alter_table("steps", schema=None) as batch_op:
        batch_op.add_column(sa.Column("results", sa.JSON(), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("steps", schema=None) as batch_op:
        batch_op.drop_column("results")
    with op.batch_alter_table("bisections", schema=None) as batch_op:
        batch_op.drop_column("tests")
