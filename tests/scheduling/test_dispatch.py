"""The dispatchers' hardening: what a command's child may see, what a value
may expand to, where a webhook may go and how it is signed, which failures
are certain and which are not, the OpenClaw Gateway contract, and keyed host
references. Real processes and real HTTP on 127.0.0.1 throughout."""

import hashlib
import json
import socket
import sys
import threading
from pathlib import Path

import pytest
from django.core.exceptions import ImproperlyConfigured

from api.digests import host_ref_digest
from ledger.models import Event, Goal
from ledger.project import siteurl
from scheduling import dispatch, tasks
from scheduling.dispatch import Result
from scheduling.signatures import sign, verify_signature
from tests.factories import lease_of
from tests.helpers import written_json
from tests.receivers import Gateway, Receiver, openclaw_gateway, receiving

SECRET = "test-webhook-secret"
GOAL = "3c36d41d-1aba-4afd-b4f6-781993043e9e"
OCCURRENCE = f"internal:{GOAL}@2026-12-02T09:00:00.123456+00:00"
PACKET = {"objective": "Fix the flaky checkout test",
          "checkpoint": {"current_step": "reproduced", "progress_pct": 40},
          "next_actions": ["fix"], "done_criteria": ["CI green"], "artifacts_to_verify": []}
LEASE = {"token": "wll_test-lease-token", "generation": 2, "holder": "agent-1",
         "expires_at": "2026-12-02T09:05:00+00:00"}


def send(name: str, *, goal_id: str = GOAL, occurrence_id: str = OCCURRENCE,
         session_key: str = "main:shop") -> Result:
    return dispatch.dispatch(name, goal_id=goal_id, occurrence_id=occurrence_id,
                             session_key=session_key, packet=PACKET, report={"status": "running"},
                             lease=LEASE)


def vanish_and_wake(agent, gid: str, body: dict, clock) -> str:
    lease = {"token": body["lease"]["token"], "generation": body["lease"]["generation"]}
    agent.post(f"goals/{gid}/watchdog", {"lease": lease})
    clock.advance(hours=1, minutes=1)
    return tasks.fire_watchdog(gid, intended_date="occ-1")


SOAK_SECRET = "soak-finding-secret"


# ------------------------------------------------------------ command: environment


@pytest.mark.django_db
def test_the_command_child_sees_only_the_allowlisted_environment(agent, clock, settings,
                                                                 tmp_path, monkeypatch):
    hook_secret = "whsec-do-not-leak-0123456789"
    dispatchers = {
        "hook": {"type": "webhook", "url": "https://hooks.example/wake", "secret": hook_secret},
        "cmd": {"type": "command", "env": ["AGENT_TOOL_TOKEN"], "argv": [
            sys.executable, "-c",
            "import json, os, sys; json.dump(dict(os.environ), open(sys.argv[1], 'w'))",
            str(tmp_path / "env.json")]},
    }
    # What a server process really has in its environment.
    monkeypatch.setenv("SECRET_KEY", "server-secret-key-do-not-leak")
    monkeypatch.setenv("DATABASE_URL", "postgres://ledger:pw-do-not-leak@db/ledger")
    monkeypatch.setenv("WAKELEDGER_DISPATCHERS", json.dumps(dispatchers))
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "unrelated-do-not-leak")
    monkeypatch.setenv("AGENT_TOOL_TOKEN", "passed-on-purpose")
    monkeypatch.setenv("LANG", "C.UTF-8")
    settings.WAKELEDGER_RUNS_DIR = tmp_path / "runs"
    settings.WAKELEDGER_DISPATCHERS = dispatchers
    body = agent.start(policy={"dispatch": "cmd", "lease_seconds": 300}).json()
    gid = body["goal"]["id"]
    assert vanish_and_wake(agent, gid, body, clock) == "recurring_acquired"

    env = json.loads(written_json(tmp_path / "env.json"))
    # Python itself may add LC_CTYPE when it coerces the C locale.
    assert set(env) - {"LC_CTYPE"} <= {
        "PATH", "HOME", "LANG", "LC_ALL", "TZ", "AGENT_TOOL_TOKEN", "WAKELEDGER_GOAL_ID",
        "WAKELEDGER_LEASE_TOKEN", "WAKELEDGER_LEASE_GENERATION", "WAKELEDGER_URL",
        "WAKELEDGER_OCCURRENCE_ID"}
    for leaked in ("SECRET_KEY", "DATABASE_URL", "WAKELEDGER_DISPATCHERS",
                   "AWS_SECRET_ACCESS_KEY"):
        assert leaked not in env
    assert not [v for v in env.values() if "do-not-leak" in v or hook_secret in v]
    assert env["AGENT_TOOL_TOKEN"] == "passed-on-purpose" and env["LANG"] == "C.UTF-8"
    assert env["WAKELEDGER_GOAL_ID"] == gid and env["WAKELEDGER_LEASE_GENERATION"] == "2"
    assert env["WAKELEDGER_LEASE_TOKEN"].startswith("wll_")
    assert env["WAKELEDGER_OCCURRENCE_ID"] == f"internal:{gid}@occ-1"
    assert env["WAKELEDGER_URL"].endswith("/api/v1")


