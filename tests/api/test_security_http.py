"""Security over HTTP, in process: the bad-token throttle, the admin login
lockout, the HTTPS production profile, the Content-Security-Policy, and what
an agent may learn from an error."""

import logging
import os
import re
import subprocess
import sys
import time
from pathlib import Path

import pytest
from django.contrib.auth import get_user_model
from django.core.cache import cache
from django.test import Client, override_settings
from rest_framework.test import APIClient

from ledger.access import accounts
from tests.factories import GoalFactory

ROOT = Path(__file__).resolve().parents[2]
PROBLEM = "application/problem+json"
BAD = "wl_AbCdEfGh_this-token-was-never-issued-by-us"

pytestmark = pytest.mark.django_db


def caller(address: str, token: str) -> APIClient:
    client = APIClient(REMOTE_ADDR=address)
    client.credentials(HTTP_AUTHORIZATION=f"Bearer {token}")
    return client


# ------------------------------------------------------------- bad tokens


def test_repeated_bad_tokens_from_one_address_are_throttled(settings, agent, caplog):
    settings.WAKELEDGER_BAD_TOKEN_LIMIT = 5
    settings.WAKELEDGER_BAD_TOKEN_WINDOW_SECONDS = 60
    caplog.set_level(logging.INFO)
    attacker = caller("203.0.113.7", BAD)

    codes = [attacker.get("/api/v1/goals").status_code for _ in range(5)]
    assert codes == [401] * 5
    throttled = attacker.get("/api/v1/goals")
    assert throttled.status_code == 429
    assert throttled["Content-Type"] == PROBLEM
    assert throttled.json()["code"] == "throttled"
    assert 1 <= int(throttled["Retry-After"]) <= 60

    # While throttled, a valid token from that address is refused too (else
    # the answer would tell a guess that hit from one that missed) ...
    assert caller("203.0.113.7", agent.token).get("/api/v1/goals").status_code == 429
    # ... and nobody else is affected.
    assert caller("198.51.100.1", BAD).get("/api/v1/goals").status_code == 401
    assert caller("198.51.100.1", agent.token).get("/api/v1/goals").status_code == 200

    assert "invalid API token from 203.0.113.7" in caplog.text
    assert "now throttled" in caplog.text
    assert BAD not in caplog.text and agent.token not in caplog.text


def test_a_lockout_counted_here_holds_at_once_after_a_good_request(settings, agent):
    """A good request keeps "not locked out" in the process for a second; the
    failure that reaches the limit drops it, so the lockout holds from there."""
    settings.WAKELEDGER_BAD_TOKEN_LIMIT = 2
    good, bad = caller("203.0.113.10", agent.token), caller("203.0.113.10", BAD)
    assert good.get("/api/v1/goals").status_code == 200
    assert [bad.get("/api/v1/goals").status_code for _ in range(2)] == [401, 401]
    assert good.get("/api/v1/goals").status_code == 429


def test_a_lockout_another_worker_set_is_seen_within_the_memo(settings, agent, monkeypatch):
    """Another worker's lockout reaches this process's cache; it is honoured
    once the memo of the last "not locked out" here runs out (1 s in production)."""
    class Later:
        """The throttle's clock, moved on at will: the memo runs out without a sleep."""

        ahead = 0.0

        @classmethod
        def monotonic(cls) -> float:
            return time.monotonic() + cls.ahead

        time = staticmethod(time.time)

    monkeypatch.setattr(accounts, "time", Later)
    good = caller("203.0.113.11", agent.token)
    assert good.get("/api/v1/goals").status_code == 200
    window = accounts.bad_tokens()
    # What record() in the other worker writes when its count reaches the limit.
    cache.set(window._key("lock", "203.0.113.11"), time.time() + 60, timeout=60)
    assert good.get("/api/v1/goals").status_code == 200  # the memo's bound
    Later.ahead = accounts.NOT_LOCKED_MEMO_SECONDS + 0.01
    assert good.get("/api/v1/goals").status_code == 429


