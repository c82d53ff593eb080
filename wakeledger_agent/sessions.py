"""A continuation whose host has no saved chat to resume.

Gemini CLI saves a chat only once a request succeeds: a run that fails on its
first request (a 429, an auth error) leaves nothing, and ``gemini --resume``
then answers "No previous sessions found" and exits, so the continuation
would start from nothing and be reported as an unknown failure. Instead the
continuation starts a new session with the same resume packet (the resume
command without its resume flag), and the goal's history says so (a
``new_session`` note). Pure: no process, no server.
"""

from __future__ import annotations

import re

# What a host prints when it has no saved chat to resume (Gemini CLI: "No
# previous sessions found", "… for this project.").
NO_SAVED_CHAT = re.compile(r"no previous sessions found", re.IGNORECASE)
RESUME_FLAGS = ("--resume", "-r")
# A resume flag's value, when it has one: a session placeholder, a name Gemini
# CLI reads ("latest", an index), a session id.
_VALUE = re.compile(r"\{session_key\}|latest|[0-9]+|[0-9a-fA-F-]{8,}")


def no_saved_chat(tail: str) -> bool:
    """Whether a failed run's last lines say there was no chat to resume."""
    return bool(NO_SAVED_CHAT.search(tail))


def fresh_command(template: list[str]) -> list[str] | None:
    """The resume command without its resume flag (and the flag's value): a
    new session, the same prompt. None when the template resumes nothing."""
    fresh, skip, found = [], False, False
    for i, word in enumerate(template):
        if skip:
            skip = False
            continue
        if word.startswith(("--resume=", "-r=")):
            found = True
            continue
        if word in RESUME_FLAGS:
            found = True
            following = template[i + 1] if i + 1 < len(template) else ""
            skip = bool(_VALUE.fullmatch(following))
            continue
        fresh.append(word)
    return fresh if found else None
