"""Speech track of a synthetic clip: short espeak-ng utterances separated by silent pauses.

The speech segments are known exactly (we place the utterances ourselves), which is the ground
truth that the VAD-based metrics are checked against.
"""
import functools
import io
import shutil
import subprocess
import tempfile
import wave
from dataclasses import dataclass
from pathlib import Path

import numpy as np
from scipy.signal import resample_poly

SAMPLE_RATE = 16000  # what Silero VAD wants; the audio is stored at this rate

# Short phrases (about 0.5-1.3 s each) so that 2-4 of them fit in a few seconds with pauses.
# They start and end on voiced sounds: a VAD hears unvoiced edges (s, sch, f, final t/k) late
# or not at all, which would put the VAD's segments 0.2-0.3 s away from the true ones.
PHRASES = {
    "en": ("good morning", "all right then", "nice to meet you", "let us begin", "are you ready",
           "good idea", "right away", "one more time", "long ago", "I agree", "lovely weather",
           "my name is Anna"),
    "fr": ("bonjour à tous", "merci beaucoup", "à bientôt", "il fait beau", "bonne journée",
           "au revoir", "un moment", "mon ami", "le matin", "bien sûr"),
    "de": ("guten Morgen", "wie geht es dir", "wir fangen an", "alles klar", "ja genau",
           "bis morgen", "wie immer", "danke schön", "willkommen"),
    "es": ("hasta luego", "muy bien", "vamos a empezar", "buen día", "me llamo Ana",
           "yo también", "mañana"),
    "it": ("buongiorno", "grazie mille", "a presto", "va bene", "benvenuti", "molto bene",
           "andiamo"),
}
VOICES = {"en": "en-us", "fr": "fr-fr", "de": "de", "es": "es", "it": "it"}

LEAD_S = (0.3, 0.5)      # leading silence
TRAIL_S = (0.3, 0.5)     # trailing silence (more only when the utterances leave room)
PAUSE_MIN_S = 0.65       # > 0.6 s so every pause is a clear silence for the VAD-based metrics
PAUSE_S = (PAUSE_MIN_S, 0.9)


@dataclass
class Speech:
    audio: np.ndarray   # float32 mono at SAMPLE_RATE, exactly the clip duration
    segments: list      # [(start_s, end_s)] per utterance, tight (espeak's own silence trimmed)
    texts: list         # the utterances, in order
    language: str
    sample_rate: int = SAMPLE_RATE


def espeak_available() -> bool:
    return shutil.which("espeak-ng") is not None


@functools.lru_cache(maxsize=256)
def _utterance(voice: str, text: str, pitch: int, speed: int) -> np.ndarray:
    """One trimmed utterance at SAMPLE_RATE (cached: kits are generated many times in tests)."""
    if not espeak_available():
        raise RuntimeError("espeak-ng is not installed (apt-get install espeak-ng)")
    with tempfile.TemporaryDirectory() as tmp:
        txt, wav = Path(tmp, "in.txt"), Path(tmp, "out.wav")
        txt.write_text(text, encoding="utf-8")  # a file avoids argv encoding issues with accents
        subprocess.run(["espeak-ng", "-b", "1", "-v", voice, "-p", str(pitch), "-s", str(speed),
                        "-f", str(txt), "-w", str(wav)], check=True, capture_output=True)
        with wave.open(io.BytesIO(wav.read_bytes())) as w:
            rate = w.getframerate()
            x = np.frombuffer(w.readframes(w.getnframes()), dtype="<i2").astype(np.float64) / 32768
    g = np.gcd(rate, SAMPLE_RATE)
    x = resample_poly(x, SAMPLE_RATE // g, rate // g)
    x = x / (np.abs(x).max() + 1e-12) * 0.6
    loud = np.flatnonzero(np.abs(x) > 0.02)  # trim espeak's own silences: segments must be tight
    x = x[loud[0]:loud[-1] + 1]
    x.setflags(write=False)
    return x


def synthesize_speech(rng: np.random.Generator, language: str, duration_s: float,
                      n_utterances=None) -> Speech:
    """2-4 utterances (as many as fit) in `language`, laid out in exactly `duration_s` seconds."""
    phrases = PHRASES.get(language)
    if phrases is None:
        raise ValueError(f"no phrases for language {language!r}; known: {sorted(PHRASES)}")
    voice = VOICES.get(language, language)
    pitch, speed = int(rng.integers(35, 65)), int(rng.integers(150, 175))
    wanted = int(n_utterances or rng.integers(2, 5))
    lead = float(rng.uniform(*LEAD_S))
    order = rng.permutation(len(phrases))
    pauses = [float(rng.uniform(*PAUSE_S)) for _ in range(len(phrases))]

    chosen = []  # greedy: keep phrases while lead + speech + pauses + minimal trail still fit
    used = lead + TRAIL_S[0]
    for i in order:
        x = _utterance(voice, phrases[i], pitch, speed)
        need = len(x) / SAMPLE_RATE + (pauses[len(chosen) - 1] if chosen else 0.0)
        if used + need <= duration_s:
            chosen.append((phrases[i], x))
            used += need
            if len(chosen) == wanted:
                break
    if not chosen:
        raise ValueError(f"duration {duration_s} s is too short for one utterance with silences")
    pauses = pauses[:len(chosen) - 1]

    # Spare time lengthens the trailing silence up to its range, then the pauses (with a single
    # utterance it all stays at the end).
    spare = duration_s - used
    spare -= min(spare, TRAIL_S[1] - TRAIL_S[0])
    pauses = [p + spare / len(pauses) for p in pauses]

    n_total = int(round(duration_s * SAMPLE_RATE))
    audio = np.zeros(n_total, np.float32)
    segments, t = [], lead
    for k, (_, x) in enumerate(chosen):
        start = int(round(t * SAMPLE_RATE))
        x = x[:max(0, n_total - start)]
        audio[start:start + len(x)] = x
        segments.append((start / SAMPLE_RATE, (start + len(x)) / SAMPLE_RATE))
        t = (start + len(x)) / SAMPLE_RATE + (pauses[k] if k < len(pauses) else 0.0)
    return Speech(audio=audio, segments=segments, texts=[p for p, _ in chosen], language=language)


def delay_audio(audio: np.ndarray, delay_s: float, rate: int = SAMPLE_RATE) -> np.ndarray:
    """The same track `delay_s` later (earlier when negative), same length: what moves past an
    end is cut, silence fills the other."""
    n = int(round(delay_s * rate))
    out = np.zeros_like(audio)
    if n >= 0:
        out[n:] = audio[:len(audio) - n]
    else:
        out[:n] = audio[-n:]
    return out
