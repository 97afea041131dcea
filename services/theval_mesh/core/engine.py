"""Score one video on the in-process backends: decode once, one FaceMesh pass, VAD once."""
from theval_mesh.backends.audio.backend import AudioBackend
from theval_mesh.backends.headpose import facexformer
from theval_mesh.backends.quality.backend import QualityBackend
from theval_mesh.core.provenance import in_process
from theval_mesh.core.results import VideoResult
from theval_mesh.core.stages import LocalVideo, new_result, score
from theval_mesh.pure.settings import RunSettings


class Engine:
    """Loads the models once; then score_video() for each video."""

    def __init__(self, settings: RunSettings, weights_store=None, inference=None):
        """inference: pure.inference.InferenceOptions, how the networks run (default auto)."""
        self.settings = settings
        self.audio = AudioBackend()
        self.quality = QualityBackend(mode=settings.quality, profile=settings.profile, store=weights_store,
                                      inference=inference)
        use_facexformer, _ = facexformer.choose(settings.headpose, weights_store)
        self.headpose = facexformer.FaceXFormerHeadPose(weights_store, inference) if use_facexformer else None
        self._provenance = None

    def runs_torch(self) -> bool:
        """Whether a network runs on torch here (quality models or FaceXFormer in this process)."""
        return (self.quality.resolved_mode == "paper" and self.quality.models.served_by == "in-process") \
            or self.headpose is not None

    def provenance(self) -> dict:
        if self._provenance is None:
            self._provenance = in_process(self.settings, self.quality, self.headpose, self.audio.provenance())
        return self._provenance

    def score_video(self, path, model: str = "", on_frames=None, cancelled=None) -> VideoResult:
        """cancelled: backends.liveness; Cancelled is raised, mid-video, once it fires."""
        result = new_result(model, path, self.settings, self.provenance())
        score(lambda: LocalVideo(path, self.settings, self.audio, self.quality, self.headpose, cancelled), result,
              self.settings, on_frames)
        return result
