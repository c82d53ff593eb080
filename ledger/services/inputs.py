"""What a shell's parser asks of a value before it calls a use case: whether
a Retry-After reads, whether a text looks like a secret. The domain answers;
the shells ask here, so they import no rule of the domain."""

from ledger.domain import resets, validation
from ledger.eventstore import clock


def retry_after_readable(value: str) -> bool:
    """A Retry-After value at all (delta-seconds, an HTTP-date, ISO 8601 with
    an offset); an absurd but well-formed one reads (the parser clamps it)."""
    return resets.parse_retry_after(value, clock.now()) is not None


def looks_like_secret(text: str) -> bool:
    return validation.looks_like_secret(text)
