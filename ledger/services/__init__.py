"""The application layer: one function per use case.

Every shell — the API's views, the admin's actions, the management command,
the django-q2 tasks, the outbox sender, the demo — calls a function here and
nothing below it. A function takes plain values, runs the domain's commands
through the store (one transaction, one locked read of the goal) and returns
a typed answer built in one place (``answers``). Rules stay in
``ledger.domain``; these functions only sequence them, derive tokens and read
settings.

    tokens     lease, dispatch and notify tokens: one HMAC derivation, digests
    ids        the ids and random tokens use cases draw: one injectable source
    answers    the typed answers: LeaseGrant, WakeReport, the lease answer
    goals      run a goal, lease, heartbeat, release, checkpoint, finish, jobs
    runs       report how a run ended (classification, reset, Retry-After)
    wakes      claim a wake, fire a scheduled wake, wake now, what to dispatch
    operators  stop, recover, approve/reject, wake now: the operator's acts
"""
