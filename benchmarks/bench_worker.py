"""Worker decode speed vs a bare llama_cpp loop, and the per-token constraint cost.

Run: `.venv/bin/python benchmarks/bench_worker.py [--sdist PATH] [--tokens N]`

1. Tiny model (synthesized, 1,024-token vocabulary): decode tokens/s of the worker's
   engine (sampling, bans, watchdog, abort callback; unconstrained text) against a bare
   `llama_cpp.Llama` loop (decode + argmax, no abort callback) on the same GGUF, prompt
   and token count (`--tiny-tokens`, 1,024 by default: `decode_ms` is whole ms).
2. A random-weight model around Qwen's real 151,936-token vocabulary (taken from the
   vocab-only `ggml-vocab-qwen2.gguf` in the pinned llama-cpp-python sdist, fetched with
   `pip download` and checked against the digest pinned in host/wheels.py): ms/token
   with no constraint, llguidance and GBNF, time to first token, peak RSS. The
   constrained runs use the same grammar's text alternative (tool_choice "none"), so
   all decode the same number of free-text tokens and the difference is the
   constraint's own per-token cost. Both backends check the sampled token first and
   mask only when it is refused; on this text nothing is refused, so the `*-mask` rows
   also measure the worst case, a full mask on every token (`gbnf-mask` decodes only
   `--mask-tokens`, 8 by default: about 1 s each).
Greedy decoding, one thread, EOS banned so every run decodes the same count. Runs are
interleaved; figures are medians (and, for the tiny model, best runs) of `--repeats`
runs on whatever this machine is doing at the time: quote them with `uptime`.
"""

from __future__ import annotations

import argparse
import contextlib
import hashlib
import resource
import statistics
import subprocess
import sys
import tarfile
import tempfile
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TypeVar

import gguf
import llama_cpp
import numpy as np
import numpy.typing as npt

from guest.worker.constraint import (
    Constraint,
    ConstraintFactory,
    GbnfConstraint,
    LlguidanceConstraint,
)
from guest.worker.engine import Engine, EngineConfig, Job
from guest.worker.grammar import Grammar
from guest.worker.loader import LoadedModel, LoadOptions, load_model
from guest.worker.schema_grammar import Limits
from guest.worker.toolcall import schema_validator
from guest.worker.toolgrammar import ToolSpec, build_tool_grammar
from host.model.convert import convert
from host.model.synth import CHAT_TEMPLATE, synthesize_tiny
from host.wheels import LLAMA_SDIST_SHA256

T = TypeVar("T")
BACKENDS = ("llguidance", "llguidance-mask", "gbnf", "gbnf-mask")
VOCAB_MEMBER = "llama_cpp_python-0.3.36/vendor/llama.cpp/models/ggml-vocab-qwen2.gguf"
PROMPT = [{"role": "user", "content": "Fix the failing test in src/app.py, then finish."}]
TOOL = {
    "type": "object",
    "properties": {"filePath": {"type": "string", "maxLength": 64},
                   "content": {"type": "string", "maxLength": 4096}},
    "required": ["filePath", "content"],
}  # fmt: skip


def engine_for(model: LoadedModel, backend: str) -> Engine:
    factory = ConstraintFactory(model.vocab, model.n_vocab, backend)  # type: ignore[arg-type]
    if backend == "llguidance":
        factory.tokenizer()
    return Engine(model, EngineConfig(0, 0, 4096), factory)


class TimedConstraint:
    """Wraps a constraint and adds up the time spent in it: its own per-token cost.

    Why beside the wall-clock difference: decode time moves by +-2 ms per token between
    runs on a loaded 2-core machine, more than the cost being measured.
    """

    def __init__(self, inner: Constraint) -> None:
        self.inner, self.seconds = inner, 0.0
        self.backend, self.check_first = inner.backend, inner.check_first

    def _timed(self, call: Callable[[], T]) -> T:
        start = time.perf_counter()
        try:
            return call()
        finally:
            self.seconds += time.perf_counter() - start

    def mask(self, logits: npt.NDArray[np.float32]) -> None:
        self._timed(lambda: self.inner.mask(logits))

    def allows(self, token: int) -> bool:
        return self._timed(lambda: self.inner.allows(token))

    def accept(self, token: int) -> bool:
        return self._timed(lambda: self.inner.accept(token))

    def finished(self) -> bool:
        return self._timed(self.inner.finished)

    def close(self) -> None:
        self.inner.close()


