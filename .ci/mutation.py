"""Mutation testing of the safety modules with cosmic-ray. Run by .ci/mutation.

Why a scratch copy: cosmic-ray mutates source files on disk, and several tests read the
file itself (the runtime gate is run from its source text in a subprocess), so an
in-process tool cannot see what they test. Mutating a copy of the checkout keeps the
developer's tree untouched even if the run is killed in the middle of a mutant;
PYTHONPATH points every test process (and the processes the tests start) at the copy.

Why a module-to-tests map: each mutant runs a fresh pytest; running only the unit tests
that exercise the module keeps a module's run in minutes on a shared 2-core machine.
Integration tests (real QEMU) are never run here: the score is what the unit suite kills.

Output, per module, under the output directory: the cosmic-ray session (sqlite), a JSON
summary and `survivors.txt` with the diff of each surviving mutant.
"""

from __future__ import annotations

import argparse
import ast
import hashlib
import json
import os
import shutil
import sqlite3
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

from cosmic_ray.work_db import WorkDB, use_db  # type: ignore[import-untyped]
from cosmic_ray.work_item import WorkerOutcome, WorkResult  # type: ignore[import-untyped]

REPO = Path(__file__).resolve().parent.parent
VENV_PYTHON = REPO / ".venv" / "bin" / "python"
COSMIC_RAY = REPO / ".venv" / "bin" / "cosmic-ray"
ANNOTATION = "skipped: inside an annotation that is never evaluated"
NOT_RUN = "skipped: not reached by the earlier run this one rechecks"


@dataclass(frozen=True)
class Scope:
    """One unit of a run: the files mutated together and the unit tests that cover them."""

    modules: tuple[str, ...]
    tests: tuple[str, ...]
    deselect: tuple[str, ...] = ()
    """Test ids left out: tests that run a `git clone` of the checkout (the scratch copy
    is not a repository, and a clone's code is never the mutant)."""


