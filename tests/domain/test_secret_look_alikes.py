"""The secret scan sees through look-alikes: a credential whose fixed prefix
is written with letters of another script (Cyrillic, Greek), small capitals,
the Kelvin sign or a Unicode dash is refused as the credential it imitates,
and ordinary text in those scripts still passes. Pure domain: no Django.

Every text with a look-alike is built from code point escapes, so this file
holds none in the clear (and no secret scanner flags it)."""

import functools
import re
import unicodedata
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ledger.domain import InvalidCommand, decide
from ledger.domain.validation import any_secret, looks_like_secret

B64 = "AbCdEfGhIjKlMnOpQrStUvWxYz0123456789"

# One credential of each refused shape, as an agent would paste it.
SHAPES = [
    ("openai", "sk-proj-" + "a1B2c3D4e5F6g7H8i9J0k1L2"),
    ("anthropic", "sk-ant-" + "api03-" + "Xy7" * 8),
    ("stripe", "sk_live_" + "4eC39HqLyjWDarjtT1zdp7dc"),
    ("stripe webhook", "whsec_" + B64[:24]),
    ("github", "ghp_" + B64),
    ("github pat", "github_pat_" + B64),
    ("gitlab", "glpat-" + "xxxxXXXXxxxx1234abcd"),
    ("npm", "npm_" + B64),
    ("pypi", "pypi-" + B64 + B64[:20]),
    ("hugging face", "hf_" + B64[:34]),
    ("aws key id", "AKIA" + "ABCDEFGHIJKLMNOP"),
    ("aws sts key id", "ASIA" + "Y34FZKBOKMUTVV7A"),
    ("slack", "xoxp-" + "1234567890-abcdef"),
    ("google", "AIza" + "SyA1B2C3D4E5F6G7H8I9J0K1L2M3N4O5P6Q"),
    ("google oauth", "ya29." + B64[:24]),
    ("private key", "-----BEGIN RSA PRIVATE KEY-----"),
    ("bearer", "Bearer " + B64),
    ("jwt", "eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiJhZG1pbiJ9.c2lnbmF0dXJl"),
    ("url credentials", "postgres://app:" + "hunter22@db:5432/x"),
    ("password assignment", "PGPASSWORD=" + "correct-horse-battery"),
    ("api token", "wl_AbCdEfGh_" + B64),
    ("lease token", "wll_" + B64),
]


def u(*points: int) -> str:
    return "".join(map(chr, points))


# Seventeen forms that were stored with the key body intact before the scan
# folded look-alikes: each fixed prefix written with another script's
# letters, small capitals, the Kelvin sign or a Unicode hyphen or minus.
LOOK_ALIKES = [
    ("cyrillic dze in sk-", u(0x455) + "k-proj-" + "a" * 30),
    ("cyrillic dze in sk_live_", u(0x455) + "k_live_" + "4eC39HqLyjWDarjtT1zdp7dc"),
    ("cyrillic ha, o, er in xoxp-", u(0x445, 0x43E, 0x445, 0x440) + "-1234567890-abcdef"),
    ("cyrillic o in xoxb-", "x" + u(0x43E) + "xb-1234567890-abcdef"),
    ("cyrillic er in ghp_", "gh" + u(0x440) + "_" + B64),
    ("greek alpha, kappa, iota in AKIA", u(0x391, 0x39A, 0x399, 0x391) + "ABCDEFGHIJKLMNOP"),
    ("greek iota alone in AKIA", "AK" + u(0x399) + "AABCDEFGHIJKLMNOP"),
    ("cyrillic a, dze, i in ASIA", u(0x410, 0x405, 0x406, 0x410) + "Y34FZKBOKMUTVV7A"),
    ("small capitals in AKIA", u(0x1D00, 0x1D0B, 0x26A, 0x1D00) + "ABCDEFGHIJKLMNOP"),
    ("small capital k and greek iota in AKIA", "A" + u(0x1D0B, 0x399) + "A" + "ABCDEFGHIJKLMNOP"),
    ("small capitals in sk-", u(0xA731, 0x1D0B) + "-proj-" + "a" * 30),
    ("hyphen U+2010 in sk-proj-", "sk" + u(0x2010) + "proj" + u(0x2010) + "a" * 30),
    ("non-breaking hyphen U+2011 in glpat-", "glpat" + u(0x2011) + "xxxxXXXXxxxx1234abcd"),
    ("minus sign U+2212 in pypi-", "pypi" + u(0x2212) + B64 + B64[:20]),
    ("kelvin sign in sk-ant-", "s" + u(0x212A) + "-ant-api03-" + "Xy7" * 8),
    ("kelvin sign in sk_test_", "s" + u(0x212A) + "_test_" + "4eC39HqLyjWDarjtT1zdp7dc"),
    ("cyrillic ie in a jwt", u(0x435) + "yJhbGciOiJIUzI1NiJ9." + u(0x435)
     + "yJzdWIiOiJhZG1pbiJ9.c2lnbmF0dXJl"),
]


