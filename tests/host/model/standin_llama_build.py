"""A stand-in for the llama-cpp-python build, run through host.wheels' test seam.

`python standin_llama_build.py OUT_DIR FLAVOUR` writes a small, installable wheel named
like the real one into OUT_DIR in a fraction of a second instead of compiling for
minutes. Like pip, it prints on stdout and on stderr, so a caller that lets a child's
stdout reach its own machine-readable stdout is caught. Environment: STANDIN_LOG (a file
to append one line per build to), STANDIN_SLEEP (seconds to take, so fills overlap).
Standard library only: the cold-path test runs it from a bare venv.
"""

from __future__ import annotations

import base64
import hashlib
import os
import sys
import time
import zipfile
from pathlib import Path

NAME = "llama_cpp_python-0.3.36-py3-none-any.whl"
DIST_INFO = "llama_cpp_python-0.3.36.dist-info"


def _record_line(name: str, data: bytes) -> str:
    digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
    return f"{name},sha256={digest},{len(data)}"


def main() -> int:
    out, flavour = Path(sys.argv[1]), sys.argv[2]
    print(f"stand-in build of the {flavour} wheel: noise on stdout, as pip makes", flush=True)
    print("stand-in build: noise on stderr", file=sys.stderr, flush=True)
    log = os.environ.get("STANDIN_LOG")
    if log:
        with open(log, "a") as handle:
            handle.write(f"built {flavour} {os.getpid()}\n")
    time.sleep(float(os.environ.get("STANDIN_SLEEP", "0")))
    files = {
        "llama_cpp/__init__.py": b'"""Stand-in: not the real llama_cpp."""\n',
        f"{DIST_INFO}/METADATA": b"Metadata-Version: 2.1\nName: llama_cpp_python\n"
        b"Version: 0.3.36\n",
        f"{DIST_INFO}/WHEEL": b"Wheel-Version: 1.0\nGenerator: stand-in\nRoot-Is-Purelib: true\n"
        b"Tag: py3-none-any\n",
    }
    record = [_record_line(name, data) for name, data in files.items()]
    record.append(f"{DIST_INFO}/RECORD,,")
    files[f"{DIST_INFO}/RECORD"] = ("\n".join(record) + "\n").encode()
    with zipfile.ZipFile(out / NAME, "w") as wheel:
        for name, data in files.items():
            wheel.writestr(name, data)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
