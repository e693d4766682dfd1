"""Compare our converter's GGUF with what llama.cpp's ``convert_hf_to_gguf.py`` writes.

Why: our converter claims to write what llama.cpp's reference converter writes for
the same checkpoint and outtype. This script is how that claim is checked, and it can
be rerun by anyone. Two modes:

``compare A.gguf B.gguf``
    Needs only ``gguf`` and numpy. Compares every metadata key (value type and
    value) and every tensor (name, shape, storage type, data bytes by SHA-256) and
    prints one canonical JSON report; exit 0 when nothing differs except the keys
    named with ``--allow-key``, 1 otherwise.

``run --llama-cpp DIR --python PY --work DIR``
    Runs from a checkout of this repository (it imports ``host.model``). Synthesizes
    the tiny Qwen3 and Llama checkpoints, converts each at f32, f16, bf16 and q8_0
    with our converter (in process) and with ``DIR/convert_hf_to_gguf.py`` under the
    interpreter *PY* (which needs torch and transformers; ``DIR/gguf-py`` is used, as
    the script itself arranges), then compares each pair. llama.cpp's converter
    identifies a BPE pre-tokenizer by hashing the tokenization of a probe text and
    refuses unknown hashes; our synthesized 1,024-token vocabulary is unknown to it,
    so it is run through a shim that answers the pre-tokenizer name (``qwen2``: the
    synth tokenizer uses Qwen2's split regex) *only* when the hash is unrecognized.
    That name is then itself compared like any other key. With ``--cases`` it does the
    same for the divergence cases in ``tests/host/model/divergence_cases.py`` (shapes
    the tiny models lack: a tied config with ``lm_head``, mixed dtypes, a Llama-3
    post-processor, ``generation_config.json``).

``store --work DIR --out FILE``
    After ``run --cases --work DIR``: writes llama.cpp's GGUFs of the divergence cases
    as a stored expectation (each case's source digests; per outtype, every tensor's
    name, type, shape and SHA-256 in file order and every metadata key), which
    ``tests/host/model/test_llamacpp_expected.py`` checks our converter against
    without torch.

Not a timed test; see docs/model-conversion.md for the commands and the results.
"""

from __future__ import annotations

import argparse
import functools
import hashlib
import json
import subprocess
from collections.abc import Callable
from pathlib import Path
from typing import Any

import gguf
import numpy as np

# Keys llama.cpp's converter writes from the model card / directory name that carry no
# model semantics; a difference in them is reported but, with --allow-key, tolerated.
DESCRIPTIVE_KEYS = ("general.name", "general.size_label", "general.basename", "general.finetune")

_SHIM = """
import runpy, sys
script, pre = sys.argv[1], sys.argv[2]
sys.argv = [script, *sys.argv[3:]]
sys.path.insert(0, script.rsplit("/", 1)[0])
import conversion.base as base
original = base.TextModel.get_vocab_base_pre
def get_vocab_base_pre(self, tokenizer):
    try:
        return original(self, tokenizer)
    except NotImplementedError:
        print("shim: pre-tokenizer hash unrecognized; answering", pre, file=sys.stderr)
        return pre
base.TextModel.get_vocab_base_pre = get_vocab_base_pre
runpy.run_path(script, run_name="__main__")
"""


def _value(field: gguf.ReaderField) -> Any:
    """A JSON-comparable value: floats by their float32 bits, arrays as lists."""
    value = field.contents()
    if field.types and field.types[0] in (gguf.GGUFValueType.FLOAT32, gguf.GGUFValueType.FLOAT64):
        return {"float": float(value), "bits": np.float32(value).view(np.uint32).item()}
    return value


def _describe(value: Any) -> Any:
    """Short form for the report: long arrays by length and digest."""
    if isinstance(value, list) and len(value) > 8:
        digest = hashlib.sha256(json.dumps(value, ensure_ascii=False).encode()).hexdigest()
        return {"array_len": len(value), "sha256": digest}
    if isinstance(value, str) and len(value) > 80:
        return {"str_len": len(value), "sha256": hashlib.sha256(value.encode()).hexdigest()}
    return value


def read_gguf(path: Path) -> tuple[dict[str, tuple[list[str], Any]], dict[str, dict[str, Any]]]:
    """(metadata key -> (types, value), tensor name -> {shape, type, sha256, order})."""
    reader = gguf.GGUFReader(path, "r")
    meta: dict[str, tuple[list[str], Any]] = {}
    for name, field in reader.fields.items():
        if name.startswith("GGUF."):
            continue
        meta[name] = ([t.name for t in field.types], _value(field))
    tensors: dict[str, dict[str, Any]] = {}
    for order, tensor in enumerate(reader.tensors):
        data = np.ascontiguousarray(tensor.data).view(np.uint8)
        tensors[tensor.name] = {
            "order": order,
            "shape": [int(n) for n in tensor.shape],
            "type": gguf.GGMLQuantizationType(tensor.tensor_type).name,
            "nbytes": int(tensor.n_bytes),
            "sha256": hashlib.sha256(data.tobytes()).hexdigest(),
        }
    return meta, tensors


