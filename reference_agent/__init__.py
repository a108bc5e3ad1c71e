"""The reference voice agent: a Strands agent on Bedrock AgentCore that speaks its reply as it writes it.

An LLM writes a reply token by token; in ``bidi`` mode every sentence goes into one persistent TTS
session (the bidirectional protocol of spec/PROTOCOL.md, through the official SageMaker client) as soon
as it is complete, so the voice starts with the first sentence; ``batch`` mode waits for the whole
reply, the baseline. The caller receives one SSE stream of text and audio events.

Reading order: :mod:`~reference_agent.events` (the stream's events) and
:mod:`~reference_agent.checks` (its rules as code), :mod:`~reference_agent.request`,
:mod:`~reference_agent.tts` (the TTS leg) and :mod:`~reference_agent.sagemaker_tts` (it over the official
client, :mod:`sagemaker_transport.client`), :mod:`~reference_agent.conversation` (the history, kept to
what the listener heard at a barge-in), :mod:`~reference_agent.pipeline` (one invocation, both modes),
:mod:`~reference_agent.app` (the AgentCore app), :mod:`~reference_agent.scripted` (the offline model),
then the programs: ``python -m reference_agent`` (serve), :mod:`~reference_agent.local` (the whole
stack on one machine) and :mod:`~reference_agent.demo` (the bidi / batch comparison).
"""
