"""``wakeledger``: the agents' command-line client.

One command per API call, JSON on stdout, a distinct exit code per error
class, standard library only (it runs in whatever shell an agent has). It
reads WAKELEDGER_URL and WAKELEDGER_TOKEN and keeps the current goal's lease
token in a 0600 file, so consecutive calls need no copy-paste:

    wakeledger start --goal-key issue-42 --workspace /srv/shop --objective "Fix it"
    wakeledger checkpoint --step "tests written" --progress 40 --next "fix the race"
    wakeledger report-run --outcome error --error-text-file - < provider-error.txt
    wakeledger finish --status completed --summary "merged" \\
        --evidence "tests pass=make test: 212 passed"

WAKELEDGER_URL may be the server's root (http://127.0.0.1:8000): /api/v1 is
added when the URL's path does not end with it.

The parser is the table COMMANDS: one row per command, its arguments as
data, so that adding a command is adding a row.
"""

import argparse
import json
import os
import sys
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from wakeledger_agent import commands
from wakeledger_agent.client import api_base
from wakeledger_agent.errors import EXIT_INTERRUPTED, EXIT_OK, CliError

__all__ = ["COMMANDS", "CliError", "api_base", "main", "parser"]
_evidence_item = commands._evidence_item  # the tests' way in


@dataclass(frozen=True)
class Arg:
    flags: tuple[str, ...]
    options: dict[str, Any]


@dataclass(frozen=True)
class OneOf:
    """Arguments of which at most one may be given."""

    args: tuple[Arg, ...]


def arg(*flags: str, **options: Any) -> Arg:
    return Arg(flags, options)


@dataclass(frozen=True)
class Command:
    name: str
    help: str
    run: Callable[[argparse.Namespace], Any] | None = None
    args: tuple[Arg | OneOf, ...] = ()
    goal: bool = True  # takes --goal (default: the current goal)
    actions: tuple["Command", ...] = ()  # sub-commands (`job track`, `watchdog cancel`)


# The agent session a goal is bound to, so a wake resumes the same one.
SESSION = (
    arg("--agent-id", help="the agent runtime's own id for itself (recorded on the goal)"),
    arg("--session-key", help="the key that resumes the agent's session (a wake passes it "
        "to the dispatcher as {session_key})"),
    arg("--session-id", help="the agent's session id, when it differs from the key"),
    arg("--model", help="the model the session runs (recorded; helps read a limit notice)"),
    arg("--timezone", help="the IANA zone the agent's limit notices print wall times in"),
)
WAKE_REASONS = ["timeout_recovery", "dependency_ready", "scheduled_progress", "rate_limit_reset"]
ENDS_A_TURN = (
    arg("--wake-in", type=int, metavar="SECONDS",
        help="with the release: wake me this many seconds later (60 to the watchdog's "
             "interval)"),
    arg("--wake-reason", default="timeout_recovery", choices=WAKE_REASONS,
        help="with --wake-in: why that wake fires (default: timeout_recovery)"),
)
REPEAT: dict[str, Any] = {"action": "append", "default": []}


def serve_mcp(args: argparse.Namespace) -> Any:
    from wakeledger_agent import mcp_server  # lazily: only this command needs `mcp`

    sys.exit(mcp_server.main(share_leases=args.share_leases))


def run_hook(args: argparse.Namespace) -> Any:
    if args.agent == "openclaw":
        from wakeledger_agent import openclaw_hook

        sys.exit(openclaw_hook.main())
    from wakeledger_agent import claude_hook

    sys.exit(claude_hook.main())


def run_openclaw(args: argparse.Namespace) -> Any:
    from wakeledger_agent import openclaw_setup as setup

    action = args.openclaw_action
    if action == "resume":
        sys.exit(setup.resume(args.session_key, args.message, args.openclaw))
    if action == "notes":
        return setup.notes(args.openclaw)
    diff = (setup.install(args.url, dispatch=args.dispatch) if action == "install"
            else setup.uninstall())
    path = setup.config_path()
    print(diff or f"{path}: no change", end="" if diff else "\n")
    sys.exit(EXIT_OK)