@pytest.mark.parametrize("name", ["SECRET_KEY", "DATABASE_URL", "WAKELEDGER_DISPATCHERS",
                                  "WAKELEDGER_LEASE_TOKEN", "1BAD", "A-B", ""])
def test_a_passthrough_of_server_secrets_or_bad_names_stops_start_up(name):
    with pytest.raises(ImproperlyConfigured, match=r"\.env"):
        dispatch.validate({"cmd": {"type": "command", "argv": ["true"], "env": [name]}})


def test_the_env_passthrough_must_be_a_list_of_names():
    with pytest.raises(ImproperlyConfigured, match=r"\.env must be a list"):
        dispatch.validate({"cmd": {"type": "command", "argv": ["true"], "env": "HOME"}})


# ------------------------------------------------------------ command: placeholders


def echo_argv(tmp_path: Path, *template: str) -> dict:
    return {"cmd": {"type": "command", "argv": [
        sys.executable, "-c",
        "import json, sys; json.dump(sys.argv[2:], open(sys.argv[1], 'w'))",
        str(tmp_path / "argv.json"), *template]}}


def test_placeholders_are_filled_in_one_pass(settings, tmp_path):
    settings.WAKELEDGER_RUNS_DIR = tmp_path / "runs"
    settings.WAKELEDGER_DISPATCHERS = echo_argv(
        tmp_path, "{prompt}", "--session={session_key}", "{goal_id}/{occurrence_id}")
    packet = {**PACKET, "objective": "Fix {goal_id} and {session_key} then {occurrence_id}"}
    result = dispatch.dispatch("cmd", goal_id=GOAL, occurrence_id=OCCURRENCE,
                               session_key="main:shop", packet=packet, report={}, lease=LEASE)
    assert result.ok and not result.uncertain
    argv = json.loads(written_json(tmp_path / "argv.json"))
    # The agent's text keeps its braces: a value never expands another placeholder.
    assert argv[0].startswith(f"Resume Wake Ledger goal {GOAL}: Fix {{goal_id}} and "
                              "{session_key} then {occurrence_id}")
    assert argv[1:] == ["--session=main:shop", f"{GOAL}/{OCCURRENCE}"]


@pytest.mark.parametrize("session_key", [
    "{prompt}",  # used to expand into the whole prompt
    "-rf",  # would be an option of the command
    "--help",
    "x; rm -rf / #",
    "a b",
    "$(id)",
    "ключ",
    "a" * 201,
    "",  # the goal has none, but the command needs one
])
def test_an_invalid_session_key_starts_nothing(settings, tmp_path, monkeypatch, session_key):
    settings.WAKELEDGER_RUNS_DIR = tmp_path / "runs"
    settings.WAKELEDGER_DISPATCHERS = echo_argv(tmp_path, "--session-key", "{session_key}")
    spawned: list = []
    monkeypatch.setattr(dispatch.subprocess, "Popen", lambda *a, **k: spawned.append(a))
    result = send("cmd", session_key=session_key)
    assert result == Result(False, "invalid session_key", uncertain=False)
    # send() spawns, if at all, before it returns: no wait can make this pass late.
    assert spawned == []
    assert not list((tmp_path / "runs").glob("*.log"))  # nothing was spawned


@pytest.mark.parametrize("session_key", ["main", "agent:main:shop", "hook:a/b@c.d-e_f",
                                         "a" * 200, "9-lives"])
