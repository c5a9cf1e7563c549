"""the backend that dispatched each step ('local', 'github_actions'), for the metrics to group by
instead of matching the runner's display string

Revision ID: 0011
Revises: 0010
"""

import sqlalchemy as sa
from alembic import op

revision = "0011"
down_revision = "0010"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("steps", schema=None) as batch_op:
        batch_op.add_column(sa.Column("backend", sa.String(length=32), nullable=True))
    # older steps: the backend as the runner string showed it (`local/<slot>`, an Actions run URL)
    op.execute("UPDATE steps SET backend = 'local' WHERE runner LIKE 'local/%'")
    op.execute("UPDATE steps SET backend = 'github_actions' WHERE runner LIKE '%/actions/runs/%'")


def downgrade() -> None:
    with op.batch_alter_table("steps", schema=None) as batch_op:
        batch_op.drop_column("backend")
