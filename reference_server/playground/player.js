// Gapless playback of PCM as it arrives: each piece becomes an AudioBufferSourceNode scheduled on the
// AudioContext's clock right where the previous one ends, at the stream's own sample rate (the browser
// resamples to the device). AudioBufferSources rather than an AudioWorklet: they also work on a page
// served over plain http from another machine, where worklets (secure contexts only) do not.

/** Seconds between scheduling the first piece (or the first after running dry) and its start. */
export const LEAD_S = 0.05;

export class Player {
  /** @param {AudioContext} context */
  constructor(context) {
    this.context = context;
    this.analyser = context.createAnalyser();
    this.analyser.fftSize = 1024;
    this.analyser.connect(context.destination);
    this._scratch = new Float32Array(this.analyser.fftSize);
    /** @type {Set<AudioBufferSourceNode>} sources scheduled and not yet ended */
    this.sources = new Set();
    this.reset();
  }

  /** Start a new stream: the next piece is a first piece, not an underrun; counts start from zero. */
  reset() {
    this.nextTime = 0;
    this.flowing = false;
    this.samples = 0;
    this.seconds = 0;
    this.stoppedAt = null;
  }

  /**
   * Play `samples` right after what is already scheduled.
   *
   * If the audio already scheduled has run out (or would within 5 ms) the piece starts LEAD_S from now,
   * and the silence that the listener hears between the two is an underrun of `gap_s` seconds.
   *
   * @param {Int16Array} samples PCM16 mono
   * @param {number} sampleRate Hz, the `sample_rate` of the bracket's `synthesis_start` (§5.1)
   * @returns {{start: number, duration: number, gap_s: number}} context times, in seconds
   */
  schedule(samples, sampleRate) {
    const ctx = this.context;
    const buffer = ctx.createBuffer(1, samples.length, sampleRate);
    const channel = buffer.getChannelData(0);
    for (let i = 0; i < samples.length; i++) channel[i] = samples[i] / 32768;
    const now = ctx.currentTime;
    let start = this.nextTime;
    let gap_s = 0;
    if (!this.flowing || start < now + 0.005) {
      const at = now + LEAD_S;
      if (this.flowing) gap_s = at - this.nextTime;
      start = at;
    }
    const source = ctx.createBufferSource();
    source.buffer = buffer;
    source.connect(this.analyser);
    source.onended = () => {
      this.sources.delete(source);
      source.disconnect();
    };
    source.start(start);
    this.sources.add(source);
    this.nextTime = start + buffer.duration;
    this.flowing = true;
    this.samples += samples.length;
    this.seconds += buffer.duration;
    return { start, duration: buffer.duration, gap_s };
  }

  /** Silence at once (barge-in): every scheduled source stops now, the queue is dropped. */
  stop() {
    for (const source of this.sources) {
      try {
        source.stop();
      } catch {
        // never started or already stopped
      }
      source.disconnect();
    }
    this.sources.clear();
    this.stoppedAt = this.context.currentTime;
    this.flowing = false;
    this.nextTime = 0;
  }

  /** Whether scheduled audio is still to be heard. */
  get playing() {
    return this.sources.size > 0 && this.nextTime > this.context.currentTime;
  }

  /** Root mean square of what the graph is rendering now, 0 to 1 (the level meter). */
  level() {
    this.analyser.getFloatTimeDomainData(this._scratch);
    let sum = 0;
    for (const v of this._scratch) sum += v * v;
    return Math.sqrt(sum / this._scratch.length);
  }
}