# Ordered by priority: a partial run does the first ones. The tests listed first are the
# ones that kill most mutants, because pytest stops at the first failure (-x).
SCOPES: dict[str, Scope] = {
    "receipts/verdict": Scope(
        ("receipts/verdict.py",),
        (
            "tests/receipts/test_verdict.py",
            "tests/receipts/test_cancelled_trials.py",
            "tests/receipts/test_audit_tamper.py",
        ),
    ),
    "receipts/manifest": Scope(
        ("receipts/manifest.py",),
        (
            "tests/receipts/test_documented_limits.py",
            "tests/receipts/test_audit_tamper.py",
            "tests/receipts/test_bundle.py",
            "tests/receipts/test_audit_fuzz.py",
        ),
    ),
    "receipts/audit": Scope(
        (
            "receipts/audit/__init__.py",
            "receipts/audit/consistency.py",
            "receipts/audit/container.py",
            "receipts/audit/context.py",
            "receipts/audit/findings.py",
            "receipts/audit/schemas.py",
            "receipts/cleanupset.py",
        ),
        (
            "tests/receipts/test_audit_tamper.py",
            "tests/receipts/test_verdict.py",
            "tests/receipts/test_cancelled_trials.py",
            "tests/receipts/test_hoststate_versions.py",
            "tests/receipts/test_memory_versions.py",
            "tests/receipts/test_documented_limits.py",
            "tests/receipts/test_audit_mutants.py",
            "tests/receipts/test_schema_docs.py",
            "tests/receipts/test_audit_fuzz.py",
        ),
    ),
    # The audit's claim checks and closed vocabulary: its
    # own scope, run with the audit's tests, so the audit row above stays comparable.
    "receipts/claim": Scope(
        ("receipts/claim.py", "receipts/vocabulary.py"),
        (
            "tests/receipts/test_claim.py",
            "tests/receipts/test_vocabulary.py",
            "tests/receipts/test_audit_mutants.py",
            "tests/receipts/test_audit_tamper.py",
            "tests/receipts/test_verdict.py",
        ),
    ),
    "guest/gate": Scope(
        ("guest/gate/bootstrap.py", "guest/gate/ready.py"),
        ("tests/guest/gate",),
    ),
    "harness/source": Scope(("harness/source.py",), ("tests/harness/test_source.py",)),
    # Split in two so each mutant runs only the tests of its own module (the jail is
    # used by every file tool, confine only by run_tests): half the time per survivor.
    "guest/tools/jail": Scope(
        ("guest/tools/jail.py",),
        (
            "tests/guest/tools/test_jail.py",
            "tests/guest/tools/test_write.py",
            "tests/guest/tools/test_read.py",
            "tests/guest/tools/test_listing.py",
        ),
    ),
    "guest/tools/confine": Scope(
        ("guest/tools/confine.py",),
        (
            "tests/guest/tools/test_run_limits.py",
            "tests/guest/tools/test_confine_exit.py",
            "tests/guest/tools/test_confine_tail.py",
            "tests/guest/tools/test_confine_report.py",
            "tests/guest/tools/test_confine_rlimits.py",
            "tests/guest/tools/test_run_tests.py",
            "tests/guest/tools/test_confine_run_as.py",
            "tests/guest/tools/test_sandbox.py",
        ),
    ),
    "harness/dispatch": Scope(
        ("harness/dispatch.py",),
        ("tests/harness/test_dispatch.py", "tests/harness/test_dispatch_flow.py"),
        (
            "tests/harness/test_dispatch.py::test_issue_writes_the_ticket_outside_the_checkout",
            "tests/harness/test_dispatch.py::test_issue_refuses_an_out_inside_the_checkout",
        ),
    ),
    # The model's pins, the GGUF check and the cache (with the content key both the cache
    # and the audit compute, receipts/modelkey.py): one scope each, each with the tests
    # that import it (one scope with all of tests/host/model ran 3 mutants a minute).
    "host/model/pins": Scope(
        ("host/model/pins.py",),
        tuple(
            f"tests/host/model/{name}.py"
            for name in (
                "test_pins",
                "test_pin_in_pass",
                "test_onepass",
                "test_hfcache",
                "test_cache",
                "test_progress",
                "test_synth",
                "test_sampling",
            )
        ),
    ),
    "host/model/verify_gguf": Scope(
        ("host/model/verify_gguf.py",),
        tuple(
            f"tests/host/model/{name}.py"
            for name in (
                "test_verify_gguf",
                "test_inwrite",
                "test_verify_gguf_bounds",
                "test_onepass",
                "test_rawcopy",
                "test_cancel",
                "test_convert",
                "test_llamacpp_divergences",
                "test_model_card",
            )
        ),
    ),
    "host/model/cache": Scope(
        ("host/model/cache.py", "receipts/modelkey.py"),
        (
            *(
                f"tests/host/model/{name}.py"
                for name in (
                    "test_cache",
                    "test_pin_in_pass",
                    "test_onepass",
                    "test_hfcache",
                    "test_cache_concurrency",
                )
            ),
            "tests/harness/trial/test_modelstage.py",
        ),
    ),
    # The worker in three parts, each with the worker's unit tests (its own first): the
    # HTTP front (app.py, about 40 s of tests with a tiny model per mutant), the
    # per-request watchdog (guard.py) and the headroom reader (memory.py, below).
    "guest/worker/app": Scope(
        ("guest/worker/app.py",),
        (
            "tests/guest/worker/test_chat_edge.py",
            "tests/guest/worker/test_chat_answers.py",
            "tests/guest/worker/test_parse_body.py",
            "tests/guest/worker",
        ),
    ),
    "guest/worker/guard": Scope(
        ("guest/worker/guard.py",),
        ("tests/guest/worker/test_guard.py", "tests/guest/worker"),
    ),
    # The headroom reader alone, with the only tests that reach it without a worker
    # process (the third session's sub-scope: the whole worker, 515 mutants each running
    # the worker's tests with a tiny model, did not fit in a session).
    "guest/worker/memory": Scope(
        ("guest/worker/memory.py",),
        ("tests/guest/worker/test_headroom.py", "tests/receipts/test_kernelfacts.py"),
    ),
    # What a receipt's digests are computed over: canonical JSON, strict JSON, the bundle
    # writer, the pin table and the tree digest, with their own tests.
    "receipts/digests": Scope(
        (
            "receipts/canonical.py",
            "receipts/strictjson.py",
            "receipts/bundle.py",
            "receipts/pintable.py",
            "receipts/treedigest.py",
        ),
        (
            "tests/receipts/test_canonical.py",
            "tests/receipts/test_strictjson.py",
            "tests/receipts/test_bundle.py",
            "tests/receipts/test_pintable.py",
            "tests/receipts/test_treedigest.py",
            "tests/receipts/test_documented_limits.py",
        ),
    ),
    "receipts/core": Scope(
        (
            "receipts/staging.py",
            "receipts/recordset.py",
            "receipts/log.py",
            "receipts/failure.py",
            "receipts/kernelfacts.py",
            "receipts/suitebundle.py",
            "receipts/types.py",
        ),
        (
            "tests/receipts/test_staging.py",
            "tests/receipts/test_staging_moves.py",
            "tests/receipts/test_log.py",
            "tests/receipts/test_failure.py",
            "tests/receipts/test_kernelfacts.py",
            "tests/receipts",
        ),
    ),
    "receipts/records": Scope(
        tuple(
            f"receipts/records/{path.name}"
            for path in sorted((REPO / "receipts" / "records").glob("*.py"))
        ),
        ("tests/receipts/test_records.py", "tests/receipts/test_schema_docs.py", "tests/receipts"),
    ),
    "host/cgroups": Scope(
        tuple(
            f"host/cgroups/{name}.py"
            for name in sorted(path.stem for path in (REPO / "host" / "cgroups").glob("*.py"))
            if name != "__init__"
        ),
        ("tests/host/cgroups",),
    ),
    "host/vm/budgets": Scope(("host/vm/budgets.py",), ("tests/host/vm/test_budgets.py",)),
    "receipts/audit/suite": Scope(
        ("receipts/audit/suite.py",),
        (
            "tests/receipts/test_suite_receipt.py",
            "tests/receipts/test_suite_dispatch_audit.py",
            "tests/receipts/test_suite_limits.py",
            # The audit result's JSON Schema is published: a mutant that changes it (the
            # findings' max_length) is caught there.
            "tests/receipts/test_schema_docs.py",
        ),
    ),
}

