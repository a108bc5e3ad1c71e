// The playground page: one session on the server's WebSocket route, driven as an agent would drive it.
//
// Speak "as written" opens one utterance (§15) and appends the text token by token at the chosen pace;
// the server's own chunker decides where segments end, so speech starts after the first sentence while
// the rest is still being written. "All at once" sends one synthesis request (§4.1). A server without
// utterances gets one request per sentence instead. Cancel sends {"type":"cancel"} (§4.2) and silences
// the page at once; audio still arriving for the cancelled requests is dropped. The encoding picker asks
// for G.711 μ-law or A-law (§3.3.1) where the server offers them; each bracket is decoded in the encoding
// its synthesis_start states.
//
// window.playground exposes the live figures (stats()) for people in the console and for the browser
// test (tests/reference_server/test_playground_browser.py).

import {
  ENCODINGS,
  PATH,
  audioDecoder,
  classify,
  locate,
  spannedWords,
  takeSentences,
  tokenize,
  wordSpans,
} from "./bidi.js";
import { Player } from "./player.js";

const $ = (id) => document.getElementById(id);
const DEFAULT_VOICE = "af_heart";
const DEFAULT_RATES = [8000, 16000, 22050, 24000];
const ENCODING_NAMES = { pcm_s16le: "PCM16", pcm_mulaw: "G.711 μ-law", pcm_alaw: "G.711 A-law" };
const DESCRIBE_ID = "pg-describe";
const PROBE_ID = "pg-probe";
const LOG_LINES = 300;

const page = {
  ws: null,
  opened: null, // promise of the open socket
  capabilities: null,
  features: new Set(),
  featuresKnown: false,
  languages: new Map(),
  context: null,
  player: null,
  run: null,
  runs: 0,
  bracket: null, // the request whose bracket is open, or {foreign: true}
  requests: new Map(), // request_id -> request record, all runs
  dirty: true, // something changed: redraw at the next animation frame
};

// --- wire ------------------------------------------------------------------------------------------

function connect() {
  if (page.ws && page.ws.readyState <= WebSocket.OPEN) return page.opened;
  const scheme = location.protocol === "https:" ? "wss:" : "ws:";
  const ws = new WebSocket(`${scheme}//${location.host}${PATH}`);
  ws.binaryType = "arraybuffer";
  page.ws = ws;
  setConnection("connecting");
  page.opened = new Promise((resolve, reject) => {
    ws.onopen = () => {
      setConnection("open");
      send({ type: "describe", request_id: DESCRIBE_ID });
      resolve(ws);
    };
    ws.onerror = () => reject(new Error("the WebSocket could not be opened"));
  });
  ws.onmessage = (event) => receive(event.data);
  ws.onclose = (event) => {
    setConnection("closed", `closed (${event.code}${event.reason ? ": " + event.reason : ""})`);
    if (page.ws === ws) page.ws = null;
    page.bracket = null;
    const run = page.run;
    if (run && !run.serverDone) finishRun(run, "connection closed");
  };
  return page.opened;
}

function send(message) {
  page.ws.send(JSON.stringify(message));
  logWire("out", message);
}

function receive(data) {
  page.dirty = true;
  const message = classify(data);
  if (message.kind === "audio") {
    onAudio(message.bytes);
    return;
  }
  const frame = message.frame;
  logWire("in", frame);
  switch (frame.type) {
    case "capabilities":
      onCapabilities(frame);
      break;
    case "synthesis_start":
      onStart(frame);
      break;
    case "marks":
      onMarks(frame);
      break;
    case "synthesis_complete":
      onComplete(frame);
      break;
    case "error":
      onError(frame);
      break;
    default:
      break; // a frame type from a later version: ignored (§1.7)
  }
}

// --- what the server offers (§4.4; a v1 server answers unknown_type) --------------------------------

