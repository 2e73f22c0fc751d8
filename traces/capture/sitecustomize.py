# traces/capture/sitecustomize.py -- loaded by CPython at start-up when
# `allocsim capture` puts this directory first on PYTHONPATH.
#
# The preloaded liballocsim_capture.so wraps CPython's mem and obj allocator
# domains at entry to main (PyMem_SetAllocator around the real pymalloc, so
# the measured RSS is still pymalloc's).  An interpreter given PYTHONMALLOC
# or -X dev replaces them while it pre-initialises; this module asks the
# library to wrap them again (allocsim_hook_python does nothing when they
# are still wrapped), and makes sys._debugmallocstats() work under capture
# (it prints nothing unless the obj domain is pymalloc's own, so the hook is
# lifted around it).  Then it runs the sitecustomize module this one
# shadows, if there is one (Debian ships one).  What the interpreter
# allocated before a late hook is the measured baseline; the trace shows
# where with the mark "hooked".
import os
import sys


def _allocsim_hook():
    if not os.environ.get("ALLOCSIM_CAPTURE_SOCK"):
        return
    try:
        import ctypes
        lib = ctypes.PyDLL(None)  # holds the GIL: the hook calls the
        # domains' allocators
        hook = lib.allocsim_hook_python
        unhook = lib.allocsim_unhook_python
    except (OSError, AttributeError, ImportError):
        return
    hook.restype = ctypes.c_int
    unhook.restype = ctypes.c_int
    if not hook():
        return
    stats = getattr(sys, "_debugmallocstats", None)
    if stats is None:
        return

    def _debugmallocstats():
        unhook()
        try:
            stats()
        finally:
            hook()

    sys._debugmallocstats = _debugmallocstats


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
