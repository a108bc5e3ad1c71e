"""One agent invocation: the model's reply streamed as text and speech, in ``bidi``, ``stream`` or
``batch`` mode.

Every mode opens ONE TTS session when the invocation starts and runs two concurrent tasks that push
events into one queue:

* the *writer* drains the Strands agent's text stream (``Agent.stream_async``; text deltas are
  ``event["data"]``, REFERENCE.md §5), emits each delta as ``text_delta`` and hands it to the TTS;
* the *speaker* drains the TTS session and emits its audio as ``audio_chunk`` events as it arrives.

The modes differ in who decides when synthesis starts:

* ``stream`` pipes every delta, as it comes, into one utterance (PROTOCOL.md §15): the TTS server cuts
  the text into segments itself and starts speaking at its first complete sentence. The agent writes
  no chunker; while the model pauses it keeps the utterance open with empty appends
  (:data:`KEEPALIVE_S`), and ends it when the reply is complete;

and, with a segmenter in the agent:

* ``bidi`` uses :class:`speech.chunker.IncrementalSentenceChunker` in the voice's language (the text
  front-end's markdown and sentence stages, :mod:`speech.frontend`): each sentence, or heading, list
  item or table row, goes to the TTS as soon as it is complete, so the first sentence is heard while
  later ones are still being written. At the end of the reply the chunker is flushed, so the last words
  are spoken even without final punctuation. Figures, symbols and emoji are left for the TTS server to
  normalize (PROTOCOL.md §14.2);
* ``batch`` (:class:`WholeReply`) releases nothing until the reply is complete, then the whole reply
  as one synthesis request: the fair baseline.

Every failure ends the stream with one ``error`` event (:class:`reference_agent.events.AgentErrorCode`
says which leg failed), never a hang or a silent stop.

With a :class:`~reference_agent.conversation.Conversation`, the model sees the history and the turn is
recorded in it. A barge-in (:meth:`Conversation.barge_in`) during the turn stops the model, cancels
every TTS request not yet answered (PROTOCOL.md §4.2) and waits for their answers, whose word timings
say what their audio spoke (§5.3); the stream then ends as usual, and the history keeps only the text
the listener heard.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass
from typing import Any, Protocol

from protocol.logs import log_event
from protocol.voices import LANGUAGES, InvalidVoiceError, Voice
from reference_agent.conversation import Conversation, Turn
from reference_agent.events import TERMINAL_TYPES, AgentErrorCode, AgentEventWriter
from reference_agent.request import AgentRequest
from reference_agent.tts import (
    DEFAULT_IDLE_TIMEOUT_S,
    DEFAULT_MAX_OUTSTANDING,
    SourcedText,
    Speaker,
    TtsConnect,
    TtsEndpoint,
    TtsFailure,
    TtsStream,
    TtsUnavailable,
    close_session,
)
from speech.chunker import IncrementalSentenceChunker
from speech.markdown import MarkdownStripper
from speech.spans import NonSpaceSources

__all__ = [
    "DEFAULT_CONNECT_TIMEOUT_S",
    "KEEPALIVE_S",
    "LlmFailure",
    "PipelineSettings",
    "Segmenter",
    "WholeReply",
    "run_agent",
]

logger = logging.getLogger(__name__)

DEFAULT_CONNECT_TIMEOUT_S = 10.0
"""Longest wait for the TTS session to open, in seconds (an untrusted certificate hangs silently)."""

KEEPALIVE_S = 5.0
"""In ``stream`` mode, seconds of model silence after which the open utterance gets an empty append.

Well under the server's ``utterance_idle_timeout_s`` (20 s by default, PROTOCOL.md §15.5) and the
agent's own TTS idle timeout, so a model that pauses (a tool call, a slow token) does not end the
utterance; an empty append changes nothing else (§15.2).
"""


class LlmFailure(Exception):
    """The language model's stream raised; the message names the original exception."""

    code = AgentErrorCode.LLM_ERROR


class Segmenter(Protocol):
    """Decides when text goes to the TTS: ``feed`` returns the segments ready now, ``flush`` the rest."""

    def feed(self, fragment: str) -> list[str]:
        """Take the next piece of the reply; return the segments complete so far (maybe none)."""
        ...

    def flush(self) -> str | None:
        """The reply ended: return whatever is left, or ``None`` when nothing is."""
        ...