def test_an_empty_bearer_token_counts_as_a_bad_one(settings):
    settings.WAKELEDGER_BAD_TOKEN_LIMIT = 2
    client = APIClient(REMOTE_ADDR="203.0.113.8")
    client.credentials(HTTP_AUTHORIZATION="Bearer ")
    assert [client.get("/api/v1/goals").status_code for _ in range(3)] == [401, 401, 429]


def test_behind_a_proxy_the_address_is_the_one_the_proxy_appended(settings):
    settings.WAKELEDGER_BAD_TOKEN_LIMIT = 2
    settings.WAKELEDGER_BEHIND_PROXY = True

    def through_proxy(forwarded: str) -> int:
        client = APIClient(REMOTE_ADDR="10.0.0.1", HTTP_X_FORWARDED_FOR=forwarded)
        client.credentials(HTTP_AUTHORIZATION=f"Bearer {BAD}")
        return client.get("/api/v1/goals").status_code

    # The client forges a first hop each time; the proxy's last one is real.
    assert [through_proxy(f"1.2.3.{i}, 203.0.113.9") for i in range(3)] == [401, 401, 429]
    assert through_proxy("203.0.113.10") == 401  # another client behind the same proxy


# ------------------------------------------------------------ admin logins


def login(address: str, username: str, password: str):
    client = Client(REMOTE_ADDR=address)
    response = client.post("/admin/login/?next=/admin/",
                           {"username": username, "password": password})
    return client, response


def test_repeated_failed_admin_logins_lock_the_username_out(settings, caplog):
    settings.WAKELEDGER_LOGIN_FAILURE_LIMIT = 10
    caplog.set_level(logging.INFO)
    get_user_model().objects.create_superuser("root", password="the-right-password")

    for _ in range(10):
        _, response = login("203.0.113.20", "root", "wrong-password")
        assert response.status_code == 200
        assert "Please enter the correct username and password" in response.content.decode()

    # The right password no longer helps, from that address, for 15 minutes.
    client, response = login("203.0.113.20", "root", "the-right-password")
    page = response.content.decode()
    assert response.status_code == 200
    assert "Too many failed logins for this account from your address" in page
    assert "Try again in 15 minutes" in page
    assert "_auth_user_id" not in client.session

    # The operator at another address still gets in: nobody can lock them out.
    client, response = login("198.51.100.20", "root", "the-right-password")
    assert response.status_code == 302 and "_auth_user_id" in client.session
    assert "admin login failed for root from 203.0.113.20" in caplog.text
    assert "wrong-password" not in caplog.text and "the-right-password" not in caplog.text


def test_a_successful_login_clears_the_failures(settings):
    settings.WAKELEDGER_LOGIN_FAILURE_LIMIT = 3
    get_user_model().objects.create_superuser("root", password="the-right-password")
    for _ in range(2):
        login("203.0.113.21", "root", "wrong")
    assert login("203.0.113.21", "root", "the-right-password")[1].status_code == 302
    for _ in range(2):
        login("203.0.113.21", "root", "wrong")
    assert login("203.0.113.21", "root", "the-right-password")[1].status_code == 302


def test_one_address_spraying_many_usernames_is_locked_out(settings):
    settings.WAKELEDGER_LOGIN_FAILURE_LIMIT = 2  # 10 for any usernames from one address
    get_user_model().objects.create_superuser("root", password="the-right-password")
    for i in range(10):
        login("203.0.113.22", f"user{i}", "guess")
    page = login("203.0.113.22", "root", "the-right-password")[1].content.decode()
    assert "Too many failed logins" in page


# ------------------------------------------------------- production profile


