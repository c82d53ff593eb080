"""The partial index on a set attention, as ``attention > ''`` (was ``NOT
attention = ''``): the /alerts query ORs it with the deadline, and SQLite
can search an index for each half of an OR only when each half is a range it
can seek (ledger/operators/alerts.py ATTENTION_SET)."""

from django.db import migrations, models


class Migration(migrations.Migration):

    dependencies = [
        ("ledger", "0011_checkpoints_and_cosignatures"),
    ]

    operations = [
        migrations.RemoveIndex(model_name="goal", name="ledger_goal_attention"),
        migrations.AddIndex(
            model_name="goal",
            index=models.Index(condition=models.Q(("attention__gt", "")), fields=["attention"],
                               name="ledger_goal_attention_set"),
        ),
    ]
