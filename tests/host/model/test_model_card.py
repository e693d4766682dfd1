"""``general.license/.license.name/.license.link/.tags/.languages`` from README.md.

Expectation from llama.cpp (llama-cpp-python 0.3.36 sdist, ``gguf-py/gguf/metadata.py``:
``load_model_card`` lines 157-199 reads the ``---`` front matter with the ``- no`` and
tab rewrites and ``yaml.safe_load``; ``apply_metadata_heuristic`` lines 551-560 takes
``license``, ``license_name``, ``license_link``, ``tags`` + ``pipeline_tag``,
``languages`` + ``language``; ``set_gguf_meta_model`` lines 656-664 and 728-731 writes
them, a license list joined with ``,``; ``GGUFWriter.add_array`` writes nothing for an
empty list). Checked against llama.cpp's converter itself by
``benchmarks/conversion_parity.py run --cases`` (case ``qwen3-model-card``).
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import gguf
import pytest

from host.model.categories import ConvertError
from host.model.convert import convert
from host.model.general import front_matter
from host.model.verify_gguf import verify_gguf
from tests.host.model.divergence_cases import build

Copy = Callable[[Path], Path]
V = gguf.GGUFValueType


def _general(path: Path) -> dict[str, tuple[list[V], object]]:
    reader = gguf.GGUFReader(path)
    return {
        name: (field.types, field.contents())
        for name, field in reader.fields.items()
        if name.startswith(("general.license", "general.tags", "general.languages"))
    }


def test_model_card_keys(tmp_path: Path) -> None:
    root = build("qwen3-model-card", tmp_path / "src")
    result = convert(root, tmp_path / "out", "bf16")
    assert _general(result.path) == {
        "general.license": ([V.STRING], "apache-2.0"),
        "general.license.link": (
            [V.STRING],
            "https://huggingface.co/Qwen/Qwen3-4B-Instruct-2507/blob/main/LICENSE",
        ),
        "general.tags": ([V.ARRAY, V.STRING], ["chat", "text-generation"]),
        "general.languages": ([V.ARRAY, V.STRING], ["en", "no"]),  # "no", not False
    }
    verify_gguf(result.path, root, "bf16", expected_sha256=result.sha256)


@pytest.mark.parametrize(
    ("card", "expected"),
    [
        ("# no front matter\nlicense: mit\n", {}),
        ("---\nlicense: [mit, apache-2.0]\n---\n", {"general.license": "mit,apache-2.0"}),
        (
            "---\ntags: []\npipeline_tag: text-generation\n---\n",
            {"general.tags": ["text-generation"]},
        ),
        ("---\ntags: []\n---\n", {}),
        (
            "---\nlicense_name: qwen\nlicense: other\n---\n",
            {"general.license": "other", "general.license.name": "qwen"},
        ),
        ("---\n- a list\n---\n", {}),
    ],
)
def test_model_card_shapes(
    tmp_path: Path, tiny_dir: Path, copy_of: Copy, card: str, expected: dict[str, object]
) -> None:
    root = copy_of(tiny_dir)
    (root / "README.md").write_text(card)
    result = convert(root, tmp_path / "out", "f32")
    got = {k: v for k, (_, v) in _general(result.path).items()}
    assert got == expected
    verify_gguf(result.path, root, "f32", expected_sha256=result.sha256)  # same key set


@pytest.mark.parametrize(
    ("card", "category"),
    [
        ("---\nlicense: [unclosed\n---\n", "config_unreadable"),
        ("---\nlicense: 5\n---\n", "unsupported_config"),
        ("---\ntags: [1, 2]\n---\n", "unsupported_config"),
    ],
)
def test_bad_model_card_refused_and_named(
    tiny_dir: Path, copy_of: Copy, card: str, category: str
) -> None:
    root = copy_of(tiny_dir)
    (root / "README.md").write_text(card)
    with pytest.raises(ConvertError) as info:
        convert(root, root.parent / "out", "f32")
    assert (info.value.category, info.value.subject) == (category, "README.md")


def test_front_matter_rewrites_as_llama_cpp_does() -> None:
    assert front_matter("---\nlanguage:\n- no\n---\n") == {"language": ["no"]}
    assert front_matter("---\nlicense:\tmit\n---\n") == {"license": "mit"}
    assert front_matter("") == {}