function onCapabilities(frame) {
  page.capabilities = frame;
  page.features = new Set(frame.features ?? []);
  page.featuresKnown = true;
  page.languages = new Map((frame.languages ?? []).map((l) => [l.code, l]));
  const server = frame.server ?? {};
  $("server-name").textContent = [server.name, server.version, server.backend, `protocol ${frame.protocol}`]
    .filter(Boolean)
    .join(" · ");
  fillVoices(frame.voices ?? []);
  fillRates(frame.sample_rates ?? DEFAULT_RATES);
  fillEncodings(frame.encodings ?? ["pcm_s16le"]);
  const languages = [...page.languages.values()];
  $("info-voices").textContent = `${(frame.voices ?? []).length} in ${languages.length} language${languages.length === 1 ? "" : "s"}`;
  const timed = languages.filter((l) => l.word_timings).map((l) => l.name);
  $("info-timings").textContent = timed.length ? timed.join(", ") : "none from this server (estimated per segment)";
  ready();
}

function describeRefused() {
  // No describe: one voice we know every Kokoro server has, and a probe for utterances. An utterance
  // message with a malformed speed is refused either way and changes nothing: unknown_type means the
  // server has no utterances, invalid_field that it has them (§9.2 checks the type before the members).
  $("server-name").textContent = "protocol 1.0 server (no describe)";
  fillVoices([{ id: DEFAULT_VOICE, language: "a", gender: "female" }]);
  fillRates(DEFAULT_RATES);
  fillEncodings(["pcm_s16le"]);
  $("info-voices").textContent = "unknown (no describe): the default voice only";
  $("info-timings").textContent = "at the end of each request, if any";
  send({ type: "utterance", request_id: PROBE_ID, speed: "probe" });
}

function onProbe(frame) {
  if (frame.code !== "unknown_type") page.features.add("utterance");
  page.features.add("cancel");
  page.featuresKnown = true;
  ready();
}

function ready() {
  $("info-features").textContent = [...page.features].join(", ") || "none";
  $("speak").disabled = false;
  updatePath();
}

function fillVoices(voices) {
  const select = $("voice");
  const keep = select.value || DEFAULT_VOICE;
  select.replaceChildren();
  const groups = new Map();
  for (const voice of voices) {
    if (!groups.has(voice.language)) groups.set(voice.language, []);
    groups.get(voice.language).push(voice);
  }
  for (const [code, list] of groups) {
    const language = page.languages.get(code);
    const group = document.createElement("optgroup");
    group.label = language ? `${language.name} (${language.tag})` : code;
    for (const voice of list) {
      const option = new Option(voice.gender ? `${voice.id} · ${voice.gender}` : voice.id, voice.id);
      group.append(option);
    }
    select.append(group);
  }
  select.value = voices.some((v) => v.id === keep) ? keep : voices[0]?.id ?? DEFAULT_VOICE;
  updatePath();
}

function fillRates(rates) {
  const select = $("rate");
  select.replaceChildren(...rates.map((rate) => new Option(`${rate} Hz`, String(rate))));
  select.value = rates.includes(24000) ? "24000" : String(rates[rates.length - 1]);
}

// The encodings both the server offers (capabilities.encodings, §4.4) and the page can decode; G.711
// at 8 kHz is what a telephone line carries, so choosing one picks 8 kHz too (any rate stays allowed).
function fillEncodings(offered) {
  const select = $("encoding");
  const usable = ENCODINGS.filter((e) => e === "pcm_s16le" || offered.includes(e));
  select.replaceChildren(...usable.map((e) => new Option(ENCODING_NAMES[e], e)));
  select.value = "pcm_s16le";
  select.disabled = usable.length < 2;
}

function onEncodingChange() {
  if ($("encoding").value !== "pcm_s16le" && [...$("rate").options].some((o) => o.value === "8000")) {
    $("rate").value = "8000";
  }
}

function voiceLanguage(voiceId) {
  const voice = (page.capabilities?.voices ?? []).find((v) => v.id === voiceId);
  return page.languages.get(voice?.language ?? voiceId[0]);
}

function updatePath() {
  const parts = [];
  if (page.featuresKnown) {
    const written = mode() === "written";
    if (written) parts.push(page.features.has("utterance") ? "one utterance, §15" : "a request per sentence");
    else parts.push("one request, §4.1");
    parts.push(page.features.has("marks") ? "live marks" : "words at the end");
  }
  $("stat-path").textContent = parts.join(" · ");
  const language = voiceLanguage($("voice").value);
  const timings = language ? language.word_timings : undefined;
  $("timing-source").textContent =
    timings === false
      ? "This voice's language has no word timings on this server: word times are estimated within each segment."
      : "";
}

