"""Our converter against llama.cpp's converter output, stored (its known divergences).

Why stored: llama.cpp's ``convert_hf_to_gguf.py`` needs torch, which the project does not
install, so its outputs for the divergence cases (tests/host/model/divergence_cases.py:
a tied config that still carries ``lm_head.weight``, mixed dtypes in dtype-grouped header
order, a Llama-3 ``TemplateProcessing`` post-processor, and three more) were produced
once with the pinned llama.cpp and kept in ``llamacpp_expected.json``: per case the
source files' digests, and per outtype every tensor (name, storage type, shape, SHA-256
of its bytes, in file order) and every metadata key except ``general.name`` /
``general.size_label`` (omitted on purpose, docs/model-conversion.md). How it was made
(``benchmarks/conversion_parity.py run --cases`` then ``store``) is in that doc.

Each test rebuilds the case (the builders are deterministic), checks the source is the
one the expectation was taken from, converts it with our converter and compares.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, cast

import pytest

from benchmarks.conversion_parity import expectation, source_digests
from host.model.categories import OutType
from host.model.convert import convert
from tests.host.model.divergence_cases import CASES, build

EXPECTED: dict[str, Any] = json.loads(
    (Path(__file__).parent / "llamacpp_expected.json").read_text(encoding="utf-8")
)
PAIRS = [(case, outtype) for case in sorted(EXPECTED) for outtype in EXPECTED[case]["outtypes"]]


@pytest.fixture(scope="module")
def sources(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("cases")
    return {case: build(case, root / case) for case in EXPECTED}


def test_every_divergence_case_has_a_stored_expectation() -> None:
    assert set(EXPECTED) == set(CASES)
    for case in ("qwen3-tied-lm-head", "qwen3-mixed-dtypes", "llama-llama3-tokenizer"):
        assert set(EXPECTED[case]["outtypes"]) == {"f32", "f16", "bf16", "q8_0"}


@pytest.mark.parametrize(("case", "outtype"), PAIRS)
def test_ours_equals_llamacpp(
    case: str, outtype: str, sources: dict[str, Path], tmp_path: Path
) -> None:
    source = sources[case]
    assert source_digests(source) == EXPECTED[case]["source"], "same input as llama.cpp's"
    want = EXPECTED[case]["outtypes"][outtype]
    got = expectation(convert(source, tmp_path / "out", cast(OutType, outtype)).path)
    assert got["tensors"] == want["tensors"]  # names, types, shapes, bytes, order
    assert got["metadata"] == want["metadata"]


def test_the_three_divergences_are_in_the_expectation() -> None:
    """What llama.cpp wrote for the three shapes where our converter could differ."""
    tied = EXPECTED["qwen3-tied-lm-head"]["outtypes"]["bf16"]
    assert tied["tensors"][0][0] == "output.weight"  # lm_head kept, sorted first
    mixed = EXPECTED["qwen3-mixed-dtypes"]["outtypes"]["bf16"]
    assert mixed["tensors"][0][:2] == ["token_embd.weight", "BF16"]  # name order, not F32 first
    llama3 = EXPECTED["llama-llama3-tokenizer"]["outtypes"]["bf16"]["metadata"]
    assert llama3["tokenizer.ggml.add_bos_token"][1] is True
    assert llama3["tokenizer.ggml.add_sep_token"][1] is False