def test_valid_session_keys_pass(settings, tmp_path, session_key):
    settings.WAKELEDGER_RUNS_DIR = tmp_path / "runs"
    settings.WAKELEDGER_DISPATCHERS = echo_argv(tmp_path, "{session_key}")
    assert send("cmd", session_key=session_key).ok
    assert json.loads(written_json(tmp_path / "argv.json")) == [session_key]


@pytest.mark.parametrize(("field", "value"), [
    ("goal_id", "../../etc/passwd"),
    ("goal_id", "not-a-uuid"),
    ("goal_id", "{prompt}"),
    ("occurrence_id", "-x"),
    ("occurrence_id", "internal:x y"),
    ("occurrence_id", "a" * 301),
])
def test_invalid_ids_start_nothing_whatever_the_dispatcher(settings, tmp_path, field, value):
    settings.WAKELEDGER_RUNS_DIR = tmp_path / "runs"
    with receiving() as (url, received):
        settings.WAKELEDGER_DISPATCHERS = {
            **echo_argv(tmp_path, "{goal_id}"),
            "hook": {"type": "webhook", "url": url, "secret": SECRET}}
        for name in ("cmd", "hook"):
            result = send(name, **{field: value})
            assert result == Result(False, f"invalid {field}")
    assert received == []
    assert not list((tmp_path / "runs").glob("*.log"))


def test_an_upper_case_goal_id_is_used_in_its_canonical_form(settings, tmp_path):
    settings.WAKELEDGER_RUNS_DIR = tmp_path / "runs"
    settings.WAKELEDGER_DISPATCHERS = echo_argv(tmp_path, "{goal_id}")
    assert send("cmd", goal_id=GOAL.upper()).ok
    assert json.loads(written_json(tmp_path / "argv.json")) == [GOAL]


def test_an_unknown_placeholder_stops_start_up():
    with pytest.raises(ImproperlyConfigured, match="sessionkey"):
        dispatch.validate({"cmd": {"type": "command", "argv": ["x", "{sessionkey}"]}})


def test_a_command_that_cannot_be_spawned_is_a_certain_failure(settings, tmp_path):
    settings.WAKELEDGER_RUNS_DIR = tmp_path / "runs"
    settings.WAKELEDGER_DISPATCHERS = {"cmd": {"type": "command",
                                               "argv": [str(tmp_path / "no-such-program")]}}
    assert send("cmd") == Result(False, "FileNotFoundError", uncertain=False)


# ------------------------------------------------------------ webhook: where it may go


def hook(url: str, **extra) -> dict:
    return {"hook": {"type": "webhook", "url": url, "secret": SECRET, **extra}}


@pytest.mark.parametrize("url", ["http://hooks.example/wake", "http://10.0.0.5:8080/wake",
                                 "http://[2001:db8::1]/wake", "http://localhost.example/x"])
def test_plain_http_to_another_host_stops_start_up(url):
    with pytest.raises(ImproperlyConfigured, match="must be https"):
        dispatch.validate(hook(url))


@pytest.mark.parametrize("url", ["https://hooks.example/wake", "http://127.0.0.1:9/x",
                                 "http://127.8.9.10/x", "http://[::1]:9/x",
                                 "http://localhost:9/x", "http://LOCALHOST/x"])
def test_https_or_loopback_is_accepted(url):
    dispatch.validate(hook(url))


def test_plain_http_elsewhere_needs_an_explicit_allowance():
    dispatch.validate(hook("http://hooks.internal/wake", allow_http=True))
    with pytest.raises(ImproperlyConfigured, match="allow_http must be true or false"):
        dispatch.validate(hook("http://hooks.internal/wake", allow_http="yes"))


@pytest.mark.parametrize(("spec", "message"), [
    ({"url": "ftp://hooks.example/x"}, "http\\(s\\) URL"),
    ({"url": "https:///x"}, "with a host"),
    ({"url": "https://user:pw@hooks.example/x"}, "credentials"),
    ({"url": "https://hooks.example:99999/x"}, "invalid port"),
    ({"url": "https://hooks.example/x y"}, "spaces or control"),
    ({"url": "https://hooks.example/x\r\nHost: evil"}, "spaces or control"),
    ({"allow_htttp": True}, "unknown keys: allow_htttp"),
    ({"timeout": 0}, "timeout"),
    ({"timeout": 600}, "timeout"),
    ({"timeout": "10"}, "timeout"),
    ({"secret": ""}, "secret"),
    ({"preset": "slack"}, "preset"),
    ({"openclaw": {"agentId": "main"}}, "needs \"preset\""),
    ({"bearer": "a", "bearer_env": "B"}, "not both"),
])
def test_bad_webhook_settings_stop_start_up(spec, message):
    with pytest.raises(ImproperlyConfigured, match=message):
        dispatch.validate({"hook": {"type": "webhook", "url": "https://hooks.example/x",
                                    "secret": SECRET, **spec}})