// --- a run: one press of Speak ----------------------------------------------------------------------

function mode() {
  return document.querySelector('input[name="mode"]:checked').value;
}

async function speak() {
  const text = $("text").value;
  if (!text.trim()) {
    notice("Type something to speak.");
    return;
  }
  if (page.run && !page.run.finished) cancel();
  notice("");
  ensureAudio();
  try {
    await connect();
  } catch (error) {
    notice(String(error.message ?? error));
    return;
  }
  if (page.context.state !== "running") await page.context.resume();
  page.player.reset();
  const run = {
    n: ++page.runs,
    text,
    mode: mode(),
    pace: Number($("pace").value),
    voice: $("voice").value,
    speed: Number($("speed").value),
    sampleRate: Number($("rate").value),
    encoding: $("encoding").value,
    t0: performance.now(),
    tokens: [],
    next: 0, // next token to write
    written: 0, // characters written so far (sent to the server)
    consumed: 0, // characters sent in sentence requests (the fallback)
    pending: "", // written and not yet sent (the fallback)
    requests: [],
    writes: [], // {t, chars}: text written over time
    arrivals: [], // {t, seconds}: audio frames received
    blocks: [], // pieces scheduled: {request, start, duration, offset_s, wall}
    underruns: [], // {t, ms}
    firstAudioMs: null,
    peak: 0,
    writingDone: false,
    serverDone: false,
    cancelled: false,
    finished: false,
    state: "speaking",
  };
  page.run = run;
  $("cancel").disabled = false;
  const marks = page.features.has("marks") ? { marks: true } : {};
  const voice = { voice: run.voice, speed: run.speed, sample_rate: run.sampleRate, ...encodingOf(run) };
  if (run.mode === "whole") {
    const id = `pg${run.n}`;
    addRequest(run, id, 0);
    send({ type: "synthesize", request_id: id, text, ...voice, ...marks });
    wrote(run, text.length);
    run.writingDone = true;
  } else {
    run.tokens = tokenize(text);
    if (page.features.has("utterance")) {
      run.utterance = `pg${run.n}`;
      addRequest(run, run.utterance, 0);
      send({ type: "utterance", request_id: run.utterance, ...voice, ...marks });
    }
    write(run);
  }
  render();
}

// Only a non-default encoding is sent, so a request for PCM16 is exactly a version 1 request (§4.1).
function encodingOf(run) {
  return run.encoding === "pcm_s16le" ? {} : { encoding: run.encoding };
}

function addRequest(run, id, offset) {
  const request = {
    id,
    run,
    offset, // where its text starts in run.text
    cursor: offset, // where the next segment is looked for
    sampleRate: run.sampleRate,
    encoding: run.encoding,
    joiner: audioDecoder(run.encoding),
    samples: 0,
    bytes: 0,
    segments: [], // {start, end, start_s, end_s}
    spans: [], // words: {start, end, start_s, end_s, estimated}
    status: null,
    dropped: false,
  };
  run.requests.push(request);
  page.requests.set(id, request);
  return request;
}

function wrote(run, chars) {
  run.written += chars;
  run.writes.push({ t: now(run), chars: run.written });
}

// Write the text token by token at run.pace tokens per second, on the clock rather than per timer tick
// (a late timer sends what is due), as a model's output arrives.
function write(run) {
  if (run.cancelled || run.finished || page.run !== run) return;
  const due = Math.min(run.tokens.length, Math.floor((now(run) * run.pace) / 1000) + 1);
  while (run.next < due) {
    const token = run.tokens[run.next++];
    if (run.utterance) {
      send({ type: "append", request_id: run.utterance, text: token });
    } else {
      run.pending += token;
      const { sentences, rest } = takeSentences(run.pending);
      for (const sentence of sentences) sendSentence(run, sentence);
      run.pending = rest;
    }
    wrote(run, token.length);
  }
  if (run.next < run.tokens.length) {
    const wait = ((run.next * 1000) / run.pace) - now(run);
    run.timer = setTimeout(() => write(run), Math.max(0, wait));
    return;
  }
  if (run.utterance) send({ type: "end", request_id: run.utterance });
  else if (run.pending.trim()) sendSentence(run, run.pending);
  run.writingDone = true;
  if (!run.requests.length) finishRun(run, "nothing to say");
}

