"""The terminal's colours and icons, by name (a web view could map the same
names to CSS classes): what ``ledger goals`` and ``ledger show`` paint.

A kind names its look (its family's) and, when it says more than its family
(how a goal ended), a colour of its own (``STYLE``, declared with the kind in
``ledger.domain``); these tables turn the names into terminal colours and
symbols."""

from ledger.domain.kinds import style_of

# Colours by name, so a web view could map the same names to CSS classes.
_SGR = {"red": "31", "green": "32", "yellow": "33", "blue": "34", "magenta": "35",
        "cyan": "36", "grey": "90", "bold-red": "1;31", "bold-green": "1;32",
        "bold-magenta": "1;35", "dim": "2"}

# By look (a kind's ``STYLE.look``, its family).
FAMILY_COLOURS = {
    "goal": "bold-magenta", "workspace": "grey", "lease": "cyan", "checkpoint": "green",
    "wake": "blue", "receipt": "grey", "continuation": "yellow", "run": "yellow",
    "approval": "magenta", "job": "blue",
}
STATUS_COLOURS = {"running": "green", "waiting": "cyan", "paused": "yellow",
                  "blocked": "bold-red", "done": "bold-green", "failed": "red", "stopped": "grey"}
# One narrow (not East-Asian-wide, not emoji) symbol per look, so columns line up.
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


def look(kind: str) -> str:
    """The look a kind names; a kind this release does not know, its family's."""
    style = style_of(kind)
    return style.look if style is not None else family(kind)


def kind_colour(kind: str) -> str:
    style = style_of(kind)
    own = style.colour if style is not None else ""
    return own or FAMILY_COLOURS.get(look(kind), "")


def icon_of(kind: str) -> str:
    return FAMILY_ICONS.get(look(kind), "·")
