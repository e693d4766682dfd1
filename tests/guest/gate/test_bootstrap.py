"""The guest runtime gate, run as it ships: its source passed to `python3 -I -B -S -c`.

Each attack of docs/engineering.md §4 is planted in a real runtime tree. Mutation controls
edit the gate's source text (the same text the host sends) to remove one check, and
show that the attack then gets through.
"""

from __future__ import annotations

import errno
import json
import os
import py_compile
import shutil
import subprocess
import sys
import tempfile
import typing
from dataclasses import dataclass
from pathlib import Path

import pytest

from guest.gate import bootstrap
from receipts.pintable import build_pin_table, pin_table_bytes
from receipts.records.gate import GateCategory
from tests.guest.gate.readonly import read_only

SOURCE = Path(bootstrap.__file__).read_text(encoding="utf-8")
PYC_TAG = sys.implementation.cache_tag


@dataclass
class Runtime:
    root: Path
    table: Path
    digest: str


def make_runtime(tmp_path: Path) -> Runtime:
    root = tmp_path / "runtime"
    (root / "app").mkdir(parents=True)
    (root / "app" / "__init__.py").write_text("")
    (root / "app" / "mod.py").write_text('VALUE = "good"\n')
    (root / "app" / "__main__.py").write_text(
        "import sys\nfrom app import mod\nprint('APP', mod.VALUE, sys.argv[1:])\n"
    )
    (root / "app" / "data.txt").write_text("fixture\n")
    table = build_pin_table(root)
    path = tmp_path / "pins.json"
    data = pin_table_bytes(table)
    path.write_bytes(data)
    return Runtime(root, path, table.digest())


def run_gate(
    runtime: Runtime,
    flags: tuple[str, ...] = ("-I", "-B", "-S"),
    source: str = SOURCE,
    env: dict[str, str] | None = None,
    digest: str | None = None,
    *,
    writable: bool = False,
    user: int | None = None,
    writable_over: tuple[Path, Path] | None = None,
) -> tuple[str, str]:
    """Run the gate on the runtime root mounted read-only, as in a guest (or left
    `writable`); return (category, the rest of stdout)."""
    command = [
        sys.executable,
        *flags,
        "-c",
        source,
        str(runtime.root),
        str(runtime.table),
        digest or runtime.digest,
        "app",
        "--flag",
    ]
    result = subprocess.run(
        command
        if writable
        else read_only(
            runtime.root, command, unprivileged=user is not None, writable_over=writable_over
        ),
        user=user,
        capture_output=True,
        text=True,
        timeout=60,
        env=env or {"PATH": "/usr/bin:/bin"},
        cwd=runtime.root.parent,
        check=False,
    )
    first, _, rest = result.stdout.partition("\n")
    if not first.startswith("HARNESS-GATE "):
        assert source != SOURCE, (result.stdout, result.stderr)  # only a mutated gate may crash
        return "crashed", rest
    return json.loads(first.removeprefix("HARNESS-GATE "))["category"], rest


def test_clean_runtime_passes_and_runs_the_module(tmp_path: Path) -> None:
    runtime = make_runtime(tmp_path)
    category, rest = run_gate(runtime)
    assert category == "ok"
    assert rest == "APP good ['--flag']\n"
    assert not list(runtime.root.rglob("__pycache__")), "the gate must not write bytecode"


def _plant_unchecked_pyc(runtime: Runtime) -> None:
    """Compile different code into an unchecked-hash .pyc beside the correct source."""
    evil = runtime.root.parent / "evil_mod.py"
    evil.write_text('VALUE = "evil"\n')
    cache = runtime.root / "app" / "__pycache__"
    cache.mkdir()
    py_compile.compile(
        str(evil),
        cfile=str(cache / f"mod.{PYC_TAG}.pyc"),
        doraise=True,
        invalidation_mode=py_compile.PycInvalidationMode.UNCHECKED_HASH,
    )


