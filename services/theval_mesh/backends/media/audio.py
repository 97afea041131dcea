"""The audio track of a video, gathered frame by frame while the video is decoded.

Besides the decoded mono signal, `reference` needs the two signals the reference scripts derive
from the file with ffmpeg (both through libswresample, which PyAV's AudioResampler runs too):
  - lip-sync (Synchronization/lip_sync.py at 3603338, lines 23-30): moviepy 1.0.3's
    `write_audiofile` defaults: 44.1 kHz, 2 channels, 16-bit, samples clipped to +-0.99 before
    they are written (moviepy audio/AudioClip.py `to_soundarray(quantize=True)`), then
    `librosa.load(sr=None)` (mono = mean of the channels). The RMS envelope and the VAD of
    lip-sync both read that file.
  - silent-lip (Synchronization/silent_lip_stability.py at 3603338, lines 25-45): pydub's
    `AudioSegment.from_file`, which has ffmpeg write 16-bit PCM at the native rate and channels
    for AAC/MP3 tracks, exported to a WAV for the VAD.
LSE-C/LSE-D (syncnet_python, SyncNetInstance.py): ffmpeg `-ac 1 -ar 16000 -acodec pcm_s16le`, i.e.
libswresample's own downmix to mono and resampling to 16 kHz, 16-bit.
Not reproduced: moviepy's buffer refills shift its samples by one sample per 200,000 (4.5 s) and
it sizes the file from the container's duration; both move the 50 ms RMS windows by far less than
one window.
"""
from dataclasses import dataclass

import av
import numpy as np

MOVIEPY_RATE = 44100
MAX_CHANNELS = 8  # 7.1 surround; more in a talking-head video is a damaged header
SYNCNET_RATE = 16000  # syncnet_python: ffmpeg -ac 1 -ar 16000
MOVIEPY_CLIP = 32440  # int16(0.99 * 32768): moviepy's +-0.99 clip on 16-bit samples
EXTRACTION = {
    "reference": "lip-sync: moviepy 1.0.3 defaults (44.1 kHz stereo 16-bit via libswresample, "
                 "+-0.99 clip); silent-lip VAD: pydub (16-bit at the native rate); VAD input "
                 "resampled to 16 kHz as torchaudio's Resample",
    "paper": "decoded track at its native rate; VAD input resampled to 16 kHz as torchaudio's Resample",
}


@dataclass
class Audio:
    samples: np.ndarray  # mono float32 at the native rate, as decoded
    rate: int
    pcm16: np.ndarray | None = None    # mono float32 of the native-rate 16-bit track (pydub)
    moviepy: np.ndarray | None = None  # mono float32 of moviepy's 44.1 kHz extraction
    syncnet: np.ndarray | None = None  # float32 of syncnet_python's 16 kHz mono 16-bit extraction
    # Why the track cannot be used (e.g. NaN samples); its signals are then empty, so a reader
    # that ignores `problem` sees an empty track, never silence.
    problem: str | None = None

    @property
    def duration_s(self) -> float:
        return len(self.samples) / self.rate if self.rate else 0.0


def _channels(frame) -> np.ndarray:
    """An audio frame as float32 (channels, samples), whatever its sample format."""
    a = frame.to_ndarray()
    channels = len(frame.layout.channels)
    if not frame.format.is_planar:  # interleaved: (1, n*channels)
        a = a.reshape(-1, channels).T
    if a.dtype.kind == "i":  # integer PCM -> [-1, 1)
        a = a.astype(np.float32) / float(np.iinfo(a.dtype).max + 1)
    return a.astype(np.float32).reshape(channels, -1)


def _mono(chunks) -> np.ndarray:
    """Channels averaged to mono, as librosa's mono=True and silero's read_audio do."""
    if not chunks:
        return np.zeros(0, np.float32)
    return np.concatenate(chunks, axis=1).mean(axis=0).astype(np.float32)


class _Pcm16:
    """One ffmpeg conversion to 16-bit interleaved PCM, kept as (channels, n) float32 chunks."""

    def __init__(self, layout=None, rate=None, clip=None):
        self.layout, self.rate, self.clip = layout, rate, clip
        self.resampler, self.chunks = None, []

    def add(self, frame):
        if self.resampler is None:
            self.resampler = av.AudioResampler(format="s16", layout=self.layout or frame.layout.name,
                                               rate=self.rate or frame.sample_rate)
        self._keep(self.resampler.resample(frame))

    def _keep(self, frames):
        for f in frames:
            a = f.to_ndarray().reshape(-1, len(f.layout.channels)).T
            if self.clip:
                a = np.clip(a, -self.clip, self.clip)
            self.chunks.append(a.astype(np.float32) / 32768.0)

    def finish(self) -> np.ndarray:
        if self.resampler is not None:
            self._keep(self.resampler.resample(None))  # flush the resampler's delay line
        return _mono(self.chunks)


class AudioGatherer:
    """Collects a track's decoded frames; `reference` also runs the reference's two extractions."""

    def __init__(self, reference: bool, syncnet: bool = False):
        self.chunks, self.rate, self.samples = [], 0, 0
        self.shape = (0, 0)  # (channels, sample rate) of the first frame
        self.problem: str | None = None
        self.extractions = (_Pcm16(), _Pcm16("stereo", MOVIEPY_RATE, MOVIEPY_CLIP)) if reference else ()
        self.syncnet = _Pcm16("mono", SYNCNET_RATE) if syncnet else None

    @property
    def duration_s(self) -> float:
        """Seconds decoded so far (counted even once the track is refused, for the limits)."""
        return self.samples / self.rate if self.rate else 0.0

    def add(self, frame):
        shape = (len(frame.layout.channels), frame.sample_rate)
        planes = shape[0] if frame.format.is_planar else 1
        if not self.problem and (shape[0] > MAX_CHANNELS or len(frame.planes) != planes):
            # A damaged header (e.g. an AAC config saying 22.2): PyAV's to_ndarray of such a frame
            # reads past its buffers and crashes the process. Never converted.
            self.problem = (f"the audio track claims {shape[0]} channels in {len(frame.planes)} planes (a damaged "
                            "header): re-encode it")
            self.chunks = []
        if self.rate and shape != self.shape and not self.problem:
            # A damaged or spliced track: samples of two formats cannot make one signal.
            self.problem = (f"the audio track changes from {self.shape[0]} channel(s) at {self.shape[1]} Hz to "
                            f"{shape[0]} at {shape[1]} Hz midway (damaged or spliced): re-encode it")
            self.chunks = []
        if not self.rate:
            self.shape = shape
        self.rate = self.rate or frame.sample_rate
        self.samples += frame.samples
        if self.problem:
            return
        a = _channels(frame)
        # Float PCM can carry NaN/inf: the RMS and the VAD would read such a track as silence.
        if not np.isfinite(a).all():
            self.problem = "audio track has NaN or infinite samples"
            self.chunks = []
            return
        self.chunks.append(a)
        for e in (*self.extractions, *([self.syncnet] if self.syncnet else [])):
            e.add(frame)

    def finish(self) -> Audio:
        if self.problem:
            empty = np.zeros(0, np.float32)
            return Audio(empty, self.rate, *((empty, empty) if self.extractions else ()), problem=self.problem)
        audio = Audio(_mono(self.chunks), self.rate)
        if self.extractions:
            audio.pcm16, audio.moviepy = (e.finish() for e in self.extractions)
        if self.syncnet:
            audio.syncnet = self.syncnet.finish()
        return audio
