"""The admin for auditors and operators.

Read-only for everyone (superusers included): nobody adds, changes or deletes
a goal or an event here; state changes only through domain commands that
append events. A goal's page is its timeline; operators (and superusers) get
actions on it — stop, recover, approve/reject a gate, replay — each through the
same domain command as the API, with their name and a reason, offered only
when the domain would accept it. Lists count boundedly and say so. Superusers
edit accounts (users, groups) and nothing else; django-q2's models are shown
read-only, since goal schedules belong to goals.
"""

# Django's autodiscovery imports this package; importing the modules registers
# their model admins (base.py holds what they and api/admin.py share).
from ledger.admin import events, goals, log, notify, site  # noqa: F401