def test_unchecked_pyc_attack_is_real_without_the_gate(tmp_path: Path) -> None:
    runtime = make_runtime(tmp_path)
    _plant_unchecked_pyc(runtime)
    root = str(runtime.root)
    code = f"import sys; sys.path.insert(0, {root!r}); from app import mod; print(mod.VALUE)"
    out = subprocess.run(
        [sys.executable, "-I", "-B", "-S", "-c", code], capture_output=True, text=True, check=True
    )
    assert out.stdout == "evil\n"


def _extra_module(runtime: Runtime) -> None:
    (runtime.root / "app" / "sneaky.py").write_text("import os\n")


def _extension_module(runtime: Runtime) -> None:
    (runtime.root / "app" / f"fast.{PYC_TAG}-x86_64-linux-gnu.so").write_bytes(b"\x7fELF")


def _pth_file(runtime: Runtime) -> None:
    (runtime.root / "evil.pth").write_text("import os; os.system('true')\n")


def _extra_data(runtime: Runtime) -> None:
    (runtime.root / "app" / "notes.txt").write_text("x")


def _digest(runtime: Runtime) -> None:
    (runtime.root / "app" / "mod.py").write_text('VALUE = "bad!"\n')


def _size(runtime: Runtime) -> None:
    (runtime.root / "app" / "mod.py").write_text('VALUE = "longer"\n')


def _missing(runtime: Runtime) -> None:
    (runtime.root / "app" / "data.txt").unlink()


def _symlink(runtime: Runtime) -> None:
    target = runtime.root / "app" / "data.txt"
    target.unlink()
    target.symlink_to("/etc/hostname")


def test_fifo_swapped_in_after_the_walk_does_not_block(tmp_path: Path) -> None:
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    with pytest.raises(bootstrap.GateRefusal) as info:
        bootstrap._sha256_nofollow(str(fifo))
    assert info.value.category == "special_file"


def _fifo(runtime: Runtime) -> None:
    target = runtime.root / "app" / "data.txt"
    target.unlink()
    os.mkfifo(target)


def _hard_link(runtime: Runtime) -> None:
    """A second name for a pinned file, outside the root: on a writable mount of the same
    filesystem it rewrites the bytes Python imports after the gate hashed them."""
    os.link(runtime.root / "app" / "mod.py", runtime.root.parent / "other-name.py")


def _nest(root: Path, levels: int) -> None:
    """`levels` nested directories, made and later removed one at a time (os.makedirs
    and shutil.rmtree recurse, and 1,100 levels is past Python's recursion limit)."""
    path = root
    for _ in range(levels):
        path = path / "d"
        path.mkdir()


def _unnest(root: Path) -> None:
    deepest = root
    while (deepest / "d").is_dir():
        deepest = deepest / "d"
    while deepest != root:
        deepest.rmdir()
        deepest = deepest.parent


@dataclass(frozen=True)
class Attack:
    plant: typing.Callable[[Runtime], None]
    category: str
    check: str
    """A line of the gate's source; replacing it with `pass` removes the check."""


ATTACKS: dict[str, Attack] = {
    "extra_module": Attack(
        _extra_module,
        "unlisted_importable",
        "                raise GateRefusal(_classify_unlisted(relative), verified)",
    ),
    "extension_module": Attack(
        _extension_module,
        "unlisted_importable",
        "                raise GateRefusal(_classify_unlisted(relative), verified)",
    ),
    "pth_file": Attack(
        _pth_file,
        "unlisted_importable",
        "                raise GateRefusal(_classify_unlisted(relative), verified)",
    ),
    "extra_data_file": Attack(
        _extra_data,
        "unlisted_file",
        "                raise GateRefusal(_classify_unlisted(relative), verified)",
    ),
    "unchecked_pyc": Attack(
        _plant_unchecked_pyc,
        "pycache_present",
        '                raise GateRefusal("pycache_present", verified)',
    ),
    "digest_mismatch": Attack(
        _digest, "digest_mismatch", '                raise GateRefusal("digest_mismatch", verified)'
    ),
    "size_mismatch": Attack(
        _size, "size_mismatch", '                raise GateRefusal("size_mismatch", verified)'
    ),
    "missing_file": Attack(
        _missing, "missing_file", '        raise GateRefusal("missing_file", verified)'
    ),
    "symlink": Attack(
        _symlink, "symlink", '                raise GateRefusal("symlink", verified)'
    ),
    "hard_link": Attack(
        _hard_link,
        "hard_link",
        '            raise GateRefusal("hard_link")  # on the fd: the inode that was hashed',
    ),
    "fifo": Attack(
        _fifo,
        "special_file",
        '            raise GateRefusal("special_file")'
        "  # FIFOs, devices, sockets: checked on the fd",
    ),
}


