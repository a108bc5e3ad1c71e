// The bidirectional protocol as the playground needs it, without I/O (spec/PROTOCOL.md).
// Nothing here touches the network, the DOM or the audio graph, so each rule can be read on its own.

/** The WebSocket route of a session (§2.1). */
export const PATH = "/invocations-bidirectional-stream";

const STRICT_UTF8 = new TextDecoder("utf-8", { fatal: true, ignoreBOM: true });
const UTF8 = new TextEncoder();
const JSON_WHITESPACE = new Set([0x20, 0x09, 0x0a, 0x0d]);

/**
 * Classify one whole server message by its content (§3.4): a control frame if and only if the whole
 * message is one JSON object, audio otherwise. The WebSocket frame type is not evidence (§3.4 item 5).
 *
 * The UTF-8 decoder is strict (`fatal`) and keeps a byte order mark (`ignoreBOM`), so a BOM makes the
 * parse fail, as §3.4 item 2 requires; WHATWG's default decoder would replace bad bytes and drop it.
 *
 * @param {string | ArrayBuffer} data the message (TEXT arrives as a string, BINARY as an ArrayBuffer)
 * @returns {{kind: "control", frame: object} | {kind: "audio", bytes: Uint8Array}}
 */
export function classify(data) {
  let bytes = null;
  let text;
  if (typeof data === "string") {
    text = data;
  } else {
    bytes = new Uint8Array(data);
    // A JSON object text starts with "{" after JSON whitespace: anything else is audio, without
    // decoding 32 KiB of PCM as text. This is the rule itself, not a shortcut around it.
    let i = 0;
    while (i < bytes.length && JSON_WHITESPACE.has(bytes[i])) i++;
    if (i === bytes.length || bytes[i] !== 0x7b) return { kind: "audio", bytes };
    try {
      text = STRICT_UTF8.decode(bytes);
    } catch {
      return { kind: "audio", bytes };
    }
  }
  let value;
  try {
    value = JSON.parse(text); // also throws RangeError on nesting too deep to decide: audio (§3.4 item 3)
  } catch {
    return { kind: "audio", bytes: bytes ?? UTF8.encode(text) };
  }
  if (value !== null && typeof value === "object" && !Array.isArray(value)) {
    return { kind: "control", frame: value };
  }
  return { kind: "audio", bytes: bytes ?? UTF8.encode(text) };
}

/**
 * Joins the audio messages of one bracket into whole PCM16LE samples (§3.3.1, §3.4 item 4): a transport
 * may split a message at any byte, so an odd trailing byte is carried over to the next message.
 */
export class PcmJoiner {
  constructor() {
    /** @type {number | null} the odd byte waiting for its partner */
    this.carry = null;
  }

  /**
   * @param {Uint8Array} bytes the next audio message of the bracket
   * @returns {Int16Array} the whole samples it completes (little-endian, whatever the machine)
   */
  push(bytes) {
    let buf = bytes;
    if (this.carry !== null) {
      buf = new Uint8Array(bytes.length + 1);
      buf[0] = this.carry;
      buf.set(bytes, 1);
      this.carry = null;
    }
    const whole = buf.length - (buf.length % 2);
    if (whole < buf.length) this.carry = buf[buf.length - 1];
    const view = new DataView(buf.buffer, buf.byteOffset, whole);
    const samples = new Int16Array(whole / 2);
    for (let i = 0; i < samples.length; i++) samples[i] = view.getInt16(2 * i, true);
    return samples;
  }

  /** Whether a byte is waiting: at `synthesis_complete` it never is (§3.4 item 4). */
  get pending() {
    return this.carry !== null;
  }
}

// --- G.711 (§3.3.1): one byte per sample, each code the linear value ITU-T G.711's tables give for it --

/** The audio frame encodings the page can play (§3.3.1). */
export const ENCODINGS = ["pcm_s16le", "pcm_mulaw", "pcm_alaw"];

