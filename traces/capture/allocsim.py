# traces/capture/allocsim.py -- named phase marks for Python programs
# captured by `allocsim capture`:
#
#     from allocsim import mark
#     mark("after_free")
#
# Under capture this directory is on PYTHONPATH and mark() records the label
# and the measured RSS at that instant (liballocsim_capture.so's
# allocsim_mark).  Outside a capture it does nothing: copy this file next to
# your program (or put its directory on PYTHONPATH) and leave the marks in.
# Labels keep at most 63 bytes.
import os

__all__ = ["mark", "capturing"]

_mark = None
if os.environ.get("ALLOCSIM_CAPTURE_SOCK"):
    try:
        import ctypes

        _mark = ctypes.CDLL(None).allocsim_mark
        _mark.argtypes = [ctypes.c_char_p]
        _mark.restype = None
    except (OSError, AttributeError, ImportError):
        _mark = None


def capturing():
    """True when this process is being captured."""
    return _mark is not None


def mark(label):
    """Records a mark named label (str or bytes); a no-op outside a capture."""
    if _mark is None:
        return
    if isinstance(label, str):
        label = label.encode("utf-8", "replace")
    _mark(label)