def _without(check: str) -> str:
    assert SOURCE.count(check + "\n") >= 1, check
    indent = check[: len(check) - len(check.lstrip())]
    return SOURCE.replace(check + "\n", f"{indent}pass\n")


@pytest.mark.parametrize("name", sorted(ATTACKS))
def test_attack_is_refused_and_nothing_runs(tmp_path: Path, name: str) -> None:
    runtime = make_runtime(tmp_path)
    ATTACKS[name].plant(runtime)
    category, rest = run_gate(runtime)
    assert category == ATTACKS[name].category
    assert rest == ""


@pytest.mark.parametrize("name", sorted(ATTACKS))
def test_mutation_control_attack_passes_without_its_check(tmp_path: Path, name: str) -> None:
    runtime = make_runtime(tmp_path)
    ATTACKS[name].plant(runtime)
    category, _rest = run_gate(runtime, source=_without(ATTACKS[name].check))
    assert category != ATTACKS[name].category


def test_unchecked_pyc_would_run_evil_code_without_the_pycache_check(tmp_path: Path) -> None:
    runtime = make_runtime(tmp_path)
    _plant_unchecked_pyc(runtime)
    # Even with the __pycache__ directory check removed, the walk still sees the .pyc as
    # an unlisted importable file: two independent refusals guard this attack.
    category, _ = run_gate(runtime, source=_without(ATTACKS["unchecked_pyc"].check))
    assert category == "unlisted_importable"


def test_foreign_directory_on_sys_path_is_refused(tmp_path: Path) -> None:
    runtime = make_runtime(tmp_path)
    evil = tmp_path / "evil"
    (evil / "app").mkdir(parents=True)
    env = {"PATH": "/usr/bin:/bin", "PYTHONPATH": str(evil)}
    assert run_gate(runtime, flags=("-B", "-S"), env=env)[0] == "foreign_path_entry"
    assert run_gate(runtime, flags=("-B", "-S"))[0] == "foreign_path_entry"  # '' (cwd) from -c
    assert run_gate(runtime, flags=("-I", "-B"))[0] == "foreign_path_entry"  # site-packages
    mutated = _without('        raise GateRefusal("foreign_path_entry")')
    assert run_gate(runtime, flags=("-B", "-S"), env=env, source=mutated)[0] == "ok"