// The decoding rules of G.711 (the reference g711.c): a sign bit, a 3-bit segment (exponent) and a
// 4-bit step; μ-law codes are sent inverted, A-law codes with their even bits inverted (XOR 0x55).
function mulawToLinear(code) {
  const u = ~code & 0xff;
  const magnitude = ((((u & 0x0f) << 3) + 0x84) << ((u & 0x70) >> 4)) - 0x84;
  return u & 0x80 ? -magnitude : magnitude;
}

function alawToLinear(code) {
  const a = code ^ 0x55;
  const segment = (a & 0x70) >> 4;
  let magnitude = ((a & 0x0f) << 4) + (segment === 0 ? 8 : 0x108);
  if (segment > 1) magnitude <<= segment - 1;
  return a & 0x80 ? magnitude : -magnitude;
}

/** Code → PCM16 value, all 256 codes of each G.711 law, built once. */
export const G711_TABLES = {
  pcm_mulaw: Int16Array.from({ length: 256 }, (_, code) => mulawToLinear(code)),
  pcm_alaw: Int16Array.from({ length: 256 }, (_, code) => alawToLinear(code)),
};

/** Turns the audio messages of a G.711 bracket into PCM16 samples: every byte is a whole sample. */
export class G711Decoder {
  /** @param {"pcm_mulaw" | "pcm_alaw"} encoding */
  constructor(encoding) {
    this.table = G711_TABLES[encoding];
  }

  /**
   * @param {Uint8Array} bytes the next audio message of the bracket
   * @returns {Int16Array} one sample per byte
   */
  push(bytes) {
    const samples = new Int16Array(bytes.length);
    for (let i = 0; i < bytes.length; i++) samples[i] = this.table[bytes[i]];
    return samples;
  }

  /** Never a byte waiting: with 1-byte samples there is nothing to carry (§3.4 item 4). */
  get pending() {
    return false;
  }
}

/**
 * The decoder for a bracket's `encoding` (its `synthesis_start`, §5.1): PCM16 joined into whole samples,
 * or G.711 through its table.
 * @param {string | undefined} encoding
 * @returns {PcmJoiner | G711Decoder}
 */
export function audioDecoder(encoding) {
  return encoding in G711_TABLES ? new G711Decoder(encoding) : new PcmJoiner();
}

// Pieces the size of a language model's tokens: a leading space joins the word after it (" the"), long
// words come in pieces of up to six letters, numbers in up to three digits, punctuation alone. Only the
// pace matters to the demo; every character belongs to exactly one piece.
const TOKEN = /\s*(?:[\p{L}\p{M}]{1,6}|\p{N}{1,3}|[^\s\p{L}\p{M}\p{N}])|\s+/gu;

/**
 * Cut text into LLM-like tokens whose concatenation is the text.
 * @param {string} text
 * @returns {string[]}
 */
export function tokenize(text) {
  return text.match(TOKEN) ?? [];
}