function sendSentence(run, sentence) {
  const id = `pg${run.n}.${run.requests.length + 1}`;
  addRequest(run, id, run.consumed);
  run.consumed += sentence.length;
  const marks = page.features.has("marks") ? { marks: true } : {};
  send({
    type: "synthesize",
    request_id: id,
    text: sentence,
    voice: run.voice,
    speed: run.speed,
    sample_rate: run.sampleRate,
    ...encodingOf(run),
    ...marks,
  });
}

/** Barge-in: tell the server, stop writing, silence the page now, drop what still arrives. */
function cancel() {
  const run = page.run;
  if (!run || run.finished || run.cancelled) return;
  run.cancelled = true;
  run.writingDone = true;
  run.cancelAt = now(run);
  clearTimeout(run.timer);
  if (page.ws && page.ws.readyState === WebSocket.OPEN) send({ type: "cancel" });
  page.player.stop();
  for (const request of run.requests) if (request.status === null) request.dropped = true;
  run.state = "cancelled";
  $("cancel").disabled = true;
  render();
}

function finishRun(run, why) {
  if (run.finished) return;
  run.finished = true;
  clearTimeout(run.timer);
  if (why) notice(why);
  if (!run.cancelled && run.state === "speaking") run.state = why ? "stopped" : "done";
  if (page.run === run) $("cancel").disabled = true;
}

// --- frames ----------------------------------------------------------------------------------------

function onStart(frame) {
  const request = page.requests.get(frame.request_id);
  if (!request || request.run !== page.run) {
    page.bracket = { foreign: true };
    return;
  }
  request.sampleRate = frame.sample_rate;
  // The bracket's audio is in the encoding synthesis_start states (§5.1): a v1 server sends PCM16.
  request.encoding = frame.encoding ?? "pcm_s16le";
  request.joiner = audioDecoder(request.encoding);
  page.bracket = request;
}

function onAudio(bytes) {
  const request = page.bracket;
  if (!request) {
    logLine("in", `audio outside a bracket (${bytes.length} bytes): ignored`);
    return;
  }
  if (request.foreign) return;
  request.bytes += bytes.length;
  logAudio(bytes.length);
  if (request.dropped) return;
  const run = request.run;
  const samples = request.joiner.push(bytes);
  if (!samples.length) return;
  const t = now(run);
  if (run.firstAudioMs === null) run.firstAudioMs = t;
  run.arrivals.push({ t, seconds: samples.length / request.sampleRate });
  const offset_s = request.samples / request.sampleRate;
  request.samples += samples.length;
  const piece = page.player.schedule(samples, request.sampleRate);
  const wall = t + (piece.start - page.context.currentTime) * 1000;
  run.blocks.push({ request, start: piece.start, duration: piece.duration, offset_s, wall });
  if (piece.gap_s > 0) run.underruns.push({ t: wall - piece.gap_s * 1000, ms: piece.gap_s * 1000 });
}

// A `marks` frame (optional, version 1.1) names the text of the segment whose audio follows and, where
// the language has them, its words' times, in seconds from the request's first sample.
function onMarks(frame) {
  const request = page.requests.get(frame.request_id);
  if (!request || request.run !== page.run || request.dropped) return;
  const text = request.run.text;
  // Words with their spans of the text (§14.4) place the segment too: its text as spoken ("twelve
  // dollars") is not in the text typed ("$12"), so it could not be found there.
  const spanned = spannedWords(text, request.offset, frame.words);
  const where = spanned
    ? { start: Math.min(...spanned.map((w) => w.start)), end: Math.max(...spanned.map((w) => w.end)) }
    : locate(text, request.cursor, frame.text ?? "");
  if (!where) return;
  request.cursor = Math.max(request.cursor, where.end);
  request.segments.push({ ...where, start_s: frame.start_s, end_s: frame.end_s });
  request.spans.push(...(spanned ?? wordSpans(text, where, frame, request.offset)));
}

