"""Pin + prepare of a full-size Qwen3-4B snapshot against the durable floor and llama.cpp.

Not a timed test: run by hand (the command is in docs/model-conversion.md). Why side by
side, in one run: a time means nothing without this machine's floor next to it, measured
on the same bytes under the same load. The goal is checked at full size:
``pin + prepare <= 1.3 x the durable floor``, faster than llama.cpp's official
converter, and peak RSS <= the largest tensor + 256 MiB.

On one synthesized snapshot (benchmarks/qwen4b_snapshot.py: 8.05 GB bf16, 3 shards,
tied embeddings, the real vocabulary), each measurement in its own process, with the
page cache dropped first for every file it reads (``posix_fadvise(DONTNEED)`` per file
after an ``fsync``, so other users of the machine keep their cache):

- ``read_sha256``: ``hashlib.sha256`` over every file of the snapshot, 1 MiB reads, cold;
- ``copy_fsync``: ``shutil.copyfile`` of every file (cold source), then ``fsync`` of each
  copy: what writing a durable output of the same size costs;
- the durable floor is the larger of the two (a converter must read and hash the source
  and write a durable output; it can overlap them, so the larger is the floor);
- ``pin``: what ``harness model pin --profile qwen4b`` runs (``pin_snapshot`` with the
  ``check_convertible`` check), the lock written into a scratch folder;
- ``prepare``: what ``harness model prepare --profile qwen4b --source DIR`` runs
  (``modelstage.prepare``) into an empty scratch cache: one pass (each shard hashed
  in the reads that convert it, the GGUF hashed and checked as it is written, its
  header read back), then the entry cached;
- ``gguf_readback``: a cold read + SHA-256 of the GGUF prepare wrote: what the
  post-write read-back that the one pass dropped would cost at least (it is what
  ``harness model verify`` reads, besides the source once more);
- ``pin_then_prepare``: the two, one after the other in one process, the cache
  dropped once before: what an operator's ``pin`` then ``prepare`` costs (prepare then
  finds whatever of the source the page cache kept);
- ``prepare_pin``: ``harness model prepare --profile qwen4b --source DIR --pin``
  (``modelstage.prepare(..., pin=True)``): the snapshot pinned by the same pass that
  converts it, then the lock written. This is the figure the goal is checked on (one
  command doing both); the rows above say where the time goes;
- ``official``: llama.cpp's ``convert_hf_to_gguf.py --outtype bf16`` from the pinned
  sdist, under an interpreter with torch (``--official-python``), through the
  pre-tokenizer shim of benchmarks/conversion_parity.py (it answers only when the
  tokenizer's hash is unknown to llama.cpp; with the real vocabulary it is not asked).

Peak RSS is each process's ``ru_maxrss`` (the official converter's is its child's). With
``--compare``, our GGUF and llama.cpp's are then compared tensor by tensor
(conversion_parity.compare). Prints one JSON object per measurement, then the targets.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

from benchmarks.conversion_parity import _SHIM

MIB = 1 << 20
_PRELUDE = """
import hashlib, os, resource, shutil, subprocess, sys, time
from pathlib import Path
src, out = Path(sys.argv[1]), Path(sys.argv[2])
locks = Path(sys.argv[3]) if len(sys.argv) > 3 else out
cache = Path(sys.argv[4]) if len(sys.argv) > 4 else out / 'cache'
files = sorted(p for p in src.iterdir() if p.is_file())
"""
_SETUP = {
    "pin": (
        "from harness.profiles import load_profile\n"
        "from harness.profiles.lock import pin_snapshot\n"
        "from harness.trial.modelstage import check_convertible\n"
        "profile = load_profile('qwen4b')\n"
    ),
    "prepare": (
        "from harness.profiles import load_profile\n"
        "from harness.trial.modelstage import prepare\n"
        "profile = load_profile('qwen4b')\n"
    ),
    "prepare_pin": (
        "from harness.profiles import load_profile\n"
        "from harness.trial.modelstage import prepare\n"
        "profile = load_profile('qwen4b')\n"
    ),
    "pin_then_prepare": (
        "from harness.profiles import load_profile\n"
        "from harness.profiles.lock import pin_snapshot\n"
        "from harness.trial.modelstage import check_convertible, prepare\n"
        "profile = load_profile('qwen4b')\n"
    ),
}
_BODIES = {
    "read_sha256": (
        "for f in files:\n"
        "    h = hashlib.sha256()\n"
        "    with f.open('rb') as r:\n"
        "        while chunk := r.read(1 << 20):\n"
        "            h.update(chunk)\n"
    ),
    "copy_fsync": (
        "for f in files:\n"
        "    shutil.copyfile(f, out / f.name)\n"
        "for f in files:\n"
        "    with (out / f.name).open('rb+') as w:\n"
        "        os.fsync(w.fileno())\n"
    ),
    "pin": ("pin_snapshot('qwen4b', src, out, check=lambda s: check_convertible(profile, s))\n"),
    "prepare": (
        "record = prepare(profile, cache, src, locks).record\n"
        "assert record.category == 'ok', record.category\n"
        "(out / 'split.json').write_text(record.model_dump_json(include={"
        "'verify_source_ms', 'convert_ms', 'verify_gguf_ms'}))\n"
    ),
    "pin_then_prepare": (
        "pin_snapshot('qwen4b', src, out, check=lambda s: check_convertible(profile, s))\n"
        "record = prepare(profile, out / 'cache', src, out).record\n"
        "assert record.category == 'ok', record.category\n"
    ),
    "prepare_pin": (
        "record = prepare(profile, out / 'cache', src, out, pin=True).record\n"
        "assert record.category == 'ok', record.category\n"
    ),
    "official": (
        "subprocess.run(json.loads(os.environ['OFFICIAL_CMD']), check=True,"
        " stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)\n"
    ),
}
_TIMED = """
import json
started = time.perf_counter()
{body}
seconds = time.perf_counter() - started
who = resource.RUSAGE_CHILDREN if {children} else resource.RUSAGE_SELF
print(seconds, resource.getrusage(who).ru_maxrss)
"""


def drop_cache(*roots: Path) -> None:
    """Write out and drop the page cache of every file under *roots*, one file at a time
    (``posix_fadvise(DONTNEED)``), so the next read is cold without touching what other
    users of the machine have cached."""
    for root in roots:
        if not root.exists():
            continue
        paths = [root] if root.is_file() else [p for p in root.rglob("*") if p.is_file()]
        for path in paths:
            fd = os.open(path, os.O_RDONLY)
            try:
                os.fsync(fd)
                os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
            finally:
                os.close(fd)


def measure(
    name: str, source: Path, out: Path, extra: list[str], env: dict[str, str] | None = None
) -> tuple[float, float]:
    """One measurement in a fresh process: (seconds, peak RSS MiB). *extra*: the pin
    lock folder (default *out*), then the harness cache (default *out*/cache)."""
    code = (
        _PRELUDE
        + _SETUP.get(name, "")
        + _TIMED.format(body=_BODIES[name], children=name == "official")
    )
    result = subprocess.run(
        [sys.executable, "-c", code, str(source), str(out), *extra],
        check=False,
        capture_output=True,
        text=True,
        env={**os.environ, **(env or {})},
    )
    if result.returncode != 0:
        raise SystemExit(f"{name} failed:\n{result.stderr[-3000:]}")
    seconds, kib = result.stdout.split()[-2:]
    return float(seconds), int(kib) / 1024


def largest_tensor(source: Path) -> int:
    """The largest tensor's bytes, from the shards' headers."""
    from host.model.safetensors_header import parse_header

    return max(
        entry.nbytes
        for shard in sorted(source.glob("*.safetensors"))
        for entry in parse_header(shard).tensors.values()
    )


def _our_gguf(entry_dir: Path, reference_entry: Path | None) -> int:
    """Print our GGUF's recorded digest and size (and whether it is the reference's)."""
    ours = json.loads((entry_dir / "entry.json").read_text())["gguf"]
    print(json.dumps({"ours_gguf": ours}), flush=True)
    if reference_entry is not None:
        reference = json.loads(reference_entry.read_text())["gguf"]
        same = reference["sha256"] == ours["sha256"]
        print(json.dumps({"same_gguf_as_reference": same}), flush=True)
    return int(ours["size"])


def main(argv: list[str] | None = None) -> int:  # noqa: PLR0915 (one linear script of measurements)
    parser = argparse.ArgumentParser(prog="python -m benchmarks.qwen4b_prepare")
    parser.add_argument("--source", type=Path, required=True, help="the synthesized snapshot")
    parser.add_argument("--work", type=Path, required=True, help="scratch for the outputs")
    parser.add_argument("--llama-cpp", type=Path, required=True, help="llama.cpp source tree")
    parser.add_argument("--official-python", type=Path, required=True, help="python with torch")
    parser.add_argument("--compare", action="store_true", help="compare the two GGUFs")
    parser.add_argument("--keep", action="store_true", help="keep both GGUFs in --work")
    parser.add_argument(
        "--reference-entry",
        type=Path,
        help="a cache entry.json of an earlier run: say whether this GGUF has its digest",
    )
    args = parser.parse_args(argv)
    source, work = args.source.resolve(), args.work.resolve()
    work.mkdir(parents=True, exist_ok=True)
    print(json.dumps({"load_average_start": os.getloadavg()}), flush=True)
    source_bytes = sum(p.stat().st_size for p in source.iterdir() if p.is_file())
    theirs = work / "official.gguf"
    script = (args.llama_cpp / "convert_hf_to_gguf.py").resolve()
    official_cmd = [str(args.official_python), "-c", _SHIM, str(script), "qwen2"]
    official_cmd += [str(source), "--outtype", "bf16", "--outfile", str(theirs)]
    results: dict[str, dict[str, float]] = {}
    ours_bytes = 0
    names = ("read_sha256", "copy_fsync", "pin", "prepare", "gguf_readback")
    for name in (*names, "pin_then_prepare", "prepare_pin", "official"):
        out = work / name
        shutil.rmtree(out, ignore_errors=True)
        theirs.unlink(missing_ok=True)
        out.mkdir()
        os.sync()  # outside the clock: nothing dirty left by the last measurement
        drop_cache(source, work)
        extra = [str(work / "pin")] if name == "prepare" else []
        env = {"OFFICIAL_CMD": json.dumps(official_cmd)}
        read_from = source
        if name == "gguf_readback":
            read_from = next((work / "prepare" / "cache" / "models").glob("*/model.gguf")).parent
        seconds, rss = measure(
            name if name != "gguf_readback" else "read_sha256", read_from, out, extra, env
        )
        results[name] = {"seconds": round(seconds, 2), "peak_rss_mib": round(rss, 1)}
        print(json.dumps({"measure": name, **results[name]}), flush=True)
        if name == "prepare":  # the model record's own split of prepare's time
            print(json.dumps({"prepare_split_ms": json.loads((out / "split.json").read_text())}))
        if name == "gguf_readback":
            ours_bytes = _our_gguf(read_from, args.reference_entry)
            if not (args.keep or args.compare):  # --compare reads it at the end
                shutil.rmtree(work / "prepare")  # one extra 8 GB copy at a time
        if name in ("copy_fsync", "pin_then_prepare", "prepare_pin"):
            shutil.rmtree(out)  # 8 GB not needed any more
    floor = max(results["read_sha256"]["seconds"], results["copy_fsync"]["seconds"])
    pin_prepare = results["prepare_pin"]["seconds"]
    largest = largest_tensor(source)
    bound = largest / MIB + 256
    targets = {
        "source_bytes": source_bytes,
        "gguf_bytes": {"ours": ours_bytes, "official": theirs.stat().st_size},
        "durable_floor_s": floor,
        "pin_plus_prepare_s": round(pin_prepare, 2),
        "pin_then_prepare_s": results["pin_then_prepare"]["seconds"],
        "pin_and_prepare_apart_s": round(
            results["pin"]["seconds"] + results["prepare"]["seconds"], 2
        ),
        "pin_plus_prepare_vs_floor": round(pin_prepare / floor, 3),
        "target_1_3x_floor_met": pin_prepare <= 1.3 * floor,
        "prepare_vs_official": round(
            results["prepare"]["seconds"] / results["official"]["seconds"], 3
        ),
        "pin_plus_prepare_vs_official": round(pin_prepare / results["official"]["seconds"], 3),
        "faster_than_official_met": pin_prepare < results["official"]["seconds"],
        "gguf_readback_s": results["gguf_readback"]["seconds"],
        "largest_tensor_mib": round(largest / MIB, 1),
        "rss_bound_mib": round(bound, 1),
        "rss_target_met": all(
            results[n]["peak_rss_mib"] <= bound
            for n in ("pin", "prepare", "pin_then_prepare", "prepare_pin")
        ),
        "read_mb_per_s": round(source_bytes / results["read_sha256"]["seconds"] / 1e6, 1),
        "durable_floor_gb_per_s": round(source_bytes / floor / 1e9, 3),
        "ceil_1_3x_floor_s": round(1.3 * floor, 2),
        "shards": len(list(source.glob("*.safetensors"))),
    }
    print(json.dumps({"targets": targets}), flush=True)
    if args.compare:
        from benchmarks.conversion_parity import compare

        ours = next((work / "prepare" / "cache" / "models").glob("*/model.gguf"))
        drop_cache(ours, theirs)
        report = compare(ours, theirs)
        summary = {
            k: report[k]
            for k in (
                "tensor_count",
                "tensors_identical",
                "tensors_differing",
                "tensors_only_ours",
                "tensors_only_theirs",
                "tensor_order_equal",
                "metadata_keys",
                "metadata_only_ours",
                "metadata_only_theirs",
                "metadata_differing",
            )
        }
        print(json.dumps({"compare": summary}, ensure_ascii=False), flush=True)
    if not args.keep:
        shutil.rmtree(work / "prepare", ignore_errors=True)
        theirs.unlink(missing_ok=True)
    print(json.dumps({"load_average_end": os.getloadavg()}), flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
