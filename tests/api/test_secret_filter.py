"""The credential filter: every kind of secret agents paste by accident is
refused with a 400 validation_error before it can enter the append-only
ledger, and prose about keys and tokens is not."""

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ledger.domain.validation import looks_like_secret
from ledger.models import Event

PROBLEM = "application/problem+json"
ZWSP = "\u200b"

# Built at run time so that no secret scanner flags this file.
B64 = "AbCdEfGhIjKlMnOpQrStUvWxYz0123456789"
JWT = ("eyJhbGciOiJIUzI1NiIsInR5cCI6IkpXVCJ9." + "eyJzdWIiOiIxMjM0NTY3ODkwIiwibmFtZSI6IkpvaG4ifQ."
       + "SflKxwRJSMeKKF2QT4fwpMeJf36POk6yJV_adQssw5c")

SECRETS = [
    ("jwt", f"token {JWT} for the staging API"),
    ("jwt without signature", "eyJhbGciOiJub25lIn0.eyJzdWIiOiJhZG1pbiJ9."),
    ("aws sts key id", "export AWS_ACCESS_KEY_ID=ASIA" + "Y34FZKBOKMUTVV7A"),
    ("aws long-term key id", "key AKIA" + "ABCDEFGHIJKLMNOP in the env"),
    ("aws secret access key",
     "aws_secret_access_key=" + "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY"),
    ("aws secret, spaced", "aws_secret_access_key = " + "wJalrXUtnFEMI/K7MDENG/bPxRfiCY"),
    ("credentials in an https url", "clone https://deploy:" + "s3cretpass@git.example.com/r.git"),
    ("credentials in a postgres url", "DATABASE_URL=postgres://app:" + "hunter22@db:5432/x"),
    ("pgpassword", "ran PGPASSWORD=" + "correct-horse-battery psql -h db"),
    ("quoted password assignment", 'DB_PASSWORD="' + 'Tr0ub4dor&3xyz"'),
    ("stripe live key", "charge with sk_live_" + "4eC39HqLyjWDarjtT1zdp7dc"),
    ("stripe test key", "sk_test_" + "4eC39HqLyjWDarjtT1zdp7dc"),
    ("npm token", "//registry.npmjs.org/:_authToken=npm_" + B64),
    ("hugging face token", "HF token hf_" + B64[:34]),
    ("gitlab token", "glpat-" + "xxxxXXXXxxxx1234abcd"),
    ("github token", "push with ghp_" + B64),
    ("openai key", "use sk-proj-" + "a" * 30),
    ("zero-width split key", "key sk-proj-" + "abcdefghij" + ZWSP + "klmnopqrstuvwxyz"),
    ("zero-width split aws id", "AKIA" + "ABCDEFGH" + ZWSP + "IJKLMNOP"),
    ("full-width look-alike", "".join(chr(ord(c) + 0xFEE0) for c in "sk-proj-" + "a" * 24)),
    ("private key", "-----BEGIN OPENSSH PRIVATE KEY-----"),
    ("our api token", "wl_AbCdEfGh_" + B64),
    # Look-alikes in the prefix: Cyrillic er, Greek capitals, non-breaking
    # hyphens (tests/domain/test_secret_look_alikes.py has the rest).
    ("cyrillic er in ghp_", "pushed with gh\u0440_" + B64),
    ("greek AKIA", "key \u0391\u039a\u0399\u0391" + "ABCDEFGHIJKLMNOP"),
    ("non-breaking hyphens in sk-proj-", "key sk\u2011proj\u2011" + "a" * 30),
]


@pytest.fixture
def goal(agent, clock):
    body = agent.start().json()
    lease = {"token": body["lease"]["token"], "generation": body["lease"]["generation"]}
    return body["goal"]["id"], lease


def assert_refused(response, field: str) -> None:
    assert response.status_code == 400, response.content[:300]
    assert response["Content-Type"] == PROBLEM
    body = response.json()
    assert body["code"] == "validation_error"
    assert field in body["errors"], body["errors"]
    assert "credential" in " ".join(body["errors"][field])


@pytest.mark.parametrize("text", [pytest.param(t, id=i) for i, t in SECRETS])
def test_a_credential_in_a_checkpoint_note_is_refused(agent, goal, text):
    gid, lease = goal
    before = Event.objects.count()
    response = agent.post(f"goals/{gid}/checkpoints", {
        "lease": lease, "current_step": "step", "progress_pct": 10, "note": text})
    assert_refused(response, "note")
    assert Event.objects.count() == before


