"""The text front-end: what a client or a language model writes, turned into what a voice should say.

Sans-I/O and incremental, like ``protocol`` beside it: plain objects and functions, no sockets, threads,
event loops, web frameworks or inference runtimes (checked by tests/protocol/test_import_light.py). The
reference server runs it on every request's and utterance's text, the reference agent on a language
model's deltas. One module per stage (PROTOCOL.md §10.1, §14.2):

- ``speech.markdown``: streaming removal of markdown syntax, block structure kept as line breaks.
- ``speech.chunker``: incremental sentence chunking, per the language's punctuation.
- ``speech.normalization``: figures, currency, dates, times, units, addresses and emoji as words, for
  the G2P of the language; each language's words and conventions are a module of ``speech.languages``.
- ``speech.frontend``: the three stages above chained as one streaming ``SpeechFrontend``.
- ``speech.segmenter``: where a server cuts a sentence into synthesis segments (§10.1).
- ``speech.spans``: where each character of spoken text is in the text as written (§14.4): the maps
  the stages above carry through their rewrites when asked (``sourced=True``).

``speech`` may import ``protocol`` (its voices and limits); ``protocol`` never imports ``speech``. This
package imports none of its submodules: import the one you need.
"""

__all__: list[str] = []
