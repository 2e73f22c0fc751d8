# traces/capture/sitecustomize.py -- loaded by CPython at start-up when
# `allocsim capture` puts this directory first on PYTHONPATH.
#
# It asks the preloaded liballocsim_capture.so to wrap CPython's mem and obj
# allocator domains (PyMem_SetAllocator around the real pymalloc, so the
# measured RSS is still pymalloc's) and then runs the sitecustomize module
# this one shadows, if there is one (Debian ships one).  Everything the
# interpreter allocated before this point is the measured baseline; the
# trace shows where with the mark "hooked".
#
# Not hooked: python -S (no site), python -I / -E (PYTHONPATH ignored).
import os
import sys


def _allocsim_hook():
    if not os.environ.get("ALLOCSIM_CAPTURE_DIR"):
        return
    try:
        import ctypes
        lib = ctypes.CDLL(None)
        hook = lib.allocsim_hook_python
    except (OSError, AttributeError, ImportError):
        return
    hook.restype = ctypes.c_int
    hook()


def _chain():
    here = os.path.dirname(os.path.abspath(__file__))
    import importlib.machinery
    import importlib.util
    path = [p for p in sys.path if os.path.abspath(p or ".") != here]
    spec = importlib.machinery.PathFinder.find_spec("sitecustomize", path)
    if spec is None or spec.loader is None:
        return
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)


_allocsim_hook()
_chain()
