"""Liveness deadlines (docs/design.md, "Liveness: no goal is ever silently
stuck"): the goal's next deadline and why a human must look, as indexed
columns, and the scheduler's heartbeat row.

The backfill computes both columns from each goal's stored state with the
pure domain (ledger.domain.liveness), as the store does on every command, so
``replay --check`` agrees at once. It uses today's rules on purpose: the
columns are a projection, and a projection always follows the current code.
"""

from django.db import migrations, models


def backfill(apps, schema_editor):
    from ledger.domain import GoalState, liveness

    Goal = apps.get_model("ledger", "Goal")
    for goal in Goal.objects.exclude(status__in=("done", "stopped")).iterator(chunk_size=500):
        state = GoalState.from_dict(goal.state)
        Goal.objects.filter(pk=goal.pk).update(deadline_at=liveness.deadline_at(state),
                                               attention=liveness.attention(state))


class Migration(migrations.Migration):

    dependencies = [
        ('ledger', '0007_verifiable_log'),
    ]

    operations = [
        migrations.CreateModel(
            name='SchedulerBeat',
            fields=[
                ('name', models.CharField(max_length=40, primary_key=True, serialize=False)),
                ('at', models.DateTimeField()),
            ],
        ),
        migrations.AddField(
            model_name='goal',
            name='attention',
            field=models.CharField(blank=True, default='', max_length=40),
        ),
        migrations.AddField(
            model_name='goal',
            name='deadline_at',
            field=models.DateTimeField(blank=True, null=True),
        ),
        migrations.AddIndex(
            model_name='goal',
            index=models.Index(fields=['deadline_at'], name='ledger_goal_deadline'),
        ),
        migrations.AddIndex(
            model_name='goal',
            index=models.Index(condition=models.Q(('attention', ''), _negated=True),
                               fields=['attention'], name='ledger_goal_attention'),
        ),
        migrations.RunPython(backfill, migrations.RunPython.noop, elidable=True),
    ]
