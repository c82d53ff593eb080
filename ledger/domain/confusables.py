"""Look-alike characters folded to the ASCII they imitate, for the secret scan.

Pure: no Django here. The data is Unicode's own confusables table (UTS #39,
``data/confusables.txt``, version 16.0.0, as shipped in ICU 76.1's source;
its licence is ``data/UNICODE-LICENSE.txt``). A character is folded when its
UTS #39 skeleton equals the skeleton of a printable ASCII character (or is
itself ASCII): Cyrillic dze, er, ha and o (U+0455, U+0440, U+0445, U+043E),
Greek Alpha, Kappa and Iota, small capitals, and so on. Every dash and
minus sign folds to ``-``: the table maps U+2010, U+2011 and U+2212 to it
but an em dash to a Katakana prolonged sound mark, and a dash joins a key's
prefix to its body however it is drawn.

Some look-alikes stand for more than one ASCII character: Greek Iota looks
like ``I``, ``l``, ``1`` and ``|`` at once, and the Kelvin sign is ``K`` by
its skeleton but ``k`` by its case. ``fold`` picks the one of the same kind
(an upper-case letter for an upper-case letter); ``readings`` gives the
text with each choice, so that no credential escapes by the pick.
See docs/security.md ("Secrets never enter the ledger").
"""

import array
import functools
import itertools
import math
import re
import sys
import unicodedata
from pathlib import Path

import regex

DATA = Path(__file__).with_name("data") / "confusables.txt"
UNICODE_VERSION = "16.0.0"

_ASTRAL = re.compile("[\U00010000-\U0010ffff]")
_IGNORABLE = regex.compile(r"\p{Default_Ignorable_Code_Point}+")
# Dashes by Unicode's class (Pd) and the minus signs, which are not in it.
_DASHES = regex.compile(r"[\p{Pd}\u2212\u2796\u02d7\u2043\u207b\u208b\ufe63\uff0d]")


# Where Unicode keeps its small capitals (IPA Extensions, Phonetic
# Extensions, Latin Extended-D, -F and -G). UTS #39 leaves most of them
# alone (U+1D00 "ᴀ" is its own skeleton, U+1D0B "ᴋ" is "ĸ"), but set in a
# key they read as the letter they are a capital of.
_SMALL_CAPITALS = ((0x0250, 0x02AF), (0x1D00, 0x1D7F), (0xA720, 0xA7FF),
                   (0x10780, 0x107BF), (0x1DF00, 0x1DFFF))
_SMALL_CAPITAL = re.compile(r"LATIN LETTER SMALL CAPITAL ([A-Z])")
# Where the dashes are looked for: Unicode 16 has none above U+10EAD, and
# the planes past the first two hold no punctuation at all.
_DASH_PLANES = (0x80, 0xD800), (0xE000, 0x20000)
_UTF32 = f"utf-32-{'le' if sys.byteorder == 'little' else 'be'}"  # array's own order


def _small_capital(c: str) -> tuple[str, ...]:
    named = _SMALL_CAPITAL.fullmatch(unicodedata.name(c, ""))
    if named is None:
        return ()
    # Lower case first: a small capital is a lower-case letter (Ll).
    return (named[1].lower(), named[1])


class Folds:
    """The tables, built once from the data file."""

    def __init__(self, prototypes: dict[str, str]) -> None:
        self.prototypes = prototypes
        by_skeleton: dict[str, list[str]] = {}
        for code in range(0x21, 0x7F):
            by_skeleton.setdefault(self.skeleton(chr(code)), []).append(chr(code))
        choices: dict[str, tuple[str, ...]] = {}
        for c in prototypes:
            if c.isascii():
                continue
            options = _options(c, self.skeleton(c), by_skeleton)
            if options:
                choices[c] = options
        for first, last in _SMALL_CAPITALS:
            for code in range(first, last + 1):
                letter = _small_capital(chr(code))
                if letter:
                    known = choices.get(chr(code), ())
                    choices[chr(code)] = (*known, *(a for a in letter if a not in known))
        # Code points to text at C speed (a join of chr() took 35 ms).
        planes = "".join(array.array("I", range(first, last)).tobytes().decode(_UTF32)
                         for first, last in _DASH_PLANES)
        for c in _DASHES.findall(planes):
            # A dash that looks like something else besides (U+1400, the
            # Canadian syllabics hyphen, is "=" by its skeleton) reads as both.
            known = choices.get(c, ())
            choices[c] = known if "-" in known else (*known, "-")
        self.choices = choices
        self.fold = {ord(c): options[0] for c, options in choices.items()}
        ambiguous = [c for c, options in choices.items() if len(options) > 1]
        # A reading picks one ASCII character per class of look-alikes (every
        # look-alike of "I", "l", "1" and "|" the same), whatever each prefers:
        # no key's fixed prefix needs two of one class.
        self.classes = {c: tuple(sorted(choices[c])) for c in ambiguous}
        self.unambiguous = {code: a for code, a in self.fold.items()
                            if chr(code) not in self.classes}
        # Two classes: with a character above U+FFFF in it, a class costs
        # `re` about 300 ns a character of the text, without one 4 ns.
        self.ambiguous = re.compile(
            "[" + "".join(re.escape(c) for c in sorted(ambiguous) if c <= "\uffff") + "]")
        self.ambiguous_astral = re.compile(
            "[" + "".join(re.escape(c) for c in sorted(ambiguous) if c > "\uffff") + "]")

    def skeleton(self, text: str) -> str:
        """UTS #39's skeleton: NFD, without default-ignorable code points,
        each character replaced by its prototype, NFD again."""
        text = _IGNORABLE.sub("", unicodedata.normalize("NFD", text))
        mapped = "".join(self.prototypes.get(c, c) for c in text)
        return unicodedata.normalize("NFD", mapped)