def manage(*args: str, **env: str) -> subprocess.CompletedProcess:
    base = {k: v for k, v in os.environ.items()
            if not k.startswith(("WAKELEDGER_", "DJANGO_")) and k != "DATABASE_URL"}
    return subprocess.run([sys.executable, "manage.py", *args], cwd=ROOT,
                          env={**base, "DJANGO_SETTINGS_MODULE": "ledger.project.settings", **env},
                          capture_output=True, text=True, timeout=120, check=False)


PRODUCTION = {"WAKELEDGER_HTTPS": "1", "WAKELEDGER_BEHIND_PROXY": "1",
              "SECRET_KEY": "x" * 20 + "a-long-random-production-key-0123456789",
              "ALLOWED_HOSTS": "ledger.example.com",
              "CSRF_TRUSTED_ORIGINS": "https://ledger.example.com",
              "SITE_URL": "https://ledger.example.com"}


@pytest.mark.slow
def test_check_deploy_is_clean_under_the_production_profile(tmp_path):
    plain = manage("check", "--deploy", "--fail-level", "WARNING",
                   WAKELEDGER_VAR_DIR=str(tmp_path / "plain"))
    assert plain.returncode != 0
    for warning in ("security.W004", "security.W008", "security.W012", "security.W016"):
        assert warning in plain.stderr

    production = manage("check", "--deploy", "--fail-level", "WARNING",
                        WAKELEDGER_VAR_DIR=str(tmp_path / "prod"), **PRODUCTION)
    assert production.returncode == 0, production.stderr
    assert "no issues" in production.stdout


def https_settings():
    return override_settings(
        SECURE_SSL_REDIRECT=True, SECURE_REDIRECT_EXEMPT=[r"^api/v1/health$"],
        SECURE_HSTS_SECONDS=31536000, SECURE_HSTS_INCLUDE_SUBDOMAINS=True, SECURE_HSTS_PRELOAD=True,
        SECURE_PROXY_SSL_HEADER=("HTTP_X_FORWARDED_PROTO", "https"),
        SESSION_COOKIE_SECURE=True, CSRF_COOKIE_SECURE=True,
        SESSION_COOKIE_NAME="__Host-sessionid", CSRF_COOKIE_NAME="__Host-csrftoken")


def test_the_https_profile_redirects_sets_hsts_and_secure_cookies():
    with https_settings():
        plain = Client().get("/admin/login/")
        assert plain.status_code == 301 and plain["Location"].startswith("https://")
        # The load balancer's health check over plain HTTP is not redirected.
        assert Client().get("/api/v1/health").status_code == 200

        proxied = Client(HTTP_X_FORWARDED_PROTO="https").get("/admin/login/")
        assert proxied.status_code == 200
        assert proxied["Strict-Transport-Security"] == \
            "max-age=31536000; includeSubDomains; preload"
        cookie = proxied.cookies["__Host-csrftoken"]
        assert cookie["secure"] and cookie["path"] == "/"


def test_the_settings_read_the_profile_from_the_environment(tmp_path):
    code = ("from django.conf import settings as s; print(s.SECURE_SSL_REDIRECT, "
            "s.SECURE_HSTS_SECONDS, s.SESSION_COOKIE_SECURE, s.CSRF_COOKIE_SECURE, "
            "s.SECURE_PROXY_SSL_HEADER)")
    base = {k: v for k, v in os.environ.items() if not k.startswith("WAKELEDGER_")}
    result = subprocess.run(
        [sys.executable, "-c", f"import django; django.setup(); {code}"], cwd=ROOT,
        env={**base, "DJANGO_SETTINGS_MODULE": "ledger.project.settings", **PRODUCTION,
             "WAKELEDGER_VAR_DIR": str(tmp_path), "DATABASE_URL": ""},
        capture_output=True, text=True, check=False)
    assert result.returncode == 0, result.stderr
    assert result.stdout.split() == ["True", "31536000", "True", "True",
                                     "('HTTP_X_FORWARDED_PROTO',", "'https')"]


# ------------------------------------------------- Content-Security-Policy