def test_start_up_validates_the_configured_dispatchers(settings):
    from django.apps import apps

    settings.WAKELEDGER_DISPATCHERS = hook("http://hooks.example/wake")
    with pytest.raises(ImproperlyConfigured):
        apps.get_app_config("scheduling").ready()


@pytest.mark.parametrize("status", [301, 302, 303, 307, 308])
def test_a_redirect_is_never_followed_and_is_a_certain_failure(settings, status):
    with receiving(status=status, headers={"Location": "/elsewhere"}) as (url, received):
        settings.WAKELEDGER_DISPATCHERS = {
            "hook": {"type": "webhook", "url": url, "secret": SECRET, "bearer": "tok"}}
        result = send("hook")
    # The webhook's client is synchronous and the receiver records a GET before
    # it answers: a followed redirect would be in Receiver.gets by now.
    assert result == Result(False, f"HTTP {status}", uncertain=False)
    assert len(received) == 1
    assert Receiver.gets == []  # no GET (with the Authorization header) to the Location


@pytest.mark.django_db
def test_a_redirect_is_recorded_as_a_failed_dispatch(agent, clock, settings):
    with receiving(status=302, headers={"Location": "/elsewhere"}) as (url, _received):
        settings.WAKELEDGER_DISPATCHERS = hook(url)
        body = agent.start(policy={"dispatch": "hook", "lease_seconds": 300}).json()
        gid = body["goal"]["id"]
        vanish_and_wake(agent, gid, body, clock)
    [dispatched] = Event.objects.filter(goal_id=gid, kind="continuation.dispatched")
    assert dispatched.data["ok"] is False and dispatched.data["detail"] == "HTTP 302"
    assert Receiver.gets == []


# ------------------------------------------------------------ webhook: certain or not


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def test_a_refused_connection_is_a_certain_failure(settings):
    settings.WAKELEDGER_DISPATCHERS = hook(f"http://127.0.0.1:{free_port()}/hook")
    assert send("hook") == Result(False, "ConnectionRefusedError", uncertain=False)


def test_a_tls_failure_is_a_certain_failure(settings):
    # A plain HTTP server spoken to in TLS: the handshake fails before anything is sent.
    with receiving() as (url, received):
        settings.WAKELEDGER_DISPATCHERS = hook(url.replace("http://", "https://"))
        result = send("hook")
    assert not result.ok and not result.uncertain
    assert result.detail.startswith("SSL")
    assert received == []


@pytest.mark.parametrize("status", [400, 401, 404, 410, 500, 503])
def test_an_error_status_is_a_certain_failure(settings, status):
    with receiving(status=status) as (url, _received):
        settings.WAKELEDGER_DISPATCHERS = hook(url)
        assert send("hook") == Result(False, f"HTTP {status}", uncertain=False)


def test_a_gateway_timeout_status_is_uncertain(settings):
    # A proxy gave up waiting; the origin may be working on the request.
    with receiving(status=504) as (url, _received):
        settings.WAKELEDGER_DISPATCHERS = hook(url)
        assert send("hook") == Result(False, "HTTP 504", uncertain=True)


def test_a_timeout_after_the_request_was_sent_is_uncertain(settings):
    with receiving(delay=1.5) as (url, received):
        settings.WAKELEDGER_DISPATCHERS = hook(url, timeout=0.3)
        result = send("hook")
    # The receiver answers 202 after 1.5 s: a TimeoutError proves the 0.3 s
    # timeout cut the wait short (how short is for `make bench`, not a test).
    assert result == Result(False, "TimeoutError after sending", uncertain=True)
    assert len(received) == 1  # it did reach the receiver


def test_a_connection_closed_without_an_answer_is_uncertain(settings):
    listener = socket.create_server(("127.0.0.1", 0))
    got: list[bytes] = []

    def read_then_hang_up() -> None:
        conn, _ = listener.accept()
        with conn:
            got.append(conn.recv(65536))
        listener.close()

    threading.Thread(target=read_then_hang_up, daemon=True).start()
    settings.WAKELEDGER_DISPATCHERS = hook(f"http://127.0.0.1:{listener.getsockname()[1]}/h")
    result = send("hook")
    assert result.uncertain and not result.ok
    assert result.detail in ("RemoteDisconnected after sending",
                             "ConnectionResetError after sending")
    assert got and got[0].startswith(b"POST /h ")