const SENTENCE_END = /[.!?…。！？]+["'”’»)\]]*(\s+)/gu;

/**
 * The complete sentences at the start of `text`, for a server without utterances (§15.1): the page
 * then sends each sentence as its own request, as v1 agents do.
 * @param {string} text what was written and not yet sent
 * @returns {{sentences: string[], rest: string}} each sentence keeps its trailing whitespace
 */
export function takeSentences(text) {
  const sentences = [];
  let from = 0;
  for (const match of text.matchAll(SENTENCE_END)) {
    const end = match.index + match[0].length;
    sentences.push(text.slice(from, end));
    from = end;
  }
  return { sentences, rest: text.slice(from) };
}

function escapeRegExp(text) {
  return text.replace(/[.*+?^${}()|[\]\\]/g, "\\$&");
}

/**
 * Where `needle` occurs in `text` at or after `from`, any run of whitespace matching any other.
 * The server reports the text it spoke (segments, words); this finds it in what the user typed.
 * @returns {{start: number, end: number} | null} UTF-16 offsets into `text`
 */
export function locate(text, from, needle, until = text.length) {
  const trimmed = needle.trim();
  if (!trimmed) return null;
  const pattern = new RegExp(trimmed.split(/\s+/u).map(escapeRegExp).join("\\s+"), "gu");
  pattern.lastIndex = from;
  const match = pattern.exec(text);
  if (!match || match.index + match[0].length > until) return null;
  return { start: match.index, end: match.index + match[0].length };
}

/**
 * The words' own spans of the text (§14.4, feature `text_spans`): each word's `text_start`/`text_end`
 * count code points of the request's text, which starts at `base` in `text`; a JavaScript string counts
 * UTF-16 units, so an emoji outside the BMP is one position there and two here. `null` unless every word
 * carries a span.
 *
 * @param {string} text the whole text typed
 * @param {number} base where the request's text starts in `text` (UTF-16 units)
 * @param {{word: string, start_s: number, end_s: number, text_start?: number, text_end?: number}[]} words
 * @returns {{start: number, end: number, start_s: number, end_s: number, estimated: boolean}[] | null}
 */
export function spannedWords(text, base, words) {
  if (!Array.isArray(words) || !words.length) return null;
  if (!words.every((w) => Number.isInteger(w.text_start) && Number.isInteger(w.text_end))) return null;
  // Walk the code points once: the spans' starts do not decrease (§14.4), their ends may.
  const units = [base]; // units[k]: where code point k of the request's text starts in `text`
  const unitOf = (point) => {
    while (units.length <= point) {
      const at = units[units.length - 1];
      if (at >= text.length) return text.length;
      units.push(at + (text.codePointAt(at) > 0xffff ? 2 : 1));
    }
    return Math.min(units[point], text.length);
  };
  return words.map((w) => ({
    start: unitOf(w.text_start),
    end: unitOf(w.text_end),
    start_s: w.start_s,
    end_s: w.end_s,
    estimated: false,
  }));
}

/**
 * Spans of words in `text` with their times (seconds from the request's first sample, §5.3).
 *
 * Words that carry their spans of the request's text (§14.4) are placed by them (`base`: where the
 * request's text starts in `text`), through figures read out and markdown. Otherwise, with the server's
 * word timings, each word is found in order inside [start, end). Without them (the language has none,
 * §14.1) the segment's time is shared among its words by their length in letters: an estimate, marked as
 * such.
 *
 * @param {string} text the whole text typed
 * @param {{start: number, end: number}} where the segment's place in `text`
 * @param {{start_s: number, end_s: number, words?: {word: string, start_s: number, end_s: number}[]}} mark
 * @param {number} [base] where the request's text starts in `text`
 * @returns {{start: number, end: number, start_s: number, end_s: number, estimated: boolean}[]}
 */
export function wordSpans(text, where, mark, base = 0) {
  const spanned = spannedWords(text, base, mark.words);
  if (spanned) return spanned;
  const spans = [];
  if (Array.isArray(mark.words) && mark.words.length) {
    let cursor = where.start;
    for (const word of mark.words) {
      const found = locate(text, cursor, word.word, where.end);
      if (!found) continue; // a word the front-end rewrote ("1500" spoken as words): no highlight
      spans.push({ ...found, start_s: word.start_s, end_s: word.end_s, estimated: false });
      cursor = found.end;
    }
    return spans;
  }
  const words = [...text.slice(where.start, where.end).matchAll(/\S+/gu)];
  const weight = (w) => Math.max(1, (w.match(/[\p{L}\p{N}]/gu) ?? []).length);
  const total = words.reduce((sum, m) => sum + weight(m[0]), 0);
  let t = mark.start_s;
  const span = Math.max(0, mark.end_s - mark.start_s);
  for (const m of words) {
    const d = (span * weight(m[0])) / total;
    const start = where.start + m.index;
    spans.push({ start, end: start + m[0].length, start_s: t, end_s: t + d, estimated: true });
    t += d;
  }
  return spans;
}
