"""A token-authenticated API call and a browser session side by side: the
token request leaves no session behind (no cookie, no Vary), a bad token is
a 401 even beside a logged-in session, a browser session still reaches the
API and the admin; the access log's redaction takes one quick look before
its substitutions (ledger/project/redact.py) and cleans the same."""

import pytest
from django.contrib.auth import get_user_model
from django.test import override_settings
from django.utils.crypto import salted_hmac
from hypothesis import given, settings
from hypothesis import strategies as st
from rest_framework.test import APIClient

from ledger.access import accounts
from ledger.project import redact

pytestmark = pytest.mark.django_db

def logged_in(api) -> APIClient:
    client = APIClient()
    client.force_login(get_user_model().objects.get(username=api.username))
    return client


def test_a_token_request_leaves_no_session_behind(agent, started):
    gid, lease = started()
    answer = agent.post(f"goals/{gid}/checkpoints", {
        "lease": lease, "current_step": "s", "progress_pct": 10}, key="short-path-1")
    assert answer.status_code == 201, answer.content
    assert "Set-Cookie" not in answer.headers and "Vary" not in answer.headers
    assert agent.get(f"goals/{gid}").status_code == 200


def test_a_bad_token_is_still_401_with_a_browser_session_beside_it(operator):
    client = logged_in(operator)
    client.credentials(HTTP_AUTHORIZATION="Bearer wl_Zz9Zz9Zz_nope")
    assert client.get("/api/v1/goals").status_code == 401
    client.credentials(HTTP_AUTHORIZATION="Token abc")
    assert client.get("/api/v1/goals").status_code == 401


def test_a_browser_session_still_reaches_the_api(operator):
    client = logged_in(operator)
    assert client.get("/api/v1/goals").status_code == 200
    assert client.get("/api/v1/alerts").status_code == 200


def test_the_admin_keeps_its_session(operator):
    user = get_user_model().objects.get(username=operator.username)
    user.is_staff = user.is_superuser = True
    user.save()
    client = logged_in(operator)
    # An Authorization header outside /api/ changes nothing for the admin.
    page = client.get("/admin/", HTTP_AUTHORIZATION="Bearer anything")
    assert page.status_code == 200
    assert page.wsgi_request.user.get_username() == operator.username
    assert APIClient().get("/admin/").status_code == 302  # no session: to the login page


# ------------------------------------------------------------ the access log

PIECES = st.sampled_from(["=", "wl_", "wll_", "Bearer ", "bEaReR\t", "?token=", "&lease=",
                          "abcdefghijklmnop", "x", " ", "/", "-", "_", "W", "L", "wl"])
TEXTS = st.lists(PIECES | st.text(max_size=6), max_size=12).map("".join)


@settings(max_examples=300, deadline=None)
@given(text=TEXTS)
def test_the_quick_look_never_skips_a_text_with_something_to_redact(text):
    assert redact.redact(text) == redact._substitute(text)


def every_atom_redacted(atoms: dict) -> dict:
    """The access log's atoms as they were cleaned before the quick look."""
    atoms = {k: redact._substitute(v) if isinstance(v, str) else v for k, v in atoms.items()}
    return {k: redact.REDACTED if k in redact._NEVER_LOGGED else v for k, v in atoms.items()}


@settings(max_examples=200, deadline=None)
@given(atoms=st.dictionaries(
    st.sampled_from(["r", "{user-agent}i", "{raw_uri}e", "{x-request-id}o", "q", "U",
                     *redact._NEVER_LOGGED]), TEXTS | st.integers(), max_size=8))
def test_the_access_log_atoms_are_cleaned_as_before(atoms):
    assert redact.gunicorn_atoms(dict(atoms)) == every_atom_redacted(atoms)


def test_a_token_in_the_request_line_or_a_header_is_redacted():
    atoms = redact.gunicorn_atoms({
        "r": "GET /api/v1/goals?token=wl_abcdefgh_secretsecret HTTP/1.1",
        "{x-forwarded-auth}i": "Bearer abcdefghijklmnopqrstuvwxyz",
        "{authorization}i": "Bearer wl_abcdefgh_secretsecret", "s": "200", "b": 412})
    assert "secret" not in str(atoms) and "abcdefghijklmnop" not in str(atoms)
    assert atoms["{authorization}i"] == redact.REDACTED and atoms["b"] == 412


# ------------------------------------------------------------ the token's digest


@settings(max_examples=100, deadline=None)
@given(token=st.text(max_size=80), secret=st.sampled_from(["s" * 50, "another-" * 8]))
def test_the_token_digest_is_salted_hmac_for_any_token_and_secret(token, secret):
    with override_settings(SECRET_KEY=secret):
        expected = salted_hmac("wakeledger.api-token", token, secret=secret,
                               algorithm="sha256").hexdigest()
        assert accounts.token_digest(token) == expected
