"""No secret in the clear anywhere; the OpenAPI document and the skill text."""

import io
import logging

import pytest
import yaml
from django.contrib.auth import get_user_model
from django.core.management import call_command
from django.db import connection
from django.test import Client
from django.urls import URLPattern, URLResolver, get_resolver

pytestmark = pytest.mark.django_db


def dump_database() -> str:
    """Every value of every table, as text: what a database dump would show."""
    parts = []
    with connection.cursor() as cursor:
        for table in connection.introspection.table_names():
            cursor.execute(f"SELECT * FROM {connection.ops.quote_name(table)}")
            parts.extend(repr(row) for row in cursor.fetchall())
    return "\n".join(parts)


def test_no_raw_token_reaches_the_database_the_logs_or_the_admin(agent, clock, caplog):
    caplog.set_level(logging.DEBUG)
    secrets_seen = [agent.token]
    started = agent.start().json()
    gid = started["goal"]["id"]
    lease = {"token": started["lease"]["token"], "generation": 1}
    secrets_seen.append(lease["token"])
    agent.post(f"goals/{gid}/checkpoints", {"lease": lease, "current_step": "a",
                                            "progress_pct": 10}, key="idem-1")
    agent.post(f"goals/{gid}/lease/heartbeat", {"lease": lease})
    agent.post(f"goals/{gid}/lease/release", {"lease": lease})
    again = agent.post(f"goals/{gid}/lease").json()
    secrets_seen.append(again["lease"]["token"])
    out = io.StringIO()
    call_command("ledger", "agent", "create", "scanner", "--role", "auditor", stdout=out)
    secrets_seen.append(out.getvalue().split()[-1])

    admin = get_user_model().objects.create_superuser("root", password="pw-for-the-test")
    browser = Client()
    browser.force_login(admin)
    from ledger.access.models import ApiToken

    token_pk = ApiToken.objects.first().pk
    pages = [browser.get(url) for url in (
        "/admin/ledger/goal/", f"/admin/ledger/goal/{gid}/timeline/", "/admin/ledger/event/",
        "/admin/api/apitoken/", f"/admin/api/apitoken/{token_pk}/change/")]
    assert [page.status_code for page in pages] == [200] * len(pages)

    haystacks = {"database": dump_database(), "logs": caplog.text,
                 "admin": "\n".join(page.content.decode() for page in pages)}
    for secret in secrets_seen:
        assert secret.startswith(("wl_", "wll_"))
        for where, text in haystacks.items():
            assert secret not in text, f"a token appears in the {where}"
            # Nor the secret part alone (an API token's after its prefix; a lease
            # token's after "wll_", which may itself contain underscores).
            part = (secret.removeprefix("wll_") if secret.startswith("wll_")
                    else secret.split("_", 2)[2])
            assert part not in text, f"a token's secret is in the {where}"


def _paths(resolver=None, prefix: str = "") -> list[str]:
    resolver = resolver or get_resolver()
    found = []
    for pattern in resolver.url_patterns:
        route = prefix + str(pattern.pattern)
        if isinstance(pattern, URLResolver):
            found += _paths(pattern, route)
        elif isinstance(pattern, URLPattern):
            found.append(route)
    return found


def test_the_openapi_document_validates_and_lists_every_endpoint():
    out = io.StringIO()
    call_command("spectacular", "--validate", "--fail-on-warn", stdout=out)
    schema = yaml.safe_load(out.getvalue())
    documented = set(schema["paths"])
    undocumented = {"api/v1/health", "api/v1/skill.md", "api/v1/schema", "api/v1/docs"}
    for route in _paths():
        if not route.startswith("api/v1/") or route in undocumented:
            continue
        route = (route.replace("<str:goal_id>", "{goal_id}").replace("<str:job_id>", "{job_id}")
                 .replace("<str:gate>", "{gate}"))
        assert "/" + route in documented, route
    # Every operation documents its errors as problem details.
    for path, operations in schema["paths"].items():
        for method, operation in operations.items():
            codes = set(operation["responses"])
            assert "401" in codes, (method, path)
    run_goal = schema["paths"]["/api/v1/goals"]["post"]
    assert run_goal["requestBody"]["content"]["application/json"]["examples"]


def test_schema_and_docs_are_served(client):
    assert client.get("/api/v1/schema").status_code == 200
    docs = client.get("/api/v1/docs")
    assert docs.status_code == 200 and b"swagger" in docs.content.lower()


def test_the_skill_document_names_this_server(client, settings):
    settings.SITE_URL = "https://ledger.example.test"
    response = client.get("/api/v1/skill.md")
    assert response.status_code == 200
    assert response["Content-Type"].startswith("text/markdown")
    text = response.content.decode()
    assert "https://ledger.example.test/api/v1" in text
    for must in ("lease_lost", "checkpoint", "finish", "Idempotency-Key", "resume"):
        assert must in text


def test_every_domain_error_code_has_an_http_status():
    """A new refusal in the domain must not fall back to a generic 400."""
    import re
    from pathlib import Path

    from api.problems import STATUS_BY_CODE, TITLES

    codes = set()
    for path in Path("ledger/domain").glob("*.py"):
        text = path.read_text()
        codes |= set(re.findall(r'\bcode\s*=\s*"([a-z_]+)"', text))
    assert codes, "no codes found: the pattern is stale"
    assert codes <= set(STATUS_BY_CODE), codes - set(STATUS_BY_CODE)
    assert codes <= set(TITLES), codes - set(TITLES)
