"""Synthetic talking heads with known ground truth, for the demo and the tests.

A real face photo (scikit-image's astronaut) is animated: the mouth opens with the envelope of
espeak-ng speech, the head rolls and shifts smoothly, the brows rise now and then. Degraded
variants of every clip each break one of these on purpose.
"""
from theval_mesh.synth.bad_inputs import write_bad_inputs
from theval_mesh.synth.kit import KitManifest, generate_kit, load_kit
from theval_mesh.synth.variants import ALL_VARIANTS, GT

__all__ = ["ALL_VARIANTS", "GT", "KitManifest", "generate_kit", "load_kit", "write_bad_inputs"]
