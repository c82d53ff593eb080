"""A deterministic simulation of weeks of goal life: one seed drives
agents, django-q2's scheduler, hosts and operators against the real store and
scheduling code on SQLite, with invariant checks after every step.

``product`` holds every call into the product; ``world`` the actors and the
event queue; ``invariants`` what must hold. Run it with ``make simulate
SEED=… DAYS=…`` or ``python -m tests.simulation``.
"""
