"""No tables of its own (the schedules are django-q2's). The module exists
because Django sends post_migrate only to apps with a models module, and the
lease sweeper's schedule is ensured on post_migrate (see apps.py)."""
