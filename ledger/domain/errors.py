"""Why a command was refused. The code is stable: the API and the CLI map it."""


class DomainError(Exception):
    """A command the rules refuse. Nothing is recorded when one is raised."""

    code = "validation_error"

    def __init__(self, detail: str, *, field: str | None = None, code: str | None = None):
        super().__init__(detail)
        self.detail = detail
        self.field = field
        if code is not None:
            self.code = code


class InvalidCommand(DomainError):
    """The command's values break a rule of shape or size."""

    code = "validation_error"


class GoalTerminal(DomainError):
    """The goal is done, failed or stopped; it accepts no more work."""

    code = "goal_terminal"


class GoalNotStarted(DomainError):
    code = "not_started"


class ProgressRegressed(DomainError):
    """Progress went down without the checkpoint saying why (rule 3)."""

    code = "progress_regressed"


class ArtifactConflict(DomainError):
    """An artifact path recorded before was overwritten without its previous checksum."""

    code = "artifact_conflict"