class WholeReply:
    """The ``batch`` segmenter: releases the whole reply as one segment at the end, nothing before.

    The text is cleaned as the bidi chunker cleans it (markdown removed, :mod:`speech.markdown`), so
    both modes send the same words; its lines stay lines, whitespace inside them collapsed, so the TTS
    still ends a segment at every heading, list item and line (PROTOCOL.md §14.2).
    """

    def __init__(self) -> None:
        self._parts: list[str] = []

    def feed(self, fragment: str) -> list[str]:
        """Keep ``fragment``; never releases anything before :meth:`flush`."""
        self._parts.append(fragment)
        return []

    def flush(self) -> str | None:
        """The whole reply, cleaned, or ``None`` if nothing but whitespace is left; a
        :class:`~reference_agent.tts.SourcedText` that knows where its characters are in the reply."""
        stripper = MarkdownStripper()
        clean, sources = stripper.feed_sourced("".join(self._parts))
        tail, more = stripper.flush_sourced()
        self._parts.clear()
        lines = (clean + tail).split("\n")
        text = "\n".join(" ".join(words) for line in lines if (words := line.split()))
        if not text:
            return None
        where = NonSpaceSources()  # only whitespace changed since the stripper: its sources hold
        where.add(clean + tail, sources + more)
        return SourcedText(text, where.map(text))


class SentenceSegments:
    """The ``bidi`` segmenter: :class:`speech.chunker.IncrementalSentenceChunker` in the voice's language,
    each chunk a :class:`~reference_agent.tts.SourcedText` that knows where it is in the reply."""

    def __init__(self, language: str) -> None:
        self._chunker = IncrementalSentenceChunker(language=language, sourced=True)

    def feed(self, fragment: str) -> list[str]:
        """Take the next piece of the reply; return the sentences complete so far."""
        return [self._sourced(chunk) for chunk in self._chunker.feed_chunks(fragment)]

    def flush(self) -> str | None:
        """The reply ended: what is left, as one text (the chunker's :meth:`flush` joins its chunks)."""
        chunks = self._chunker.finish()
        if not chunks:
            return None
        if len(chunks) == 1:
            return self._sourced(chunks[0])
        return " ".join(chunk.text for chunk in chunks)  # rare (held markdown completed a boundary)

    @staticmethod
    def _sourced(chunk: Any) -> str:
        return SourcedText(chunk.text, chunk.source) if chunk.source is not None else chunk.text


def _chunker_language(voice: str) -> str:
    # The chunker takes the language of the voice or blend (§14.1); an unknown voice is left for the TTS
    # to refuse, and American English rules are used meanwhile.
    try:
        language = Voice.parse(voice).language
    except InvalidVoiceError:
        language = None
    return (language or LANGUAGES["a"]).code


@dataclass(frozen=True, slots=True)
class PipelineSettings:
    """How one invocation reaches its legs.

    Attributes:
        agent_factory: builds the Strands ``Agent`` for one request (one per request: an Agent cannot
            serve two calls at once, REFERENCE.md §5).
        tts_connect: opens the TTS session.
        endpoint: where the TTS session goes.
        connect_timeout_s: longest wait for ``tts_connect``.
        idle_timeout_s: longest TTS silence while an answer is owed.
        max_outstanding: unanswered TTS requests allowed before the writer waits.
    """

    agent_factory: Callable[[AgentRequest], Any]
    tts_connect: TtsConnect
    endpoint: TtsEndpoint
    connect_timeout_s: float = DEFAULT_CONNECT_TIMEOUT_S
    idle_timeout_s: float = DEFAULT_IDLE_TIMEOUT_S
    max_outstanding: int = DEFAULT_MAX_OUTSTANDING


async def run_agent(
    request: AgentRequest,
    settings: PipelineSettings,
    *,
    request_id: str,
    session_id: str | None = None,
    clock: Callable[[], float] = time.monotonic,
    conversation: Conversation | None = None,
) -> AsyncIterator[dict[str, Any]]:
    """Run one invocation and yield its events (``reference_agent.events``), terminal event last.

    ``conversation``: the history the model sees and this turn joins (a barge-in during the turn stops it,
    see the module docstring); ``None`` runs the prompt alone.

    Every queue, task and client is created here, inside the running loop: ``BedrockAgentCoreApp``
    runs async handlers on its own worker loop (REFERENCE.md §5). Closing the generator early (the
    caller went away) cancels the work and closes the TTS session.

    Never raises for a failed leg: failures become the final ``error`` event.
    """
    writer = AgentEventWriter(request_id, request.mode, clock)
    queue: asyncio.Queue[dict[str, Any]] = asyncio.Queue()
    yield writer.start(session_id)
    turn, context = None, None
    if conversation is not None:
        await conversation.idle()  # a turn still running (being interrupted) ends first
        turn, context = conversation.begin(request.prompt), conversation.context()
    runner = asyncio.create_task(_run(request, settings, writer, queue.put_nowait, turn, context))
    ended = False
    status, error = "disconnected", None  # unless a terminal event is sent
    try:
        while True:
            event = await queue.get()
            yield event
            if event["type"] in TERMINAL_TYPES:
                ended = True
                status = "completed" if event["type"] == "agent_end" else "failed"
                error = event.get("code")
                return
    finally:
        if not ended:
            runner.cancel()
        # After the terminal event the runner is only closing the TTS session (bounded by
        # close_session); wait for it so no connection outlives the invocation.
        await asyncio.wait({runner})
        if conversation is not None and turn is not None:
            conversation.end(turn)
        sample_rate = writer.sample_rate or request.sample_rate
        log_event(
            logger,
            "invocation",
            request_id=request_id,
            session=session_id,
            mode=request.mode,
            voice=request.voice,
            prompt_chars=len(request.prompt),
            first_audio_ms=writer.first_audio_ms,
            audio_s=round(writer.audio_bytes / 2 / sample_rate, 3),
            chunks=writer.total_chunks,
            status=status,
            error=error,
        )