def compare(ours: Path, theirs: Path) -> dict[str, Any]:
    """Every metadata and tensor difference between two GGUFs."""
    meta_a, tens_a = read_gguf(ours)
    meta_b, tens_b = read_gguf(theirs)
    differing = {
        key: {"ours": _describe(meta_a[key]), "theirs": _describe(meta_b[key])}
        for key in sorted(set(meta_a) & set(meta_b))
        if meta_a[key] != meta_b[key]
    }
    tensor_diffs = {
        name: {
            field: {"ours": tens_a[name][field], "theirs": tens_b[name][field]}
            for field in ("shape", "type", "nbytes", "sha256")
            if tens_a[name][field] != tens_b[name][field]
        }
        for name in sorted(set(tens_a) & set(tens_b))
    }
    order_a = sorted(tens_a, key=lambda n: tens_a[n]["order"])
    order_b = sorted(tens_b, key=lambda n: tens_b[n]["order"])
    return {
        "ours": {"path": str(ours), "sha256": _file_sha256(ours), "size": ours.stat().st_size},
        "theirs": {
            "path": str(theirs),
            "sha256": _file_sha256(theirs),
            "size": theirs.stat().st_size,
        },
        "metadata_keys": {"ours": len(meta_a), "theirs": len(meta_b)},
        "metadata_only_ours": {k: _describe(meta_a[k]) for k in sorted(set(meta_a) - set(meta_b))},
        "metadata_only_theirs": {
            k: _describe(meta_b[k]) for k in sorted(set(meta_b) - set(meta_a))
        },
        "metadata_differing": differing,
        "tensor_count": {"ours": len(tens_a), "theirs": len(tens_b)},
        "tensors_only_ours": sorted(set(tens_a) - set(tens_b)),
        "tensors_only_theirs": sorted(set(tens_b) - set(tens_a)),
        "tensors_differing": {name: diff for name, diff in tensor_diffs.items() if diff},
        "tensors_identical": sum(1 for diff in tensor_diffs.values() if not diff),
        "tensor_order_equal": order_a == order_b,
    }


def _file_sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as handle:
        while chunk := handle.read(1 << 20):
            digest.update(chunk)
    return digest.hexdigest()


def verdict(report: dict[str, Any], allowed: tuple[str, ...]) -> bool:
    """True when only allowed metadata keys differ and the tensors are byte-identical
    and in the same order (llama.cpp writes them in a defined order; a loader does
    not care, but a converter that claims llama.cpp's output must match it)."""
    keys = (
        set(report["metadata_only_ours"])
        | set(report["metadata_only_theirs"])
        | set(report["metadata_differing"])
    )
    return (
        keys <= set(allowed)
        and not report["tensors_only_ours"]
        and not report["tensors_only_theirs"]
        and not report["tensors_differing"]
        and report["tensor_order_equal"]
    )


def _sources() -> list[tuple[str, Callable[[Path], object]]]:
    from host.model.synth import synthesize_tiny, synthesize_tiny_llama

    return [("qwen3", synthesize_tiny), ("llama", synthesize_tiny_llama)]


def _divergence_cases() -> list[tuple[str, Callable[[Path], object]]]:
    """The shapes the tiny models lack (tests/host/model/divergence_cases.py)."""
    from tests.host.model.divergence_cases import CASES, build

    return [(name, functools.partial(build, name)) for name in CASES]


def expectation(gguf_path: Path, allowed: tuple[str, ...] = DESCRIPTIVE_KEYS) -> dict[str, Any]:
    """What a GGUF holds, in a form small enough to store: every tensor in file order
    (name, storage type, shape, SHA-256 of its bytes) and every metadata key but the
    *allowed* descriptive ones (long arrays and strings by length and digest)."""
    meta, tensors = read_gguf(gguf_path)
    return {
        "tensors": [
            [name, t["type"], t["shape"], t["sha256"]]
            for name, t in sorted(tensors.items(), key=lambda item: item[1]["order"])
        ],
        "metadata": {
            key: [types, _describe(value)]
            for key, (types, value) in sorted(meta.items())
            if key not in allowed
        },
    }


def source_digests(source: Path) -> dict[str, str]:
    """Each file of a checkpoint by SHA-256: the input an expectation was taken from."""
    return {p.name: _file_sha256(p) for p in sorted(source.iterdir()) if p.is_file()}


