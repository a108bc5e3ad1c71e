"""Deadline-aware segmentation: where a server cuts a sentence into synthesis segments (PROTOCOL.md §10.1).

Kokoro speaks a segment in one pass and its time to synthesize grows with the audio it makes, so a long
sentence queued behind a short one can take longer to synthesize than the audio ahead of the listener
lasts: the listener hears silence. A server therefore cuts each sentence into segments whose predicted
synthesis time fits inside the audio already queued for the listener, and lets segments grow as that
buffer grows, because every cut costs a little prosody. This module is the cutting policy only: it knows
nothing of time. The server turns its time budget into a budget of *spoken units* with its model-speed
estimate (``reference_server.scheduling``) and asks :meth:`Segmenter.next_cut` for the best cut within it.

Where a cut may go, best first (:class:`Boundary`):

1. the end of the text (no cut);
2. after clause punctuation: ``, ; : — – …`` and a closing bracket; ``、，；：`` in Japanese and Chinese;
3. before a conjunction, subordinator or relative pronoun ("and", "because", "which"; "que", "qui",
   "che"; "और", "कि"; "但是", "因为"), or an opening bracket or quote;
4. before a preposition ("from", "de", "à", "di", "em"); after a Hindi postposition ("में", "से");
   after a Japanese particle that ends a phrase ("は", "を", "から") when a new word follows;
5. any other word boundary, and worst of all
6. a word boundary right after a function word ("the | house", "will | arrive"), or before a Hindi
   postposition.

Never: inside a word; inside a number, in figures or spelled out by the text front-end ("1 000 000",
"555 1234", "one thousand two hundred"); between Japanese or Chinese characters except at the places
above (a long run of CJK text without punctuation, particles or conjunctions stays whole, since without a
dictionary a cut there could split a word); after a token ending in a period (an abbreviation or
initial: "Dr.", "e.g.", "J."); before a token with no letter or digit ("—", "%"), so no segment starts
with one.

Lengths are in *spoken units* (:func:`spoken_units`): a letter or digit is 1, a kana 2, a CJK ideograph 3,
roughly proportional to speaking time. Every segment but a speech's first is at least ``min_units`` long
and leaves a rest of at least ``min_units`` (or none), so no cut leaves a fragment too short to sound
natural. The first segment of a speech (the listener has nothing queued) is short: the best natural
break within ``first_units``, unless the budget allows more.

Invariants (property-tested): the segment and the rest concatenate to the input text exactly; every cut
is at an allowed boundary; no character is lost or added.
"""

from __future__ import annotations

import enum
import unicodedata
from collections.abc import Mapping
from dataclasses import dataclass
from types import MappingProxyType

from protocol.voices import language_code

__all__ = [
    "BOUNDARY_WEIGHT",
    "DEFAULT_FIRST_UNITS",
    "DEFAULT_MIN_UNITS",
    "Boundary",
    "Cut",
    "Segmenter",
    "cuts",
    "spoken_units",
]

DEFAULT_MIN_UNITS = 12.0
"""Shortest segment (and shortest rest) except a speech's first, in spoken units: about two or three
English words. Shorter pieces are spoken with the intonation of a whole utterance and sound chopped; and
each synthesis pass costs a fixed share (Kokoro adds about 0.8 s of lead-in and trailing silence to every
pass, which the server trims at a cut), so tiny segments also waste the model's time."""

DEFAULT_FIRST_UNITS = 30.0
"""Longest first segment when the budget allows less, in spoken units: a few words (about five in
English). Short enough that sound starts at once, long enough to reach a natural break and to buy the
next segment some time."""


class Boundary(enum.IntEnum):
    """How good a cut is, worst to best; :attr:`FORBIDDEN` is never taken (see the module docstring)."""

    FORBIDDEN = 0
    WEAK = 1
    WORD = 2
    PREPOSITION = 3
    CONJUNCTION = 4
    CLAUSE = 5
    END = 6


BOUNDARY_WEIGHT: Mapping[Boundary, float] = MappingProxyType(
    {
        Boundary.FORBIDDEN: 0.0,
        Boundary.WEAK: 0.15,
        Boundary.WORD: 0.4,
        Boundary.PREPOSITION: 0.6,
        Boundary.CONJUNCTION: 0.75,
        Boundary.CLAUSE: 0.9,
        Boundary.END: 1.0,
    }
)
"""A cut's value is its weight times the segment's length in units: a longer segment wins unless a
clearly better boundary is reasonably close (a clause break at 40 units beats a word break at 80)."""