function onComplete(frame) {
  const request = page.requests.get(frame.request_id);
  page.bracket = null;
  if (!request) return;
  request.status = frame.status;
  request.audioBytes = frame.audio_bytes;
  if (request.joiner.pending) logLine("in", `${frame.request_id}: an odd byte was left over (§3.4)`);
  if (frame.audio_bytes !== request.bytes) {
    logLine("in", `${frame.request_id}: audio_bytes ${frame.audio_bytes} ≠ ${request.bytes} received (§5.3)`);
  }
  // Without marks the words arrive only now: enough to follow sentence requests, too late for an
  // utterance (its words cover all of it and come at its very end).
  const run = request.run;
  if (!request.segments.length && Array.isArray(frame.words) && frame.words.length) {
    const next = run.requests[run.requests.indexOf(request) + 1];
    const where = { start: request.offset, end: next ? next.offset : run.text.length };
    request.spans = wordSpans(run.text, where, { words: frame.words, start_s: 0, end_s: 0 }, request.offset);
  }
  if (run.writingDone && run.requests.every((r) => r.status !== null)) run.serverDone = true;
}

function onError(frame) {
  if (frame.request_id === DESCRIBE_ID) {
    if (frame.code === "unknown_type") describeRefused();
    return;
  }
  if (frame.request_id === PROBE_ID) {
    onProbe(frame);
    return;
  }
  notice(frame.message ?? frame.code);
  const request = page.requests.get(frame.request_id);
  // A refused request or utterance gets no bracket (§6.3): the run cannot finish normally.
  const refusedWhole = frame.message_type === "utterance" || frame.message_type === "synthesize";
  if (request && request.status === null && refusedWhole && frame.code !== "internal_error") {
    request.status = "refused";
    if (request.run === page.run) finishRun(request.run, frame.message);
  }
}

// --- figures ---------------------------------------------------------------------------------------

function now(run) {
  return performance.now() - run.t0;
}

function ensureAudio() {
  if (page.context) return;
  try {
    page.context = new AudioContext({ sampleRate: 24000, latencyHint: "interactive" });
  } catch {
    page.context = new AudioContext({ latencyHint: "interactive" });
  }
  page.player = new Player(page.context);
}

/** Where playback is: the piece being heard and the time within its request, or null. */
function playhead(run) {
  if (!page.context) return null;
  const t = page.context.currentTime;
  for (let i = run.blocks.length - 1; i >= 0; i--) {
    const block = run.blocks[i];
    if (block.start <= t) {
      if (t >= block.start + block.duration) return null;
      return { request: block.request, time_s: block.offset_s + (t - block.start) };
    }
  }
  return null;
}

/** The live figures; the browser test reads them. */
function stats() {
  const run = page.run;
  const player = page.player;
  const requests = run
    ? run.requests.map((r) => ({
        id: r.id,
        status: r.status,
        audio_bytes: r.audioBytes ?? null,
        bytes: r.bytes,
        samples: r.samples,
        sample_rate: r.sampleRate,
        encoding: r.encoding,
        segments: r.segments.length,
        words: r.spans.length,
      }))
    : [];
  return {
    ready: !$("speak").disabled,
    features: [...page.features],
    voices: $("voice").options.length,
    contextState: page.context?.state ?? null,
    contextRate: page.context?.sampleRate ?? null,
    state: run?.state ?? "idle",
    firstAudioMs: run?.firstAudioMs ?? null,
    samplesScheduled: player?.samples ?? 0,
    secondsScheduled: player?.seconds ?? 0,
    activeSources: player?.sources.size ?? 0,
    playing: player?.playing ?? false,
    level: player ? player.level() : 0,
    peak: run?.peak ?? 0,
    underruns: run?.underruns.length ?? 0,
    underrunMs: run ? run.underruns.reduce((s, u) => s + u.ms, 0) : 0,
    written: run?.written ?? 0,
    highlighted: page.highlighted ?? null,
    requests,
  };
}

// --- drawing ---------------------------------------------------------------------------------------

function render() {
  const run = page.run;
  if (run && !run.finished && run.serverDone && page.player && !page.player.playing) finishRun(run);
  if (run && page.player && !run.cancelled) run.peak = Math.max(run.peak, page.player.level());
  renderFigures(run);
  renderTranscript(run);
  renderTimeline(run);
}