def run_hooks(args: argparse.Namespace) -> Any:
    from wakeledger_agent import claude_settings

    path = claude_settings.settings_path(args.project, args.user)
    if args.hooks_action == "install":
        diff = claude_settings.install(path, args.command or claude_settings.default_command())
    else:
        diff = claude_settings.uninstall(path)
    print(diff or f"{path}: no change", end="" if diff else "\n")
    sys.exit(EXIT_OK)


def claude_run(args: argparse.Namespace) -> Any:
    from wakeledger_agent import claude_transcript

    command = args.command[1:] if args.command[:1] == ["--"] else args.command
    sys.exit(claude_transcript.run(command))  # its stdout is claude's: no JSON after it


CLAUDE_RUN = Command(
    "claude-run", "run claude (print mode, scripts, the --resume dispatcher) and report how "
    "its turn ended from the session's transcript when its hooks could not (docs/agents.md)",
    claude_run, goal=False, args=(arg("command", nargs=argparse.REMAINDER,
                                      metavar="-- CLAUDE ARGS", help="the claude command"),))
AGENTS = arg("agent", choices=["claude-code"], help="the agent whose hooks these are")
WHERE = (OneOf((arg("--project", metavar="DIR", help="DIR/.claude/settings.json (default: "
                    "the current directory's)"),
                arg("--user", action="store_true", help="~/.claude/settings.json"))),)
HOOK = Command("hook", "run one agent hook event (JSON on stdin); always exits 0",
               run_hook, goal=False, args=(arg("agent", choices=["claude-code", "openclaw"],
                                               help="the agent whose hook this is"),))
OPENCLAW_BIN = arg("--openclaw", default="openclaw", help="the openclaw program")
OPENCLAW = Command("openclaw", "the OpenClaw plugin, continuations and chat notes "
                   "(docs/agents.md)", goal=False, actions=(
    Command("install", "link the plugin into the OpenClaw config (idempotent; prints the diff)",
            run_openclaw, goal=False, args=(
                arg("--url", required=True, help="the server's URL, e.g. "
                    "http://127.0.0.1:8000/api/v1"),
                arg("--dispatch", help="the dispatcher new goals name (policy.dispatch)"))),
    Command("uninstall", "take the plugin out of the OpenClaw config", run_openclaw,
            goal=False),
    Command("resume", "what a wake's command dispatcher runs: keep its lease for the "
            "Gateway's hooks, then `openclaw agent --session-key K --message M`",
            run_openclaw, goal=False, args=(
                arg("--session-key", required=True,
                    help="the OpenClaw session the goal is bound to (its session key)"),
                arg("--message", required=True,
                    help="the resume prompt the wake hands over"),
                OPENCLAW_BIN)),
    Command("notes", "one chat note per terminal stop in its goal's OpenClaw session "
            "(chat.inject, no model turn)", run_openclaw, goal=False, args=(OPENCLAW_BIN,)),
))
HOOKS = Command("hooks", "install or uninstall the agent hooks", goal=False, actions=(
    Command("install", "merge our hooks into the agent's settings (idempotent; prints the "
            "diff)", run_hooks, goal=False, args=(
        AGENTS, *WHERE, arg("--command", help="the hook command to install (default: this "
                             "wakeledger, by absolute path)"))),
    Command("uninstall", "remove only our hooks", run_hooks, goal=False,
            args=(AGENTS, *WHERE)),
))

START = Command("start", "start or resume a goal and take its lease", commands.cmd_start,
                goal=False, args=(
    arg("--goal-key", required=True,
        help="the goal's stable name in its workspace: the same key resumes the same goal"),
    arg("--workspace", required=True, help="the directory (or repository) the goal works in"),
    arg("--objective", required=True, help="what the goal is to achieve, in one sentence"),
    arg("--done", **REPEAT, help="a done criterion (repeat)"),
    arg("--next", **REPEAT, help="a planned step (repeat)"),
    arg("--timeout", type=int, help="seconds this turn may run"),
    arg("--estimate", type=int, help="estimated seconds for the whole goal"),
    arg("--lease-seconds", type=int,
        help="how long each lease lasts before it must be renewed (the server caps it)"),
    arg("--scheduler", choices=["internal", "host"],
        help="who fires the watchdog's wakes: the server's scheduler (internal) or the "
             "agent's host (host: `watchdog prepare` answers the schedule to create)"),
    *SESSION))
