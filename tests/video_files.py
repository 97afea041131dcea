"""Real video files for tests, written with PyAV (importable by name: conftest modules collide)."""
import av
import numpy as np


def write_video(path, images, fps=25, audio=None, audio_rate=16000, video_codec="libx264", audio_codec="aac",
                audio_format="fltp"):
    """A real file: the given RGB images, and `audio` (float32, channels x samples) if given."""
    out = av.open(str(path), "w")
    h, w = images[0].shape[:2]
    vs = out.add_stream(video_codec, rate=fps)
    vs.width, vs.height = w, h
    vs.pix_fmt = "rgb24" if video_codec == "png" else "yuv420p"
    if audio is not None:
        aus = out.add_stream(audio_codec, rate=audio_rate)
        aus.layout = "mono" if len(audio) == 1 else "stereo"
    for img in images:
        for p in vs.encode(av.VideoFrame.from_ndarray(img, format="rgb24")):
            out.mux(p)
    for p in vs.encode():
        out.mux(p)
    if audio is not None:
        for k in range(0, audio.shape[1], 1024):
            chunk = np.ascontiguousarray(audio[:, k:k + 1024])
            if audio_format == "flt":  # packed: one row of interleaved samples
                chunk = np.ascontiguousarray(chunk.T.reshape(1, -1))
            fr = av.AudioFrame.from_ndarray(chunk, format=audio_format, layout=aus.layout.name)
            fr.sample_rate, fr.pts = audio_rate, k
            for p in aus.encode(fr):
                out.mux(p)
        for p in aus.encode():
            out.mux(p)
    out.close()
    return path