@dataclass(frozen=True, slots=True)
class Cut:
    """A place to cut a text.

    Attributes:
        position: index into the text: ``text[:position]`` is the segment (trailing whitespace
            included; strip it to synthesize), ``text[position:]`` the rest, which never starts with
            whitespace. ``position == len(text)`` for :attr:`Boundary.END`.
        kind: how good the boundary is.
        units: spoken units of the segment (:func:`spoken_units` of ``text[:position]``).
    """

    position: int
    kind: Boundary
    units: float


# --- languages ----------------------------------------------------------------------------------------


def _words(text: str) -> frozenset[str]:
    return frozenset(text.split())


_EN_CONJ = _words(
    """
    and but or nor so yet because although though while whereas if unless until since when whenever
    where wherever whether after before as than once who whom whose which that what why how
    """
)
_EN_PREP = _words(
    """
    about above across against along among around at behind below beneath beside besides between
    beyond by despite during except for from in inside into like near of off on onto out outside
    over past per through throughout to toward towards under underneath unlike up upon via with
    within without
    """
)
_EN_FUNCTION = _words(
    """
    a an the this these those my your his her its our their some any no every each either neither is
    are was were be been am will would can could should shall may might must do does did has have
    had not very more most
    """
)

_EN_PAIRS = frozenset(
    tuple(pair.split("+"))
    for pair in (
        "soon+as long+as well+as much+as far+as such+as so+that even+though even+if rather+than other+than "
        "more+than less+than order+to according+to due+to instead+of ahead+of as+if as+though now+that"
    ).split()
)
"""Word pairs that are one phrase ("as soon as", "rather than"): never cut between them."""

# Numbers as the text front-end spells them out (speech.frontend): never cut between two of their words.
_EN_NUMBERS = _words(
    """
    zero one two three four five six seven eight nine ten eleven twelve thirteen fourteen fifteen sixteen
    seventeen eighteen nineteen twenty thirty forty fifty sixty seventy eighty ninety hundred thousand
    million billion trillion point oh first second third fourth fifth sixth seventh eighth ninth tenth
    percent dollars dollar cents euros pounds
    """
)
_ES_NUMBERS = _words(
    """
    cero uno una dos tres cuatro cinco seis siete ocho nueve diez once doce trece catorce quince dieciséis
    veinte treinta cuarenta cincuenta sesenta setenta ochenta noventa cien ciento cientos mil millón
    millones coma doscientos trescientos cuatrocientos quinientos seiscientos setecientos ochocientos
    novecientos doscientas trescientas cuatrocientas quinientas seiscientas setecientas ochocientas
    novecientas veintiuno veintidós veintitrés veinticuatro veinticinco veintiséis veintisiete veintiocho
    veintinueve
    """
)
_FR_NUMBERS = _words(
    """
    zéro un une deux trois quatre cinq six sept huit neuf dix onze douze treize quatorze quinze seize vingt
    trente quarante cinquante soixante cent cents mille million millions milliard virgule pour
    """
)
_IT_NUMBERS = _words(
    """
    zero uno una due tre quattro cinque sei sette otto nove dieci undici dodici tredici venti trenta
    quaranta cinquanta sessanta settanta ottanta novanta cento mille mila milione milioni virgola
    """
)
_PT_NUMBERS = _words(
    """
    zero um uma dois duas três quatro cinco seis sete oito nove dez onze doze treze vinte trinta quarenta
    cinquenta sessenta setenta oitenta noventa cem cento mil milhão milhões vírgula duzentos trezentos
    quatrocentos quinhentos seiscentos setecentos oitocentos novecentos duzentas trezentas quatrocentas
    quinhentas seiscentas setecentas oitocentas novecentas
    """
)

_ES_CONJ = _words(
    """
    y e o u ni pero sino mas porque pues aunque si cuando mientras que quien quienes cual cuales
    cuyo cuya donde adonde como cuanto
    """
)
_ES_PREP = _words(
    """
    a al ante bajo con contra de del desde durante en entre hacia hasta mediante para por según sin
    sobre tras
    """
)
_ES_FUNCTION = _words(
    """
    el la los las un una unos unas lo mi mis tu tus su sus nuestro nuestra este esta estos estas ese
    esa esos esas es son está están fue ha han he no se me te le les nos
    """
)