def test_root_must_be_first_on_sys_path(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    runtime = make_runtime(tmp_path)
    monkeypatch.setattr(sys, "dont_write_bytecode", True)
    monkeypatch.setattr(sys, "flags", type("F", (), {"dont_write_bytecode": 1})())
    with pytest.raises(bootstrap.GateRefusal) as info:
        bootstrap.check_interpreter(str(runtime.root), [str(tmp_path), str(runtime.root)])
    assert info.value.category == "not_first_on_path"
    bootstrap.check_interpreter(
        str(runtime.root), [str(runtime.root), *sorted(bootstrap.stdlib_dirs())]
    )


def test_bytecode_writing_on_is_refused(tmp_path: Path) -> None:
    runtime = make_runtime(tmp_path)
    assert run_gate(runtime, flags=("-I", "-S"))[0] == "bytecode_writing_on"
    mutated = _without('        raise GateRefusal("bytecode_writing_on")')
    assert run_gate(runtime, flags=("-I", "-S"), source=mutated)[0] == "ok"


def test_writable_root_is_refused(tmp_path: Path) -> None:
    """Python re-opens every file after the gate hashed it: only a read-only mount keeps
    those the same bytes."""
    runtime = make_runtime(tmp_path)
    assert run_gate(runtime, writable=True) == ("root_writable", "")
    # Two independent refusals: the root's mount first, then each hashed file's.
    root_check = '        raise GateRefusal("root_writable")'
    assert run_gate(runtime, writable=True, source=_without(root_check))[0] == "root_writable"
    both = _without(root_check).replace(PER_FILE_CHECK + "\n", "            pass\n")
    assert run_gate(runtime, writable=True, source=both)[0] == "ok"


PER_FILE_CHECK = (
    '            raise GateRefusal("root_writable")  # a writable mount inside the read-only root'
)


def test_writable_mount_inside_the_read_only_root_is_refused(tmp_path: Path) -> None:
    """A writable copy of the package mounted over it: every byte matches the pins, the
    root itself is read-only, and the files Python imports can still change."""
    runtime = make_runtime(tmp_path)
    copy = tmp_path / "writable-app"
    shutil.copytree(runtime.root / "app", copy)
    over = (copy, runtime.root / "app")
    assert run_gate(runtime, writable_over=over) == ("root_writable", "")
    assert run_gate(runtime, writable_over=over, source=_without(PER_FILE_CHECK))[0] == "ok"


@pytest.mark.parametrize(("levels", "category"), [(64, "ok"), (65, "too_deep"), (1100, "too_deep")])
def test_depth_is_bounded_with_a_gate_line(tmp_path: Path, levels: int, category: str) -> None:
    """1,100 nested directories crashed the recursive walk with no gate line; the bound
    refuses them with one, and is exact at MAX_DEPTH (64)."""
    runtime = make_runtime(tmp_path)
    _nest(runtime.root, levels)
    try:
        assert run_gate(runtime) == (category, "" if category != "ok" else "APP good ['--flag']\n")
        mutated = _without('            raise GateRefusal("too_deep", verified)')
        assert run_gate(runtime, source=mutated)[0] == ("crashed" if levels > 900 else "ok")
    finally:
        _unnest(runtime.root)


def test_unlistable_directory_is_refused_not_skipped() -> None:
    """A directory the gate cannot list (mode 000, the gate not root) is not verified, so
    it is refused. As root the gate runs as `nobody` to see it; the base directory is
    made traversable for that uid."""
    base = Path(tempfile.mkdtemp(prefix="gate-"))
    try:
        base.chmod(0o755)
        runtime = make_runtime(base)
        hidden = runtime.root / "app" / "hidden"
        hidden.mkdir()
        (hidden / "payload.py").write_text("import os\n")
        hidden.chmod(0)
        user = 65534 if os.geteuid() == 0 else None
        assert run_gate(runtime, user=user) == ("unreadable_directory", "")
        mutated = SOURCE.replace('raise GateRefusal("unreadable_directory")', "return None", 1)
        assert run_gate(runtime, user=user, source=mutated)[0] == "ok"
    finally:
        for directory, _dirs, _files in os.walk(base):
            os.chmod(directory, 0o755)
        shutil.rmtree(base)


def test_pin_table_must_be_the_one_the_host_sent(tmp_path: Path) -> None:
    runtime = make_runtime(tmp_path)
    assert run_gate(runtime, digest="0" * 64)[0] == "pin_table_mismatch"
    mutated = _without('        raise GateRefusal("pin_table_mismatch")')
    assert run_gate(runtime, digest="0" * 64, source=mutated)[0] == "ok"


def test_every_category_the_gate_can_print_is_a_receipt_category() -> None:
    categories = set(typing.get_args(GateCategory))
    printed = {
        "ok",
        "unread",
        *(a.category for a in ATTACKS.values()),
        "not_first_on_path",
        "foreign_path_entry",
        "bytecode_writing_on",
        "pin_table_mismatch",
        "root_writable",
        "unreadable_directory",
    }
    assert printed <= categories
    for category in categories - {"ok", "unread"}:
        assert f'"{category}"' in SOURCE, category


def test_gate_imports_only_the_standard_library() -> None:
    import ast

    tree = ast.parse(SOURCE)
    modules = {
        alias.name.split(".")[0]
        for node in ast.walk(tree)
        if isinstance(node, ast.Import)
        for alias in node.names
    }
    modules |= {
        node.module.split(".")[0]
        for node in ast.walk(tree)
        if isinstance(node, ast.ImportFrom) and node.module
    }
    assert modules <= set(sys.stdlib_module_names) | {"__future__"}


def _run_raw(runtime: Runtime, *args: str) -> subprocess.CompletedProcess[str]:
    """The gate run as it ships on a read-only root, with the arguments given: for the
    exit status and the whole gate line, which run_gate does not return."""
    command = [sys.executable, "-I", "-B", "-S", "-c", SOURCE, *args]
    return subprocess.run(
        read_only(runtime.root, command),
        capture_output=True,
        text=True,
        timeout=60,
        env={"PATH": "/usr/bin:/bin"},
        cwd=runtime.root.parent,
        check=False,
    )


def test_exit_status_says_whether_the_module_ran(tmp_path: Path) -> None:
    """0 after an `ok` gate ran the module, 3 on a refusal, and the refusal's line counts
    the files verified before it (none before the pin table is read). Mutation controls
    (cosmic-ray): main's `return 0` as `return 1`, and `verified = 0` as `verified = 1`,
    each fail this test."""
    runtime = make_runtime(tmp_path)
    args = (str(runtime.root), str(runtime.table))
    ok = _run_raw(runtime, *args, runtime.digest, "app")
    assert ok.returncode == 0, ok.stderr
    line = json.loads(ok.stdout.partition("\n")[0].removeprefix("HARNESS-GATE "))
    pinned = len(json.loads(runtime.table.read_bytes())["files"])
    assert pinned == 4
    assert line == {"category": "ok", "files_verified": 4, "pin_table_sha256": runtime.digest}
    refused = _run_raw(runtime, *args, "0" * 64, "app")
    assert refused.returncode == 3
    line = json.loads(refused.stdout.removeprefix("HARNESS-GATE "))
    assert line == {
        "category": "pin_table_mismatch",
        "files_verified": 0,
        "pin_table_sha256": "0" * 64,
    }


def test_an_unreadable_pin_table_is_unread_with_a_gate_line(tmp_path: Path) -> None:
    """An OSError while verifying is the closed answer `unread` (exit 3), not a traceback
    with no gate line. Mutation controls (cosmic-ray): the `except OSError` handler made
    dead, and its `return 3` as `return 2`, fail this test."""
    runtime = make_runtime(tmp_path)
    result = _run_raw(
        runtime, str(runtime.root), str(tmp_path / "absent.json"), runtime.digest, "app"
    )
    assert result.returncode == 3
    line = json.loads(result.stdout.removeprefix("HARNESS-GATE "))
    assert line["category"] == "unread"
    assert line["files_verified"] == 0


def test_a_writable_root_is_named_before_anything_else_is_looked_at(tmp_path: Path) -> None:
    """The root's mount is checked first: a writable root holding an unlisted file is
    `root_writable`, before the walk finds the file. Mutation control (cosmic-ray):
    `f_flag & ST_RDONLY` as `f_flag | ST_RDONLY` in check_read_only (the root check never
    fires) makes this `unlisted_file`."""
    runtime = make_runtime(tmp_path)
    (runtime.root / "unpinned.txt").write_text("walked before any pinned file\n")
    assert run_gate(runtime, writable=True)[0] == "root_writable"


def test_bytecode_writing_turned_back_on_in_the_process_is_refused(tmp_path: Path) -> None:
    """Both must be off: the -B start flag and sys.dont_write_bytecode, which code run
    before the gate can set back. Here the gate's source is executed after doing so.
    Mutation control (cosmic-ray): the `or` of the two as `and` lets this run."""
    runtime = make_runtime(tmp_path)
    gate = tmp_path / "gate.py"
    gate.write_text(SOURCE)
    prelude = (
        "import sys; sys.dont_write_bytecode = False; "
        f"exec(compile(open({str(gate)!r}).read(), 'gate', 'exec'), {{'__name__': '__main__'}})"
    )
    assert run_gate(runtime, source=prelude)[0] == "bytecode_writing_on"


def test_too_few_arguments_is_a_usage_error_not_a_crash(tmp_path: Path) -> None:
    """No module named: usage on stderr, exit 2, nothing printed as a gate line. Mutation
    control (cosmic-ray): `len(argv) < 4` as `< 3` crashes on the unpacking instead."""
    runtime = make_runtime(tmp_path)
    result = _run_raw(runtime, str(runtime.root), str(runtime.table), runtime.digest)
    assert result.returncode == 2
    assert result.stdout == ""
    assert result.stderr.startswith("usage: bootstrap ROOT")


def test_hashing_never_follows_a_symlink(tmp_path: Path) -> None:
    """The hash opens with O_NOFOLLOW: a name that became a symlink after the walk's
    lstat is refused by the open (ELOOP, reported `unread`), never hashed as its target.
    Mutation control (cosmic-ray): `O_RDONLY | O_NOFOLLOW` as `O_RDONLY & O_NOFOLLOW`
    (which drops O_NOFOLLOW) opens the target instead."""
    target = tmp_path / "target.py"
    target.write_text("VALUE = 1\n")
    link = tmp_path / "link.py"
    link.symlink_to(target)
    with pytest.raises(OSError) as raised:
        bootstrap._sha256_nofollow(str(link))
    assert raised.value.errno == errno.ELOOP


def test_a_refusal_counts_the_files_verified_before_it(tmp_path: Path) -> None:
    """mod.py is the fourth file walked (sorted): a size mismatch there reports the three
    verified before it. Mutation control (cosmic-ray): main's `refusal.files_verified or
    verified` as `and` reports 0."""
    runtime = make_runtime(tmp_path)
    _size(runtime)
    args = (str(runtime.root), str(runtime.table), runtime.digest, "app")
    result = _run_raw(runtime, *args)
    line = json.loads(result.stdout.removeprefix("HARNESS-GATE "))
    assert (line["category"], line["files_verified"]) == ("size_mismatch", 3)


def test_the_module_runs_as_the_real_main(tmp_path: Path) -> None:
    """The verified module is run as __main__ the way `python -m` would: sys.argv[0] is its
    file and sys.modules['__main__'] is it (multiprocessing and pickling rely on that).
    Mutation control (cosmic-ray): run_module's `alter_sys=True` as False leaves the
    gate's own -c module there."""
    root = tmp_path / "runtime"
    (root / "app").mkdir(parents=True)
    (root / "app" / "__init__.py").write_text("")
    (root / "app" / "__main__.py").write_text(
        "import sys\nprint(sys.argv[0], getattr(sys.modules['__main__'], '__file__', None))\n"
    )
    table = build_pin_table(root)
    (tmp_path / "pins.json").write_bytes(pin_table_bytes(table))
    runtime = Runtime(root, tmp_path / "pins.json", table.digest())
    result = _run_raw(runtime, str(root), str(runtime.table), runtime.digest, "app")
    main = str(root / "app" / "__main__.py")
    assert result.stdout.splitlines()[1:] == [f"{main} {main}"]
