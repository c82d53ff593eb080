"""The words and limits the shells show and check, and nothing that decides.

The REST shell's shapes, the admin's filters and ``manage.py ledger``'s
choices name statuses, reasons, liveness labels, policy ranges and size
limits; the dispatchers and the agent's tools word a resumed agent's prompt.
Each is defined where its rule lives; this module only gathers them, so a
shell imports vocabulary from the domain and never a command or a rule
(``tests/test_layers.py`` holds the shells to it).
"""

from ledger.domain.claims import WAKE_REASONS
from ledger.domain.clocksteps import CLOCK_SKEW
from ledger.domain.commands import FINISH_STATUSES
from ledger.domain.continuations import TRIGGERS as CONTINUATION_TRIGGERS
from ledger.domain.kinds import PAYLOADS
from ledger.domain.liveness import LABELS, WHY
from ledger.domain.policy import HOST_GRACE_RANGE, RANGES, RESUME_POLICIES, SCHEDULERS
from ledger.domain.runs import NOTES as RUN_NOTES
from ledger.domain.runs import OUTCOMES as RUN_OUTCOMES
from ledger.domain.smartwake import (
    LEASE_IN_ENVIRONMENT,
    LEASE_WITH_HOST_TOOLS,
    lease_hint_moved,
    packet_lines,
    resume_prompt,
)
from ledger.domain.state import ACTIVE_STATUSES, DONE, REASONS, STATUSES, TERMINAL_STATUSES
from ledger.domain.validation import (
    MAX_ARTIFACTS,
    MAX_ITEM,
    MAX_ITEMS,
    MAX_KEY,
    MAX_NOTE,
    MAX_OBJECTIVE,
    MAX_PATH,
    MAX_STEP,
    MAX_WORKSPACE,
)
from ledger.domain.watchdogs import (
    HOST,
    INTERNAL,
    SCHEDULE_PREFIXES,
    reset_schedule_name,
    schedule_goal,
    schedule_name,
)

# Every event kind (family.past_tense), for the admin's filter: read off the
# catalogue, so a kind added there is listed without a second list.
EVENT_KINDS = tuple(sorted(payload.KIND for payload in PAYLOADS))

__all__ = [
    "ACTIVE_STATUSES", "CONTINUATION_TRIGGERS", "DONE", "EVENT_KINDS", "FINISH_STATUSES",
    "HOST", "HOST_GRACE_RANGE", "INTERNAL", "LABELS",
    "LEASE_IN_ENVIRONMENT", "LEASE_WITH_HOST_TOOLS",
    "MAX_ARTIFACTS", "MAX_ITEM", "MAX_ITEMS", "MAX_KEY", "MAX_NOTE",
    "MAX_OBJECTIVE", "MAX_PATH", "MAX_STEP", "MAX_WORKSPACE", "RANGES", "REASONS",
    "RESUME_POLICIES", "RUN_NOTES", "RUN_OUTCOMES",
    "SCHEDULERS", "SCHEDULE_PREFIXES", "STATUSES", "TERMINAL_STATUSES", "WAKE_REASONS", "WHY",
    "lease_hint_moved",
    "packet_lines", "reset_schedule_name", "resume_prompt", "schedule_goal", "schedule_name",
]
# The skew bound beyond which a goal's last event is from a clock that ran
# ahead (the sweeper's query for such goals).
__all__ += ["CLOCK_SKEW"]