function renderFigures(run) {
  const first = $("stat-first");
  first.textContent = run?.firstAudioMs != null ? `${Math.round(run.firstAudioMs)} ms` : "–";
  const underruns = $("stat-underruns");
  underruns.textContent = run ? String(run.underruns.length) : "–";
  underruns.className = `value ${run ? (run.underruns.length ? "bad" : "good") : ""}`;
  const ms = run ? run.underruns.reduce((s, u) => s + u.ms, 0) : 0;
  $("stat-underrun-ms").textContent = run?.underruns.length ? `${Math.round(ms)} ms of silence` : "playback ran dry";
  if (run && page.context) {
    const t = page.context.currentTime;
    const stop = page.player.stoppedAt ?? Infinity;
    const played = run.blocks.reduce(
      (s, b) => s + Math.max(0, Math.min(b.duration, Math.min(t, stop) - b.start)),
      0,
    );
    const received = run.requests.reduce((s, r) => s + r.samples / r.sampleRate, 0);
    $("stat-audio").textContent = `${played.toFixed(1)} s`;
    $("stat-audio-hint").textContent = `played of ${received.toFixed(1)} s received`;
  }
  $("stat-state").textContent = run?.state ?? "idle";
  const level = page.player && !run?.cancelled ? page.player.level() : 0;
  $("meter-bar").style.width = `${Math.min(100, level * 400)}%`;
}

let lastTranscript = "";

function renderTranscript(run) {
  if (!run) return;
  const text = run.text;
  const head = playhead(run);
  let word = null;
  let segment = null;
  if (head && !run.cancelled) {
    const { request, time_s } = head;
    segment = request.segments.find((s) => s.start_s <= time_s && time_s < s.end_s) ?? null;
    for (const span of request.spans) {
      if (span.start_s <= time_s && time_s < Math.max(span.end_s, span.start_s + 0.08)) word = span;
    }
  }
  page.highlighted = word ? text.slice(word.start, word.end) : null;
  const key = [run.n, run.written, segment?.start, segment?.end, word?.start, word?.end].join("|");
  if (key === lastTranscript) return;
  lastTranscript = key;
  // Cut the text where any class changes, then give each piece its classes.
  const cuts = new Set([0, text.length, run.written]);
  for (const edge of [segment?.start, segment?.end, word?.start, word?.end]) if (edge != null) cuts.add(edge);
  const points = [...cuts].filter((c) => c >= 0 && c <= text.length).sort((a, b) => a - b);
  const pieces = [];
  for (let i = 0; i + 1 < points.length; i++) {
    const [from, to] = [points[i], points[i + 1]];
    if (from === to) continue;
    const span = document.createElement("span");
    const classes = [];
    if (from >= run.written) classes.push("unsent");
    if (segment && from >= segment.start && to <= segment.end) classes.push("segment");
    if (word && from >= word.start && to <= word.end) classes.push("word");
    span.className = classes.join(" ");
    span.textContent = text.slice(from, to);
    pieces.push(span);
  }
  $("transcript").replaceChildren(...pieces);
}

const COLORS = {
  text: "#2458d6",
  textFill: "rgba(36, 88, 214, 0.12)",
  received: "#667085",
  played: ["#1f8a4c", "#36a269"],
  ahead: ["rgba(31, 138, 76, 0.28)", "rgba(54, 162, 105, 0.28)"],
  underrun: "#c81e1e",
  grid: "#eceef2",
  ink: "#1d2330",
  muted: "#667085",
};

