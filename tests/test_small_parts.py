import io

import pytest

from ledger.operators.progress import Progress


class FakeTTY(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_progress_prints_nothing_off_a_terminal():
    out = io.StringIO()  # a pipe, a CI log, cron mail
    bar = Progress(1000, "replay", out)
    for _ in range(1000):
        bar.advance()
    bar.close()
    assert out.getvalue() == ""


def test_progress_redraws_one_line_on_a_terminal():
    out = FakeTTY()
    bar = Progress(4, "verify", out, width=4)
    for _ in range(4):
        bar.advance()
    bar.close()
    assert out.getvalue().count("\r") == 4
    assert "verify [████] 4/4" in out.getvalue()
    assert out.getvalue().endswith("\n")


@pytest.mark.django_db
def test_health_endpoint(client):
    response = client.get("/api/v1/health")
    assert response.status_code == 200
    assert response.json()["status"] == "ok"


def test_every_command_of_the_domain_is_in_the_one_catalogue():
    """decider.COMMANDS lists every command and nothing else decides one."""
    import dataclasses
    import inspect

    from ledger.domain import (
        COMMANDS,
        claims,
        commands,
        dispatches,
        finishing,
        jobs,
        overdue,
        requested,
        runs,
        watchdogs,
    )

    defined = {obj for module in (commands, runs, watchdogs, claims, dispatches, jobs,
                                  finishing, requested, overdue)
               for _, obj in inspect.getmembers(module, inspect.isclass)
               if dataclasses.is_dataclass(obj) and obj.__module__ == module.__name__
               and obj.__name__ not in ("LeaseProof", "Artifact", "WakeRequest", "Evidence",
                                        "ScheduleRow", "Verdict")}
    assert defined == set(COMMANDS)
    assert len(COMMANDS) == len(set(COMMANDS)) == 23


def test_every_event_kind_has_its_own_timeline_style_and_markers_name_real_kinds():
    """A kind added to the domain without a family style is drawn as a bare
    "event" dot in the admin's timeline (liveness.missed was, until this test)."""
    from ledger.domain import events
    from ledger.operators import timeline

    kinds = {value for name, value in vars(events).items()
             if name.isupper() and isinstance(value, str) and "." in value}
    assert {"liveness.missed", "wake.claimed", "goal.started"} <= kinds
    unstyled = sorted(kind for kind in kinds if timeline.style(kind) == timeline.OTHER_STYLE)
    assert not unstyled, f"event kinds the timeline draws as a bare dot: {unstyled}"
    assert set(timeline.MARKER_KINDS) <= kinds
    assert set(timeline.RESUME_KINDS) <= kinds