# One mutant per kind of slip rather than every operator swapped for every other: a
# flipped condition, a boundary moved by one, a boolean, a constant, a loop skipped, an
# exception handler made dead. The full cross product (`a + b` into 11 operators) adds
# mutants that die with the first of them and would multiply the run time.
KEPT_OPERATORS = (
    "core/ReplaceBinaryOperator_Add_Sub",
    "core/ReplaceBinaryOperator_Sub_Add",
    "core/ReplaceBinaryOperator_Mul_Div",
    "core/ReplaceBinaryOperator_Div_Mul",
    "core/ReplaceBinaryOperator_FloorDiv_Mul",
    "core/ReplaceBinaryOperator_Mod_FloorDiv",
    "core/ReplaceBinaryOperator_BitOr_BitAnd",
    "core/ReplaceBinaryOperator_BitAnd_BitOr",
    "core/ReplaceBinaryOperator_LShift_RShift",
    "core/ReplaceBinaryOperator_RShift_LShift",
    "core/ReplaceComparisonOperator_Eq_NotEq",
    "core/ReplaceComparisonOperator_NotEq_Eq",
    "core/ReplaceComparisonOperator_Lt_LtE",
    "core/ReplaceComparisonOperator_Lt_GtE",
    "core/ReplaceComparisonOperator_LtE_Lt",
    "core/ReplaceComparisonOperator_LtE_Gt",
    "core/ReplaceComparisonOperator_Gt_GtE",
    "core/ReplaceComparisonOperator_Gt_LtE",
    "core/ReplaceComparisonOperator_GtE_Gt",
    "core/ReplaceComparisonOperator_GtE_Lt",
    "core/ReplaceComparisonOperator_Is_IsNot",
    "core/ReplaceComparisonOperator_IsNot_Is",
    "core/ReplaceUnaryOperator_USub_UAdd",
    "core/ReplaceUnaryOperator_Delete_Not",
    "core/AddNot",
    "core/ReplaceTrueWithFalse",
    "core/ReplaceFalseWithTrue",
    "core/ReplaceAndWithOr",
    "core/ReplaceOrWithAnd",
    "core/ReplaceBreakWithContinue",
    "core/ReplaceContinueWithBreak",
    "core/ExceptionReplacer",
    "core/NumberReplacer",
    "core/ZeroIterationForLoop",
)