_FR_CONJ = _words(
    """
    et ou mais donc or ni car que qu' qui quand lorsque lorsqu' puisque puisqu' parce quoique si
    comme dont où tandis
    """
)
_FR_PREP = _words(
    """
    à au aux de d' du des en dans par pour sur sous avec sans chez vers entre contre depuis pendant
    avant après selon malgré envers parmi
    """
)
_FR_FUNCTION = _words(
    """
    le la l' les un une mon ma mes ton ta tes son sa ses notre nos votre vos leur leurs ce cet cette
    ces je j' tu il elle on nous vous ils elles ne n' se s' me m' te t' est sont a ont très plus
    """
)

_IT_CONJ = _words(
    """
    e ed o od ma però perché poiché siccome se quando mentre che cui dove come quindi oppure né
    """
)
_IT_PREP = _words(
    """
    a ad al allo alla ai agli alle all' di del dello della dei degli delle dell' da dal dallo dalla
    dai dagli dalle dall' in nel nello nella nei negli nelle nell' con col su sul sullo sulla sui
    sugli sulle sull' per tra fra verso senza dopo prima durante contro
    """
)
_IT_FUNCTION = _words(
    """
    il lo la l' i gli le un uno una un' mio mia tuo tua suo sua nostro questo questa quello quella è
    sono ha hanno non si mi ti ci vi
    """
)

_PT_CONJ = _words(
    """
    e ou mas porém contudo todavia porque pois que quando enquanto se embora caso onde como quem
    cujo cuja cujos cujas nem
    """
)
_PT_PREP = _words(
    """
    a ao aos à às de do da dos das em no na nos nas num numa por pelo pela pelos pelas para pra com
    sem sobre entre até desde após contra durante sob perante
    """
)
_PT_FUNCTION = _words(
    """
    o os um uma uns umas meu minha seu sua nosso nossa este esta esse essa aquele aquela é são está
    estão foi não se me te lhe
    """
)

_HI_CONJ = _words(
    """
    और लेकिन मगर परंतु परन्तु किंतु किन्तु कि जो जिसे जिसने जिसका जिसकी जिसके जिन्हें जिन्होंने जहाँ
    जहां जब जबकि क्योंकि इसलिए तो या अथवा अगर यदि बल्कि तथा एवं ताकि चूँकि
    """
)
_HI_POST = _words(
    """
    में से को का की के पर ने तक लिए साथ बाद पहले द्वारा वाला वाली वाले
    """
)

_JA_PARTICLES = tuple(
    sorted(
        """から まで より ので のに けど けれど けれども ながら
        には では とは へは ても でも が を は に で と も へ や""".split(),
        key=len,
        reverse=True,
    )
)
_ZH_CONJ = tuple(
    sorted(
        """但是 可是 不过 然而 因为 所以 因此 而且 并且 或者 如果 要是 虽然 尽管
        然后 于是 接着 以及 即使 只要 只有 除非 无论 不管 既然 否则""".split(),
        key=len,
        reverse=True,
    )
)


@dataclass(frozen=True, slots=True)
class _Rules:
    before: frozenset[str] = frozenset()  # conjunctions: cut before them (CONJUNCTION)
    before_prep: frozenset[str] = frozenset()  # prepositions: cut before them (PREPOSITION)
    after_post: frozenset[str] = frozenset()  # postpositions: cut after them (PREPOSITION), never before
    function: frozenset[str] = frozenset()  # a cut right after one of these is WEAK
    elision: bool = False  # "qu'il" is looked up as "qu'"
    pairs: frozenset[tuple[str, str]] = frozenset()  # (previous, next) words never cut apart
    numbers: frozenset[str] = frozenset()  # words of a spelled-out number: never cut between two


_ENGLISH = _Rules(
    _EN_CONJ, _EN_PREP, function=_EN_CONJ | _EN_PREP | _EN_FUNCTION, pairs=_EN_PAIRS, numbers=_EN_NUMBERS
)
_RULES: Mapping[str, _Rules] = MappingProxyType(
    {
        "a": _ENGLISH,
        "b": _ENGLISH,
        "e": _Rules(_ES_CONJ, _ES_PREP, function=_ES_CONJ | _ES_PREP | _ES_FUNCTION, numbers=_ES_NUMBERS),
        "f": _Rules(
            _FR_CONJ, _FR_PREP, function=_FR_CONJ | _FR_PREP | _FR_FUNCTION, elision=True, numbers=_FR_NUMBERS
        ),
        "i": _Rules(
            _IT_CONJ, _IT_PREP, function=_IT_CONJ | _IT_PREP | _IT_FUNCTION, elision=True, numbers=_IT_NUMBERS
        ),
        "p": _Rules(_PT_CONJ, _PT_PREP, function=_PT_CONJ | _PT_PREP | _PT_FUNCTION, numbers=_PT_NUMBERS),
        "h": _Rules(_HI_CONJ, after_post=_HI_POST, function=_HI_CONJ),
        "j": _Rules(),
        "z": _Rules(),
        "": _Rules(),
    }
)