function renderTimeline(run) {
  const canvas = $("timeline");
  const ratio = window.devicePixelRatio || 1;
  const width = canvas.clientWidth;
  const height = canvas.clientHeight;
  if (canvas.width !== Math.round(width * ratio)) canvas.width = Math.round(width * ratio);
  if (canvas.height !== Math.round(height * ratio)) canvas.height = Math.round(height * ratio);
  const g = canvas.getContext("2d");
  g.setTransform(ratio, 0, 0, ratio, 0, 0);
  g.clearRect(0, 0, width, height);
  g.font = "12px system-ui, sans-serif";
  g.textBaseline = "middle";
  const left = 118;
  const right = width - 12;
  const lanes = [
    { label: "text written", y: 14, h: 34 },
    { label: "audio received", y: 58, h: 26 },
    { label: "audio played", y: 94, h: 34 },
  ];
  const axisY = 142;
  const t = run ? now(run) : 0;
  let endMs = 6000;
  if (run) {
    const lastBlock = run.blocks.at(-1);
    const last = Math.max(t, lastBlock ? lastBlock.wall + lastBlock.duration * 1000 : 0);
    endMs = Math.max(endMs, Math.ceil((run.finished ? last + 300 : last + 1500) / 1000) * 1000);
  }
  const x = (ms) => left + ((right - left) * ms) / endMs;
  // Lanes and grid.
  g.fillStyle = COLORS.muted;
  for (const lane of lanes) {
    g.fillStyle = "#f7f8fa";
    g.fillRect(left, lane.y, right - left, lane.h);
    g.fillStyle = COLORS.ink;
    g.fillText(lane.label, 8, lane.y + lane.h / 2);
  }
  const step = endMs <= 10000 ? 1000 : endMs <= 30000 ? 2000 : 5000;
  g.strokeStyle = COLORS.grid;
  g.fillStyle = COLORS.muted;
  g.textAlign = "center";
  for (let ms = 0; ms <= endMs; ms += step) {
    g.beginPath();
    g.moveTo(x(ms), lanes[0].y);
    g.lineTo(x(ms), axisY);
    g.stroke();
    g.fillText(`${ms / 1000} s`, x(ms), axisY + 12);
  }
  g.textAlign = "left";
  if (!run) return;
  // Text written: the share of the text sent so far.
  const lane0 = lanes[0];
  g.beginPath();
  g.moveTo(x(0), lane0.y + lane0.h);
  let y = lane0.y + lane0.h;
  for (const w of run.writes) {
    g.lineTo(x(w.t), y);
    y = lane0.y + lane0.h - (lane0.h * w.chars) / Math.max(1, run.text.length);
    g.lineTo(x(w.t), y);
  }
  g.lineTo(x(run.writingDone ? (run.writes.at(-1)?.t ?? 0) : t), y);
  g.strokeStyle = COLORS.text;
  g.lineWidth = 1.5;
  g.stroke();
  g.lineTo(x(run.writes.at(-1)?.t ?? 0), lane0.y + lane0.h);
  g.fillStyle = COLORS.textFill;
  g.fill();
  g.lineWidth = 1;
  // Audio received: a tick per piece, its height the piece's length.
  const lane1 = lanes[1];
  g.fillStyle = COLORS.received;
  for (const a of run.arrivals) {
    const h = Math.max(3, Math.min(lane1.h, (lane1.h * a.seconds) / 0.7));
    g.fillRect(x(a.t) - 1, lane1.y + lane1.h - h, 2, h);
  }
  // Audio played: each piece where it plays, solid once heard; underruns in red.
  const lane2 = lanes[2];
  const stop = run.cancelAt ?? Infinity;
  run.blocks.forEach((b, i) => {
    const from = b.wall;
    const to = Math.min(b.wall + b.duration * 1000, stop);
    if (to <= from) return;
    const heard = Math.min(to, t);
    g.fillStyle = COLORS.played[i % 2];
    if (heard > from) g.fillRect(x(from), lane2.y, x(heard) - x(from), lane2.h);
    g.fillStyle = COLORS.ahead[i % 2];
    if (to > heard) g.fillRect(x(Math.max(from, heard)), lane2.y, x(to) - x(Math.max(from, heard)), lane2.h);
  });
  g.fillStyle = COLORS.underrun;
  for (const u of run.underruns) g.fillRect(x(u.t), lane2.y - 3, Math.max(2, x(u.t + u.ms) - x(u.t)), lane2.h + 6);
  // First audio, cancel, now.
  if (run.firstAudioMs != null) {
    marker(g, x(run.firstAudioMs), lanes[0].y, lane2.y + lane2.h, COLORS.ink, `first audio ${Math.round(run.firstAudioMs)} ms`);
  }
  if (run.cancelAt != null) {
    marker(g, x(run.cancelAt), lanes[0].y, lane2.y + lane2.h, COLORS.underrun, "cancel", lane2.y + lane2.h - 16);
  }
  if (!run.finished) {
    g.strokeStyle = "rgba(29, 35, 48, 0.35)";
    g.beginPath();
    g.moveTo(x(t), lanes[0].y);
    g.lineTo(x(t), lane2.y + lane2.h);
    g.stroke();
  }
}