def _operator_exclusions() -> list[str]:
    listed = subprocess.run(
        [str(COSMIC_RAY), "operators"], capture_output=True, text=True, check=True
    ).stdout.split()
    unknown = set(KEPT_OPERATORS) - set(listed)
    if unknown:
        sys.exit(f"mutation: cosmic-ray has no operator {sorted(unknown)}; check the pin")
    return [f"{name}$" for name in listed if name not in KEPT_OPERATORS]


def _copy_tree(dest: Path, rev: str | None) -> None:
    """The working tree's tracked and untracked-not-ignored files (uncommitted edits
    included), no bytecode: what the developer would test. With `rev`, that commit's
    tree instead (to score an earlier suite)."""
    if rev is not None:
        archive = subprocess.run(
            ["git", "-C", str(REPO), "archive", "--format=tar", rev],
            capture_output=True,
            check=True,
        ).stdout
        subprocess.run(["tar", "-x", "-C", str(dest)], input=archive, check=True)
        return
    names = subprocess.run(
        ["git", "-C", str(REPO), "ls-files", "-z", "-c", "-o", "--exclude-standard"],
        capture_output=True,
        check=True,
    ).stdout.split(b"\0")
    for raw in names:
        if not raw:
            continue
        name = raw.decode()
        source = REPO / name
        if not source.is_file():
            continue  # deleted in the working tree
        target = dest / name
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(source, target)


def _test_command(scope: Scope, tree: Path) -> str:
    """The scope's tests that exist in the tree (an earlier --rev may lack newer ones)."""
    tests = [test for test in scope.tests if (tree / test).exists()]
    return " ".join(
        [
            str(VENV_PYTHON),
            "-m",
            "pytest",
            "-x",
            "-q",
            "-p",
            "no:cacheprovider",
            "-m",
            "'not integration'",
            *(f"--deselect {test}" for test in scope.deselect),
            *tests,
        ]
    )


def _config(scope: Scope, tree: Path, timeout: float, exclusions: list[str]) -> str:
    def array(items: list[str] | tuple[str, ...]) -> str:
        return "[" + ", ".join(json.dumps(item) for item in items) + "]"

    return "\n".join(
        [
            "[cosmic-ray]",
            f"module-path = {array(scope.modules)}",
            f"timeout = {timeout:.0f}",
            "excluded-modules = []",
            f"test-command = {json.dumps(_test_command(scope, tree))}",
            "",
            "[cosmic-ray.distributor]",
            'name = "local"',
            "",
            "[cosmic-ray.filters.operators-filter]",
            f"exclude-operators = {array(exclusions)}",
            "",
        ]
    )


def _annotation_spans(module: Path) -> list[tuple[tuple[int, int], tuple[int, int]]]:
    """Where a function's parameter and return annotations are, in a module that has
    `from __future__ import annotations`: there they are strings never evaluated, so a
    mutant inside one (`X | None` into `X & None`) cannot change behaviour."""
    tree = ast.parse(module.read_text(encoding="utf-8"))
    future = any(
        isinstance(node, ast.ImportFrom)
        and node.module == "__future__"
        and any(alias.name == "annotations" for alias in node.names)
        for node in tree.body
    )
    if not future:
        return []
    spans = []
    for node in ast.walk(tree):
        if not isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            continue
        arguments = node.args
        annotated = [
            *arguments.posonlyargs,
            *arguments.args,
            *arguments.kwonlyargs,
            *([arguments.vararg] if arguments.vararg else []),
            *([arguments.kwarg] if arguments.kwarg else []),
        ]
        annotations = [arg.annotation for arg in annotated if arg.annotation is not None]
        if node.returns is not None:
            annotations.append(node.returns)
        for annotation in annotations:
            assert annotation.end_lineno is not None and annotation.end_col_offset is not None
            spans.append(
                (
                    (annotation.lineno, annotation.col_offset),
                    (annotation.end_lineno, annotation.end_col_offset),
                )
            )
    return spans


def _skip_annotations(db: Path, tree: Path) -> None:
    """Mark the mutants inside unevaluated annotations skipped, with the reason."""
    spans = {}
    with use_db(str(db), WorkDB.Mode.open) as work_db:
        for item in list(work_db.pending_work_items):
            mutation = item.mutations[0]
            path = mutation.module_path
            if path not in spans:
                spans[path] = _annotation_spans(tree / path)
            start = tuple(mutation.start_pos)
            if any(low <= start < high for low, high in spans[path]):
                work_db.set_result(
                    item.job_id,
                    WorkResult(output=ANNOTATION, worker_outcome=WorkerOutcome.SKIPPED),
                )