def run_engine(engine: Engine, tokens: int, constrained: bool) -> tuple[float, float, float]:
    """(ms per decoded token, time to first token ms, constraint ms per token)."""
    grammars = None
    validators = {}
    if constrained:
        spec = [ToolSpec("write", TOOL)]
        grammars = (
            build_tool_grammar(spec, "none", Limits(), special_tags=engine.vocab.special_tags),
            build_tool_grammar(spec, "none", Limits(), special_tags=False),
        )
        validators = {"write": schema_validator(TOOL)}
    now = time.monotonic()
    job = Job(
        messages=PROMPT, tools=None, grammars=grammars, validators=validators,
        max_tokens=tokens, temperature=0.0, top_p=1.0, seed=0,
        logit_bias={engine.vocab.eos: -100.0}, deadline=now + 600, received=now,
    )  # fmt: skip
    engine._clear_cache()  # same work every repeat: no prompt reuse
    timed: list[TimedConstraint] = []
    create = engine.factory.create

    def create_timed(special: Grammar, plain: Grammar) -> Constraint:
        timed.append(TimedConstraint(create(special, plain)))
        return timed[-1]

    engine.factory.create = create_timed  # type: ignore[method-assign,assignment]
    try:
        result = engine.run(job)
    finally:
        del engine.factory.create
    assert result.completion_tokens > 1, result
    per_token = result.decode_ms / (result.completion_tokens - 1)
    inside = sum(t.seconds for t in timed) * 1000 / result.completion_tokens
    return per_token, float(result.time_to_first_token_ms or 0), inside


@contextlib.contextmanager
def mask_every_token(backend: str) -> Iterator[None]:
    """For a `*-mask` backend, turn its check-first shortcut off: a full mask per token."""
    cls = GbnfConstraint if backend.startswith("gbnf") else LlguidanceConstraint
    saved = cls.check_first
    cls.check_first = saved and not backend.endswith("-mask")
    try:
        yield
    finally:
        cls.check_first = saved


def bare_loop(model: LoadedModel, prompt_tokens: list[int], tokens: int) -> float:
    """ms per token of a plain decode + argmax loop on the same context.

    The context's abort callback is cleared first: the engine points it at its cancel
    flag on every request, and a bare `llama_cpp.Llama` has none.
    """
    llm = model.llm
    llama_cpp.llama_set_abort_callback(llm._ctx.ctx, llama_cpp.ggml_abort_callback(), None)
    llama_cpp.llama_memory_clear(llama_cpp.llama_get_memory(llm._ctx.ctx), True)
    llm.n_tokens = 0
    llm.eval(prompt_tokens)
    eos = model.llm.token_eos()
    start = time.perf_counter()
    for _ in range(tokens - 1):
        ptr = llama_cpp.llama_get_logits_ith(llm._ctx.ctx, -1)
        logits = np.ctypeslib.as_array(ptr, shape=(model.n_vocab,)).copy()
        logits[eos] = -np.inf
        llm.eval([int(np.argmax(logits))])
    return (time.perf_counter() - start) * 1000 / (tokens - 1)


def tiny_model(work: Path) -> tuple[Path, str]:
    synthesize_tiny(work / "tiny-src")
    result = convert(work / "tiny-src", work / "tiny", "f32")
    return result.path, result.sha256