def test_a_success_is_ok(settings):
    with receiving(status=204) as (url, _received):
        settings.WAKELEDGER_DISPATCHERS = hook(url)
        assert send("hook") == Result(True, "HTTP 204", uncertain=False)


def test_result_is_frozen_and_certain_by_default():
    result = Result(False, "HTTP 500")
    assert result.uncertain is False
    with pytest.raises(AttributeError):
        result.ok = True  # type: ignore[misc]


# ------------------------------------------------------------ webhook: signature


def test_the_receiver_verifies_the_signature_of_what_was_sent(settings):
    with receiving(secret=SECRET) as (url, received):
        settings.WAKELEDGER_DISPATCHERS = hook(url)
        assert send("hook") == Result(True, "HTTP 202")
    [(headers, raw)] = received
    payload = json.loads(raw)
    assert payload["lease"] == LEASE  # the plain webhook carries the lease in its body
    assert "lease field" in payload["prompt"] and "WAKELEDGER_LEASE_TOKEN" not in payload["prompt"]
    assert headers["Idempotency-Key"] == OCCURRENCE


def test_a_receiver_with_another_secret_refuses(settings):
    with receiving(secret="another-secret") as (url, _received):
        settings.WAKELEDGER_DISPATCHERS = hook(url)
        assert send("hook") == Result(False, "HTTP 401")


def test_verify_signature_accepts_only_a_fresh_signature_of_the_same_body():
    body = b'{"goal_id": "x"}'
    header = sign(SECRET, body, timestamp=1_800_000_000)
    assert header.startswith("t=1800000000,v1=") and len(header.split("v1=")[1]) == 64
    assert verify_signature(SECRET, header, body, now=1_800_000_000)
    assert verify_signature(SECRET, header, body, now=1_800_000_300)  # the window's edge
    assert not verify_signature(SECRET, header, body, now=1_800_000_301)  # a replay, later
    assert not verify_signature(SECRET, header, body, now=1_799_999_699)  # from the future
    assert verify_signature(SECRET, header, body, now=1_800_000_500, tolerance=600)
    assert not verify_signature(SECRET, header, body + b" ", now=1_800_000_000)
    assert not verify_signature("other", header, body, now=1_800_000_000)
    # The timestamp is signed: moving it breaks the MAC.
    moved = header.replace("t=1800000000", "t=1800000100")
    assert not verify_signature(SECRET, moved, body, now=1_800_000_100)
    # Rotation: any one of several v1 values may match.
    rotated = f"{header},v1={'0' * 64}"
    assert verify_signature(SECRET, rotated, body, now=1_800_000_000)


@pytest.mark.parametrize("header", [None, "", "sha256=abc", "t=1800000000", "v1=00",
                                    "t=abc,v1=00", "t=1800000000,t=1800000000,v1=00",
                                    "t=-1800000000,v1=00", "t=١٨٠٠٠٠٠٠٠٠,v1=00", "garbage"])
def test_verify_signature_refuses_malformed_headers(header):
    assert verify_signature(SECRET, header, b"{}", now=1_800_000_000) is False


# ------------------------------------------------------------ OpenClaw


def claw(url: str, **extra) -> dict:
    return {"claw": {"type": "webhook", "url": url, "preset": "openclaw", **extra}}