def _options(c: str, skeleton: str, by_skeleton: dict[str, list[str]]) -> tuple[str, ...]:
    """The ASCII that ``c`` may stand for, the likeliest first: a character of
    the same general category (Greek Iota, a capital, is ``I`` before ``l``)."""
    found = list(by_skeleton.get(skeleton, ()))
    if skeleton.isascii() and skeleton not in found:
        found.append(skeleton)  # several characters: "rn" for U+AB51, "(l)" for U+2474
    for cased in (unicodedata.normalize("NFKC", c), c.lower(), c.upper()):
        # The Kelvin sign's skeleton is "K", its lower case "k"; U+0131, the
        # dotless i, is "i", then "I"; U+017F, the long s, is "f" by its look
        # and "s" by NFKC.
        if len(cased) == 1 and cased.isascii() and cased.isprintable() and cased not in found:
            found.append(cased)
    if not found:
        return ()
    category = unicodedata.category(c)
    found.sort(key=lambda a: (len(a) != 1 or unicodedata.category(a) != category,
                              a != skeleton, a))
    return tuple(found)


# A line of the table whose prototype is ASCII: source ; prototype ; type
# # comment (the source is one code point, the prototype one or more). Only
# these are read: a character folds only to ASCII, and a skeleton made of
# ASCII comes only from them (the table's prototypes are final: it maps
# none of them again). A third of the lines, a third of the start-up.
_LINE = re.compile(r"^([0-9A-F]+) ;\t((?:00[2-7][0-9A-F] ?)+) ;", re.MULTILINE)


def _code_points(hexes: str) -> str:
    return "".join(chr(int(h, 16)) for h in hexes.split())


def _parse(data: str) -> dict[str, str]:
    return {chr(int(source, 16)): _code_points(target) for source, target in _LINE.findall(data)}


@functools.cache
def folds() -> Folds:
    """Loaded on the first text that is not ASCII: most texts never need it."""
    return Folds(_parse(DATA.read_text(encoding="utf-8")))


def fold(text: str) -> str:
    """``text`` with every look-alike in the likeliest ASCII it imitates."""
    return text.translate(folds().fold)


# Readings of one text at most: every combination up to here (three classes
# of two and one of four is 32), past it each class's choices one at a time.
MAX_READINGS = 64


def readings(text: str) -> list[str]:
    """``text`` with every look-alike in ASCII, once per reading of those that
    imitate several characters (every combination of their classes' choices);
    just ``fold(text)`` when it holds none of those."""
    tables = folds()
    members = _classes(text)
    if not members:
        return [text.translate(tables.fold)]
    partial = text.translate(tables.unambiguous)
    found = []
    for choice in _choices(list(members)):
        reading = partial
        for options, pick in zip(members, choice, strict=True):
            for c in members[options]:
                reading = reading.replace(c, pick)
        found.append(reading)
    return found


def every_reading(text: str) -> bool:
    """Whether ``readings`` tries every combination for ``text``."""
    return math.prod(len(options) for options in _classes(text)) <= MAX_READINGS


def _classes(text: str) -> dict[tuple[str, ...], list[str]]:
    """The classes of the look-alikes of several characters in ``text``,
    each with its members there."""
    tables = folds()
    present = set(tables.ambiguous.findall(text))
    if _ASTRAL.search(text) is not None:
        present.update(tables.ambiguous_astral.findall(text))
    members: dict[tuple[str, ...], list[str]] = {}
    for c in sorted(present):
        members.setdefault(tables.classes[c], []).append(c)
    return members


def _choices(classes: list[tuple[str, ...]]) -> list[tuple[str, ...]]:
    if math.prod(len(options) for options in classes) <= MAX_READINGS:
        return list(itertools.product(*classes))
    # Too many to try all: each class's every choice with the others at
    # their first, and every class at its i-th choice together.
    firsts = tuple(options[0] for options in classes)
    found = {firsts}
    for i, options in enumerate(classes):
        for pick in options:
            found.add((*firsts[:i], pick, *firsts[i + 1:]))
    for k in range(max(len(options) for options in classes)):
        found.add(tuple(options[k % len(options)] for options in classes))
    return sorted(found)