# --- characters ---------------------------------------------------------------------------------------

_CLAUSE_END = frozenset(",;:—–…、，；：‥!?！？")
_DASHES = frozenset("-—–…")
_OPENERS = frozenset("([{\"'“‘«¿¡「『（【《〈")
_APOSTROPHES = "'’"
_CJK_CLAUSE = frozenset("、，,；;：:…‥")


def _is_han(char: str) -> bool:
    code = ord(char)
    return 0x4E00 <= code <= 0x9FFF or 0x3400 <= code <= 0x4DBF or 0xF900 <= code <= 0xFAFF or char == "々"


def _is_hiragana(char: str) -> bool:
    return 0x3040 <= ord(char) <= 0x309F


def _is_katakana(char: str) -> bool:
    code = ord(char)
    return 0x30A0 <= code <= 0x30FF or 0x31F0 <= code <= 0x31FF or 0xFF66 <= code <= 0xFF9F


def _is_cjk(char: str) -> bool:
    return _is_han(char) or _is_hiragana(char) or _is_katakana(char)


def _is_closer(char: str) -> bool:
    return unicodedata.category(char) in ("Pe", "Pf") or char in "\"'」』）】》〉"


def _char_units(char: str) -> float:
    if _is_han(char):
        return 3.0
    if _is_hiragana(char) or _is_katakana(char):
        return 0.0 if char == "・" else 2.0
    return 1.0 if char.isalnum() else 0.0


def spoken_units(text: str, language: str = "a") -> float:
    """Roughly how long ``text`` takes to say, in units: letters and digits 1, kana 2, CJK ideographs 3.

    Punctuation, spaces and combining marks count 0. ``language`` is accepted for symmetry with
    :func:`cuts`; the weights do not depend on it (the server learns seconds per unit per language).
    """
    return float(sum(_char_units(char) for char in text))


def _is_mark_or_word(char: str) -> bool:
    return char.isalnum() or unicodedata.category(char)[0] == "M"  # Devanagari vowel signs are marks


def _key(token: str, elision: bool) -> str:
    """A token as the word lists spell it: lower case, without surrounding punctuation."""
    word = token.lower()
    start, end = 0, len(word)
    while start < end and not _is_mark_or_word(word[start]):
        start += 1
    while end > start and not _is_mark_or_word(word[end - 1]):
        end -= 1
    word = word[start:end].replace("’", "'")
    if elision and "'" in word:
        return word[: word.index("'") + 1]
    return word


def _has_alnum(token: str) -> bool:
    return any(char.isalnum() for char in token)


def _spaced_boundary(prev: str, nxt: str, rules: _Rules) -> Boundary:
    """The kind of a cut between two whitespace-separated tokens (rules in the module docstring)."""
    if not _has_alnum(nxt):
        return Boundary.FORBIDDEN  # no segment starts with "—", "%" or a lone quote
    if not _has_alnum(prev):
        return Boundary.CLAUSE if prev[-1] in _DASHES or prev[-1] in _CLAUSE_END else Boundary.FORBIDDEN
    if prev[-1].isdigit() and nxt[0].isdigit():
        return Boundary.FORBIDDEN  # digit groups: "1 000 000", "555 1234"
    bare = prev.rstrip("".join(c for c in prev if _is_closer(c)))
    if prev.endswith("...") or prev.endswith("…"):
        return Boundary.CLAUSE
    if prev.endswith(".") or bare.endswith("."):
        return Boundary.FORBIDDEN  # an abbreviation or an initial: "Dr.", "e.g.", "J."
    if bare and (bare[-1] in _CLAUSE_END or bare[-1] in _DASHES):
        return Boundary.CLAUSE
    if prev[-1] in ")]）】":
        return Boundary.CLAUSE
    if nxt[0] in _OPENERS and _has_alnum(nxt):
        return Boundary.CONJUNCTION
    after, before = _key(prev, rules.elision), _key(nxt, rules.elision)
    if after in rules.numbers and (before in rules.numbers or before.split("-")[0] in rules.numbers):
        return Boundary.FORBIDDEN  # inside a spelled-out number: "one thousand | two hundred"
    if after in rules.function or before in rules.after_post or (after, before) in rules.pairs:
        return Boundary.WEAK  # "the | house", "parce | que", "घर | में": the word leans on the next
    if before in rules.before:
        return Boundary.CONJUNCTION
    if before in rules.before_prep or after in rules.after_post:
        return Boundary.PREPOSITION
    return Boundary.WORD


