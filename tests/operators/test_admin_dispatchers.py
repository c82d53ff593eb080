"""The admin shows the configured dispatchers read-only — name, type, a
redacted target and the file they came from — and never a dispatcher's
secret: not a webhook's signing secret, bearer token, or a token in its path
or query, nor a command's arguments or environment."""

import pytest

from ledger.project import dispatchers
from tests.helpers import staff

pytestmark = pytest.mark.django_db

SECRETS = ("whsec-9f8e7d6c5b4a", "gw-bearer-1a2b3c4d", "path-token-5e6f7a8b",
           "query-token-0c1d2e3f", "cli-token-4a5b6c7d", "env-token-8e9f0a1b")


@pytest.fixture
def configured(settings):
    settings.WAKELEDGER_DISPATCHERS = {
        "relay": {"type": "webhook",
                  "url": f"https://hooks.example.com:8443/in/{SECRETS[2]}?key={SECRETS[3]}",
                  "secret": SECRETS[0]},
        "gateway": {"type": "webhook", "preset": "openclaw",
                    "url": "http://127.0.0.1:18789/hooks/agent", "bearer": SECRETS[1]},
        "claude": {"type": "command",
                   "argv": ["/usr/local/bin/resume-agent", "--token", SECRETS[4], "{goal_id}"],
                   "env": {"AGENT_TOKEN": SECRETS[5]}},
    }
    settings.WAKELEDGER_DISPATCHERS_SOURCE = "/srv/wakeledger/var/dispatchers.json"


def test_the_dashboard_lists_dispatchers_redacted_with_their_file(configured):
    for role in ("operator", "auditor"):
        page = staff(f"{role}-1", role).get("/admin/ledger/goal/dashboard/").content.decode()
        assert 'data-testid="section-dispatchers"' in page
        assert "/srv/wakeledger/var/dispatchers.json" in page
        for row in ("<td>claude</td><td>command</td><td>resume-agent with 3 argument(s), "
                    "1 variable(s)</td>",
                    "<td>gateway</td><td>webhook (openclaw)</td>"
                    "<td>http://127.0.0.1:18789/… (bearer set)</td>",
                    "<td>relay</td><td>webhook</td>"
                    "<td>https://hooks.example.com:8443/… (secret set)</td>"):
            assert row in page
        leaked = [secret for secret in SECRETS if secret in page]
        assert leaked == []


def test_a_target_is_redacted_for_any_url_and_argv():
    for spec in ({"type": "webhook", "url": f"https://user:{SECRETS[0]}@h.example/x"},
                 {"type": "webhook", "url": f"https://h.example/#{SECRETS[0]}"},
                 {"type": "webhook", "url": "https://h.example:99999/x"},
                 {"type": "command", "argv": ["/bin/agent", SECRETS[0]]},
                 {"type": "command", "argv": f"run {SECRETS[0]}"}):
        assert SECRETS[0] not in dispatchers._target(spec)


def test_no_dispatcher_says_every_wake_is_pulled(settings):
    settings.WAKELEDGER_DISPATCHERS = {}
    page = staff("olga", "operator").get("/admin/ledger/goal/dashboard/").content.decode()
    assert 'data-testid="no-dispatchers"' in page