@pytest.mark.django_db
def test_openclaw_preset_meets_the_gateway_contract(agent, clock, settings, monkeypatch):
    monkeypatch.setenv("OPENCLAW_HOOKS_TOKEN", "hooks-token-from-env")
    with openclaw_gateway(token="hooks-token-from-env",
                          session_key_prefixes=("hook:",)) as url:
        settings.WAKELEDGER_DISPATCHERS = claw(
            url, bearer_env="OPENCLAW_HOOKS_TOKEN",
            openclaw={"agentId": "main", "deliver": False, "wakeMode": "now",
                      "timeoutSeconds": 900})
        body = agent.start(policy={"dispatch": "claw", "lease_seconds": 300},
                           session={"session_key": "hook:wakeledger:shop"}).json()
        gid = body["goal"]["id"]
        # The Gateway carries no lease: the wake is ready, the message says so.
        assert vanish_and_wake(agent, gid, body, clock) == "ready_for_pull"
    assert Gateway.refused == []
    [(headers, payload)] = Gateway.accepted
    occurrence = f"internal:{gid}@occ-1"
    assert set(payload) == {"message", "name", "sessionKey", "idempotencyKey", "agentId",
                            "deliver", "wakeMode", "timeoutSeconds"}
    assert payload["idempotencyKey"] == occurrence == headers["Idempotency-Key"]
    assert payload["sessionKey"] == "hook:wakeledger:shop" and payload["name"] == "Wake Ledger"
    assert (payload["agentId"], payload["deliver"], payload["timeoutSeconds"]) == \
        ("main", False, 900)
    message = payload["message"]
    assert message.startswith(f"Resume Wake Ledger goal {gid}: Fix the flaky checkout test")
    assert "Next actions: reproduce; fix" in message
    # No lease to the Gateway (transcripts, chat summaries): the agent takes it.
    assert "wll_" not in json.dumps(payload) and "WAKELEDGER_LEASE" not in message
    assert f"POST {siteurl.api_url()}/goals/{gid}/lease" in message
    [dispatched] = Event.objects.filter(goal_id=gid, kind="continuation.dispatched")
    assert dispatched.data == {"occurrence_id": occurrence, "dispatcher": "claw", "ok": True,
                               "detail": "HTTP 202"}
    assert "hooks-token-from-env" not in json.dumps(Goal.objects.get(pk=gid).state)


def test_openclaw_without_a_session_key_lets_the_gateway_choose(settings):
    with openclaw_gateway(allow_request_session_key=False) as url:
        settings.WAKELEDGER_DISPATCHERS = claw(url, bearer="hooks-token")
        assert send("claw", session_key="") == Result(True, "HTTP 202")
    [(_headers, payload)] = Gateway.accepted
    assert "sessionKey" not in payload


def test_openclaw_refusals_are_certain_failures(settings):
    with openclaw_gateway(allow_request_session_key=False) as url:
        # The Gateway refuses request session keys unless configured to accept them.
        settings.WAKELEDGER_DISPATCHERS = claw(url, bearer="hooks-token")
        assert send("claw") == Result(False, "HTTP 400", uncertain=False)
        settings.WAKELEDGER_DISPATCHERS = claw(url, bearer="wrong-token")
        assert send("claw", session_key="") == Result(False, "HTTP 401", uncertain=False)
    assert [status for status, _ in Gateway.refused] == [400, 401]


def test_openclaw_refuses_bad_values_before_sending(settings):
    with openclaw_gateway() as url:
        settings.WAKELEDGER_DISPATCHERS = claw(url, bearer="hooks-token")
        assert send("claw", session_key="-x") == Result(False, "invalid session_key")
        # The Gateway would silently ignore a key over 256 characters.
        assert send("claw", occurrence_id="o" * 257) == Result(False, "invalid occurrence_id")
    assert Gateway.accepted == [] and Gateway.refused == []


@pytest.mark.parametrize(("extra", "message"), [
    ({}, "hooks token"),
    ({"bearer_env": "WAKELEDGER_TEST_UNSET_TOKEN"}, "is not set"),
    ({"bearer_env": "not a name"}, "must name an environment variable"),
    ({"bearer": ""}, "non-empty"),
    ({"bearer": "tok\r\nX-Injected: 1"}, "no spaces"),
    ({"bearer_env": "WAKELEDGER_TEST_SPACED_TOKEN"}, "not set to a token"),
    ({"bearer": "t", "openclaw": {"sessionKey": "x"}}, "openclaw.sessionKey is not one of"),
    ({"bearer": "t", "openclaw": {"deliver": "no"}}, "must be a bool"),
    ({"bearer": "t", "openclaw": {"timeoutSeconds": True}}, "must be a int"),
    ({"bearer": "t", "openclaw": ["agentId"]}, "must be an object"),
])
def test_bad_openclaw_settings_stop_start_up(extra, message, monkeypatch):
    monkeypatch.setenv("WAKELEDGER_TEST_SPACED_TOKEN", "tok\nX-Injected: 1")
    with pytest.raises(ImproperlyConfigured, match=message):
        dispatch.validate(claw("http://127.0.0.1:18789/hooks/agent", **extra))


