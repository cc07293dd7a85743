"""This machine's memory and this process's share of it, portably: ``/proc`` and ``os.sysconf`` on Linux,
``sysctl`` on macOS, the Win32 calls on Windows. Each reader answers ``None`` where the platform cannot tell."""
from __future__ import annotations

import ctypes
import os
import sys
from pathlib import Path
from typing import Optional


def peak_rss_bytes() -> Optional[int]:
    """Peak resident set size of this process, portable where it can be."""
    try:
        import resource  # POSIX only

        peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
        # Linux reports KiB, macOS bytes.
        return int(peak if sys.platform == "darwin" else peak * 1024)
    except ImportError:
        pass
    counters = _windows_process_counters()
    return int(counters.PeakWorkingSetSize) if counters is not None else None


def resident_bytes() -> Optional[int]:
    """Resident set size of this process now: /proc/self/statm on Linux, the working set on Windows."""
    try:
        pages = int(Path("/proc/self/statm").read_text().split()[1])
        return pages * os.sysconf("SC_PAGE_SIZE")
    except (OSError, ValueError, IndexError, AttributeError):
        pass
    counters = _windows_process_counters()
    return int(counters.WorkingSetSize) if counters is not None else None


def total_physical_memory_bytes() -> Optional[int]:
    """Physical memory of this machine: os.sysconf on POSIX, GlobalMemoryStatusEx on Windows."""
    try:
        pages, page_size = os.sysconf("SC_PHYS_PAGES"), os.sysconf("SC_PAGE_SIZE")
        if pages > 0 and page_size > 0:
            return int(pages * page_size)
    except (AttributeError, ValueError, OSError):
        pass
    status = _windows_memory_status()
    return int(status.ullTotalPhys) if status is not None else None


def available_physical_memory_bytes() -> Optional[int]:
    """Memory this machine could still give a process without swapping: MemAvailable on Linux (free pages count
    too few: the page cache gives way), the free pages on macOS, ullAvailPhys on Windows."""
    for reader in (_linux_available, _sysconf_available, _macos_free, _windows_available):
        found = reader()
        if found is not None:
            return found
    return None


def _linux_available() -> Optional[int]:
    try:
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemAvailable:"):
                return int(line.split()[1]) * 1024  # "MemAvailable:  123456 kB"
    except (OSError, ValueError, IndexError):
        pass
    return None


def _sysconf_available() -> Optional[int]:
    try:
        pages, page_size = os.sysconf("SC_AVPHYS_PAGES"), os.sysconf("SC_PAGE_SIZE")
        return int(pages * page_size) if pages >= 0 and page_size > 0 else None
    except (AttributeError, ValueError, OSError):
        return None


def _macos_free() -> Optional[int]:
    if sys.platform != "darwin":
        return None
    free_pages, page_size = _sysctl_integer(b"vm.page_free_count", ctypes.c_uint32), _sysctl_integer(b"hw.pagesize", ctypes.c_int64)
    return free_pages * page_size if free_pages is not None and page_size else None


def _sysctl_integer(name: bytes, kind) -> Optional[int]:
    try:
        libc = ctypes.CDLL(None)
        value, size = kind(0), ctypes.c_size_t(ctypes.sizeof(kind))
        if libc.sysctlbyname(name, ctypes.byref(value), ctypes.byref(size), None, ctypes.c_size_t(0)) == 0:
            return int(value.value)
    except (OSError, AttributeError):
        pass
    return None


def _windows_available() -> Optional[int]:
    status = _windows_memory_status()
    return int(status.ullAvailPhys) if status is not None else None


def _windows_memory_status():
    """GlobalMemoryStatusEx's MEMORYSTATUSEX, else ``None`` (not Windows, or the call failed)."""
    if os.name != "nt":
        return None

    class _MemoryStatusEx(ctypes.Structure):
        _fields_ = [
            ("dwLength", ctypes.c_ulong),
            ("dwMemoryLoad", ctypes.c_ulong),
            ("ullTotalPhys", ctypes.c_ulonglong),
            ("ullAvailPhys", ctypes.c_ulonglong),
            ("ullTotalPageFile", ctypes.c_ulonglong),
            ("ullAvailPageFile", ctypes.c_ulonglong),
            ("ullTotalVirtual", ctypes.c_ulonglong),
            ("ullAvailVirtual", ctypes.c_ulonglong),
            ("ullAvailExtendedVirtual", ctypes.c_ulonglong),
        ]

    try:
        status = _MemoryStatusEx()
        status.dwLength = ctypes.sizeof(_MemoryStatusEx)
        return status if ctypes.windll.kernel32.GlobalMemoryStatusEx(ctypes.byref(status)) else None
    except Exception:
        return None


def _windows_process_counters():
    """GetProcessMemoryInfo's PROCESS_MEMORY_COUNTERS for this process, else ``None``."""
    if os.name != "nt":
        return None
    from ctypes import wintypes

    class _Counters(ctypes.Structure):
        _fields_ = [
            ("cb", wintypes.DWORD),
            ("PageFaultCount", wintypes.DWORD),
            ("PeakWorkingSetSize", ctypes.c_size_t),
            ("WorkingSetSize", ctypes.c_size_t),
            ("QuotaPeakPagedPoolUsage", ctypes.c_size_t),
            ("QuotaPagedPoolUsage", ctypes.c_size_t),
            ("QuotaPeakNonPagedPoolUsage", ctypes.c_size_t),
            ("QuotaNonPagedPoolUsage", ctypes.c_size_t),
            ("PagefileUsage", ctypes.c_size_t),
            ("PeakPagefileUsage", ctypes.c_size_t),
        ]

    try:
        counters = _Counters()
        counters.cb = ctypes.sizeof(_Counters)
        handle = ctypes.windll.kernel32.GetCurrentProcess()
        return counters if ctypes.windll.psapi.GetProcessMemoryInfo(handle, ctypes.byref(counters), counters.cb) else None
    except Exception:
        return None