async def _run(
    request: AgentRequest,
    settings: PipelineSettings,
    writer: AgentEventWriter,
    emit: Callable[[dict[str, Any]], None],
    turn: Turn | None = None,
    context: list[dict[str, Any]] | None = None,
) -> None:
    session: TtsStream | None = None
    try:
        endpoint = settings.endpoint
        session = await _connect(settings.tts_connect, endpoint, settings.connect_timeout_s)
        speaker = Speaker(
            session,
            voice=request.voice,
            speed=request.speed,
            sample_rate=request.sample_rate,
            max_outstanding=settings.max_outstanding,
            idle_timeout_s=settings.idle_timeout_s,
        )
        emit(writer.audio_stream_start(voice=request.voice, sample_rate=request.sample_rate))
        try:
            agent = settings.agent_factory(request)
        except Exception as exc:
            raise LlmFailure(f"cannot build the model: {type(exc).__name__}: {exc}") from exc
        prompt = request.prompt
        if turn is not None:
            agent.messages = context or []  # the history before this prompt (Strands appends the prompt)
            prompt = turn.prompt
            speaker.answers = turn.spoken  # the turn sees each answer as it comes
            emit = _recording(emit, turn)
        if request.mode == "stream":
            writing = _write_stream(agent, prompt, speaker, writer, emit)
        else:
            segmenter: Segmenter = (
                SentenceSegments(_chunker_language(request.voice)) if request.mode == "bidi" else WholeReply()
            )
            writing = _write(agent, prompt, segmenter, speaker, writer, emit)
        if turn is not None:
            writing = _until_barge_in(writing, turn.interrupted, speaker)
        await _both(writing, _speak(speaker, writer, emit))
        emit(writer.audio_stream_end(speaker.segments))
        emit(writer.end(interrupted=speaker.cancelled))
    except (TtsUnavailable, TtsFailure, LlmFailure) as exc:
        emit(writer.error(exc.code, str(exc)))
    except Exception as exc:
        logger.exception("agent invocation %s failed", writer.request_id)
        emit(writer.error(AgentErrorCode.INTERNAL_ERROR, f"{type(exc).__name__}: {exc}"))
    finally:
        if session is not None:
            await close_session(session)


async def _connect(connect: TtsConnect, endpoint: TtsEndpoint, timeout_s: float) -> TtsStream:
    try:
        async with asyncio.timeout(timeout_s):
            return await connect(endpoint)
    except TtsUnavailable:
        raise
    except TimeoutError:
        # The official client hangs rather than fails on an untrusted certificate (REFERENCE.md §1)
        # and on missing credentials (its signing task fails where nothing awaits it).
        where = f"endpoint {endpoint.name!r}" + (f" at {endpoint.url}" if endpoint.url else "")
        raise TtsUnavailable(
            f"no TTS session after {timeout_s:g} s ({where}): is it reachable, its certificate trusted, "
            "and are AWS credentials configured?"
        ) from None
    except Exception as exc:
        raise TtsUnavailable(f"cannot open the TTS stream: {type(exc).__name__}: {exc}") from exc


def _recording(emit: Callable[[dict[str, Any]], None], turn: Turn) -> Callable[[dict[str, Any]], None]:
    """``emit`` that also adds each ``text_delta`` to the turn's written reply."""

    def record(event: dict[str, Any]) -> None:
        if event.get("type") == "text_delta":
            turn.written += event.get("text", "")
        emit(event)

    return record


