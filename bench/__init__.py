"""Benchmarks: what this project exists for, measured, with the AWS sample's figures beside ours.

``python -m bench`` (``make bench``) runs every benchmark in one process and writes
``bench/results/<name>.json`` (figures, every trial, the environment) and ``bench/results/<name>.png``;
``python -m bench report`` turns the JSON files into ``bench/RESULTS.md``, with the seed figures of
REFERENCE.md §3 beside ours. Benchmarks are not tests: nothing here asserts a speed.

Reading order: :mod:`bench.texts` (what is spoken) and :mod:`bench.seeds` (the figures we compare
against); :mod:`bench.record` and :mod:`bench.summary` (results and statistics);
:mod:`bench.stack` (servers and the simulator, started as the deployment starts them) and
:mod:`bench.channels` (one checked bidirectional session over the simulator or a direct WebSocket);
then one module per benchmark, in the order of the issue:

1. :mod:`bench.transport_latency`: first audio, whole text vs first sentence;
   1b. :mod:`bench.first_audio`: a reply's first audio, lead-in sent early vs with its segment;
   1c. :mod:`bench.barge_in`: a cancel during a pass, then the next reply's first audio, the pass
   aborted vs run to its end (issue #26);
   1d. :mod:`bench.pass_settings`: Kokoro's ONNX pass per session setting (threads, spinning, split or
   whole graph, optimization level, int8 or fp32) and the event loop's ``/ping`` and accepts beside it;
2. :mod:`bench.agent_latency`: the agent's first audio and playback underrun, bidi, stream and batch;
3. :mod:`bench.transport_sizes`: bytes on the wire per audio encoding;
   3b. :mod:`bench.audio_formats`: bytes per second and first audio per session encoding (PCM16, G.711
   μ-law and A-law at 8 and 24 kHz) and ``POST /invocations`` format (wav, pcm, mp3, opus, flac, aac;
   binary and SSE);
4. :mod:`bench.throughput`: concurrent sessions per backend;
5. :mod:`bench.simulator_overhead`: the simulator's cost in first-audio time, leg by leg;
6. :mod:`bench.playback`: silence a real-time player would insert, old segmentation vs deadline-aware
   segmentation (PROTOCOL.md §10.1, §10.2), one to three sessions at once;
7. :mod:`bench.chunker_cost`: the sentence chunker fed one character at a time;
8. :mod:`bench.segmentation_quality`: the cuts the server makes, and duration and word timings of the
   segmented audio against the unsegmented;
9. :mod:`bench.gpu` (run by ``bench/gpu.sh`` on a GPU machine): the torch backend on CUDA;
10. :mod:`bench.capacity_model`: the runtime on a Kokoro stand-in of known speed (:mod:`bench.paced`):
    how many real-time listeners stay fed, old vs new.
11. :mod:`bench.capacity`: the reference server behind the simulator at rising concurrency: the most
    conversations it keeps within its p95 first-audio and underrun targets, the figure autoscaling uses;
12. :mod:`bench.intelligibility` (on request: ``make intelligibility``): the server's speech heard back by
    Whisper-base in nine languages, character error rates per language and voice.

:mod:`bench.runner` runs them in one event loop (``python -m bench``), :mod:`bench.plots` draws the
charts and :mod:`bench.report` writes RESULTS.md.
"""
