"""bisections and steps

Revision ID: 0001
Revises:
"""

import sqlalchemy as sa
from alembic import op

revision = '0001'
down_revision = None
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table('bisections',
    sa.Column('id', sa.Integer(), nullable=False),
    sa.Column('repo', sa.Text(), nullable=False),
    sa.Column('good_rev', sa.String(length=255), nullable=False),
    sa.Column('bad_rev', sa.String(length=255), nullable=False),
    sa.Column('good', sa.String(length=64), nullable=False),
    sa.Column('bad', sa.String(length=64), nullable=False),
    sa.Column('command', sa.JSON(), nullable=False),
    sa.Column('settings', sa.JSON(), nullable=False),
    sa.Column('phase', sa.String(length=32), nullable=False),
    sa.Column('merges', sa.JSON(), nullable=False),
    sa.Column('confirming', sa.String(length=64), nullable=True),
    sa.Column('confirm_round', sa.Integer(), nullable=False),
    sa.Column('confirmations', sa.Integer(), nullable=False),
    sa.Column('guess', sa.String(length=64), nullable=True),
    sa.Column('guess_probability', sa.Float(), nullable=True),
    sa.Column('flake_rate', sa.Float(), nullable=True),
    sa.Column('boundary', sa.Float(), nullable=True),
    sa.Column('status', sa.String(length=32), nullable=True),
    sa.Column('outcome', sa.JSON(), nullable=True),
    sa.Column('created_at', sa.DateTime(timezone=True), nullable=False),
    sa.Column('updated_at', sa.DateTime(timezone=True), nullable=False),
    sa.Column('finished_at', sa.DateTime(timezone=True), nullable=True),
    sa.PrimaryKeyConstraint('id')
    )
    with op.batch_alter_table('bisections', schema=None) as batch_op:
        batch_op.create_index(batch_op.f('ix_bisections_phase'), ['phase'], unique=False)
        batch_op.create_index(batch_op.f('ix_bisections_status'), ['status'], unique=False)

    op.create_table('steps',
    sa.Column('id', sa.Integer(), nullable=False),
    sa.Column('bisection_id', sa.Integer(), nullable=False),
    sa.Column('sha', sa.String(length=64), nullable=False),
    sa.Column('kind', sa.String(length=16), nullable=False),
    sa.Column('round', sa.Integer(), nullable=False),
    sa.Column('state', sa.String(length=16), nullable=False),
    sa.Column('exit_code', sa.Integer(), nullable=True),
    sa.Column('metric', sa.Float(), nullable=True),
    sa.Column('infra_reason', sa.Text(), nullable=True),
    sa.Column('verdict', sa.String(length=16), nullable=True),
    sa.Column('runner', sa.String(length=255), nullable=True),
    sa.Column('duration_s', sa.Float(), nullable=True),
    sa.Column('log_tail', sa.Text(), nullable=True),
    sa.Column('started_at', sa.DateTime(timezone=True), nullable=False),
    sa.Column('finished_at', sa.DateTime(timezone=True), nullable=True),
    sa.ForeignKeyConstraint(['bisection_id'], ['bisections.id'], ondelete='CASCADE'),
    sa.PrimaryKeyConstraint('id')
    )
    with op.batch_alter_table('steps', schema=None) as batch_op:
        batch_op.create_index(batch_op.f('ix_steps_bisection_id'), ['bisection_id'], unique=False)
        batch_op.create_index(batch_op.f('ix_steps_state'), ['state'], unique=False)



def downgrade() -> None:
    with op.batch_alter_table('steps', schema=None) as batch_op:
        batch_op.drop_index(batch_op.f('ix_steps_state'))
        batch_op.drop_index(batch_op.f('ix_steps_bisection_id'))

    op.drop_table('steps')
    with op.batch_alter_table('bisections', schema=None) as batch_op:
        batch_op.drop_index(batch_op.f('ix_bisections_status'))
        batch_op.drop_index(batch_op.f('ix_bisections_phase'))

    op.drop_table('bisections')