CHECKPOINT = Command("checkpoint", "record a verified step", commands.cmd_checkpoint, args=(
    arg("--step", required=True, help="the step just verified, in a few words"),
    arg("--progress", type=int, required=True, help="percent of the goal done, 0 to 100"),
    arg("--completed", **REPEAT, help="something finished in this step (repeat)"),
    arg("--next", **REPEAT, help="the next planned action (repeat)"),
    arg("--artifact", **REPEAT, help="a file to record with its sha256 and size (repeat)"),
    arg("--overwrite", action="store_true",
        help="allow re-recording an artifact path with a new checksum"),
    arg("--error", **REPEAT, help="an error met in this step, for whoever resumes (repeat)"),
    arg("--note", default="", help="free text for whoever resumes the goal"),
    arg("--release", action="store_true",
        help="release the lease (the last checkpoint before a turn ends)"),
    *ENDS_A_TURN))
LEASE_HELP = ("acquire the lease (or take over a stale one); exit 0 with already_held when "
              "the live lease is the one in your lease file")
FINISH = Command("finish", "finish the goal", commands.cmd_finish, args=(
    arg("--status", required=True, choices=["completed", "failed", "blocked"],
        help="how the goal ends: completed needs evidence for each done criterion; blocked "
             "waits for a human"),
    arg("--summary", default="", help="what was done (required with completed)"),
    arg("--evidence", **REPEAT, metavar="CRITERION=EVIDENCE",
        help="with completed: what shows a done criterion holds (a link, a command and its "
             "result); one per done criterion (repeat)")))
REPORT_RUN = Command(
    "report-run", "report how a run ended (a rate limit pauses the goal until its reset and "
    "schedules one wake)", commands.cmd_report_run, args=(
        arg("--outcome", required=True, choices=["ok", "error"],
            help="how the run ended; an error needs --error-text(-file) or --retry-after"),
        OneOf((arg("--error-text", help="the provider's message (classified, then discarded "
                   "by the server)"),
               arg("--error-text-file", metavar="PATH",
                   help="read the provider's message from PATH, or stdin with -"))),
        arg("--retry-after", help="a Retry-After header value: seconds or an HTTP date"),
        *SESSION))
APPROVAL = Command("request-approval", "ask an operator to approve a gate; the goal blocks "
                   "until decided", commands.cmd_request_approval, args=(
    arg("--gate", required=True, help="what needs approving, e.g. deploy"),
    arg("--summary", default="", help="what the approver should know, in a sentence")))
JOB = Command("job", "blocking jobs: track, status", goal=False, actions=(
    Command("track", "track a blocking job (one exact run)", commands.cmd_job_track, args=(
        arg("--kind", required=True, help="e.g. ci_run, deploy, review"),
        arg("--ref", required=True, help="the exact run id"),
        arg("--link", default="", help="where a human sees the run"),
        arg("--notify", action="store_true",
            help="give the job a notify token (shown once) for the CI system to report its "
                 "end: a waiting goal is woken at once"))),
    Command("status", "record a tracked job's status", commands.cmd_job_status, args=(
        arg("job_id", metavar="JOB_ID", help="the job_id `job track` returned"),
        arg("--status", required=True, choices=["running", "succeeded", "failed", "cancelled"],
            help="the job's status now"),
        arg("--conclusion", default="", help="the job system's own word for its end"))),
))
RECEIPTS = ["created", "create_failed", "create_uncertain", "cancelled", "disabled",
            "user_attested_deleted"]
