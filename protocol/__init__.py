"""The sans-I/O core of the Kokoro bidirectional streaming TTS protocol (spec/PROTOCOL.md).

Plain objects and functions with no sockets, threads or event loops, in the manner of h11 and
python-websockets: the reference server, the SageMaker simulator, the agent and the conformance suite
are thin shells around them. One module per concept:

- ``protocol.errors``: the error-code registry and ``ProtocolError`` (§9).
- ``protocol.limits``: the named limits and their defaults (§10).
- ``protocol.voices``: the 54 Kokoro-82M v1.0 voices and their languages (§4.1).
- ``protocol.schemas``: access to the JSON Schemas in spec/schemas (Appendix A).
- ``protocol.messages``: typed client and server frames and strict parsing (§3.1, §4, §5, §11.1).
- ``protocol.frames``: classifying server messages and cutting audio into safe frames (§3.3, §3.4).
- ``protocol.pcm``: PCM16 conversion, resampling, sample alignment, WAV headers (§3.3, §11.2).
- ``protocol.sse``: server-sent event encoding and decoding (§11.4).
- ``protocol.server_session``: the server's half of a session, ``ServerSession`` (§4–§9, §15).
- ``protocol.server_state``: the server session's states and transitions as one table (§7).
- ``protocol.client_session``: the client's half of a session, ``ClientSession``, strict (§3–§6).
- ``protocol.reader``: the lenient reader of a server's output and the rules a client checks (§3, §5, §6).
- ``protocol.server_output``: the events of a server's output, one vocabulary for every client (§5).
- ``protocol.heard``: what a listener heard of a request, from its word timings and the player's
  position (§5.3, barge-in).

Importing ``protocol`` or any of its modules never imports a web framework, a WebSocket or HTTP
library, an AWS SDK or an inference runtime (checked by tests/protocol/test_import_light.py), so every
shell can depend on it. This package imports none of its submodules: import the one you need.

The text front-end (markdown, sentence chunks, segments, figures read as words, §10.1, §14.2) is the
``speech`` package beside this one: ``speech`` may import ``protocol``, never the other way round.
"""

__all__: list[str] = []
