"""MediaPipe FaceMesh index sets used by the THEval metrics (see docs/metrics.md, "Shared conventions")."""

LIPS = (0, 13, 14, 17, 37, 39, 40, 61, 78, 80, 81, 82, 84, 87, 88, 91, 95, 146, 178, 181,
        185, 191, 267, 269, 270, 291, 308, 310, 311, 312, 314, 317, 318, 321, 324, 375, 402,
        405, 409, 415)
UPPER_INNER = (191, 80, 81, 82, 13, 312, 311, 310)
LOWER_INNER = (95, 88, 178, 87, 14, 317, 402, 318)
LEFT_EYE = (263, 249, 390, 373, 374, 380, 381, 382, 362, 466, 388, 387, 386, 385, 384, 398)
RIGHT_EYE = (33, 7, 163, 144, 145, 153, 154, 155, 133, 246, 161, 160, 159, 158, 157, 173)
LEFT_BROW = (276, 283, 282, 295, 285, 300, 293, 334, 296, 336)
RIGHT_BROW = (46, 53, 52, 65, 55, 70, 63, 105, 66, 107)
# Lip-sync inter-ocular width: mean x of (33, 133) against mean x of (362, 263).
EYE_CORNERS_RIGHT = (33, 133)
EYE_CORNERS_LEFT = (362, 263)
# Silent-lip stability normalises by the distance between these two outer eye corners.
OUTER_EYE_CORNERS = (33, 263)

NUM_LANDMARKS_REFINED = 478
NUM_LANDMARKS = 468