WATCHDOG = Command("watchdog", "the goal's one watchdog: prepare, cancel, receipt", goal=False,
                   actions=(
    Command("prepare", "ensure the watchdog (idempotent); for a host scheduler, the answer is "
            "the schedule to create", commands.cmd_watchdog_prepare,
            args=(arg("--tzid", help="IANA zone the host schedule runs in"),)),
    Command("cancel", "cancel the watchdog", commands.cmd_watchdog_cancel),
    Command("receipt", "record what the host did with the watchdog", commands.cmd_watchdog_receipt,
            args=(
        arg("--status", required=True, choices=RECEIPTS,
            help="what the host did: created the task, failed or may have failed to, "
                 "cancelled or disabled it, or the user says it is deleted"),
        arg("--host-ref", help="the host's task id (stored as a digest only)"),
        arg("--due-at", help="the next run, ISO 8601 with offset"),
        arg("--runs-on", choices=["cloud", "local", "unverified"],
            help="where the host task runs (a local one stops with the machine)"),
        arg("--verified", action="store_true", help="the host proved where the task runs"),
        arg("--attested-by", help="with user_attested_deleted: who says so"),
        arg("--note", help="free text recorded with the receipt"))),
))
CLAIM = Command("claim", "claim a wake (what a host-fired task runs first); exit 0 with a "
                "saved lease, 8 when there is nothing to do", commands.cmd_claim, args=(
    arg("--occurrence-id", help="the host run's id: the same id twice is one claim"),
    arg("--reason", choices=["timeout_recovery", "rate_limit_reset", "dependency_ready",
                             "scheduled_progress"],
        help="why the host task fired (default: the server's reading of the goal)")))
CONTINUED = Command(
    "continued", "say the host continued the session by itself (an auto-continue at a usage "
    "limit's reset, a run starting): exit 0 with the reset's lease saved or nothing to do, 8 "
    "when another continuation of that reset came first (stand down)", commands.cmd_continued,
    args=(arg("--host", required=True, help="who continued: claude-code, openclaw, ..."),
          arg("--trigger", required=True, choices=["session_start", "prompt", "run_start"],
              help="the host's hook that saw it"),
          arg("--session-key", help="the session the host continued (the goal's own)")))
EVENTS = Command("events", "the goal's events, in order", commands.cmd_events, args=(
    arg("--after", type=int, help="only events after this seq"),
    arg("--limit", type=int, help="at most this many events")))
GOALS = Command("goals", "list the goals you may see", commands.cmd_goals, goal=False, args=(
    *(arg(f"--{name}", help=f"only goals with this {name}")
      for name in ("status", "reason", "workspace", "agent")),
    arg("--cursor", help="the previous page's next cursor, for the next page"),
    arg("--page-size", type=int, help="goals per page")))
MCP = Command("mcp", "serve these calls as MCP tools over stdio (docs/agents.md)", serve_mcp,
              goal=False, args=(
    arg("--share-leases", action="store_true",
        help="keep leases in the CLI's lease files (WAKELEDGER_STATE_DIR) instead of this "
             "process only, so the lease `wakeledger hook` took is the one the tools use"),))



def supervise(args: argparse.Namespace) -> Any:
    from wakeledger_agent import supervise as supervisor  # lazily: it reads the failure classifier

    sys.exit(supervisor.main(args))  # its stdout is the agent's: no JSON answer after it


SUPERVISE = Command(
    "supervise", "run an agent command under the goal's lease: heartbeats, the run reported "
    "as its class (a limit notice pauses the goal until its reset), with --until-done its "
    "wakes pulled and resumed (docs/agents.md)", supervise, goal=False, args=(
        arg("--workspace", required=True, help="the directory the goal works in"),
        arg("--goal-key", required=True,
            help="the goal's stable name in its workspace: the same key resumes the same goal"),
        arg("--objective", default="",
            help="for a new goal (default: 'supervised: GOAL_KEY')"),
        arg("--done-criterion", "--done", dest="done", **REPEAT,
            help="a done criterion (repeat)"),
        arg("--next", **REPEAT, help="a planned step (repeat)"),
        arg("--resume-cmd", help="what a wake runs: one string, split as a shell would (no "
            "shell runs it), {goal_id} {session_key} {prompt} filled in per argument; "
            "default: CMD again"),
        arg("--until-done", action="store_true",
            help="after each run, wait for the goal's wake, pull it and resume, until the "
                 "goal ends or needs a human"),
        arg("--session-key", default="",
            help="the agent's session key (registered on the goal; {session_key})"),
        arg("--lease-seconds", type=int, help="for a new goal: how long each lease lasts"),
        arg("--timezone", help="the IANA zone limit notices print wall times in (default: "
            "this machine's)"),
        arg("--poll-seconds", type=float, default=30.0,
            help="with --until-done: the longest sleep between looks at the goal"),
        arg("--silent-limit", metavar="SECONDS",
            help="take the command for hung after this long without a byte of output or "
                 "a checkpoint: stop renewing the lease, stop it (SIGTERM to its process "
                 "group, SIGKILL 10 s later) and report an unclassified failure, which "
                 "blocks the goal for a human; 0 never (default: $WAKELEDGER_SILENT_LIMIT, "
                 "else 1800)"),
        arg("command", nargs=argparse.REMAINDER, metavar="-- CMD ARGS",
            help="the agent command to run")))