def test_only_the_openclaw_preset_keeps_the_lease_back(settings):
    settings.WAKELEDGER_DISPATCHERS = {
        **hook("https://hooks.example/x"), **claw("https://gw.example/hooks/agent", bearer="t"),
        "cmd": {"type": "command", "argv": ["true"]}}
    assert dispatch.hands_over_lease("hook") and dispatch.hands_over_lease("cmd")
    assert not dispatch.hands_over_lease("claw")
    assert not dispatch.hands_over_lease("none") and not dispatch.hands_over_lease("nope")


def test_each_prompt_says_where_its_lease_is():
    assert "WAKELEDGER_LEASE_TOKEN" in dispatch.prompt(PACKET, GOAL)
    assert "lease field" in dispatch.prompt(PACKET, GOAL, lease_hint=dispatch.LEASE_IN_BODY)


# ------------------------------------------------------------ host references


@pytest.mark.django_db
def test_host_references_are_stored_as_keyed_digests(agent, clock, settings):
    body = agent.start(policy={"lease_seconds": 300, "cadence_minutes": 60,
                               "scheduler": "host"}).json()
    gid = body["goal"]["id"]
    lease = {"token": body["lease"]["token"], "generation": body["lease"]["generation"]}
    prepared = agent.post(f"goals/{gid}/watchdog", {"lease": lease}).json()
    receipt = agent.post(f"goals/{gid}/watchdog/receipts", {
        "lease": lease, "status": "created", "host_ref": "42",
        "due_at": prepared["host_schedule"]["first_due_at"], "runs_on": "local"})
    assert receipt.status_code == 200, receipt.json()
    [recorded] = Event.objects.filter(goal_id=gid, kind="receipt.recorded")
    stored = recorded.data["host_ref_sha256"]
    # A guessable id ("42") cannot be found by hashing candidates.
    assert stored != hashlib.sha256(b"42").hexdigest()
    assert len(stored) == 64 and int(stored, 16) >= 0
    assert stored == host_ref_digest("42") == Goal.objects.get(pk=gid).state["watchdog"][
        "host_ref_sha256"]
    # Keyed with the server's key: another key gives another digest.
    settings.SECRET_KEY = "another-server-key-" + "x" * 40
    assert host_ref_digest("42") != stored


def test_a_configuration_broken_after_start_up_is_a_certain_failure(settings, monkeypatch):
    monkeypatch.setenv("OPENCLAW_HOOKS_TOKEN", "t")
    settings.WAKELEDGER_DISPATCHERS = claw("https://gw.example/hooks/agent",
                                           bearer_env="OPENCLAW_HOOKS_TOKEN")
    monkeypatch.delenv("OPENCLAW_HOOKS_TOKEN")
    assert send("claw") == Result(False, "ImproperlyConfigured", uncertain=False)


@pytest.mark.django_db
def test_an_openclaw_continuation_takes_its_own_lease(agent, clock, settings):
    with openclaw_gateway() as url:
        settings.WAKELEDGER_DISPATCHERS = claw(url, bearer="hooks-token")
        body = agent.start(policy={"dispatch": "claw", "lease_seconds": 300},
                           session={"session_key": "hook:shop"}).json()
        gid = body["goal"]["id"]
        vanish_and_wake(agent, gid, body, clock)
    assert len(Gateway.accepted) == 1
    # What the message tells the resumed agent to do.
    taken = agent.post(f"goals/{gid}/lease").json()
    assert taken["acquired"] is True


def test_an_ipv6_loopback_receiver_is_reached(settings):
    from http.server import ThreadingHTTPServer

    class V6(ThreadingHTTPServer):
        address_family = socket.AF_INET6

    try:
        server = V6(("::1", 0), Receiver)
    except OSError:
        pytest.skip("no IPv6 loopback here")
    Receiver.received, Receiver.status, Receiver.secret = [], 202, SECRET
    Receiver.headers_out, Receiver.delay = {}, 0.0
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        settings.WAKELEDGER_DISPATCHERS = hook(f"http://[::1]:{server.server_port}/hook")
        assert send("hook") == Result(True, "HTTP 202")
    finally:
        server.shutdown()
        server.server_close()
    [(headers, _raw)] = Receiver.received
    assert headers["Host"] == f"[::1]:{server.server_port}"