@pytest.mark.parametrize("text", [pytest.param(t, id=i) for i, t in LOOK_ALIKES])
def test_a_credential_written_with_look_alikes_is_refused(text):
    assert not text.isascii()
    assert looks_like_secret(f"deployed with {text} today")


@pytest.mark.parametrize("text", [pytest.param(t, id=i) for i, t in LOOK_ALIKES[:6]])
def test_a_checkpoint_with_a_look_alike_credential_is_refused_naming_its_field(text):
    from tests.domain.test_domain import T0, checkpoint, started

    state = started()
    cmd = checkpoint(state, note=f"pushed with {text}")
    with pytest.raises(InvalidCommand) as refused:
        decide(state, cmd, T0)
    assert refused.value.field == "note"
    assert "credential" in str(refused.value)


def test_a_commands_one_scan_finds_a_look_alike_key_among_many_other_look_alikes():
    """A key needing four choices at once (Greek Iota as "l", small capitals
    as lower case) is read in every combination in its own text; joined
    with another text's look-alikes, the combinations would be too many to
    try, and the scan of the command still finds it."""
    from ledger.domain import confusables

    key = "g" + u(0x399, 0x1D18, 0x1D00, 0x1D1B) + "-xxxxXXXXxxxx1234abcd"
    other = u(0x41E, 0x17F, 0x2BC, 0x1D04, 0x1D05, 0x1D07)
    assert looks_like_secret(key)
    assert not confusables.every_reading(f"{key}\n{other}")
    assert any_secret([key, other])
    assert any_secret([other, "a note", key])


# ------------------------------------------------------------ generated look-alikes


DATA = Path(__file__).resolve().parents[2] / "ledger" / "domain" / "data" / "confusables.txt"


@functools.cache
def look_alikes() -> dict[str, list[str]]:
    """Each printable ASCII character's look-alikes outside ASCII, read here
    from Unicode's table by its own definition (UTS #39: the same skeleton),
    not from the scan's code; its small capitals by name, its case twin (the
    Kelvin sign) and, for "-", every dash (Pd) and minus sign."""
    prototype = {}
    for line in DATA.read_text(encoding="utf-8").splitlines():
        fields = line.partition("#")[0].split(";")
        if len(fields) >= 2:
            prototype[chr(int(fields[0], 16))] = "".join(
                chr(int(h, 16)) for h in fields[1].split())

    def skeleton(text: str) -> str:
        mapped = "".join(prototype.get(c, c) for c in unicodedata.normalize("NFD", text))
        return unicodedata.normalize("NFD", mapped)

    by_skeleton: dict[str, list[str]] = {}
    for c in prototype:
        if not c.isascii():
            by_skeleton.setdefault(skeleton(c), []).append(c)
    found = {chr(a): list(by_skeleton.get(skeleton(chr(a)), ())) for a in range(0x21, 0x7F)}
    for code in range(0x80, 0x30000):
        c = chr(code)
        name = unicodedata.name(c, "")
        small = re.fullmatch(r"LATIN LETTER SMALL CAPITAL ([A-Z])", name)
        if small:
            found[small[1]].append(c)
            found[small[1].lower()].append(c)
        if unicodedata.category(c) == "Pd" or name in ("MINUS SIGN", "HEAVY MINUS SIGN"):
            found["-"].append(c)
    found["k"].append("\u212a")
    return {a: sorted(set(cs)) for a, cs in found.items() if cs}


@st.composite
def homoglyph_forms(draw: st.DrawFn) -> str:
    """A refused shape with some of its characters, prefix included, each
    swapped for one of its look-alikes."""
    _, secret = draw(st.sampled_from(SHAPES))
    swappable = [i for i, a in enumerate(secret) if a in look_alikes()]
    where = draw(st.sets(st.sampled_from(swappable), min_size=1, max_size=len(swappable)))
    chars = list(secret)
    for i in where:
        chars[i] = draw(st.sampled_from(look_alikes()[chars[i]]))
    return "".join(chars)