@pytest.mark.parametrize("text", [pytest.param(t, id=i) for i, t in SECRETS[:6]])
def test_a_credential_in_an_objective_is_refused(agent, db, text):
    response = agent.start(objective=f"Deploy; {text}")
    assert_refused(response, "objective")


def test_the_goals_own_lease_token_in_a_note_is_refused(agent, goal, auditor):
    """An auditor reads notes; the lease token is the agent's fencing secret."""
    gid, lease = goal
    response = agent.post(f"goals/{gid}/checkpoints", {
        "lease": lease, "current_step": "step", "progress_pct": 10,
        "note": f"resume with lease {lease['token']} generation 1"})
    assert_refused(response, "note")
    events = auditor.get(f"goals/{gid}/events").content.decode()
    assert lease["token"] not in events


# Prose an agent writes: words, numbers, paths, plain URLs, hashes, UUIDs and
# talk *about* secrets, none of which is one.
_WORD = st.from_regex(r"[A-Za-z]{1,12}", fullmatch=True)
_PIECE = st.one_of(
    _WORD, _WORD, _WORD,
    st.integers(0, 10**9).map(str),
    st.sampled_from([".", ",", ";", "(", ")", "-", "—", "'", '"', "!", "?", "@"]),
    st.from_regex(r"/srv/[a-z]{1,8}/[a-z_]{1,10}\.py", fullmatch=True),
    st.from_regex(r"https://[a-z]{1,10}\.example\.com/[a-z/]{0,12}", fullmatch=True),
    st.from_regex(r"[0-9a-f]{40}", fullmatch=True),
    st.uuids().map(str),
    # Words about secrets, never followed by "=" or ":" and a value here
    # ("password = <uuid>" is an assignment of a secret, rightly refused).
    st.sampled_from(["the password", "a token", "API key", "secret", "AWS", "JWT",
                     "the key rotation",
                     "PGPASSWORD", "password=$DB_PASS", "token: <redacted>", "sk-", "hf_",
                     "npm_", "glpat-", "wll_", "eyJ", "user@example.com", "ssh://git@host",
                     "HTTP 401", "set API_KEY from the vault"]),
)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(_PIECE, min_size=1, max_size=60).map(" ".join))
def test_prose_without_secrets_is_accepted(text):
    assert not looks_like_secret(text), text


@pytest.mark.parametrize("text", [
    "Rotated the API key and the password in the vault; PGPASSWORD comes from $PGPASSFILE.",
    "password=$DB_PASSWORD and api_key=<from the vault>",
    "See https://docs.example.com:8443/a/b?x=1 and git@github.com:org/repo.git",
    "sha 3f786850e387550fdab836ed7e6dc881de23001b, uuid 4b0e7a4e-2d4c-4d0a-9c7e-1f6f8f0e5a11",
    "jwt header eyJhbGciOiJIUzI1NiJ9 decoded (no payload)",
])
def test_talk_about_secrets_is_not_a_secret(text):
    assert not looks_like_secret(text)


# The filter scans a pattern only where one of its literals occurs; the plain
# alternation of every pattern (_SECRET) is its definition. Texts built from
# the secrets above, the prose pieces and arbitrary characters (case changes,
# non-ASCII, invisible characters included) must get the same verdict.
_FRAGMENT = st.one_of(
    st.sampled_from([text for _, text in SECRETS]),
    _PIECE,
    st.text(max_size=40),
    st.text(alphabet="sSkK-_:/=@.eyJAIKwlhfBearer \u212a\u017f" + ZWSP, max_size=40),
)


@settings(max_examples=500, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(_FRAGMENT, min_size=1, max_size=6).map("".join),
       st.sampled_from([str, str.lower, str.upper, str.swapcase]))
def test_the_literal_prefilter_agrees_with_the_whole_alternation(text, case):
    from ledger.domain.validation import _SECRET, _scan, folds

    text = case(text)
    assert _scan(text) == (_SECRET.search(text) is not None), text
    # The forms the scan also looks at: without invisible characters, in
    # NFKC, look-alikes folded (tests/domain/test_secret_look_alikes.py).
    expected = any(_SECRET.search(form) is not None for form in (text, *folds(text)))
    assert looks_like_secret(text) == expected, text


@settings(max_examples=500, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(st.lists(_FRAGMENT, min_size=0, max_size=4).map("".join), min_size=1,
                max_size=8),
       st.sampled_from([str, str.lower, str.upper, str.swapcase]))