def fetch_vocab(work: Path, sdist: Path | None) -> Path:
    if sdist is None:
        subprocess.run(
            [sys.executable, "-m", "pip", "download", "--no-deps", "--no-binary", ":all:",
             "-d", str(work), "llama-cpp-python==0.3.36"],
            check=True, capture_output=True,
        )  # fmt: skip
        sdist = work / "llama_cpp_python-0.3.36.tar.gz"
    digest = hashlib.sha256(sdist.read_bytes()).hexdigest()
    if digest != LLAMA_SDIST_SHA256:
        raise SystemExit("sdist digest does not match the pin in host/wheels.py")
    with tarfile.open(sdist) as tar:
        member = tar.extractfile(VOCAB_MEMBER)
        assert member is not None
        out = work / "ggml-vocab-qwen2.gguf"
        out.write_bytes(member.read())
    return out


def big_vocab_model(vocab_gguf: Path, out: Path) -> tuple[Path, str]:
    """A 2-layer random Qwen3 (hidden 64) carrying the real Qwen2 vocabulary."""
    reader = gguf.GGUFReader(vocab_gguf)
    writer = gguf.GGUFWriter(out, "qwen3")
    n_vocab = 0
    for field in reader.fields.values():
        if not field.name.startswith("tokenizer.") or field.name == "tokenizer.chat_template":
            continue
        value = field.contents()
        if field.name == "tokenizer.ggml.tokens":
            n_vocab = len(value)
        vtype = field.types[0]
        sub = field.types[-1] if vtype == gguf.GGUFValueType.ARRAY else None
        writer.add_key_value(field.name, value, vtype, sub_type=sub)
    hidden, layers, heads, kv, head_dim, ff = 64, 2, 4, 2, 32, 128
    writer.add_block_count(layers)
    writer.add_context_length(4096)
    writer.add_embedding_length(hidden)
    writer.add_feed_forward_length(ff)
    writer.add_head_count(heads)
    writer.add_head_count_kv(kv)
    writer.add_key_length(head_dim)
    writer.add_value_length(head_dim)
    writer.add_rope_freq_base(1e6)
    writer.add_layer_norm_rms_eps(1e-6)
    writer.add_chat_template(CHAT_TEMPLATE)
    rng = np.random.default_rng(0)

    def tensor(name: str, *shape: int, scale: float = 1.0) -> None:
        data = (rng.standard_normal(shape) * scale).astype(np.float32)
        writer.add_tensor(name, data)

    tensor("token_embd.weight", n_vocab, hidden)
    tensor("output_norm.weight", hidden, scale=0.0)
    for i in range(layers):
        p = f"blk.{i}."
        for norm in ("attn_norm", "ffn_norm"):
            writer.add_tensor(p + norm + ".weight", np.ones(hidden, dtype=np.float32))
        for norm in ("attn_q_norm", "attn_k_norm"):
            writer.add_tensor(p + norm + ".weight", np.ones(head_dim, dtype=np.float32))
        tensor(p + "attn_q.weight", heads * head_dim, hidden, scale=hidden**-0.5)
        tensor(p + "attn_k.weight", kv * head_dim, hidden, scale=hidden**-0.5)
        tensor(p + "attn_v.weight", kv * head_dim, hidden, scale=hidden**-0.5)
        tensor(p + "attn_output.weight", hidden, heads * head_dim, scale=0.1)
        tensor(p + "ffn_gate.weight", ff, hidden, scale=hidden**-0.5)
        tensor(p + "ffn_up.weight", ff, hidden, scale=hidden**-0.5)
        tensor(p + "ffn_down.weight", hidden, ff, scale=ff**-0.5)
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    return out, hashlib.sha256(out.read_bytes()).hexdigest()