@settings(max_examples=250, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(homoglyph_forms(), st.sampled_from(["", "key ", "use: ", "(", "\n"]))
def test_any_look_alike_form_of_a_refused_shape_is_refused(text, before):
    assert looks_like_secret(f"{before}{text} here"), ascii(text)


def test_the_generated_forms_reach_every_shape_and_many_look_alikes():
    """The generator is worth something: each shape has characters to swap,
    and the tables give each of the prefixes' letters several look-alikes."""
    for _, secret in SHAPES:
        assert any(a in look_alikes() for a in secret)
    for a in "skAIKxopgh-_":
        assert len(look_alikes()[a]) >= 3, a


# ------------------------------------------------------------ text in other scripts


CYRILLIC = st.from_regex(r"[а-яё]{1,12}|[А-ЯЁ][а-яё]{0,11}|[ІіЇїЄєҐґ][а-яі]{0,6}", fullmatch=True)
GREEK = st.from_regex(r"[α-ωάέήίόύώ]{1,12}|[Α-Ω][α-ω]{0,11}", fullmatch=True)
TURKISH = st.sampled_from(["İstanbul", "Işık", "Ağaoğlu", "Çağrı", "Şükrü", "Gökçe", "ıslak",
                           "İzmir", "Öztürk", "kılıç", "IĞDIR", "ŞİŞLİ"])
MATH = st.sampled_from(["x − y = 3", "−1", "a − b − c", "2 − 1 = 1", "f(x) = x² − 4",
                        "−40 °C", "10 − 20 %", "Δt − ε", "α − β", "n − 1"])
DASHED = st.sampled_from(["—", "–", "‐", "‑", "−", "—то", "кто‑то", "well‐known",
                          "1990–2000", "pages 3–7", "Tokyo—Osaka"])
WORDS = st.one_of(CYRILLIC, CYRILLIC, GREEK, TURKISH, MATH, DASHED,
                  st.from_regex(r"[A-Za-z]{1,10}", fullmatch=True),
                  st.integers(0, 10**6).map(str),
                  st.sampled_from([".", ",", ";", ":", "(", ")", "!", "?", "«", "»", "„", "“"]))


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(WORDS, min_size=1, max_size=40).map(" ".join))
def test_prose_in_other_scripts_and_math_with_minus_signs_is_accepted(text):
    assert not looks_like_secret(text), text


@pytest.mark.parametrize("text", [
    "Запускаю интеграционные тесты на тестовой базе; сбой бывает раз в двадцать запусков.",
    "Хохо, хорошо: ключ АРІ сменили, пароль — в хранилище.",
    "Οι δοκιμές ΑΚΙΑ και ΑΣΙΑ πέρασαν· η βάση είναι ΟΚ.",
    "Ürün İstanbul'dan Işık Öztürk'e gönderildi; ŞİŞLİ deposu hazır.",
    "The error is x − y = 3 − 1 for n − 1 steps—then it converges (1990–2000).",
    "Коэффициент k = −0,5; СКО ≈ 0,3 — в пределах нормы.",
    "Ѕоме Ѕlavic letters: ѕ, і, ј, ԁ in words like Ѕкопје and ѕвезда.",
])
def test_ordinary_text_in_other_scripts_is_accepted(text):
    assert not looks_like_secret(text)


# ------------------------------------------------------------ the scan's own invariants


_FRAGMENT = st.one_of(
    st.sampled_from([text for _, text in LOOK_ALIKES]),
    st.sampled_from([text for _, text in SHAPES]),
    WORDS,
    st.text(max_size=30),
    st.text(alphabet="sSkK-_:/=@.eyJAIKwlhfBearer \u212a\u017f\u0130\u0131\u0455\u0399\u2212",
            max_size=30),
)


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(_FRAGMENT, min_size=1, max_size=5).map("".join))
def test_the_literal_prefilter_agrees_with_the_whole_alternation_on_every_fold(text):
    """Text outside ASCII goes through the literals too (unless it holds a
    character case-insensitive matching takes for an ASCII letter): on the
    text and on each of its folds, the verdict is the alternation's."""
    from ledger.domain.validation import _SECRET, _scan, folds

    for form in (text, *folds(text)):
        assert _scan(form) == (_SECRET.search(form) is not None), ascii(form)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(st.lists(_FRAGMENT, min_size=0, max_size=3).map("".join), min_size=1,
                max_size=6))
def test_one_scan_of_a_commands_texts_misses_no_look_alike(texts):
    """any_secret, the one scan of all a command's texts joined, folds them
    together: it still says yes whenever one of them holds a secret."""
    if any(looks_like_secret(t) for t in texts):
        assert any_secret(texts), texts


def test_the_table_is_unicodes_confusables_of_the_version_noted():
    from ledger.domain import confusables

    head = confusables.DATA.read_text(encoding="utf-8")[:600]
    assert f"# Version: {confusables.UNICODE_VERSION}" in head
    assert "Unicode Security Mechanisms for UTS #39" in head
    licence = confusables.DATA.with_name("UNICODE-LICENSE.txt").read_text(encoding="utf-8")
    assert "UNICODE LICENSE V3" in licence