def csp_of(response) -> str:
    policy = response["Content-Security-Policy"]
    assert "default-src 'self'" in policy and "object-src 'none'" in policy
    assert "frame-ancestors 'none'" in policy and "unsafe-inline" not in policy
    return policy


def assert_nothing_inline_without_the_nonce(response) -> None:
    """What the browser would refuse under the policy: no style="" or on…=
    attribute, and every inline <script>/<style> carries this response's nonce."""
    nonce = re.search(r"'nonce-([^']+)'", csp_of(response)).group(1)
    page = response.content.decode()
    assert not re.search(r"<[^>]+\sstyle=", page), "an inline style attribute"
    assert not re.search(r"<[^>]+\son[a-z]+=", page), "an inline event handler"
    for tag in re.findall(r"<(?:script|style)\b[^>]*>", page):
        if "src=" not in tag:
            assert f'nonce="{nonce}"' in tag, tag


def test_every_page_sends_a_content_security_policy(agent):
    superuser = get_user_model().objects.create_superuser("root", password="pw")
    admin = Client()
    admin.force_login(superuser)
    goal = GoalFactory(checkpoints=3)
    pages = {
        "login": Client().get("/admin/login/"),
        "index": admin.get("/admin/"),
        "goals": admin.get("/admin/ledger/goal/"),
        "timeline": admin.get(f"/admin/ledger/goal/{goal.pk}/timeline/"),
        "dashboard": admin.get("/admin/ledger/goal/dashboard/"),
        "api docs": Client().get("/api/v1/docs"),
        "api": agent.get("goals"),
        "api 404": agent.get("nowhere"),
        "health": Client().get("/api/v1/health"),
    }
    for name, response in pages.items():
        assert response.status_code in (200, 404), name
        csp_of(response)
    for name in ("login", "index", "goals", "timeline", "dashboard", "api docs"):
        assert_nothing_inline_without_the_nonce(pages[name])
    nonces = {re.search(r"'nonce-([^']+)'", r["Content-Security-Policy"]).group(1)
              for r in pages.values()}
    assert len(nonces) == len(pages)  # a fresh nonce per response
    # The timeline's icons keep their family colours, as SVG fills (no style="").
    timeline = pages["timeline"].content.decode()
    assert 'fill="#1e8e3e"' in timeline and 'style="' not in timeline


# ------------------------------------------------------- what errors reveal


def test_an_unknown_dispatcher_does_not_list_the_configured_ones(settings, agent):
    settings.WAKELEDGER_DISPATCHERS = {
        "ops-pager-prod": {"type": "webhook", "url": "https://10.1.2.3/hook", "secret": "s"}}
    refused = agent.start(policy={"dispatch": "pager"})
    assert refused.status_code == 400 and refused.json()["code"] == "validation_error"
    message = refused.json()["errors"]["policy.dispatch"][0]
    assert message == "policy.dispatch 'pager' is not a dispatcher of this server."
    assert "ops-pager-prod" not in refused.content.decode()


# ------------------------------------------------------------ log levels


def test_expected_conflicts_are_logged_at_info_not_as_alarms(agent, clock, caplog):
    caplog.set_level(logging.INFO)
    started = agent.start().json()
    gid = started["goal"]["id"]
    stale = {"token": "wll_" + "x" * 43, "generation": 1}
    lost = agent.post(f"goals/{gid}/checkpoints",
                      {"lease": stale, "current_step": "late", "progress_pct": 5})
    assert lost.status_code == 409
    [record] = [r for r in caplog.records if r.name == "django.request"]
    assert record.levelname == "INFO" and record.status_code == 409


def test_server_errors_stay_errors():
    from ledger.project.logfilters import ClientErrorsAreInfo

    record = logging.LogRecord("django.request", logging.ERROR, __file__, 1,
                               "Internal Server Error: %s", ("/api/v1/goals",), None)
    record.status_code = 500
    ClientErrorsAreInfo().filter(record)
    assert record.levelname == "ERROR"
