# Probe 11, High (narrow trigger): a scanned program that itself runs `dmlprof scan` (a driver script, a test
# suite scanned with `-m pytest` whose tests scan) hands DMLPROF_SUPERVISED to the inner scan, which then
# believes it is a supervised child: it runs unsupervised, and the inner script's native crash loses its
# recording with no message (status -11, no session), where the same inner scan run directly exits 7 and saves
# the partial session.
# direct: python -m dmlprof scan nested_scan_inner.py --run-to-end   -> exit 7, partial session saved
# plain:  python nested_scan_loses_crash.py                          -> "inner scan exit 7 ... partial session saved"
# nested: python -m dmlprof scan nested_scan_loses_crash.py --run-to-end -> "inner scan exit -11", nothing saved
import os
import subprocess
import sys

inner = os.path.join(os.path.dirname(os.path.abspath(__file__)), "nested_scan_inner.py")
result = subprocess.run([sys.executable, "-m", "dmlprof", "scan", inner, "--run-to-end"], capture_output=True, text=True)
print("inner scan exit", result.returncode, result.stderr.strip().splitlines()[-1:] if result.stderr.strip() else "")
print("DMLPROF_SUPERVISED seen by the program:", os.environ.get("DMLPROF_SUPERVISED"))