def median(values: list[float]) -> float:
    return statistics.median(values)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--sdist", type=Path, help="a local llama-cpp-python 0.3.36 sdist")
    parser.add_argument("--tokens", type=int, default=256)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument(
        "--backends", nargs="*", default=list(BACKENDS), choices=BACKENDS,
        help="constraint backends to measure at 152k beside no constraint; *-mask: a full "
             "mask every token (the worst case: every sampled token refused)",
    )  # fmt: skip
    parser.add_argument("--tiny-tokens", type=int, default=1024)
    parser.add_argument("--tiny-only", action="store_true", help="skip the 152k-vocabulary part")
    parser.add_argument("--mask-tokens", type=int, default=8, help="tokens for gbnf-mask")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="bench-worker-") as tmp:
        work = Path(tmp)
        path, sha = tiny_model(work)
        model = load_model(path, sha, LoadOptions(4096, 1))
        engine = engine_for(model, "llguidance")
        prompt = engine.tokenize(engine.renderer.render(PROMPT, None)[0])
        worker, bare = [], []
        for _ in range(args.repeats):  # interleaved, so load changes hit both alike
            worker.append(run_engine(engine, args.tiny_tokens, False)[0])
            bare.append(bare_loop(model, prompt, args.tiny_tokens))
        print(f"tiny model, {args.tiny_tokens} tokens, greedy, 1 thread, {args.repeats} runs each")
        print(f"  {'':20} {'median':>8} {'best':>8}")
        print(f"  {'bare tok/s':20} {1000 / median(bare):8.0f} {1000 / min(bare):8.0f}")
        print(f"  {'worker tok/s':20} {1000 / median(worker):8.0f} {1000 / min(worker):8.0f}")
        print(f"  {'ratio worker/bare':20} {median(bare) / median(worker):8.3f} "
              f"{min(bare) / min(worker):8.3f}  (target >= 0.95)")  # fmt: skip
        paired = median([b / w for b, w in zip(bare, worker, strict=True)])
        print(f"  {'median paired ratio':20} {paired:8.3f}  (worker run / the bare run after it)")
        del engine, model
        if args.tiny_only:
            return

        big_path, big_sha = big_vocab_model(fetch_vocab(work, args.sdist), work / "qwen-vocab.gguf")
        big = load_model(big_path, big_sha, LoadOptions(4096, 1))
        rows: list[tuple[str, float, float, float]] = []
        engines = {b: engine_for(big, "gbnf" if b.startswith("gbnf") else "llguidance")
                   for b in ("none", *args.backends)}  # fmt: skip
        runs: dict[str, list[tuple[float, float, float]]] = {b: [] for b in engines}
        for _ in range(args.repeats):  # interleaved, like the tiny model's runs
            for backend, eng in engines.items():
                tokens = args.mask_tokens if backend == "gbnf-mask" else args.tokens
                with mask_every_token(backend):
                    runs[backend].append(run_engine(eng, tokens, backend != "none"))
        for backend, measured in runs.items():
            per_token, ttft, inside = (median([r[i] for r in measured]) for i in range(3))
            rows.append((backend, per_token, ttft, inside))
        del engines
        base = rows[0][1]
        print(
            f"\n151,936-token vocabulary, random 2-layer model, {args.tokens} tokens "
            f"({args.mask_tokens} for gbnf-mask), median of {args.repeats}"
        )
        print(f"  {'constraint':<16} {'ms/token':>9} {'+ms/token':>10} {'ratio':>7} "
              f"{'TTFT ms':>8} {'in-constraint':>13}")  # fmt: skip
        for name, per_token, ttft, inside in rows:
            print(f"  {name:<16} {per_token:9.2f} {per_token - base:10.2f} "
                  f"{per_token / base:7.2f} {ttft:8.0f} {inside:13.3f}")  # fmt: skip
        extra = {name: inside for name, _, _, inside in rows}
        if "llguidance" in extra and "gbnf" in extra and extra["llguidance"] > 0:
            factor = extra["gbnf"] / extra["llguidance"]
            print(f"  GBNF/llguidance in-constraint ms/token: {factor:.1f}x")
        peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
        print(f"\npeak RSS of this process: {peak / (1 << 20):.0f} MiB")


if __name__ == "__main__":
    main()
