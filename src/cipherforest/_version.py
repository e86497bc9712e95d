"""The installed distribution's version (read from package metadata on first use)."""

from importlib.metadata import PackageNotFoundError, version

try:
    __version__ = version("cipherforest")
except PackageNotFoundError:  # running from a source tree that is not installed
    __version__ = "0.0.0+unknown"
