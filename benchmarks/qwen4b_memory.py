"""The qwen4b memory envelope, measured through the worker's own admission path.

Why this way: the floors in profiles/qwen4b.toml are only right if a real worker, in a
real no-swap cgroup of the profile's size, admits the requests an agent sends. So this
starts `python -m guest.worker serve` exactly as the trial's host placement does
(harness/trial/worker.serve_args, the same cgroup code), sends real chat requests
over its Unix socket, and reports:
- the cgroup's readings sampled every 100 ms (usage, max usage, rss, cache, mapped
  file, active/inactive file; v1 files, as on this host) and the worker's
  VmRSS/RssAnon/RssFile, and host MemAvailable, at each phase (loaded, after each
  request) and their maxima;
- the worker's own per-request records: admission, headroom, deciding scope, need,
  floor, min headroom during generation, time to first token, decode time.

`--cold` drops the GGUF's pages from the page cache first (posix_fadvise DONTNEED on
that file only), so the worker's digest check and its mmap faults charge the weights
to its own cgroup: the worst case the limit must hold. Without it, pages cached by
whoever read the file last stay charged to that cgroup (v1 charges the first toucher).
`--activate` reads the GGUF twice inside the worker's cgroup after load, which puts the
weights on the active file list: the state the kernel reaches on its own once reclaim
has scanned the mapped, referenced pages, and the one in which admission counts them.

Run: `.venv/bin/python -m benchmarks.qwen4b_memory --gguf F --sha256 H [--cold]
[--request-floor B] [--prompt-words N] [--max-tokens N] [--requests N]`
(one JSON document on stdout). Uses cgroup v1 memory files: this host's layout.
"""

from __future__ import annotations

import argparse
import http.client
import json
import os
import socket
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

from harness.profiles import Profile, load_profile
from harness.trial.worker import serve_args
from host.cgroups.detect import detect
from host.cgroups.spawn import spawn_in_cgroup

STAT_KEYS = (
    "total_cache",
    "total_rss",
    "total_mapped_file",
    "total_inactive_file",
    "total_active_file",
    "total_inactive_anon",
    "total_active_anon",
)
SENTENCE = (
    "the worker reads a file then edits a function and runs the tests again while the "
    "agent keeps a short log of every step it took so far in this trial"
)
WORDS = tuple(SENTENCE.split(" "))
REPO = Path(__file__).resolve().parents[1]


class UnixHTTPConnection(http.client.HTTPConnection):
    def __init__(self, path: str, timeout: float) -> None:
        super().__init__("localhost", timeout=timeout)
        self._path = path

    def connect(self) -> None:
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.sock.settimeout(self.timeout)
        self.sock.connect(self._path)


def _int(path: Path) -> int:
    return int(path.read_text().strip())


def snapshot(cgroup_dir: Path, pid: int) -> dict[str, int]:
    out: dict[str, int] = {
        "usage": _int(cgroup_dir / "memory.usage_in_bytes"),
        "max_usage": _int(cgroup_dir / "memory.max_usage_in_bytes"),
        "limit": _int(cgroup_dir / "memory.limit_in_bytes"),
    }
    stat = dict(line.split() for line in (cgroup_dir / "memory.stat").read_text().splitlines())
    for key in STAT_KEYS:
        out[key] = int(stat[key])
    out["working_set"] = out["usage"] - out["total_inactive_file"]
    out["headroom"] = out["limit"] - out["working_set"]
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            key, _, value = line.partition(":")
            if key in ("VmRSS", "RssAnon", "RssFile", "VmHWM"):
                out[key] = int(value.split()[0]) * 1024
    except FileNotFoundError:
        pass
    for line in Path("/proc/meminfo").read_text().splitlines():
        if line.startswith("MemAvailable:"):
            out["host_mem_available"] = int(line.split()[1]) * 1024
    return out


class Sampler(threading.Thread):
    def __init__(self, cgroup_dir: Path, pid: int) -> None:
        super().__init__(daemon=True)
        self.cgroup_dir, self.pid = cgroup_dir, pid
        self.maxima: dict[str, int] = {}
        self.minima: dict[str, int] = {}
        self.samples = 0
        self._halt = threading.Event()

    def run(self) -> None:
        while not self._halt.wait(0.1):
            try:
                snap = snapshot(self.cgroup_dir, self.pid)
            except (OSError, ValueError):
                continue
            self.samples += 1
            for key, value in snap.items():
                self.maxima[key] = max(self.maxima.get(key, value), value)
                self.minima[key] = min(self.minima.get(key, value), value)

    def stop(self) -> None:
        self._halt.set()
        self.join()


def prompt_text(words: int, salt: int) -> str:
    body = " ".join(WORDS[(i * 7 + salt) % len(WORDS)] for i in range(words))
    return f"Request {salt}. Summarise this log in one line.\n{body}"