function marker(g, at, top, bottom, color, label, labelY = top) {
  g.save();
  g.strokeStyle = color;
  g.setLineDash([4, 3]);
  g.beginPath();
  g.moveTo(at, top);
  g.lineTo(at, bottom);
  g.stroke();
  g.setLineDash([]);
  g.fillStyle = "#ffffff";
  const width = g.measureText(label).width + 8;
  g.fillRect(at + 3, labelY, width, 16);
  g.fillStyle = color;
  g.fillText(label, at + 7, labelY + 8);
  g.restore();
}

// --- page chrome -----------------------------------------------------------------------------------

function setConnection(state, text) {
  const pill = $("connection");
  pill.dataset.state = state;
  pill.textContent = text ?? state;
}

function notice(text) {
  $("notice").textContent = text;
}

let audioLine = null;

function logWire(direction, message) {
  if (direction === "out" && message.type === "append" && audioLine?.kind === "append") {
    audioLine.count += 1;
    audioLine.chars += message.text.length;
    audioLine.text.textContent = `append ×${audioLine.count} (${audioLine.chars} characters) → ${message.request_id}`;
    return;
  }
  const text =
    message.type === "capabilities"
      ? `{"type":"capabilities","protocol":"${message.protocol}", ${message.voices?.length ?? 0} voices, ` +
        `features ${JSON.stringify(message.features)}, …}`
      : JSON.stringify(message);
  const line = logLine(direction, text);
  audioLine = message.type === "append" ? { kind: "append", count: 1, chars: message.text.length, text: line } : null;
  if (audioLine) line.textContent = `append ×1 (${message.text.length} characters) → ${message.request_id}`;
}

function logAudio(bytes) {
  if (audioLine?.kind === "audio") {
    audioLine.count += 1;
    audioLine.bytes += bytes;
    audioLine.text.textContent = `audio ×${audioLine.count} (${audioLine.bytes} bytes)`;
    return;
  }
  const line = logLine("in", `audio ×1 (${bytes} bytes)`);
  audioLine = { kind: "audio", count: 1, bytes, text: line };
}

function logLine(direction, text) {
  const list = $("log");
  const item = document.createElement("li");
  item.className = direction;
  const t = document.createElement("span");
  t.className = "t";
  t.textContent = page.run ? `${(now(page.run) / 1000).toFixed(3)}` : "";
  const arrow = document.createElement("span");
  arrow.className = "dir";
  arrow.textContent = direction === "out" ? "→" : "←";
  const body = document.createElement("span");
  body.textContent = text;
  item.append(t, arrow, body);
  list.append(item);
  while (list.childElementCount > LOG_LINES) list.firstElementChild.remove();
  list.scrollTop = list.scrollHeight;
  return body;
}

function init() {
  $("pace").addEventListener("input", () => {
    $("pace-out").textContent = `${$("pace").value} tokens/s`;
    if (page.run) page.run.pace = Number($("pace").value);
  });
  $("speed").addEventListener("input", () => {
    $("speed-out").textContent = `${Number($("speed").value).toFixed(2)}×`;
  });
  $("voice").addEventListener("change", updatePath);
  $("encoding").addEventListener("change", onEncodingChange);
  for (const radio of document.querySelectorAll('input[name="mode"]')) radio.addEventListener("change", updatePath);
  $("speak").addEventListener("click", speak);
  $("cancel").addEventListener("click", cancel);
  $("text").addEventListener("keydown", (event) => {
    if (event.key === "Enter" && (event.ctrlKey || event.metaKey)) speak();
    if (event.key === "Escape") cancel();
  });
  // Redraw about twenty times a second while something moves (words last longer than that), and not
  // at all when idle: the browser should leave the CPU to the synthesizer on a small machine.
  let last = 0;
  const frame = (time) => {
    const busy = page.run && (!page.run.finished || page.player?.playing);
    if (page.dirty || (busy && time - last >= 50)) {
      page.dirty = false;
      last = time;
      render();
    }
    requestAnimationFrame(frame);
  };
  requestAnimationFrame(frame);
  window.addEventListener("resize", () => (page.dirty = true));
  // Figures also advance when the tab is hidden (no animation frames then).
  setInterval(() => document.hidden && render(), 250);
  connect().catch((error) => notice(String(error.message ?? error)));
}

window.playground = { stats, speak, cancel, page, tokenize };
init();