@pytest.mark.django_db
def test_an_operator_wake_on_openclaw_is_pulled_never_a_lease_to_nobody(agent, operator, clock,
                                                                       settings):
    """The operator's wake once decided push from "a dispatcher is named"
    alone, so on the OpenClaw preset (which carries no lease) it granted a
    lease nobody received. Push or pull is now the domain's, for every wake."""
    with openclaw_gateway(allow_request_session_key=False) as url:
        settings.WAKELEDGER_DISPATCHERS = claw(url, bearer="hooks-token")
        body = agent.start(policy={"dispatch": "claw", "lease_seconds": 300}).json()
        gid = body["goal"]["id"]
        agent.post(f"goals/{gid}/lease/release", {"lease": lease_of(body)})
        woken = operator.post(f"goals/{gid}/wake", {"reason": "look at it now"}).json()
    assert woken["outcome"] == "ready_for_pull", woken
    assert Goal.objects.get(pk=gid).state["lease"] == {}
    assert agent.post(f"goals/{gid}/lease", {}).json()["acquired"] is True


# ---------------------------------------- the runs directory; a continuation that finishes first


def test_var_runs_and_its_logs_are_private_from_creation(settings, tmp_path):
    import os
    import stat

    from tests.scheduling.test_dispatch import echo_argv, send

    old = os.umask(0o022)  # the common default, which made them 0755 / 0644
    try:
        settings.WAKELEDGER_RUNS_DIR = tmp_path / "runs"
        settings.WAKELEDGER_DISPATCHERS = echo_argv(tmp_path, "{goal_id}")
        assert send("cmd").ok
        written_json(tmp_path / "argv.json")
    finally:
        os.umask(old)
    runs = tmp_path / "runs"
    assert stat.S_IMODE(runs.stat().st_mode) == 0o700
    [log] = runs.glob("*.log")
    assert stat.S_IMODE(log.stat().st_mode) == 0o600


@pytest.mark.django_db(transaction=True)
def test_a_continuation_that_finishes_before_its_dispatch_is_recorded_keeps_the_record(
        agent, clock, settings):
    """In the soak, a receiver's agent finished its goal with the pushed lease
    a few milliseconds after the webhook arrived, before the outbox recorded
    `continuation.dispatched`; the record was then refused ("the goal is done;
    it accepts no more work", scheduling/outbox.py _record) and the ledger
    shows a granted, charged wake with no dispatch, although the outbox row
    says `sent`. Here the receiver finishes the goal before it answers 202."""

    from http.server import BaseHTTPRequestHandler

    from rest_framework.test import APIClient

    from scheduling.models import Dispatch
    from tests.receivers import serving
    finished = []

    class FinishingReceiver(BaseHTTPRequestHandler):  # an agent host that works fast
        def do_POST(self):  # http.server's naming
            packet = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
            client = APIClient()
            client.credentials(HTTP_AUTHORIZATION=f"Bearer {agent.token}")
            lease = {"token": packet["lease"]["token"],
                     "generation": packet["lease"]["generation"]}
            answer = client.post(f"/api/v1/goals/{packet['goal_id']}/finish",
                                 {"lease": lease, "status": "completed", "summary": "done",
                                  "evidence": [{"criterion": "CI green",
                                                "evidence": "run 7 passed"}]},
                                 format="json")
            finished.append(answer.status_code)
            self.send_response(202)
            self.send_header("Content-Length", "0")
            self.end_headers()

        def log_message(self, *args):
            pass

    with serving(FinishingReceiver) as port:
        settings.WAKELEDGER_DISPATCHERS = {"hook": {
            "type": "webhook", "url": f"http://127.0.0.1:{port}/hook", "secret": SOAK_SECRET}}
        body = agent.start(policy={"dispatch": "hook", "lease_seconds": 300}).json()
        gid = body["goal"]["id"]
        lease = {"token": body["lease"]["token"], "generation": body["lease"]["generation"]}
        agent.post(f"goals/{gid}/watchdog", {"lease": lease})
        clock.advance(hours=1, minutes=1)  # the agent vanished; its slot is due
        assert tasks.fire_watchdog(gid, intended_date="occ-1") == "recurring_acquired"

    assert finished == [200]
    assert Dispatch.objects.get(goal_id=gid).status == Dispatch.SENT
    kinds = list(Event.objects.filter(goal_id=gid).order_by("seq").values_list("kind", flat=True))
    assert "continuation.charged" in kinds and "goal.completed" in kinds
    assert "continuation.dispatched" in kinds  # the push that did the work is on record