def _summarise(db: Path, source_root: Path) -> tuple[dict[str, object], list[str]]:
    """Counts per outcome from the session, and each survivor's diff. A survivor inside an
    unevaluated annotation (a session made before that filter) counts as skipped."""
    dumped = subprocess.run(
        [str(COSMIC_RAY), "dump", str(db)], capture_output=True, text=True, check=True
    ).stdout
    counts = dict.fromkeys(
        ("killed", "survived", "incompetent", "pending", "skipped_operator", "skipped_annotation"),
        0,
    )
    spans: dict[str, list[tuple[tuple[int, int], tuple[int, int]]]] = {}
    survivors: list[str] = []
    for line in dumped.splitlines():
        item, result = json.loads(line)
        mutation = item["mutations"][0]
        path = mutation["module_path"]
        if path not in spans:
            spans[path] = _annotation_spans(source_root / path)
        start = tuple(mutation["start_pos"])
        not_run = result is None or (
            result["worker_outcome"] == "skipped" and result["output"] == NOT_RUN
        )
        if not_run:
            counts["pending"] += 1
        elif result["worker_outcome"] == "skipped":
            annotation = result["output"] == ANNOTATION
            counts["skipped_annotation" if annotation else "skipped_operator"] += 1
        elif result["test_outcome"] in ("killed", "survived"):
            if any(low <= start < high for low, high in spans[path]):
                counts["skipped_annotation"] += 1
                continue
            counts[result["test_outcome"]] += 1
            if result["test_outcome"] == "survived":
                survivors.append(
                    f"## {path}:{start[0]} {mutation['operator_name']}"
                    f" #{mutation['occurrence']} ({mutation['definition_name']})\n{result['diff']}"
                )
        else:
            counts["incompetent"] += 1
    total = counts["killed"] + counts["survived"]
    summary: dict[str, object] = dict(counts)
    summary["score_percent"] = round(100 * counts["killed"] / total, 1) if total else None
    return summary, survivors


def write_summary(
    workdir: Path, scope: Scope, source_root: Path, extra: dict[str, object]
) -> dict[str, object]:
    """summary.json and survivors.txt of one scope's session."""
    summary, survivors = _summarise(workdir / "session.sqlite", source_root)
    summary.update(module_paths=list(scope.modules), tests=list(scope.tests), **extra)
    (workdir / "survivors.txt").write_text("\n".join(survivors))
    (workdir / "summary.json").write_text(json.dumps(summary, indent=2) + "\n")
    return summary


def _digests(tree: Path, scope: Scope) -> dict[str, str]:
    return {
        module: hashlib.sha256((tree / module).read_bytes()).hexdigest() for module in scope.modules
    }


def _reopen_survivors(db: Path, sources: Path, tree: Path, scope: Scope) -> None:
    """Make the earlier session's survivors pending again, if the modules are the same."""
    if json.loads(sources.read_text()) != _digests(tree, scope):
        sys.exit(f"mutation: {scope.modules} changed since {sources.parent}; run it in full")
    with sqlite3.connect(db) as connection:
        # Mutants the earlier run never reached stay not run: a recheck is not a full run.
        connection.execute(
            "INSERT INTO work_results (job_id, worker_outcome, output) "
            "SELECT job_id, 'SKIPPED', ? FROM work_items "
            "WHERE job_id NOT IN (SELECT job_id FROM work_results)",
            (NOT_RUN,),
        )
        connection.execute("DELETE FROM work_results WHERE test_outcome = 'SURVIVED'")


