"""The short request path of a token-authenticated API call keeps every
behaviour of the long one (ledger/project/browser.py): the lazy Django user
and messages are not built for it, and still are for the admin and for a
browser session on the API."""

import pytest
from django.contrib.auth import get_user_model
from django.contrib.auth.middleware import AuthenticationMiddleware
from django.contrib.messages.middleware import MessageMiddleware
from rest_framework.test import APIClient

pytestmark = pytest.mark.django_db

BROWSER = (AuthenticationMiddleware, MessageMiddleware)


@pytest.fixture
def no_browser_middleware(monkeypatch):
    for cls in BROWSER:
        monkeypatch.setattr(cls, "process_request",
                            lambda self, request: pytest.fail(f"{type(self).__name__} ran"))


def logged_in(api) -> APIClient:
    client = APIClient()
    client.force_login(get_user_model().objects.get(username=api.username))
    return client


def test_a_token_request_builds_no_lazy_user_or_messages(agent, started,
                                                            no_browser_middleware):
    gid, lease = started()
    answer = agent.post(f"goals/{gid}/checkpoints", {
        "lease": lease, "current_step": "s", "progress_pct": 10}, key="short-path-1")
    assert answer.status_code == 201, answer.content
    assert "Set-Cookie" not in answer.headers and "Vary" not in answer.headers
    assert agent.get(f"goals/{gid}").status_code == 200


def test_a_bad_token_is_still_401_with_a_browser_session_beside_it(operator,
                                                                   no_browser_middleware):
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
