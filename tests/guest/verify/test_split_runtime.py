"""The split judge's two children import only modules of the verified guest runtime.

Both start as `python3 -I -B -c BOOT ROOT ...` with ROOT the runtime root the gate
verified in the verifier's process (guest/verify/split.py). Built here from this tree as
host/runtime.py builds it: every module the children load from ROOT before they drop it
from sys.path must be a file the runtime's pin table names, and nothing but our own
`guest` package (no wheel of the runtime: the judge's pytest must come from the system).
Mutation control: `import receipts.canonical` added to guest/verify/wire.py ->
test_the_children_load_only_pinned_guest_modules fails (a module outside guest/).
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from guest.verify import split
from host.runtime import _copy_sources
from receipts.pintable import build_pin_table

REPO = Path(__file__).parents[3]
PROBE = (
    "import json, sys; root = sys.argv[1]; sys.path.insert(0, root); "
    "import guest.verify.judgeside, guest.verify.agentside; "
    "print(json.dumps(sorted(m.__file__[len(root) + 1:] for m in list(sys.modules.values()) "
    "if (getattr(m, '__file__', None) or '').startswith(root + '/'))))"
)


def test_the_children_load_only_pinned_guest_modules(tmp_path: Path) -> None:
    root = tmp_path / "runtime"
    _copy_sources(REPO, root)
    pinned = {item.path for item in build_pin_table(root).files}
    out = subprocess.run(
        [sys.executable, "-I", "-B", "-c", PROBE, str(root)],
        capture_output=True,
        check=True,
        text=True,
    ).stdout
    loaded = json.loads(out)
    assert "guest/verify/judgeside.py" in loaded and "guest/verify/agentside.py" in loaded
    assert set(loaded) <= pinned
    assert all(path.startswith("guest/") for path in loaded), loaded


def test_the_boot_names_the_verified_root() -> None:
    argv = split.server_argv("/s", Path("/w"), "python3")
    assert argv[:3] == ["python3", "-I", "-B"] and argv[5] == split.RUNTIME_ROOT
    assert Path(split.RUNTIME_ROOT, "guest", "verify", "agentside.py").is_file()
