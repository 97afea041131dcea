"""The two metric profiles: `reference` reproduces the reference code, `paper` the paper's text."""

REFERENCE = "reference"
PAPER = "paper"
PROFILES = (REFERENCE, PAPER)


def check_profile(profile: str) -> str:
    if profile not in PROFILES:
        raise ValueError(f"unknown profile {profile!r}: use one of {', '.join(PROFILES)}")
    return profile


def std_ddof(profile: str) -> int:
    """Population std in `reference` (numpy default), sample std in `paper`."""
    return 0 if check_profile(profile) == REFERENCE else 1
