"""flakes.run_id as a 64-bit integer: GitHub's workflow run ids are int64 and past 2**31 today (its REST API
describes `id` of a workflow run as `integer`, format int64); on PostgreSQL an INTEGER column refused them, so a
flake of a real run could not be recorded. (SQLite's INTEGER held them already; its column is declared BIGINT too,
copying `flakes`, which no table references.)

Revision ID: 0019
Revises: 0018
"""

import sqlalchemy as sa
from alembic import op

revision = "0019"
down_revision = "0018"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("flakes", schema=None) as batch_op:
        batch_op.alter_column("run_id", type_=sa.BigInteger(), existing_type=sa.Integer(), existing_nullable=False)


def downgrade() -> None:
    with op.batch_alter_table("flakes", schema=None) as batch_op:
        batch_op.alter_column("run_id", type_=sa.Integer(), existing_type=sa.BigInteger(), existing_nullable=False)