COMMANDS: tuple[Command, ...] = (
    START, CHECKPOINT,
    Command("heartbeat", "renew the lease", commands.cmd_heartbeat),
    Command("release", "release the lease", commands.cmd_release, args=ENDS_A_TURN),
    Command("lease", LEASE_HELP, commands.cmd_lease),
    FINISH,
    Command("workspace-release", "release the goal's workspace binding",
            commands.cmd_workspace_release,
            args=(arg("--reason", required=True, help="why (recorded in the history)"),)),
    REPORT_RUN, APPROVAL, JOB, WATCHDOG, CLAIM, CONTINUED,
    Command("show", "the goal's state", commands.cmd_show),
    Command("resume", "the resume packet", commands.cmd_resume),
    Command("contract", "the smart-wake checkpoint contract", commands.cmd_contract),
    EVENTS, GOALS,
    Command("alerts", "goals that need a human: one page, oldest first, with the total "
            "(count); pass the page's next cursor for the rest", commands.cmd_alerts,
            goal=False, args=(
                arg("--cursor", help="the previous page's next cursor, for the next page"),
                arg("--page-size", type=int, help="goals per page"))),
    MCP, HOOK, HOOKS, CLAUDE_RUN, OPENCLAW, SUPERVISE,
)
EPILOG = ("exit codes: 0 ok, 2 usage, 3 validation, 4 auth, 5 not found, 6 lease lost, "
          "7 goal terminal, 8 conflict or lease/wake not granted, 9 network or database busy "
          "(try again), 10 server")


def _add(within: Any, command: Command) -> None:
    sub = within.add_parser(command.name, help=command.help)
    if command.goal:
        sub.add_argument("--goal", help="goal id (default: the current goal)")
    for item in command.args:
        group = sub.add_mutually_exclusive_group() if isinstance(item, OneOf) else sub
        for one in item.args if isinstance(item, OneOf) else (item,):
            group.add_argument(*one.flags, **one.options)
    if command.actions:
        actions = sub.add_subparsers(dest=f"{command.name}_action", required=True,
                                     metavar="ACTION")
        for action in command.actions:
            _add(actions, action)
    if command.run is not None:
        sub.set_defaults(run=command.run)


def parser() -> argparse.ArgumentParser:
    root = argparse.ArgumentParser(
        prog="wakeledger", description=(__doc__ or "").splitlines()[0].replace("``", ""),
        epilog=EPILOG)
    subparsers = root.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for command in COMMANDS:
        _add(subparsers, command)
    return root


def main(argv: list[str] | None = None) -> int:
    args = parser().parse_args(argv)
    code = EXIT_OK
    try:
        try:
            output = args.run(args)
        except CliError as error:
            code, output = error.exit_code, error.body
            print(f"wakeledger: {error}", file=sys.stderr)
        if output is not None or code == EXIT_OK:
            print(json.dumps(output, indent=2))
            sys.stdout.flush()  # here, where a closed pipe can still be caught
    except BrokenPipeError:
        # The reader went away (`wakeledger events | head`): leave quietly
        # with the call's own exit code. Python would hit the closed pipe
        # again flushing stdout at exit, so point it at /dev/null first.
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
    except KeyboardInterrupt:
        return EXIT_INTERRUPTED
    return code


if __name__ == "__main__":
    sys.exit(main())
