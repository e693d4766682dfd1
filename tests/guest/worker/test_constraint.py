"""The llguidance constraint: the text slices speed masks up without changing them."""

from __future__ import annotations

import llguidance
import llguidance.llamacpp
import llguidance.numpy
import numpy as np

from guest.worker.constraint import TEXT_SLICES, ConstraintFactory, LlguidanceConstraint
from guest.worker.loader import LoadOptions, load_model
from guest.worker.schema_grammar import Limits
from guest.worker.toolgrammar import ToolSpec, build_tool_grammar, build_tool_grammars
from tests.guest.worker.conftest import READ_TOOL, Gguf

TEXTS = [
    "Plain words, then <b> and <tool and <tool_ca\nnot a call < <<tool_cal> \u2603 end <",
    '<tool_call>\n{"name": "read", "arguments": {"filePath": "a<b.py"}}\n</tool_call>',
]


def test_text_slices_leave_every_mask_unchanged(tiny_gguf: Gguf) -> None:
    model = load_model(tiny_gguf.path, tiny_gguf.sha256, LoadOptions(256, 1))
    factory = ConstraintFactory(model.vocab, model.n_vocab, "llguidance")
    plain = llguidance.llamacpp.lltokenizer_from_vocab(model.vocab, slices=[])
    assert TEXT_SLICES
    spec = [ToolSpec("read", READ_TOOL["function"]["parameters"])]
    special = build_tool_grammar(spec, "auto", Limits(), special_tags=True)
    plain_form = build_tool_grammar(spec, "auto", Limits(), special_tags=False)
    refused_somewhere = False
    for text in TEXTS:
        sliced = factory.create(special, plain_form)
        assert isinstance(sliced, LlguidanceConstraint)
        reference = llguidance.LLMatcher(
            plain, llguidance.LLMatcher.grammar_from_lark(special.to_lark()), log_level=0
        )
        bitmask = llguidance.numpy.allocate_token_bitmask(1, model.n_vocab)
        for token in model.llm.tokenize(text.encode(), add_bos=False, special=True):
            with_slices = np.zeros(model.n_vocab, dtype=np.float32)
            sliced.mask(with_slices)
            llguidance.numpy.fill_next_token_bitmask(reference, bitmask)
            bits = np.unpackbits(bitmask.view(np.uint8), count=model.n_vocab, bitorder="little")
            assert np.array_equal(np.isfinite(with_slices), bits.astype(bool))
            refused_somewhere |= not bits.all()
            assert sliced.accept(token)
            assert reference.consume_token(token)
    assert refused_somewhere


def test_matcher_cache_keeps_the_admitted_requests_and_a_few_more(tiny_gguf: Gguf) -> None:
    """Prepared matchers stay until their requests run (min_entries), and the cache
    holds only CACHE_SIZE more: a near-budget matcher is about 9 MB."""
    model = load_model(tiny_gguf.path, tiny_gguf.sha256, LoadOptions(256, 1))
    factory = ConstraintFactory(model.vocab, model.n_vocab, "llguidance", min_entries=3)
    prepared = []
    for i in range(12):
        grammars = build_tool_grammars(
            [ToolSpec(f"t{i}", READ_TOOL["function"]["parameters"])],
            "auto",
            Limits(),
            special_tags=False,
        )
        factory.prepare(*grammars)
        prepared.append(grammars)
    assert len(factory._matchers) == 3 + ConstraintFactory.CACHE_SIZE
    for grammars in prepared[-(3 + ConstraintFactory.CACHE_SIZE) :]:
        assert grammars[0].to_lark() in factory._matchers
