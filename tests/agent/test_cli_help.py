"""Every option of `wakeledger` says what it is for: `wakeledger start --help`
used to leave most of its options undescribed. The whole argparse tree is
walked, so a command or option added later without a help text fails here."""

import argparse

from wakeledger_agent import cli


def undescribed(parser: argparse.ArgumentParser, path: str) -> list[str]:
    missing = []
    for action in parser._actions:
        if isinstance(action, argparse._HelpAction):
            continue
        if isinstance(action, argparse._SubParsersAction):
            described = {choice.dest: choice.help for choice in action._choices_actions}
            for name, sub in action.choices.items():
                if not described.get(name):
                    missing.append(f"{path} {name} (the command)")
                missing += undescribed(sub, f"{path} {name}")
            continue
        if not action.help or action.help == argparse.SUPPRESS:
            missing.append(f"{path} {'/'.join(action.option_strings) or action.dest}")
    return missing


def test_every_command_and_option_has_help_text():
    assert undescribed(cli.parser(), "wakeledger") == []


def test_the_walk_finds_an_option_without_help():
    # The test above could not fail if the walk missed options: it does not.
    parser = argparse.ArgumentParser(prog="x")
    sub = parser.add_subparsers().add_parser("start", help="a command")
    sub.add_argument("--quiet-one")
    assert undescribed(parser, "x") == ["x start --quiet-one"]


def test_start_help_describes_its_options(capsys):
    try:
        cli.parser().parse_args(["start", "--help"])
    except SystemExit as done:
        assert done.code == 0
    text = capsys.readouterr().out
    assert "--goal-key GOAL_KEY" in text and "--session-key SESSION_KEY" in text
    assert "the goal's stable name" in text