def _readable(value: Any, depth: int = 0) -> str:
    """Stable JSON (sorted keys) with every value that fits in 160 characters on one
    line: one line per tensor, so a changed tensor is a one-line diff."""
    flat = json.dumps(value, sort_keys=True, ensure_ascii=False)
    if len(flat) <= 160 or not isinstance(value, dict | list):
        return flat
    pad = " " * (depth + 1)
    if isinstance(value, dict):
        items = [
            f"{pad}{json.dumps(k)}: {_readable(v, depth + 1)}" for k, v in sorted(value.items())
        ]
        return "{\n" + ",\n".join(items) + "\n" + " " * depth + "}"
    return (
        "[\n" + ",\n".join(pad + _readable(v, depth + 1) for v in value) + "\n" + " " * depth + "]"
    )


def _store_expectations(args: argparse.Namespace) -> int:
    """Write llama.cpp's outputs for the divergence cases (``run --cases`` made them in
    --work) as stored expectations, after checking each case's source there is the
    checkpoint ``divergence_cases.build`` makes now (so they describe the same input)."""
    import tempfile

    from tests.host.model.divergence_cases import CASES, build

    stored: dict[str, Any] = {}
    for case in CASES:
        with tempfile.TemporaryDirectory() as tmp:
            fresh = source_digests(build(case, Path(tmp) / "source"))
        if source_digests(args.work / case / "source") != fresh:
            raise SystemExit(f"{case}: the source in --work is not what build() makes now")
        stored[case] = {"source": fresh, "outtypes": {}}
        for outtype in args.outtypes:
            theirs = args.work / case / f"llamacpp-{outtype}.gguf"
            stored[case]["outtypes"][outtype] = {
                "gguf_sha256": _file_sha256(theirs),
                **expectation(theirs),
            }
    text = _readable(stored)
    args.out.write_text(text + "\n", encoding="utf-8")
    return 0


def _run_both(args: argparse.Namespace) -> int:
    from host.model.convert import convert

    work: Path = args.work
    work.mkdir(parents=True, exist_ok=True)
    script = (args.llama_cpp / "convert_hf_to_gguf.py").resolve()
    failures = 0
    for model, synth in _divergence_cases() if args.cases else _sources():
        source = work / model / "source"
        if not source.exists():
            synth(source)
        for outtype in args.outtypes:
            ours_dir = work / model / f"ours-{outtype}"
            if not ours_dir.exists():
                convert(source, ours_dir, outtype)
            theirs = work / model / f"llamacpp-{outtype}.gguf"
            if not theirs.exists():
                cmd = [str(args.python), "-c", _SHIM, str(script), args.assume_pre]
                cmd += [str(source), "--outtype", outtype, "--outfile", str(theirs)]
                subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL)
            report = compare(ours_dir / "model.gguf", theirs)
            report["model"], report["outtype"] = model, outtype
            report["match"] = verdict(report, tuple(args.allow_key))
            failures += not report["match"]
            print(json.dumps(report, sort_keys=True, ensure_ascii=False), flush=True)
    return 1 if failures else 0


def main(argv: list[str] | None = None) -> int:
    """``compare`` two GGUFs, or ``run`` both converters on the tiny checkpoints."""
    parser = argparse.ArgumentParser(prog="python -m benchmarks.conversion_parity")
    sub = parser.add_subparsers(dest="mode", required=True)
    cmp = sub.add_parser("compare", help="compare two GGUF files")
    cmp.add_argument("ours", type=Path)
    cmp.add_argument("theirs", type=Path)
    run = sub.add_parser("run", help="convert with both converters, compare each pair")
    run.add_argument("--llama-cpp", type=Path, required=True, help="llama.cpp source tree")
    run.add_argument("--python", type=Path, required=True, help="python with torch")
    run.add_argument("--work", type=Path, required=True)
    run.add_argument("--outtypes", nargs="+", default=["f32", "f16", "bf16", "q8_0"])
    run.add_argument("--assume-pre", default="qwen2")
    run.add_argument(
        "--cases",
        action="store_true",
        help="the divergence cases (tied lm_head, mixed dtypes, Llama-3 tokenizer, ...)",
    )
    for p in (cmp, run):
        p.add_argument("--allow-key", action="append", default=[], help="tolerated key")
    store = sub.add_parser(
        "store", help="store llama.cpp's GGUFs of the divergence cases as expectations"
    )
    store.add_argument("--work", type=Path, required=True, help="what run --cases wrote")
    store.add_argument("--out", type=Path, required=True)
    store.add_argument("--outtypes", nargs="+", default=["f32", "f16", "bf16", "q8_0"])
    args = parser.parse_args(argv)
    if args.mode == "run":
        return _run_both(args)
    if args.mode == "store":
        return _store_expectations(args)
    report = compare(args.ours, args.theirs)
    report["match"] = verdict(report, tuple(args.allow_key))
    print(json.dumps(report, sort_keys=True, ensure_ascii=False))
    return 0 if report["match"] else 1


if __name__ == "__main__":
    raise SystemExit(main())
