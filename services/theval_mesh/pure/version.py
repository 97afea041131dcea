"""The tool's version, recorded in every result's provenance."""
import importlib.metadata

try:
    VERSION = importlib.metadata.version("theval-mesh")
except importlib.metadata.PackageNotFoundError:  # running from a source tree
    VERSION = "0.0.0+source"
