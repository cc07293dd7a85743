import ctypes
def segv():
    ctypes.string_at(0)
