"""Deliberately broken servers that prove the conformance suite has teeth.

Each mutant is :class:`~conformance.mutants.base.ToneServer` (spec-correct, a cheap deterministic tone
instead of Kokoro) with one behaviour broken (:mod:`conformance.mutants.variants`). :data:`MUTANTS` names
each one, the rule it breaks and the case ids that must report it ``FAILED``;
``tests/conformance/test_teeth.py`` runs the suite against every mutant and checks exactly that, and that the
unbroken server (``base``) passes.

Run one as a container: ``python -m conformance.mutants NAME --port P``, for example
``pytest conformance --container-cmd "python -m conformance.mutants odd-frames --port {port}"``.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from dataclasses import dataclass

from conformance.mutants.admission import (
    AssignsWithoutSkipping,
    LenientTimestamps,
    NoIdReuse,
    QueuesSilently,
    RefusesSlowest,
    UnhealthyWhenBusy,
)
from conformance.mutants.aws_sample import AwsSampleServer, AwsSampleTextOnly
from conformance.mutants.base import ToneServer
from conformance.mutants.catching import must_catch
from conformance.mutants.defects import DEFECTS, DefectServer
from conformance.mutants.features import (
    CancelWordsAll,
    CancelWordsNone,
    CancelWordsUnsent,
    FinishesAbandoned,
    InlineAsLink,
    LexiconAnyPhoneme,
    LexiconIgnored,
    LexiconInWords,
    LexiconUnbounded,
    MarksForAll,
    SessionLexiconIgnored,
    WithoutLexicon,
)
from conformance.mutants.synthesis import (
    BigFrames,
    CancelThenStream,
    LateCancel,
    SegmentFrames,
    WholeTextFirst,
    WrapsAround,
)
from conformance.mutants.variants import (
    BlockingSynthesis,
    CancelIgnoresUtterance,
    CloseDropsUtterance,
    ClosesAfterFirstRequest,
    ClosesOnBadMessage,
    ClosesWithoutDraining,
    FlushEndsUtterance,
    FragmentSegments,
    IgnoresClose,
    IgnoresFlush,
    InterleavesRequests,
    JsonObjectAudioFrame,
    NoIdleTimeout,
    OddAudioFrames,
    RefusalWithoutMessageType,
    TextOnlyReceive,
    WaitsForEnd,
    WithoutCancel,
    WithoutUtterances,
    WrongSampleRate,
)

__all__ = ["MUTANTS", "Mutant"]


@dataclass(frozen=True)
class Mutant:
    """A server to certify and what the suite must say about it.

    Attributes:
        name: the command-line name.
        server: makes the server (a :class:`ToneServer` subclass, or a :class:`DefectServer` with its row).
        requirements: the ids of the spec sentences, or of the conditions of a split sentence, it breaks
            (``"R3.3.1-1"``, ``"R4.2-2b"``, :mod:`conformance.engine.requirements`); empty for a conforming
            server (the unbroken control and the servers without an optional feature).
        description: what it breaks, in words (default: the server class's docstring).
        observed_by: for a mutant that breaks its clauses only on a path their own cases do not take: cases
            that take it. Run against them, the suite must fail on each of ``requirements`` (a ``FAILED``
            clause row, exit status 1) although no case owning one runs (issue 30).
    """

    name: str
    server: Callable[[], ToneServer]
    requirements: tuple[str, ...] = ()
    description: str | None = None
    observed_by: tuple[str, ...] = ()
    where: tuple[str, ...] = ()
    """Condition ids that narrow it: it breaks ``requirements`` only where all of these apply too
    (:func:`~conformance.mutants.catching.must_catch`)."""

    @property
    def caught_by(self) -> tuple[str, ...]:
        """The case ids that must report it ``FAILED`` (``NON-STRICT`` for a SHOULD case): every case citing
        one of its requirement ids (:func:`conformance.mutants.catching.must_catch`); empty for a conforming
        server, which must pass them, and for a mutant caught by the run only (``observed_by``)."""
        return must_catch(self.requirements, self.observed_by, self.where)

    @property
    def breaks(self) -> str:
        """The rule it breaks, in words (the table's description, else the server class's docstring)."""
        return self.description or (self.server.__doc__ or "").strip().splitlines()[0]


AWS_SAMPLE_DEFECTS = (
    "3.2.1",
    "4.2.42",
    "4.2.43",
    "5.1.1",
    "5.3.1",
    "7.1.1",
    "7.1.2",
    "7.2.1",
    "9.2.8",
    "9.2.10",
)
"""The cases of the requirements the AWS-sample server breaks: control frames valid against their schemas
(R5-1), synthesis_start describing the request (R5.1-1), audio_bytes (R5.3-2; for a cancelled request,
R4.2-6c), a cancelled request's synthesis_complete saying so (its status is missing, R4.2-5: 4.2.43), close
with 1000 once drained (R7.1-3), error frames naming the request (R6.3-3). Exactly these are FAILED, every
other case is OK."""

AWS_SAMPLE_BREAKS = ("R5-1", "R5.1-1a", "R7.1-3a", "R7.1-3b", "R6.3-3b")
"""What the AWS-sample server breaks, by condition. Its audio_bytes defect (R5.3-2) shows only in 5.3.1's
pipelined session, narrower than any condition of R5.3-2, so it is not named here: 5.3.1 is held FAILED by
the whole-suite check of :data:`AWS_SAMPLE_DEFECTS` instead."""

CANCEL_OBSERVERS = ("4.2.1", "7.2.1")
"""Cases that cancel an active request: where a server that streams a cancelled request's audio after its
``synthesis_complete`` shows audio outside any bracket (R6.1-2), a clause none of them owns."""


def _by_name(mutants: tuple[Mutant, ...]) -> dict[str, Mutant]:
    """Name -> mutant. Raises ValueError on a name given twice: a dict would keep the second silently (a
    condition mutant once replaced a run-level one of the same name, and its checks went with it)."""
    by_name: dict[str, Mutant] = {}
    for mutant in mutants:
        if mutant.name in by_name:
            raise ValueError(f"two mutants are named {mutant.name!r}")
        by_name[mutant.name] = mutant
    return by_name


MUTANTS: dict[str, Mutant] = _by_name(
    (
        Mutant(
            "base",
            ToneServer,
        ),
        Mutant("text-only", TextOnlyReceive, ("R3.1-1",)),
        Mutant("close-after-first", ClosesAfterFirstRequest, ("R7-1",)),
        Mutant("odd-frames", OddAudioFrames, ("R3.3.1-1",)),
        Mutant("json-frame", JsonObjectAudioFrame, ("R3.3.2-1", "R3.3.1-2")),
        Mutant("blocking", BlockingSynthesis, ("R8-1", "R8-2", "R2.2-2", "R2.3-2")),
        Mutant("ignores-close", IgnoresClose, ("R7.1-3a",)),
        Mutant("no-drain", ClosesWithoutDraining, ("R7.1-2",)),
        Mutant("interleave", InterleavesRequests, ("R6.2-3", "R6.2-2")),
        Mutant("close-on-bad", ClosesOnBadMessage, ("R6.3-2c",)),
        Mutant("wrong-rate", WrongSampleRate, ("R4.1-6", "R5.1-1d")),
        Mutant(
            "no-cancel",
            WithoutCancel,
        ),  # conforming: cancel is OPTIONAL (§1.5)
        Mutant("aws-sample", AwsSampleServer, AWS_SAMPLE_BREAKS),
        Mutant(
            "aws-sample-text-only",
            AwsSampleTextOnly,
            ("R3.1-1", "R5.3-2", *AWS_SAMPLE_BREAKS),  # failing nearly every case, it fails R5.3-2's too
        ),
        Mutant("late-cancel", LateCancel, ("R4.2-6a",)),
        Mutant("cancel-then-stream", CancelThenStream, ("R6.1-2",), observed_by=CANCEL_OBSERVERS),
        Mutant("whole-text", WholeTextFirst, ("R10.1-8",)),
        Mutant("segment-frames", SegmentFrames, ("R3.3.1-6a", "R3.3.1-6b", "R3.3.1-6c")),
        Mutant("big-frames", BigFrames, ("R3.3.1-6c",)),
        Mutant("wrap", WrapsAround, ("R3.3.1-7",)),
        Mutant("ids-no-skip", AssignsWithoutSkipping, ("R4.1-8b",)),
        Mutant("no-id-reuse", NoIdReuse, ("R4.1-3",)),
        Mutant("lenient-timestamps", LenientTimestamps, ("R4.1-5o", "R4.1-5q", "R4.1-5r")),
        Mutant("refuses-slowest", RefusesSlowest, ("R4.1-5f",)),
        Mutant("queues-silently", QueuesSilently, ("R10.2-4",)),
        Mutant("unhealthy-when-busy", UnhealthyWhenBusy, ("R10.2-7", "R2.2-2")),
        *(
            Mutant(
                d.name,
                functools.partial(DefectServer, d),
                d.requirements,
                d.breaks,
                d.observed_by,
                d.where,
            )
            for d in DEFECTS
        ),
        Mutant("marks-for-all", MarksForAll, ("R5.5-7a",)),
        Mutant("finishes-abandoned", FinishesAbandoned, ("R7.4-1a",)),
        Mutant("cancel-words-none", CancelWordsNone, ("R5.3-4a",)),
        Mutant("cancel-words-all", CancelWordsAll, ("R5.3-4b",)),
        Mutant("cancel-words-unsent", CancelWordsUnsent, ("R5.3-4b",)),
        # Pronunciations (§14.3): a server without them is the control, each other breaks one rule.
        Mutant(
            "no-lexicon",
            WithoutLexicon,
        ),  # conforming: the feature is OPTIONAL (§1.7)
        Mutant("lexicon-ignored", LexiconIgnored, ("R14.3-2", "R14.3-3")),
        Mutant("lexicon-in-words", LexiconInWords, ("R14.3-2",)),
        Mutant("session-lexicon-ignored", SessionLexiconIgnored, ("R4.5-1a", "R4.5-2a")),
        Mutant("inline-as-link", InlineAsLink, ("R14.3-3",)),
        Mutant("lexicon-any-phoneme", LexiconAnyPhoneme, ("R14.3-1", "R9.1-1a", "R4.1-5v")),
        Mutant("lexicon-unbounded", LexiconUnbounded, ("R10-2",)),
        # Utterances (§15): a version 1 server is the control, each other breaks one rule.
        Mutant(
            "no-utterances",
            WithoutUtterances,
        ),  # conforming: utterances are OPTIONAL (§1.5)
        Mutant("flush-ends-utterance", FlushEndsUtterance, ("R15.4-2", "R15.3-4a")),
        Mutant("fragment-segments", FragmentSegments, ("R15.3-3a",)),
        Mutant("waits-for-end", WaitsForEnd, ("R15.3-1a",)),
        Mutant("ignores-flush", IgnoresFlush, ("R15.3-4b",)),
        Mutant("cancel-ignores-utterance", CancelIgnoresUtterance, ("R15.5-4",)),
        Mutant("close-drops-open", CloseDropsUtterance, ("R15.5-1a",)),
        Mutant("no-idle-timeout", NoIdleTimeout, ("R15.5-3b", "R15.5-3c")),
        Mutant("no-message-type", RefusalWithoutMessageType, ("R15.6-1",)),
    )
)
"""Every mutant by name; ``base`` is the unbroken control."""