async def _until_barge_in(writing: Any, interrupted: asyncio.Event, speaker: Speaker) -> None:
    """Run the writer; a barge-in (``interrupted``) before the reply is spoken stops it.

    The barge-in cancels the writer (the model's stream is closed: nothing more is written) and every TTS
    request not yet answered (:meth:`Speaker.cancel`, PROTOCOL.md §4.2). Once the writer is done, a
    barge-in still cancels what the TTS has not answered yet, until the speaker is drained. A failure of
    the writer is raised as it is.
    """
    task = asyncio.ensure_future(writing)
    barge = asyncio.ensure_future(interrupted.wait())
    drained = asyncio.ensure_future(speaker.drained.wait())
    try:
        await asyncio.wait({task, barge}, return_when=asyncio.FIRST_COMPLETED)
        if task.done():
            task.result()
            await asyncio.wait({barge, drained}, return_when=asyncio.FIRST_COMPLETED)
            if not barge.done():
                return
        else:
            task.cancel()
            await asyncio.wait({task})
            if not task.cancelled() and task.exception() is not None:
                raise task.exception()  # type: ignore[misc]
        await speaker.cancel()
    finally:
        for waiter in (task, barge, drained):
            waiter.cancel()
        await asyncio.gather(task, barge, drained, return_exceptions=True)


async def _both(*coroutines: Any) -> None:
    """Run the coroutines concurrently; the first failure cancels the others and is raised."""
    tasks = [asyncio.create_task(c) for c in coroutines]
    try:
        done, _ = await asyncio.wait(tasks, return_when=asyncio.FIRST_EXCEPTION)
        for task in tasks:
            if task in done and task.exception() is not None:
                raise task.exception()  # type: ignore[misc]
    finally:
        for task in tasks:
            task.cancel()
        await asyncio.wait(tasks)


async def _write(
    agent: Any,
    prompt: str,
    segmenter: Segmenter,
    speaker: Speaker,
    writer: AgentEventWriter,
    emit: Callable[[dict[str, Any]], None],
) -> None:
    stream = agent.stream_async(prompt)
    try:
        while True:
            try:
                event = await anext(stream)
            except StopAsyncIteration:
                break
            except Exception as exc:
                raise LlmFailure(f"the model failed: {type(exc).__name__}: {exc}") from exc
            # Only text deltas are forwarded: Strands events also hold live objects (the agent, spans)
            # that must never reach the SSE encoder (REFERENCE.md §5).
            text = event.get("data") if isinstance(event, dict) else None
            if not isinstance(text, str) or not text:
                continue
            emit(writer.text_delta(text))
            for segment in segmenter.feed(text):
                await speaker.say(segment)
    finally:
        # A failure to close the model's stream must not replace the error that ended it.
        with contextlib.suppress(Exception):
            await stream.aclose()
    tail = segmenter.flush()
    if tail:
        await speaker.say(tail)
    speaker.finish()


async def _write_stream(
    agent: Any,
    prompt: str,
    speaker: Speaker,
    writer: AgentEventWriter,
    emit: Callable[[dict[str, Any]], None],
) -> None:
    """``stream`` mode: every text delta goes straight into one utterance (PROTOCOL.md §15).

    One task (:func:`_pump`) drives the model's stream from start to end, so the OpenTelemetry context that
    Strands attaches around each step is detached in the task that attached it (advancing the generator
    from a new task per event logged "Failed to detach context" tracebacks); this task waits on the queue,
    keeping the utterance open while the model is silent.
    """
    stream = agent.stream_async(prompt)
    events: asyncio.Queue[Any] = asyncio.Queue()
    pump = asyncio.create_task(_pump(stream, events))
    try:
        while True:
            getting = asyncio.ensure_future(events.get())
            # Keep the utterance open while the model is silent; only once it has been opened.
            while not (await asyncio.wait({getting}, timeout=KEEPALIVE_S))[0]:
                if speaker.streaming:
                    await speaker.stream("")
            event = getting.result()
            if isinstance(event, BaseException):
                raise LlmFailure(f"the model failed: {type(event).__name__}: {event}") from event
            if event is _END:
                break
            text = event.get("data") if isinstance(event, dict) else None
            if not isinstance(text, str) or not text:
                continue
            emit(writer.text_delta(text))
            await speaker.stream(text)
    finally:
        if not pump.done():
            pump.cancel()
        with contextlib.suppress(BaseException):
            await pump
    await speaker.end_stream()
    speaker.finish()


_END = object()


async def _pump(stream: Any, events: asyncio.Queue[Any]) -> None:
    """Put every event of ``stream`` on ``events``, then :data:`_END`, or the exception that ended it;
    the stream is closed here, in the task that iterated it."""
    try:
        async for event in stream:
            events.put_nowait(event)
        events.put_nowait(_END)
    except Exception as exc:
        events.put_nowait(exc)
    finally:
        with contextlib.suppress(Exception):
            await stream.aclose()


async def _speak(speaker: Speaker, writer: AgentEventWriter, emit: Callable[[dict[str, Any]], None]) -> None:
    async for pcm in speaker.audio():
        emit(writer.audio_chunk(pcm))
