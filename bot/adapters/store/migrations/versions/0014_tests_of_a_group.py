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
    # in place on SQLite too: batch mode would copy `bisections` and drop the old table, whose ON DELETE CASCADE
    # empties `steps` (foreign keys are on, and cannot be turned off inside the migration's transaction)
    for table, column in (("steps", "results"), ("bisections", "tests")):
        if op.get_bind().dialect.name == "sqlite":
            op.execute(f"ALTER TABLE {table} DROP COLUMN {column}")
        else:
            op.drop_column(table, column)