def run_scope(
    name: str,
    scope: Scope,
    tree: Path,
    out: Path,
    exclusions: list[str],
    *,
    recheck: Path | None,
) -> dict[str, object]:
    workdir = out / name.replace("/", "-")
    workdir.mkdir(parents=True, exist_ok=True)
    env = dict(os.environ, PYTHONPATH=str(tree), PYTHONDONTWRITEBYTECODE="1")

    started = time.monotonic()
    baseline = subprocess.run(
        ["sh", "-c", _test_command(scope, tree)],
        cwd=tree,
        env=env,
        capture_output=True,
        text=True,
        check=False,
    )
    baseline_s = time.monotonic() - started
    if baseline.returncode != 0:
        sys.exit(
            f"mutation: {name}: the unmutated tests fail; fix them first\n{baseline.stdout[-3000:]}"
        )
    # Killed includes a timeout: a mutant that loops forever is caught, but the limit must
    # be far enough above a normal run that a loaded machine does not kill survivors.
    timeout = max(60.0, 4 * baseline_s)

    config = workdir / "config.toml"
    config.write_text(_config(scope, tree, timeout, exclusions))
    db = workdir / "session.sqlite"
    db.unlink(missing_ok=True)
    if recheck is not None:
        # Only the survivors of an earlier session run again: tests were added since,
        # none removed, and the mutated modules are unchanged (checked), so a mutant the
        # earlier suite killed is still killed.
        earlier = recheck / workdir.name
        shutil.copy2(earlier / "session.sqlite", db)
        _reopen_survivors(db, earlier / "sources.json", tree, scope)
    else:
        subprocess.run(
            [str(COSMIC_RAY), "init", str(config), str(db)], cwd=tree, env=env, check=True
        )
        subprocess.run(
            [str(REPO / ".venv" / "bin" / "cr-filter-operators"), str(db), str(config)],
            cwd=tree,
            env=env,
            check=True,
        )
        _skip_annotations(db, tree)
    (workdir / "sources.json").write_text(json.dumps(_digests(tree, scope), indent=2) + "\n")
    subprocess.run([str(COSMIC_RAY), "exec", str(config), str(db)], cwd=tree, env=env, check=True)
    summary = write_summary(
        workdir,
        scope,
        tree,
        {
            "baseline_seconds": round(baseline_s, 1),
            "run_seconds": round(time.monotonic() - started, 1),
        },
    )
    # The copy must be back to the source after every scope: cosmic-ray restores each
    # file after its mutant, and this checks it did.
    if _digests(tree, scope) != json.loads((workdir / "sources.json").read_text()):
        sys.exit(f"mutation: {name}: a module was left mutated in the scratch copy")
    return summary


def _print(name: str, summary: dict[str, object]) -> None:
    print(
        f"mutation: {name}: {summary['killed']} killed, {summary['survived']} survived,"
        f" {summary['incompetent']} incompetent, {summary['pending']} not run,"
        f" score {summary['score_percent']}% ({summary.get('run_seconds', '-')} s)",
        flush=True,
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "scopes",
        nargs="*",
        help=f"scopes (default: all, in this order): {', '.join(SCOPES)}",
    )
    parser.add_argument("--out", type=Path, default=REPO / ".mutation")
    parser.add_argument("--list", action="store_true", help="print the scopes and their tests")
    parser.add_argument(
        "--report",
        action="store_true",
        help="rewrite the summaries of the sessions already under --out (no run)",
    )
    parser.add_argument(
        "--rev", help="mutate and test this commit's tree instead of the working tree"
    )
    parser.add_argument(
        "--recheck",
        type=Path,
        metavar="EARLIER_OUT",
        help="run only the survivors of the sessions under EARLIER_OUT (after adding tests)",
    )
    args = parser.parse_args()

    if args.list:
        for name, scope in SCOPES.items():
            print(f"{name}: {' '.join(scope.modules)}\n    tests: {' '.join(scope.tests)}")
            if scope.deselect:
                print(f"    left out: {' '.join(scope.deselect)}")
        return
    chosen = args.scopes or list(SCOPES)
    unknown = [name for name in chosen if name not in SCOPES]
    if unknown:
        sys.exit(f"mutation: unknown scope {unknown}; --list shows them")

    out: Path = args.out.resolve()
    if args.report:
        for name in chosen:
            workdir = out / name.replace("/", "-")
            if (workdir / "session.sqlite").exists():
                _print(name, write_summary(workdir, SCOPES[name], REPO, {}))
        return
    tree = out / "tree"
    if tree.exists():
        shutil.rmtree(tree)
    tree.mkdir(parents=True)
    _copy_tree(tree, args.rev)
    exclusions = _operator_exclusions()
    for name in chosen:
        _print(name, run_scope(name, SCOPES[name], tree, out, exclusions, recheck=args.recheck))
    shutil.rmtree(tree)


if __name__ == "__main__":
    main()
