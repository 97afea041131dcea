"""Speech segments from Silero VAD's per-window speech probabilities: silero-vad 5.1.2's rule.

The reference calls `get_speech_timestamps(wav, model, return_seconds=True)` with its defaults
(Synchronization/lip_sync.py, silent_lip_stability.py). That function (silero-vad 5.1.2,
src/silero_vad/utils_vad.py) scores 512-sample windows, then turns the probabilities into
segments; this is the second half, with those defaults: threshold 0.5, negative threshold 0.35,
speech of at least 250 ms, silences of at least 100 ms split it, 30 ms of padding, no maximum
speech length (so the maximum-length branch never runs and is left out), each edge rounded to
0.1 s (5.1.2 does not cap the end at the audio's length; later releases do). A test holds it to
silero's own function on many probability sequences.
"""
RATE = 16000
WINDOW = 512  # samples per window at 16 kHz
THRESHOLD = 0.5
NEG_THRESHOLD = THRESHOLD - 0.15
MIN_SPEECH = RATE * 250 / 1000  # samples
MIN_SILENCE = RATE * 100 / 1000
PAD = RATE * 30 / 1000


def speech_segments(probs, n_samples: int) -> list[tuple[float, float]]:
    """[(start_s, end_s)] of speech in a 16 kHz wave of n_samples, window i's probability probs[i]."""
    if n_samples == 0:
        return []
    speeches, start, temp_end = [], None, 0
    for i, p in enumerate(float(p) for p in probs):
        sample = WINDOW * i
        if p >= THRESHOLD and temp_end:
            temp_end = 0
        if p >= THRESHOLD and start is None:
            start = sample
            continue
        if p < NEG_THRESHOLD and start is not None:
            if not temp_end:
                temp_end = sample
            if sample - temp_end < MIN_SILENCE:
                continue
            if temp_end - start > MIN_SPEECH:
                speeches.append([start, temp_end])
            start, temp_end = None, 0
    if start is not None and n_samples - start > MIN_SPEECH:
        speeches.append([start, n_samples])
    return [(round(s / RATE, 1), round(e / RATE, 1)) for s, e in _padded(speeches, n_samples)]


def _padded(speeches: list[list], n_samples: int) -> list[list]:
    """Each segment widened by PAD, or by half the silence to the next when that is shorter than
    2 PAD (the edges as silero computes them: floats, then int)."""
    for i, speech in enumerate(speeches):
        if i == 0:
            speech[0] = int(max(0, speech[0] - PAD))
        if i != len(speeches) - 1:
            nxt = speeches[i + 1]
            silence = nxt[0] - speech[1]
            if silence < 2 * PAD:
                speech[1] += int(silence // 2)
                nxt[0] = int(max(0, nxt[0] - silence // 2))
            else:
                speech[1] = int(min(n_samples, speech[1] + PAD))
                nxt[0] = int(max(0, nxt[0] - PAD))
        else:
            speech[1] = int(min(n_samples, speech[1] + PAD))
    return speeches
