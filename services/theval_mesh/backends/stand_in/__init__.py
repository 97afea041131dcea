"""Deterministic STAND-IN weights: every weight file of the quality models (and, on request, of the
FaceXFormer head-pose network), in the format and under
the key names the real file has, filled from a seeded numpy generator. Scores computed with them
mean nothing; they exist so that our pipeline and the reference scripts can be run on the SAME
network and compared (preprocessing, cropping, batching, detection, colour order, resizing and
averaging do not depend on the weights' values).

Every tensor's values come from `numpy.random.default_rng([seed, crc32(name)])`, drawn in float32,
so they are identical whatever the torch version (only torch's container format may differ).
Scales follow the module a tensor belongs to, so that no network saturates:
  - convolutions and linear layers: normal, std sqrt(2 / fan_in) (He), biases 0;
  - the last linear layer of a score head: std 1 / sqrt(fan_in), so logits stay O(1);
  - normalisation layers: weight 1, bias 0, running mean 0, running variance 1; the norm closing
    a residual branch (ResNet `bn3`, `downsample.1`) weight 0.2, so 16 stacked blocks do not grow
    the features by orders of magnitude;
  - bare parameters (position embeddings, class tokens, relative position tables): std 0.02;
  - buffers the constructor computes (index tables, attention masks, mean/std constants): kept.
The face detector (facexlib RetinaFace-R50) cannot learn faces from random numbers. Its heads are
designed (detectors.py): only the 256 px anchors of the coarsest level (stride 32) can score above
facexlib's 0.97 threshold, by a content term (positive weights on the non-negative features) that
spreads their scores so that no near-tie decides which boxes NMS keeps; boxes and five landmarks are
the anchor's own plus a small content-dependent shift, and facexlib keeps the box nearest the image
centre: a CENTRE-PRIOR detector, which on a centred talking head lands on the face.
syncnet_python's S3FD (`sfd_face.pth`) has designed heads too (backends/classic/s3fd.py
stand_in_state).

FaceXFormer (`model.pt`, head pose; backends/headpose/facexformer_net.py) follows the same rules
with two exceptions (facexformer_state):
  - its random-Fourier position encoding `pe_layer.positional_encoding_gaussian_matrix` is a
    buffer the constructor draws with torch.randn (the original's facexformer.py:143-146): a
    constant that is not reproducible, so it is drawn here, std 1 as the constructor's;
  - the pose head's last linear layer has std POSE_STD / sqrt(fan_in): the pose token leaves a
    LayerNorm, so the head's input is O(1) per unit whatever the image; with it pitch, yaw and
    roll have a spread of some tens of degrees across images and move by degrees from frame to
    frame of a talking head, and nothing saturates (the outputs are linear).
Its Swin-B ImageNet init `swin_b-68c6b09e.pth` (torchvision's state_dict) is written too: the
reference's constructor reads it (from the torch hub cache) and model.pt then overwrites every
value, so its values are the ones in model.pt under `backbone.0.` / `backbone.1.`.

The store that holds them gets `STAND-IN.json` (seed, generator version, sha256 of each file):
`theval weights verify` reports those files as stand-ins, never as the published weights, and
provenance names them `stand-in:<seed>`.

The package: rules.py (the rules above and the values digest), detectors.py (the designed face
detectors and the Keras HDF5 file), facexformer.py (FaceXFormer and its Swin-B init), writer.py
(a store of them and its marker, the classic metrics' networks included). The classic networks'
own stand-in states are beside their code (backends/classic/<network>.py stand_in_state).
"""
from theval_mesh.backends.stand_in.writer import write

__all__ = ["write"]
