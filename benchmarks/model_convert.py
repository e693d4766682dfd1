"""Measure the streaming converter on a synthesized ~126M-parameter model.

Not a timed test: run by hand, ``python -m benchmarks.model_convert [--keep DIR]``.
Each conversion runs in its own process so its peak RSS is its own. Prints one JSON
line per output type: wall seconds, source and output bytes, MB/s of output and the
child's peak RSS, next to the largest single tensor (what streaming should bound).
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from host.model.convert import plan_conversion
from host.model.synth import TinySpec

SPEC = TinySpec("llama", "LlamaForCausalLM", 1024, 8, 8, 4, 128, 4096, 1e4, False, False, False)

# Children report their own peak RSS; the parent stays small (synthesis runs in a
# child too), because a forked child's ru_maxrss includes its parent's pages.
_SYNTH = """
import sys
from pathlib import Path
from benchmarks.model_convert import SPEC
from host.model.synth import synthesize
synthesize(Path(sys.argv[1]), SPEC)
"""
_CHILD = """
import resource, sys, time
from pathlib import Path
from host.model.convert import convert
started = time.perf_counter()
result = convert(Path(sys.argv[1]), Path(sys.argv[2]), sys.argv[3])
peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
print(time.perf_counter() - started, result.size, peak)
"""


def main(argv: list[str] | None = None) -> int:
    """Synthesize once, convert at every output type, print measurements."""
    parser = argparse.ArgumentParser(prog="python -m benchmarks.model_convert")
    parser.add_argument("--keep", type=Path, default=None, help="work here, keep outputs")
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="bench-convert-") as tmp:
        work = args.keep if args.keep is not None else Path(tmp)
        source = work / "source"
        started = time.perf_counter()
        subprocess.run([sys.executable, "-c", _SYNTH, str(source)], check=True)
        synth_seconds = time.perf_counter() - started
        source_bytes = sum(p.stat().st_size for p in source.iterdir())
        for outtype in ("f32", "f16", "bf16", "q8_0"):
            largest = max(t.nbytes for t in plan_conversion(source, outtype).tensors)
            proc = subprocess.run(
                [sys.executable, "-c", _CHILD, str(source), str(work / outtype), outtype],
                check=True,
                capture_output=True,
                text=True,
            )
            seconds, size, peak_kib = proc.stdout.split()
            print(
                json.dumps(
                    {
                        "outtype": outtype,
                        "seconds": round(float(seconds), 3),
                        "source_bytes": source_bytes,
                        "gguf_bytes": int(size),
                        "mb_per_s": round(int(size) / float(seconds) / 1e6, 1),
                        "child_peak_rss_mib": round(int(peak_kib) / 1024, 1),
                        "largest_tensor_mib": round(largest / 2**20, 1),
                        "synth_seconds": round(synth_seconds, 2),
                    }
                ),
                flush=True,
            )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
