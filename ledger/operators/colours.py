"""The terminal's colours and icons, by name (a web view could map the same
names to CSS classes): what ``ledger goals`` and ``ledger show`` paint."""

# Colours by name, so a web view could map the same names to CSS classes.
_SGR = {"red": "31", "green": "32", "yellow": "33", "blue": "34", "magenta": "35",
        "cyan": "36", "grey": "90", "bold-red": "1;31", "bold-green": "1;32",
        "bold-magenta": "1;35", "dim": "2"}

FAMILY_COLOURS = {
    "goal": "bold-magenta", "workspace": "grey", "lease": "cyan", "checkpoint": "green",
    "wake": "blue", "receipt": "grey", "continuation": "yellow", "run": "yellow",
    "approval": "magenta", "job": "blue",
}
# Endings say more than their family: how a goal ended is what people look for.
KIND_COLOURS = {"goal.completed": "bold-green", "goal.failed": "bold-red",
                "goal.blocked": "bold-red", "goal.stopped": "red", "goal.paused": "yellow"}
STATUS_COLOURS = {"running": "green", "waiting": "cyan", "paused": "yellow",
                  "blocked": "bold-red", "done": "bold-green", "failed": "red", "stopped": "grey"}
# One narrow (not East-Asian-wide, not emoji) symbol per family, so columns line up.
FAMILY_ICONS = {
    "goal": "◉", "workspace": "☐", "lease": "⇄", "checkpoint": "✓", "wake": "↻",
    "receipt": "✎", "continuation": "⟳", "run": "▸", "approval": "⚑", "job": "⧗",
}


def paint(text: str, colour: str, enabled: bool) -> str:
    """``text`` in a named colour, or unchanged when colour is off (not a TTY)."""
    sgr = _SGR.get(colour)
    return f"\x1b[{sgr}m{text}\x1b[0m" if enabled and sgr else text


def family(kind: str) -> str:
    return kind.partition(".")[0]


def kind_colour(kind: str) -> str:
    return KIND_COLOURS.get(kind) or FAMILY_COLOURS.get(family(kind), "")
