"""Why a command was refused. The code is stable: the API and the CLI map it."""


class DomainError(Exception):
    """A command the rules refuse. Nothing is recorded when one is raised."""

    code = "validation_error"

    def __init__(self, detail: str, *, field: str | None = None, code: str | None = None,
                 **extra: object):
        super().__init__(detail)
        self.detail = detail
        self.field = field
        self.extra = extra  # machine-readable context, e.g. retry_after_seconds
        if code is not None:
            self.code = code


class InvalidCommand(DomainError):
    """The command's values break a rule of shape or size."""

    code = "validation_error"


class GoalTerminal(DomainError):
    """The goal is done, failed or stopped; it accepts no more work."""

    code = "goal_terminal"


class GoalBlocked(DomainError):
    """The goal waits for a human (reason says why); no lease is granted."""

    code = "goal_blocked"


class GoalNotStarted(DomainError):
    code = "not_started"


class ProgressRegressed(DomainError):
    """Progress went down without the checkpoint saying why (the checkpoint rule)."""

    code = "progress_regressed"


class ArtifactConflict(DomainError):
    """An artifact path recorded before was overwritten without its previous checksum."""

    code = "artifact_conflict"


class LeaseRequired(DomainError):
    """A fenced call came without ``lease: {token, generation}``."""

    code = "lease_required"


class LeaseLost(DomainError):
    """The caller's lease is not the goal's current one (stale generation,
    wrong token, released or taken over)."""

    code = "lease_lost"


class LeaseHeld(DomainError):
    """Someone else holds a live lease (or its stale grace has not run out).
    ``extra['retry_after_seconds']`` says when to try again."""

    code = "lease_held"


class WorkspaceBound(DomainError):
    code = "workspace_bound"


class SessionBound(DomainError):
    code = "session_bound"
