"""Normative sentences of spec/PROTOCOL.md that no black-box conformance case can observe, and why.

The traceability matrix (``python -m conformance.matrix``) lists these instead of cases. A sentence belongs
here when a client talking to a server through SageMaker (or the simulator) cannot see whether it holds:
a requirement on clients (the suite *is* a client: its own client code meets them, and ``tests/`` tests
that code), on deployment, or on what a server does inside.

Keys are requirement ids (:mod:`conformance.engine.requirements`); values say why, in a sentence.
"""

from __future__ import annotations

__all__ = ["CLIENT", "NO_MUTANT", "NO_RUN_MUTANT", "UNOBSERVABLE"]

CLIENT = "a requirement on clients: the suite is the client here (its client code meets it, tests/ check it)"

UNOBSERVABLE: dict[str, str] = {
    # Requirements on clients.
    "R1.7-1": CLIENT,
    "R3.1-2": CLIENT,
    "R3.1-4": CLIENT + "; the server's side is the invalid_json refusal of a BOM (R3.1-3)",
    "R3.3.1-3": CLIENT,
    "R3.3.1-4": CLIENT,
    "R3.4-1": CLIENT + "; the server's side is R3.3.2-1",
    "R3.4-2": CLIENT,
    "R3.4-3": CLIENT,
    "R3.4-4": CLIENT,
    "R4.1-2": CLIENT,
    "R4.1-4": CLIENT,
    "R4.2-3": CLIENT,
    "R5.4-2": CLIENT,
    "R11.4-4": CLIENT,
    "R11.4-8": CLIENT,
    "R12.3-1": CLIENT,
    "R12.3-2": CLIENT,
    "R15.4-1": CLIENT,
    # Requirements on deployment, documentation or the inside of a server.
    "R6.3-4": "needs a synthesis failure: a client cannot make a conforming server's synthesizer fail "
    "(tests/reference_server and tests/protocol cover the reference's internal_error path)",
    "R11.6-1": "needs a failure after the 200 status line: a client cannot make a conforming server fail "
    "mid-response (the simulator's fault cases test how such a failure reaches the caller)",
    "R10-1": "about the server's documentation, not its behaviour",
    "R13-1": "the default bind address of a server outside a container: the suite reaches the container only "
    "on the address it was given",
    "R13-2": "about deployment: the suite reaches the server only through the simulator or the endpoint",
    "R13-4": "about deployment (TLS in front of the server), not the server's protocol behaviour",
    **{
        rid: "a browser's request straight to the server: through SageMaker (or the simulator) no request "
        "reaches the container with a client's Origin, Host or request head "
        "(tests/reference_server/test_edges.py covers the reference)"
        for rid in ("R13-5", "R13-6", "R13-7")
    },
    "R7.3-1": "needs the server to be shut down mid-run: the suite certifies a running container and cannot "
    "signal a live endpoint's process",
    "R4.2-7d": "synthesis a server does for a cancelled queued request and then discards shows only as time; "
    "the audio it must not send is R4.2-7a's",
    "R9.4-2c": "a server that reads on after its fatal error frame shows it only by what it sends, which the "
    "frame being the last (R9.4-2a) already forbids; what it does inside with the bytes is not observable",
    "R7.3-2": "needs the server to be shut down mid-run (see R7.3-1)",
    "R7.3-3": CLIENT,
    # A server that cannot serve: the suite certifies a container that started and answers /ping 200.
    "R2.2-3": "about a server that cannot serve (missing or corrupt model files): the suite certifies a "
    "running container (tests/reference_server/test_failfast.py covers the reference's exit)",
    "R2.2-4": "about a server that cannot serve: the suite certifies a running container "
    "(tests/reference_server/test_ws.py covers the reference's answers until it exits)",
    "R2.2-5": "what a server does inside: a client cannot hand a server corrupt model files "
    "(tests/reference_server/test_failfast.py and test_assets.py cover the reference's refusal)",
    # Segmentation and scheduling (§10.1, §10.2): where a server cuts and whom it serves first is not on
    # the wire; what a client can see of it (words, timings, order) is §5.3 and §6.2, with their cases.
    **{
        rid: "what a server does inside: its cuts and its order of synthesis are not on the wire "
        "(tests/speech/test_segmenter.py and tests/reference_server/test_scheduling.py cover the "
        "reference; bench/RESULTS.md measures what a listener hears)"
        for rid in ("R10.1-1", "R10.1-2", "R10.1-3", "R10.1-4", "R10.1-5", "R10.1-7", "R10.2-1", "R10.2-2")
    },
    "R10.2-3": "how a server judges when first audio would go out is not on the wire; what a client sees of "
    "it, served in time or refused at once, is R10.2-4 and its case (tests/reference_server/"
    "test_admission.py checks the reference's promise against the wait on a model of known speed)",
    "R10.1-6": "the cuts are not on the wire; what a client sees of them, the words and their timings on "
    "one timeline, is §5.3 and its cases (tests/reference_server/test_scheduling.py checks the timings "
    "point at the words after cuts)",
    # Floods and idle sessions (§7.5, §10.3): what the container does with its socket is hidden behind the
    # transport, which reads and buffers for the client; the reference is checked from inside.
    "R7.5-1": "needs a session idle for session_idle_timeout_s (default 300 s): far past a case's deadline "
    "(tests/reference_server/test_load_bounds.py covers the reference with a short setting)",
    "R7.5-2": "needs sessions idle for minutes (session_idle_timeout_s); 7.0.1 keeps one idle for 2 s "
    "(tests/reference_server/test_load_bounds.py covers the reference)",
    "R10.3-1": "whether the container stops reading its socket is hidden by the transport, which reads the "
    "container's output for the client (SageMaker, the simulator): "
    "tests/reference_server/test_load_bounds.py checks the reference's queued output stays under "
    "max_output_bytes",
    "R10.3-2": "needs the container's output to stay unread for send_timeout_s (default 60 s), which the "
    "transport between them reads (tests/reference_server/test_load_bounds.py covers the reference)",
    "R10.3-3": "what a server does inside: how much input it has read ahead is not on the wire",
    "R10.3-5": "what a server does inside: its memory (bench/abuse.py measures the reference's RSS before, "
    "during and after a flood)",
    # Utterances (§15).
    "R15.2-1": CLIENT + " (how a client may split its text; the server's side is R15.3-3)",
    "R15.5-2": CLIENT,
    "R15.3-2": "a timing property, not a verdict a loaded machine can give: whether audio flows without gaps "
    "while text arrives faster than it is spoken is measured by bench/agent_latency.py (stream mode's "
    "playback underrun) on a quiet machine",
}
"""Requirement id -> why no server case can observe it."""