def _run_boundary(text: str, i: int, code: str) -> Boundary:
    """The kind of a cut at ``i`` between two non-space characters (Japanese and Chinese runs)."""
    before, after = text[i - 1], text[i]
    if not (after.isalnum() or _is_cjk(after)) or after in "ー々・":
        return Boundary.FORBIDDEN  # no segment starts with punctuation or a length mark
    # Clause punctuation, possibly followed by closing brackets or quotes: "、" "，" or, after a CJK
    # character, an ASCII "," (never the comma of "1,000" or "a,b").
    j = i - 1
    while j > 0 and _is_closer(text[j]):
        j -= 1
    mark = text[j]
    if mark in _CJK_CLAUSE and (not mark.isascii() or (j > 0 and _is_cjk(text[j - 1]))):
        return Boundary.CLAUSE
    if code == "j" and _is_hiragana(before) and not _is_hiragana(after) and after != "ー":
        if any(text.endswith(particle, 0, i) for particle in _JA_PARTICLES) and i > 1:
            return Boundary.PREPOSITION  # a particle ends a phrase (bunsetsu) and a new word begins
    if code == "z" and _is_cjk(before) and any(text.startswith(word, i) for word in _ZH_CONJ):
        return Boundary.CONJUNCTION
    return Boundary.FORBIDDEN


def cuts(text: str, language: str = "a") -> list[Cut]:
    """Every place ``text`` may be cut, in order, with its kind; the last is the end (:attr:`Boundary.END`).

    Positions with kind :attr:`Boundary.FORBIDDEN` are listed too (between whitespace-separated tokens),
    so callers and tests can see why a place was refused. Position 0 is never a cut.

    Args:
        text: one sentence (or the rest of one), as the sentence chunker gives it.
        language: a Kokoro language code or a BCP 47 tag (:func:`protocol.voices.language_code`).
    """
    code = language_code(language)
    rules = _RULES.get(code, _RULES[""])
    prefix = [0.0]
    for char in text:
        prefix.append(prefix[-1] + _char_units(char))
    found: list[Cut] = []
    n = len(text)
    i = 0
    while i < n and text[i].isspace():
        i += 1
    token_start = i
    while i < n:
        if text[i].isspace():
            token = text[token_start:i]
            while i < n and text[i].isspace():
                i += 1
            if i == n:
                break
            end = i
            while end < n and not text[end].isspace():
                end += 1
            kind = _spaced_boundary(token, text[i:end], rules)
            found.append(Cut(i, kind, prefix[i]))
            token_start = i
            continue
        if i > token_start:
            kind = _run_boundary(text, i, code)
            if kind is not Boundary.FORBIDDEN:
                found.append(Cut(i, kind, prefix[i]))
        i += 1
    found.append(Cut(n, Boundary.END, prefix[n]))
    return found


