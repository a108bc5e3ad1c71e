"""Kokoro-82M reference server for the bidirectional TTS protocol (spec/PROTOCOL.md).

Run it with ``python -m reference_server``; build it into an app with :func:`reference_server.app.create_app`.
"""