def test_one_scan_of_a_commands_texts_misses_no_text_that_holds_a_secret(texts, case):
    """any_secret is the pre-check that lets a checkpoint skip scanning each of
    its texts: it may say yes when none holds one (a match across two
    texts), never no when one does."""
    from ledger.domain.validation import any_secret

    texts = [case(t) for t in texts]
    if any(looks_like_secret(t) for t in texts):
        assert any_secret(texts), texts


@pytest.mark.parametrize(("field", "value"), [
    ("note", "export OPENAI_API_KEY=sk-abcdefghijklmnopqrstuvwxyz123456"),
    ("current_step", "curl -H 'Authorization: Bearer abcdefghijklmnopqrstuvwx'"),
    ("completed[1]", "pushed with ghp_abcdefghijklmnopqrstuvwxyz0123456789"),
    ("errors[0]", "psql postgres://app:hunter2hunter2@db/app failed"),
])
def test_a_checkpoint_names_the_one_field_with_a_secret(field, value):
    """The one scan of all texts only decides whether to look at each: the
    refusal still names the field that holds the credential."""
    from ledger.domain import InvalidCommand, decide
    from tests.domain.test_domain import T0, checkpoint, started

    state = started()
    fields = {"note": "", "current_step": "testing", "completed": ["built", "tested"],
              "errors": ["one"]}
    name, _, index = field.partition("[")
    if index:
        fields[name][int(index[:-1])] = value
    else:
        fields[name] = value
    cmd = checkpoint(state, current_step=fields["current_step"], note=fields["note"],
                     completed=tuple(fields["completed"]), errors=tuple(fields["errors"]))
    with pytest.raises(InvalidCommand) as refused:
        decide(state, cmd, T0)
    assert refused.value.field == field


# ------------------------------------------------------------ credentials split by bidi controls


@pytest.mark.parametrize("control", ["\u202a", "\u202b", "\u202c", "\u202d", "\u202e",
                                     "\u2066", "\u2067", "\u2068", "\u2069"])
def test_a_credential_split_by_a_bidi_control_is_still_caught(control):
    from ledger.domain.validation import looks_like_secret

    assert looks_like_secret(f"use ghp_{'A' * 18}{control}{'A' * 18}")


# ------------------------------------------- credentials split by any default-ignorable code point

# Once 15 of 15 were stored: five invisible characters outside the old
# list (combining grapheme joiner, a variation selector, a tag space, the
# Hangul filler, a Mongolian free variation selector) in three credentials.
SPLITTERS = ["\u034f", "\ufe0f", "\U000e0020", "\u3164", "\u180b"]
SPLIT = [("github", "ghp_" + B64), ("openai", "sk-proj-" + "a" * 30),
         ("aws", "AKIA" + "ABCDEFGHIJKLMNOP")]


@pytest.mark.parametrize("splitter", SPLITTERS, ids=lambda c: f"U+{ord(c):04X}")
@pytest.mark.parametrize(("name", "secret"), SPLIT, ids=[n for n, _ in SPLIT])
def test_a_credential_split_by_an_ignorable_character_is_caught(splitter, name, secret):
    half = len(secret) // 2
    assert looks_like_secret(f"use {secret[:half]}{splitter}{secret[half:]} here")


def test_an_ignorable_split_credential_is_refused_by_the_api(agent, goal):
    goal_id, lease = goal
    secret = "ghp_" + B64
    response = agent.post(f"goals/{goal_id}/checkpoints", {
        "lease": lease, "current_step": "deploy", "progress_pct": 10,
        "note": f"pushed with {secret[:9]}\U000e0020{secret[9:]}"})
    assert_refused(response, "note")


def _ignorables() -> list[str]:
    import regex

    pattern = regex.compile(r"\p{Default_Ignorable_Code_Point}")
    return [chr(c) for c in range(0x110000) if pattern.match(chr(c))]


@settings(max_examples=300, deadline=None)
@given(st.data())
def test_any_default_ignorable_code_point_anywhere_in_a_credential_is_dropped(data):
    """The property, not a list: every one of Unicode's default-ignorable code
    points, at any place inside any credential the scan knows."""
    _, text = data.draw(st.sampled_from(SECRETS[:18]))
    where = data.draw(st.integers(min_value=0, max_value=len(text)))
    splitter = data.draw(st.sampled_from(IGNORABLES))
    assert looks_like_secret(text[:where] + splitter + text[where:])


IGNORABLES = _ignorables()
