"""The simulator in front of the REAL reference server (Kokoro-82M), started as a container command.

Skipped unless ``reference_server.app`` imports and its verified assets are present (``make assets``).
These are the acceptance checks of the simulator issue against the real server: the official client
over TLS + HTTP/2 and through the in-process transport, three sentences each, requests sent as
BINARY (where a ``receive_text()``-only container fails) and as UTF8; boto3's response stream under a
misaligned split; and the voice list (``describe``, PROTOCOL.md §4.4) through both of SageMaker's
routes, the bidirectional stream and InvokeEndpoint.
"""

from __future__ import annotations

import asyncio
import json
import socket
import sys
from pathlib import Path

import pytest
from sim_support import SENTENCES, Transcript, describe, run, speak

from protocol.client_session import ClientSession
from protocol.messages import parse_server_control
from protocol.server_output import AudioReceived, ErrorReceived
from protocol.voices import KOKORO_VOICES
from sagemaker_transport.client import iter_response_stream, open_bidi_stream, runtime_client
from simulator import CommandContainer, Simulator, SimulatorSettings, SplitPolicy

REPO = Path(__file__).resolve().parents[2]


def _unavailable_reason() -> str | None:
    try:
        import reference_server.app  # noqa: F401
        from reference_server import assets

        assets.locate()
    except Exception as exc:  # ImportError, AssetError, or a half-written package
        return f"reference server not usable here: {exc!r}"
    return None


pytestmark = pytest.mark.skipif(_unavailable_reason() is not None, reason=str(_unavailable_reason()))


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def _reference_container() -> CommandContainer:
    port = _free_port()
    return CommandContainer(
        f"{sys.executable} -m reference_server --port {port}",
        f"http://127.0.0.1:{port}",
        startup_timeout_s=240,
        env={"PYTHONPATH": str(REPO), "HF_HUB_OFFLINE": "1"},
    )


def _assert_three_sentences(transcript: Transcript) -> None:
    assert transcript.started == transcript.completed == ["c1", "c2", "c3"]
    assert not transcript.errors
    for rid in ("c1", "c2", "c3"):
        pcm = transcript.audio[rid]
        assert len(pcm) > 24_000 and len(pcm) % 2 == 0  # more than half a second of PCM16LE


def test_reference_server_through_tls_and_in_process() -> None:
    async def main() -> None:
        settings = SimulatorSettings(split=SplitPolicy.parse("misaligned"))
        async with Simulator(_reference_container(), settings) as sim:
            async with open_bidi_stream(
                "tts", endpoint_url=sim.endpoint_url, ca_file=sim.ca_file, timeout=120
            ) as session:
                capabilities = await describe(session)
                _assert_three_sentences(await speak(session, SENTENCES, data_type="BINARY"))
            async with open_bidi_stream("tts", transport=sim.transport(), timeout=120) as session:
                _assert_three_sentences(await speak(session, SENTENCES, data_type="UTF8"))

            client = runtime_client(sim.http1_url, max_attempts=1, read_timeout=120)
            body = await asyncio.to_thread(
                lambda: b"".join(iter_response_stream(client, "tts", {"text": SENTENCES[0], "format": "wav"}))
            )
            assert body[:4] == b"RIFF" and len(body) > 44 and (len(body) - 44) % 2 == 0

            # The voice list through InvokeEndpoint is the same as through the bidirectional stream.
            answer = await asyncio.to_thread(
                client.invoke_endpoint,
                EndpointName="tts",
                Body=json.dumps({"type": "describe", "request_id": "voices"}).encode(),
                ContentType="application/json",
            )
            assert answer["ContentType"] == "application/json"
            over_http = parse_server_control(json.loads(answer["Body"].read()))
            assert over_http == capabilities and capabilities.request_id == "voices"
            assert capabilities.voice_ids == KOKORO_VOICES and len(capabilities.languages) == 9
            assert all(language.word_timings for language in capabilities.languages)

    run(main(), timeout=600)


def test_utterance_per_character_with_messages_resplit_into_parts() -> None:
    """PROTOCOL.md §15 through the official client: an utterance sent one character per message, every
    message re-split into 3-byte PayloadParts (the container sees each as one fragmented WebSocket
    message, §12.3), and the output misaligned: the same speech as one synthesize request of the text."""
    text = "Good question. It streams \U0001f600 fine."

    async def send_split(session, frame: bytes) -> None:
        for offset in range(0, len(frame), 3):
            last = offset + 3 >= len(frame)
            await session.send(
                frame[offset : offset + 3], data_type="UTF8", completion_state=None if last else "PARTIAL"
            )

    async def main() -> dict[str, bytearray]:
        settings = SimulatorSettings(split=SplitPolicy.parse("misaligned"))
        async with Simulator(_reference_container(), settings) as sim:
            async with open_bidi_stream(
                "tts", endpoint_url=sim.endpoint_url, ca_file=sim.ca_file, timeout=120
            ) as session:
                client = ClientSession(check_frames=False)
                _, frame = client.utterance("u1")
                await send_split(session, frame)
                units = text.encode("utf-16-le", "surrogatepass")  # the emoji's halves go apart
                for i in range(0, len(units), 2):
                    half = units[i : i + 2].decode("utf-16-le", "surrogatepass")
                    await send_split(session, client.append("u1", half))
                await send_split(session, client.end("u1"))
                _, frame = client.request(text, request_id="whole")
                await send_split(session, frame)
                await send_split(session, client.close())
                audio: dict[str, bytearray] = {}
                async for part in session:
                    for event in client.receive_part(part.data, part.is_complete):
                        assert not isinstance(event, ErrorReceived), event
                        if isinstance(event, AudioReceived):
                            audio.setdefault(event.request_id, bytearray()).extend(event.pcm)
                assert client.outstanding == []
                return audio

    audio = run(main(), timeout=600)
    assert len(audio["u1"]) == len(audio["whole"]) > 48_000  # the same speech, over a second of it