NO_MUTANT: dict[str, str] = {
    "R2.5-1": "the WebSocket layer of any ASGI server (uvicorn here) reassembles fragments before the "
    "application sees a message: a one-defect mutant cannot receive fragments differently",
}
"""Requirement id -> why no one-defect mutant of the tone server can break it (its cases still run)."""

NO_RUN_MUTANT: dict[str, str] = {
    "R2.3-1": "a handshake is judged on its timing by 2.3.1 alone, on sessions it opens without a retry: "
    "elsewhere an opening refused once is tried again and logged (host load passes the 250 ms accept "
    "deadline as well as a slow container), and one refused twice is a finding in any case",
    "R5.5-6": "spans come only in marks frames, which only the marks recording asks for, and the marks "
    "cases that judge it own the clause: no case outside them can see a span",
    "R6.2-3": "brackets out of order on the cancel path break the cancel's 'in its turn' (R4.2-7) as well, "
    "which 4.2.2 owns: no path found on which only R6.2-3 breaks",
    "R7-1": "every case sends close as soon as its answers are in: a server that ends a session before it is "
    "seen ending it only where the case was still waiting for an answer, which fails the case itself",
    "R15.6-1": "only the utterance cases get refusals that name an utterance, and 15.6.1 refuses each kind "
    "of utterance message: no path found that only other cases take",
}
"""Requirement id -> why no mutant breaks it only outside its own cases, for the clauses a finding can be
recorded on in any case (:func:`conformance.engine.clauses.recorded`; the others have a mutant caught by the
run)."""
