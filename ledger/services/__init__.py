"""The application layer: one function per use case.

Every shell — the API's views, the admin's actions, the management command,
the django-q2 tasks, the outbox sender, the demo — calls a function here and
nothing below it. A function takes plain values, runs the domain's commands
through the store (one transaction, one locked read of the goal) and returns
a typed answer built in one place (``answers``). Rules stay in
``ledger.domain``; these functions only sequence them, derive tokens and read
settings.

The modules, one concern each, are listed in docs/layout.md.
"""