class Segmenter:
    """Chooses the next segment of a sentence within a budget of spoken units (§10.1).

    Args:
        language: Kokoro language code or BCP 47 tag of the text (:func:`protocol.voices.language_code`).
        min_units: shortest segment and shortest rest, except a speech's first segment
            (:data:`DEFAULT_MIN_UNITS`).
        first_units: longest first segment when the budget allows less (:data:`DEFAULT_FIRST_UNITS`).

    Raises:
        ValueError: ``min_units`` or ``first_units`` is negative.
    """

    def __init__(
        self,
        language: str = "a",
        *,
        min_units: float = DEFAULT_MIN_UNITS,
        first_units: float = DEFAULT_FIRST_UNITS,
    ) -> None:
        if min_units < 0 or first_units < 0:
            raise ValueError("min_units and first_units must not be negative")
        self.language = language
        self.min_units = min_units
        self.first_units = first_units

    def next_cut(self, text: str, max_units: float, *, first: bool = False) -> Cut:
        """The best cut of ``text`` whose segment fits in ``max_units`` spoken units.

        Among the allowed cuts whose segment is at most ``max_units`` long (at most
        ``max(max_units, first_units)`` when ``first``) and at least ``min_units`` (no minimum when
        ``first``), and whose rest is empty or at least ``min_units``, the one with the largest
        ``BOUNDARY_WEIGHT[kind] * units`` wins (the longer on a tie). The whole text fits when it is
        short enough, so a generous budget never cuts. When nothing fits (the budget is too small for
        even a minimal segment), the best cut within ``first_units`` of the minimum is taken: the
        listener will wait either way, and a natural break costs nothing more.

        Returns:
            the :class:`Cut`; ``Boundary.END`` (the whole text) when no cut is allowed.
        """
        options = cuts(text, self.language)
        end = options[-1]
        lower = 0.0 if first else self.min_units
        limit = max(max_units, self.first_units) if first else max_units
        allowed = [
            cut
            for cut in options
            if cut.kind is Boundary.END
            or (
                cut.kind is not Boundary.FORBIDDEN
                and cut.units >= lower
                and cut.units > 0
                and end.units - cut.units >= self.min_units
            )
        ]
        fitting = [cut for cut in allowed if cut.units <= limit]
        if not fitting:
            limit = max(limit, lower + self.first_units)
            fitting = [cut for cut in allowed if cut.units <= limit] or allowed
        return max(fitting, key=lambda cut: (BOUNDARY_WEIGHT[cut.kind] * cut.units, cut.units, -cut.position))

    def early_cut(self, text: str, max_units: float, *, first: bool = False) -> Cut | None:
        """The best cut of a sentence that is still being written, within ``max_units`` (§10.1, §15.3).

        ``text`` is the start of a sentence whose end has not arrived: its last token may still grow
        (``"an"`` may become ``"and"``), so only the cuts between two tokens followed by whitespace are
        considered, never :attr:`Boundary.END`. Only a cut at whitespace between two plain words (letters,
        apostrophes and hyphens; the first may end in ``, ; :``) qualifies: the text front-end leaves
        such words as they are (§14.2), so the words spoken do not depend on where the text was cut; a
        figure, symbol or abbreviation next to the cut rules it out, and so does a run of Japanese or
        Chinese text (no whitespace). The segment is at least ``min_units`` long and the choice among the
        cuts within ``max_units`` is :meth:`next_cut`'s; when none fits, the shortest allowed cut is
        taken: the listener is about to run dry and the shortest segment is ready soonest. With
        ``first`` (the listener has nothing queued) nothing is cut until ``first_units`` of complete
        words are written, then the best break within ``max(max_units, first_units)``, as
        :meth:`next_cut` chooses a speech's first segment.

        Returns:
            the :class:`Cut` (``text[:position]`` is the segment), or ``None`` when no cut qualifies
            (the text is too short, or has no plain-word boundary yet).
        """
        if text[-1:].isspace():
            complete = text.rstrip()
        else:  # the last token may still grow: leave it out
            complete = text[: max((i for i, char in enumerate(text) if char.isspace()), default=0)].rstrip()
        if not complete:
            return None
        if first and spoken_units(complete) < self.first_units:
            return None  # not yet enough text for a first segment worth speaking
        lower = 0.0 if first else self.min_units
        limit = max(max_units, self.first_units) if first else max_units
        allowed = [
            cut
            for cut in cuts(complete, self.language)
            if cut.kind not in (Boundary.END, Boundary.FORBIDDEN)
            and cut.units >= lower
            and cut.units > 0
            and complete[cut.position - 1].isspace()
            and _plain(complete[: cut.position].split()[-1], trailing=True)
            and _plain(complete[cut.position :].split()[0], trailing=False)
        ]
        if not allowed:
            return None
        fitting = [cut for cut in allowed if cut.units <= limit]
        if not fitting:
            return min(allowed, key=lambda cut: cut.units)
        return max(fitting, key=lambda cut: (BOUNDARY_WEIGHT[cut.kind] * cut.units, cut.units, -cut.position))


def _plain(token: str, *, trailing: bool) -> bool:
    """A word the text front-end leaves alone: letters with inner apostrophes or hyphens; with
    ``trailing``, one clause mark (``, ; :``) may follow it."""
    if trailing and token[-1:] in (",", ";", ":"):
        token = token[:-1]
    parts = token.replace("’", "'").replace("-", "'").split("'")
    return bool(token) and all(part and all(_is_letter(char) for char in part) for part in parts)


def _is_letter(char: str) -> bool:
    return char.isalpha() or unicodedata.category(char)[0] == "M"  # Devanagari vowel signs are marks
