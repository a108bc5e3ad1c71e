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
        caught_by: case ids that must be ``FAILED`` (empty for the unbroken control, which must pass them,
            and for a mutant caught by the run only).
        requirements: the ids of the spec sentences it breaks (``"R3.3.1-1"``,
            :mod:`conformance.engine.requirements`).
        description: what it breaks, in words (default: the server class's docstring).
        observed_by: for a mutant that breaks its clauses only on a path their own cases do not take: cases
            that take it. Run against them, the suite must fail on each of ``requirements`` (a ``FAILED``
            clause row, exit status 1) although no case owning one runs (issue 30).
    """

    name: str
    server: Callable[[], ToneServer]
    caught_by: tuple[str, ...]
    requirements: tuple[str, ...] = ()
    description: str | None = None
    observed_by: tuple[str, ...] = ()

    @property
    def breaks(self) -> str:
        """The rule it breaks, in words (the table's description, else the server class's docstring)."""
        return self.description or (self.server.__doc__ or "").strip().splitlines()[0]


AWS_SAMPLE_DEFECTS = ("3.2.1", "5.1.1", "5.3.1", "7.1.1", "7.1.2", "7.2.1", "9.2.8")
"""The cases of the requirements the AWS-sample server breaks: control frames valid against their schemas
(R5-1), synthesis_start describing the request (R5.1-1), audio_bytes (R5.3-2), close with 1000 once drained
(R7.1-3), error frames naming the request (R6.3-3). Exactly these are FAILED, every other case is OK."""

AWS_SAMPLE_BREAKS = ("R5-1", "R5.1-1", "R5.3-2", "R7.1-3", "R6.3-3")

CANCEL_OBSERVERS = ("4.2.1", "7.2.1")
"""Cases that cancel an active request: where a server that streams a cancelled request's audio after its
``synthesis_complete`` shows audio outside any bracket (R6.1-2), a clause none of them owns."""

MUTANTS: dict[str, Mutant] = {
    m.name: m
    for m in (
        Mutant("base", ToneServer, ()),
        Mutant("text-only", TextOnlyReceive, ("3.1.1", "9.1.1"), ("R3.1-1",)),
        Mutant("close-after-first", ClosesAfterFirstRequest, ("7.0.1", "7.1.1"), ("R7-1",)),
        Mutant("odd-frames", OddAudioFrames, ("3.3.2",), ("R3.3.1-1",)),
        Mutant("json-frame", JsonObjectAudioFrame, ("3.3.4",), ("R3.3.2-1", "R3.3.1-2")),
        Mutant(
            "blocking", BlockingSynthesis, ("8.1.1", "2.2.2", "2.3.1"), ("R8-1", "R8-2", "R2.2-2", "R2.3-2")
        ),
        Mutant("ignores-close", IgnoresClose, ("7.1.1",), ("R7.1-3",)),
        Mutant("no-drain", ClosesWithoutDraining, ("7.1.1",), ("R7.1-2",)),
        Mutant("interleave", InterleavesRequests, ("6.2.1",), ("R6.2-3", "R6.2-2")),
        Mutant("close-on-bad", ClosesOnBadMessage, ("9.1.5", "9.1.40"), ("R6.3-2",)),
        Mutant("wrong-rate", WrongSampleRate, ("4.1.9",), ("R4.1-6", "R5.1-1")),
        Mutant("no-cancel", WithoutCancel, ()),  # conforming: cancel is OPTIONAL (§1.5)
        Mutant("aws-sample", AwsSampleServer, AWS_SAMPLE_DEFECTS, AWS_SAMPLE_BREAKS),
        Mutant(
            "aws-sample-text-only",
            AwsSampleTextOnly,
            ("3.1.1", *AWS_SAMPLE_DEFECTS),
            ("R3.1-1", *AWS_SAMPLE_BREAKS),
        ),
        Mutant("late-cancel", LateCancel, ("4.2.4",), ("R4.2-6",)),
        Mutant("cancel-then-stream", CancelThenStream, (), ("R6.1-2",), observed_by=CANCEL_OBSERVERS),
        Mutant("whole-text", WholeTextFirst, ("10.1.1",), ("R10.1-8",)),
        Mutant("segment-frames", SegmentFrames, ("3.3.6", "3.3.7"), ("R3.3.1-6",)),
        Mutant("big-frames", BigFrames, ("3.3.7",), ("R3.3.1-6",)),
        Mutant("wrap", WrapsAround, ("3.3.8",), ("R3.3.1-7",)),
        Mutant("ids-no-skip", AssignsWithoutSkipping, ("4.1.11",), ("R4.1-8",)),
        Mutant("no-id-reuse", NoIdReuse, ("4.1.12",), ("R4.1-3",)),
        Mutant("lenient-timestamps", LenientTimestamps, ("4.1.13.1", "9.1.59", "9.1.60"), ("R4.1-5",)),
        Mutant("refuses-slowest", RefusesSlowest, ("4.1.13.5",), ("R4.1-5",)),
        Mutant("queues-silently", QueuesSilently, ("10.2.1",), ("R10.2-4",)),
        Mutant("unhealthy-when-busy", UnhealthyWhenBusy, ("10.2.2", "2.2.2"), ("R10.2-7", "R2.2-2")),
        *(
            Mutant(
                d.name,
                functools.partial(DefectServer, d),
                d.caught_by,
                d.requirements,
                d.breaks,
                d.observed_by,
            )
            for d in DEFECTS
        ),
        Mutant("marks-for-all", MarksForAll, ("5.5.3",), ("R5.5-7",)),
        Mutant("finishes-abandoned", FinishesAbandoned, ("7.4.2",), ("R7.4-1",)),
        Mutant("cancel-words-none", CancelWordsNone, ("5.3.2",), ("R5.3-4",)),
        Mutant("cancel-words-all", CancelWordsAll, ("5.3.2",), ("R5.3-4",)),
        Mutant("cancel-words-unsent", CancelWordsUnsent, ("5.3.2",), ("R5.3-4",)),
        # Pronunciations (§14.3): a server without them is the control, each other breaks one rule.
        Mutant("no-lexicon", WithoutLexicon, ()),  # conforming: the feature is OPTIONAL (§1.7)
        Mutant("lexicon-ignored", LexiconIgnored, ("14.3.1", "14.3.2"), ("R14.3-2", "R14.3-3")),
        Mutant("lexicon-in-words", LexiconInWords, ("14.3.1",), ("R14.3-2",)),
        Mutant("session-lexicon-ignored", SessionLexiconIgnored, ("14.3.1", "14.3.3"), ("R4.5-1", "R4.5-2")),
        Mutant("inline-as-link", InlineAsLink, ("14.3.2",), ("R14.3-3",)),
        Mutant("lexicon-any-phoneme", LexiconAnyPhoneme, ("14.3.3",), ("R14.3-1", "R9.1-1")),
        Mutant("lexicon-unbounded", LexiconUnbounded, ("14.3.3",), ("R10-2",)),
        # Utterances (§15): a version 1 server is the control, each other breaks one rule.
        Mutant("no-utterances", WithoutUtterances, ()),  # conforming: utterances are OPTIONAL (§1.5)
        Mutant("flush-ends-utterance", FlushEndsUtterance, ("15.4.1",), ("R15.4-2", "R15.3-4")),
        Mutant("fragment-segments", FragmentSegments, ("15.3.1",), ("R15.3-3",)),
        Mutant("waits-for-end", WaitsForEnd, ("15.3.2",), ("R15.3-1",)),
        Mutant("ignores-flush", IgnoresFlush, ("15.3.3",), ("R15.3-4",)),
        Mutant("cancel-ignores-utterance", CancelIgnoresUtterance, ("15.5.1",), ("R15.5-4",)),
        Mutant("close-drops-open", CloseDropsUtterance, ("15.5.2",), ("R15.5-1",)),
        Mutant("no-idle-timeout", NoIdleTimeout, ("15.5.3",), ("R15.5-3",)),
        Mutant("no-message-type", RefusalWithoutMessageType, ("15.6.1",), ("R15.6-1",)),
    )
}
"""Every mutant by name; ``base`` is the unbroken control."""