def chat(sock: str, model: str, text: str, max_tokens: int, timeout: float) -> dict[str, Any]:
    conn = UnixHTTPConnection(sock, timeout)
    body = json.dumps(
        {
            "model": model,
            "messages": [{"role": "user", "content": text}],
            "max_tokens": max_tokens,
            "temperature": 0,
        }
    )
    started = time.monotonic()
    conn.request("POST", "/v1/chat/completions", body, {"Content-Type": "application/json"})
    response = conn.getresponse()
    payload = json.loads(response.read() or b"{}")
    conn.close()
    return {
        "status": response.status,
        "usage": payload.get("usage"),
        "error": (payload.get("error") or {}).get("code"),
        "wall_ms": int((time.monotonic() - started) * 1000),
    }


def worker_argv(args: argparse.Namespace, profile: Profile, sock: Path, records: Path) -> list[str]:
    """The trial's own `serve` arguments (worker.serve_args), with the overrides."""
    argv = serve_args(profile, str(args.gguf), args.sha256, str(records))
    overrides = {
        "--threads": args.threads,
        "--request-floor": args.request_floor,
        "--runtime-guard": args.runtime_guard,
    }
    for flag, value in overrides.items():
        if value is not None:
            argv[argv.index(flag) + 1] = str(value)
    return [sys.executable, "-I", "-m", "guest.worker", *argv, "--socket", str(sock)]


def measure(args: argparse.Namespace, argv: list[str], limit: int, sock: Path) -> dict[str, Any]:
    """Start the worker in its cgroup, send the requests, read everything, clean up."""
    # Its own parent, not "harness": `harness gc` (and tests that run it) sweep leftovers
    # under "harness" by name and would end a measurement that another user is running.
    cgroup = detect(parent="harness-memprobe").create(f"memprobe-{os.getpid()}")
    applied = cgroup.set_memory_limit(limit)
    cgroup_dir: Path = cgroup._dir("memory")  # type: ignore[attr-defined]  # v1, as documented
    env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "PYTHONPATH": str(REPO)}
    result: dict[str, Any] = {"argv": argv[3:], "limit_applied": applied.limit_bytes}
    started = time.monotonic()
    popen = spawn_in_cgroup(
        cgroup, argv, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, env=env
    )
    try:
        result["before_load"] = snapshot(cgroup_dir, popen.pid)
        sampler = Sampler(cgroup_dir, popen.pid)
        sampler.start()
        assert popen.stdout is not None
        result["ready_line"] = json.loads(popen.stdout.readline() or b"null")
        result["load_wall_ms"] = int((time.monotonic() - started) * 1000)
        time.sleep(1.0)
        result["loaded"] = snapshot(cgroup_dir, popen.pid)
        if args.activate:
            for _ in range(2):  # a second read of a cached page moves it to the active list
                reader = spawn_in_cgroup(cgroup, ["cat", str(args.gguf)], stdout=subprocess.DEVNULL)
                reader.wait()
            result["activated"] = snapshot(cgroup_dir, popen.pid)
        result["requests"] = []
        for index in range(args.requests):
            text = prompt_text(args.prompt_words, index)
            reply = chat(str(sock), result["ready_line"]["model"], text, args.max_tokens, 3600)
            time.sleep(0.5)
            reply["after"] = snapshot(cgroup_dir, popen.pid)
            result["requests"].append(reply)
            print(json.dumps({"progress": index, "reply": reply}), file=sys.stderr, flush=True)
        sampler.stop()
        result["maxima"], result["minima"] = sampler.maxima, sampler.minima
        result["samples"] = sampler.samples
        result["oom_control"] = (cgroup_dir / "memory.oom_control").read_text().split()
    finally:
        popen.terminate()
        try:
            popen.wait(30)
        except subprocess.TimeoutExpired:
            popen.kill()
            popen.wait()
        cgroup.kill_members()
        cgroup.remove()
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--gguf", type=Path, required=True)
    parser.add_argument("--sha256", required=True)
    parser.add_argument("--profile", default="qwen4b")
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--limit", type=int, help="worker cgroup limit (default: the profile's)")
    parser.add_argument("--request-floor", type=int, help="default: the profile's")
    parser.add_argument("--runtime-guard", type=int, help="default: the profile's")
    parser.add_argument("--prompt-words", type=int, default=1100)
    parser.add_argument("--max-tokens", type=int, default=16)
    parser.add_argument("--requests", type=int, default=2)
    parser.add_argument("--cold", action="store_true")
    parser.add_argument(
        "--activate",
        action="store_true",
        help="after load, read the GGUF twice inside the cgroup: weights on the active list",
    )
    args = parser.parse_args()
    profile = load_profile(args.profile)
    if args.cold:
        fd = os.open(args.gguf, os.O_RDONLY)
        os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
        os.close(fd)
    work = Path(tempfile.mkdtemp(prefix="qwen4b-mem-"))
    sock, records = work / "api.sock", work / "records.jsonl"
    limit = args.limit or profile.memory.worker_cgroup_limit
    result = measure(args, worker_argv(args, profile, sock, records), limit, sock)
    result["records"] = [json.loads(line) for line in records.read_text().splitlines()]
    print(json.dumps(result, indent=1))


if __name__ == "__main__":
    main()
