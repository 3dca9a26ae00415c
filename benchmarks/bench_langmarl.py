"""LangMARL against a loopback OpenAI-compatible server with a fixed latency, side by side.

(1) Concurrency of one update: N=4 agents, K=4 scripted Pistonball trajectories. An update
makes K critic + K*N gradient + N aggregate + N optimize calls (4 + 16 + 4 + 4 = 28) in four
dependent stages, so with every stage's calls in flight at once it should take about 4 L,
not 28 L. The same update with a limiter of 1 (every call one at a time) is the measured
sequential baseline. Target: (calls x L) / wall >= 5x.
(2) Replays cost nothing: a tiny LangMARL run (babyai/goto-obj, 2 agents, 2 iterations of 2
rollouts) counted in server requests: the first run; the same config into a new directory
with the same response cache; ``--resume`` of the finished run; and a run killed (SIGKILL)
during its first gradient stage, with the cache off, then resumed: a call the killed run
had already been answered for must not be made again. Target: 0, 0 and 0 repeated calls.
Usage: python benchmarks/bench_langmarl.py [--latency 0.2]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import re
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections import Counter
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any, Self

if __package__ in (None, ""):  # run as a script from a source checkout
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from marlang.agents import CallContext
from marlang.config import build_config
from marlang.envs import make as make_env
from marlang.learners import LearnerContext, PolicyState
from marlang.methods.langmarl.learner import LangMARLLearner, LangMARLOptions
from marlang.models import UsageRecorder, load_chat_model
from marlang.run import Experiment
from marlang.types import Decision, Step, Trajectory

N_AGENTS = 4
K_TRAJECTORIES = 4
EPISODE_STEPS = 5
AGENTS = [f"agent_{i}" for i in range(N_AGENTS)]
_KEYS = re.compile(r"keys are exactly ([^;.]+)[;.]")


# the loopback server ------------------------------------------------------------------------

def _text(content: Any) -> str:
    if isinstance(content, list):  # content blocks
        return "".join(b.get("text", "") if isinstance(b, dict) else str(b) for b in content)
    return str(content or "")


def request_role(body: dict[str, Any]) -> str:
    """Which LangMARL (or actor) call a request body is, from its prompt."""
    messages = body.get("messages") or []
    last_user = next((_text(m.get("content")) for m in reversed(messages) if m.get("role") == "user"), "")
    if "read a whole episode" in last_user or "keys are exactly" in last_user:
        return "critic"
    if "Turn this assessment" in last_user:
        return "gradient"
    if "Merge them into one update direction" in last_user:
        return "aggregator"
    if "Write the improved policy" in last_user:
        return "optimizer"
    if any("Action:" in _text(m.get("content")) for m in messages):
        return "actor"
    return "other"


def reply_for(body: dict[str, Any]) -> str:
    role = request_role(body)
    if role == "critic":
        messages = body.get("messages") or []
        last_user = next(_text(m.get("content")) for m in reversed(messages) if m.get("role") == "user")
        found = _KEYS.search(last_user)
        keys = [k.strip() for k in found.group(1).split(",")] if found else []
        return json.dumps({k: f"{k} moved usefully but wasted a step; act sooner." for k in keys})
    return {
        "gradient": "Keep moving toward the goal; stop waiting when the path is clear.",
        "aggregator": "Keep moving toward the goal and never wait when the path is clear.",
        "optimizer": "Move straight toward the goal; do not wait when the path is clear.",
        "actor": "The target is ahead.\nAction: go forward",
    }.get(role, "Noted.")


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    request_queue_size = 128  # the listen backlog: a stage's calls all connect at once


class LatencyChatServer:
    """An OpenAI-compatible chat-completions server on 127.0.0.1 that answers every request
    after ``latency`` seconds, each in its own thread (so concurrent requests overlap).

    ``records`` holds one dict per request: the body, its canonical ``key`` (sorted JSON),
    ``role``, the ``phase`` the benchmark was in when it arrived, and ``answered_at`` (the
    monotonic time its reply was fully written, or None). ``gradient_seen`` is set at the
    first gradient request.
    """

    def __init__(self, latency: float) -> None:
        self.latency = latency
        self.phase = "idle"
        self.records: list[dict[str, Any]] = []
        self.gradient_seen = threading.Event()
        self._lock = threading.Lock()
        self._server: ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None

    @property
    def base_url(self) -> str:
        assert self._server is not None
        host, port = self._server.server_address[:2]
        return f"http://{host}:{port}/v1"

    def count(self, phase: str) -> int:
        with self._lock:
            return sum(1 for r in self.records if r["phase"] == phase)

    def of_phase(self, phase: str) -> list[dict[str, Any]]:
        with self._lock:
            return [r for r in self.records if r["phase"] == phase]

    def __enter__(self) -> Self:
        self._server = _Server(("127.0.0.1", 0), self._handler_class())
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)
        self._thread.start()
        return self

    def __exit__(self, *exc_info: object) -> None:
        assert self._server is not None and self._thread is not None
        self._server.shutdown()
        self._server.server_close()
        self._thread.join()

    def _arrive(self, body: dict[str, Any]) -> dict[str, Any]:
        record = {"key": json.dumps(body, sort_keys=True), "role": request_role(body),
                  "arrived_at": time.monotonic(), "answered_at": None}
        with self._lock:
            record["phase"] = self.phase
            record["index"] = len(self.records)
            self.records.append(record)
        if record["role"] == "gradient":
            self.gradient_seen.set()
        return record

    def _handler_class(self) -> type[BaseHTTPRequestHandler]:
        server = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                try:
                    body = json.loads(self.rfile.read(int(self.headers.get("Content-Length", 0))))
                except (OSError, ValueError):  # a request cut off by the killed run
                    self.send_error(400)
                    return
                record = server._arrive(body)
                time.sleep(server.latency)
                text = reply_for(body)
                prompt_tokens = sum(len(_text(m.get("content")).split()) for m in body.get("messages") or [])
                data = json.dumps({
                    "id": f"chatcmpl-{record['index']}", "object": "chat.completion", "created": 0,
                    "model": body.get("model", "bench"),
                    "choices": [{"index": 0, "message": {"role": "assistant", "content": text},
                                 "finish_reason": "stop"}],
                    "usage": {"prompt_tokens": prompt_tokens, "completion_tokens": len(text.split()),
                              "total_tokens": prompt_tokens + len(text.split())},
                }).encode()
                try:
                    self.send_response(200)
                    self.send_header("Content-Type", "application/json")
                    self.send_header("Content-Length", str(len(data)))
                    self.end_headers()
                    self.wfile.write(data)
                    self.wfile.flush()
                except OSError:  # the client is gone (the killed run)
                    return
                record["answered_at"] = time.monotonic()

            def log_message(self, format: str, *args: Any) -> None:
                pass

        return Handler


# (1) one update: concurrent vs one call at a time -------------------------------------------

def scripted_trajectories(env_id: str = "pistonball") -> list[Trajectory]:
    """K short episodes of the env's scripted team, recorded as the episode graph records them."""
    env = make_env(env_id, n_agents=N_AGENTS, max_steps=EPISODE_STEPS)
    team = env.scripted_team()
    out = []
    for episode in range(K_TRAJECTORIES):
        observations, _ = env.reset(seed=episode)
        team.reset()
        steps: list[Step] = []
        success = False
        for t in range(EPISODE_STEPS):
            actions = team.act(observations)
            next_obs, rewards, terms, truncs, infos = env.step(actions)
            step_success = any(bool(i.get("success")) for i in infos.values())
            success = success or step_success
            steps.append(Step(
                t=t, observations=observations, messages=[],
                decisions={a: Decision(action=act, raw="(scripted)") for a, act in actions.items()},
                rewards={a: float(r) for a, r in rewards.items()},
                terminated=any(terms.values()), truncated=any(truncs.values()),
                info={"success": step_success},
                infos={a: dict(i) for a, i in infos.items()},
                terminations={a: bool(v) for a, v in terms.items()},
                truncations={a: bool(v) for a, v in truncs.items()},
            ))
            observations = next_obs
            if any(terms.values()) or any(truncs.values()) or not next_obs:
                break
        out.append(Trajectory(episode=episode, seed=episode, env_id=env_id, protocol="scripted",
                              agents=list(env.possible_agents), steps=steps, success=success,
                              final_observations=dict(observations or {})))
    env.close()
    return out


async def _timed_update(model: Any, env: Any, trajectories: list[Trajectory], limit: int) -> tuple[float, Any]:
    recorder = UsageRecorder()
    ctx = LearnerContext(agents=AGENTS, model=model,
                         call=CallContext(callbacks=[recorder], limiter=asyncio.Semaphore(limit)), env=env)
    learner = LangMARLLearner(LangMARLOptions(), ctx)
    state = PolicyState(policies={a: "initial policy" for a in AGENTS}, versions={a: 0 for a in AGENTS})
    start = time.perf_counter()
    candidate = await learner.update(state, trajectories)
    elapsed = time.perf_counter() - start
    assert candidate.counters.get("credit_failures") == 0, candidate.counters
    assert sorted(candidate.policies) == AGENTS, candidate.policies
    return elapsed, candidate


def bench_update(server: LatencyChatServer, latency: float, repeats: int = 3) -> dict[str, float]:
    """Wall time of one update with every call free to overlap (median of ``repeats``, after a
    warm-up) and with a limiter of 1 (once: it is ~28 L long and varies little)."""
    trajectories = scripted_trajectories()
    env = make_env("pistonball", n_agents=N_AGENTS, max_steps=EPISODE_STEPS)  # narrates the episodes
    model = load_chat_model("openai:bench", base_url=server.base_url, max_retries=0, timeout=30)
    figures: dict[str, float] = {}
    try:
        runs = [("warmup", 64)] + [(f"concurrent{i}", 64) for i in range(repeats)] + [("sequential", 1)]
        for label, limit in runs:
            server.phase = f"update-{label}"
            elapsed, _ = asyncio.run(_timed_update(model, env, trajectories, limit))
            figures[f"{label}_s"] = elapsed
            figures[f"{label}_calls"] = server.count(server.phase)
    finally:
        env.close()
    walls = sorted(figures[f"concurrent{i}_s"] for i in range(repeats))
    figures["concurrent_s"] = statistics.median(walls)
    figures["concurrent_min_s"], figures["concurrent_max_s"] = walls[0], walls[-1]
    calls = figures["concurrent0_calls"]
    assert all(figures[f"{label}_calls"] == calls for label, _ in runs), figures
    figures["calls"] = calls
    figures["sum_latency_s"] = calls * latency
    figures["bound_ratio"] = figures["sum_latency_s"] / figures["concurrent_s"]
    figures["measured_ratio"] = figures["sequential_s"] / figures["concurrent_s"]
    return figures


# (2) replays: cache rerun, resume of a finished run, resume after a kill -----------------------

_CHILD = (
    "import json, sys\n"
    "from marlang.config import build_config\n"
    "from marlang.run import Experiment\n"
    "Experiment(build_config(json.loads(sys.argv[1])), sys.argv[2]).run()\n"
)


def _experiment_dict(base_url: str, cache_path: Path, cache: bool) -> dict[str, Any]:
    return {
        "env": {"id": "babyai/goto-obj", "n_agents": 2, "max_steps": 3},
        "model": {"spec": "openai:bench", "base_url": base_url, "cache": cache, "cache_path": str(cache_path),
                  "max_retries": 0},
        "protocol": {"name": "none"},
        "learning": {"method": "langmarl", "rollouts": 2, "iterations": 2},
        "run": {"name": "bench-langmarl", "progress": False},
    }


def _run(server: LatencyChatServer, phase: str, config: Any, out: Path, resume: bool = False) -> tuple[int, int]:
    """(requests the server saw, episodes played) for one in-process run."""
    server.phase = phase
    result = Experiment(config, out, resume=resume).run()
    return server.count(phase), result.episodes_run


def bench_replays(server: LatencyChatServer, tmp: Path) -> dict[str, Any]:
    cache_path = tmp / "responses.sqlite"
    cached = build_config(_experiment_dict(server.base_url, cache_path, cache=True))
    figures: dict[str, Any] = {}
    figures["first_calls"], figures["first_episodes"] = _run(server, "first", cached, tmp / "first")
    figures["rerun_calls"], figures["rerun_episodes"] = _run(server, "rerun", cached, tmp / "rerun")
    figures["resume_done_calls"], figures["resume_done_episodes"] = _run(
        server, "resume-finished", cached, tmp / "first", resume=True)

    # Killed mid-update (cache off), then resumed in this process.
    raw = _experiment_dict(server.base_url, cache_path, cache=False)
    killed_dir = tmp / "killed"
    server.phase = "killed"
    server.gradient_seen.clear()
    log_path = tmp / "killed.log"
    with log_path.open("w") as log:
        proc = subprocess.Popen([sys.executable, "-c", _CHILD, json.dumps(raw), str(killed_dir)],
                                stdout=log, stderr=subprocess.STDOUT)
        try:
            deadline = time.monotonic() + 90
            while not server.gradient_seen.wait(0.02):
                if proc.poll() is not None or time.monotonic() > deadline:
                    raise RuntimeError(f"the run to kill ended or stalled before its gradient stage "
                                       f"(rc={proc.poll()}):\n{log_path.read_text()[-3000:]}")
        finally:
            proc.kill()  # SIGKILL
            proc.wait()
    killed_at = time.monotonic()
    time.sleep(server.latency + 0.2)  # let the killed run's in-flight handlers finish
    killed = server.of_phase("killed")
    answered = {r["key"] for r in killed if r["answered_at"] is not None and r["answered_at"] < killed_at}
    in_flight = {r["key"] for r in killed} - answered
    figures["killed_calls"] = len(killed)
    figures["killed_answered"] = sum(1 for r in killed if r["key"] in answered)
    figures["killed_roles"] = Counter(r["role"] for r in killed)
    episodes_file = killed_dir / "episodes.jsonl"
    figures["killed_episodes_on_disk"] = (
        sum(1 for line in episodes_file.read_text().splitlines() if line.strip()) if episodes_file.is_file() else 0)
    calls, episodes = _run(server, "resume-killed", build_config(raw), killed_dir, resume=True)
    resumed = server.of_phase("resume-killed")
    repeated = [r for r in resumed if r["key"] in answered]
    figures["resume_killed_calls"], figures["resume_killed_episodes"] = calls, episodes
    figures["resume_roles"] = Counter(r["role"] for r in resumed)
    figures["repeated_calls"] = len(repeated)
    figures["repeated_roles"] = Counter(r["role"] for r in repeated)
    figures["resent_in_flight"] = sum(1 for r in resumed if r["key"] in in_flight)
    return figures


def _roles(counter: Counter) -> str:
    order = ("actor", "critic", "gradient", "aggregator", "optimizer", "other")
    return ", ".join(f"{role} {counter[role]}" for role in order if counter.get(role)) or "none"


def main(latency: float = 0.2) -> dict[str, Any]:
    with LatencyChatServer(latency) as server, tempfile.TemporaryDirectory(prefix="bench-langmarl-") as tmp:
        update = bench_update(server, latency)
        replays = bench_replays(server, Path(tmp))

    u = update
    print(f"one LangMARL update (N={N_AGENTS} agents, K={K_TRAJECTORIES} pistonball trajectories of "
          f"{EPISODE_STEPS} steps, loopback server, latency L={latency:g} s per call)")
    print(f"  calls: {u['calls']:.0f} (expected {K_TRAJECTORIES} + {K_TRAJECTORIES * N_AGENTS} + "
          f"{N_AGENTS} + {N_AGENTS} = {K_TRAJECTORIES + K_TRAJECTORIES * N_AGENTS + 2 * N_AGENTS}); "
          f"sum of latencies {u['sum_latency_s']:.2f} s; critical path 4 L = {4 * latency:.2f} s")
    print(f"  limiter 64 (concurrent): {u['concurrent_s']:.2f} s wall (median of 3: "
          f"{u['concurrent_min_s']:.2f}..{u['concurrent_max_s']:.2f}; {u['concurrent_s'] - 4 * latency:.2f} s "
          "over 4 L)")
    print(f"  limiter 1 (sequential):  {u['sequential_s']:.2f} s wall")
    print(f"  speedup, sum of latencies / concurrent wall: {u['bound_ratio']:.2f}x  (target >= 5x)")
    print(f"  speedup, measured sequential / concurrent:   {u['measured_ratio']:.2f}x")

    r = replays
    print("\nreplays (babyai/goto-obj, 2 agents, 3 steps, langmarl 2 iterations x 2 rollouts, protocol none)")
    print(f"  (a) first run:                          {r['first_calls']} requests, {r['first_episodes']} episodes")
    print(f"  (b) rerun, new dir, same cache:         {r['rerun_calls']} requests, {r['rerun_episodes']} episodes"
          "  (target 0 requests)")
    print(f"  (c) resume of the finished run:         {r['resume_done_calls']} requests, "
          f"{r['resume_done_episodes']} episodes  (target 0, 0)")
    print("  (d) cache off, SIGKILL at the first gradient request, then resume:")
    print(f"      killed run: {r['killed_calls']} requests ({_roles(r['killed_roles'])}), "
          f"{r['killed_answered']} answered, {r['killed_episodes_on_disk']} episodes on disk")
    print(f"      resume: {r['resume_killed_calls']} requests ({_roles(r['resume_roles'])}), "
          f"{r['resume_killed_episodes']} episodes; {r['resent_in_flight']} re-sent calls that were in flight")
    print(f"      repeated calls after resume (identical body already answered): {r['repeated_calls']}"
          f"{' (' + _roles(r['repeated_roles']) + ')' if r['repeated_calls'] else ''}  (target 0)")
    return {"update": update, "replays": replays}


if __name__ == "__main__":
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--latency", type=float, default=0.2, help="seconds the server waits before each reply")
    a = ap.parse_args()
    main(a.latency)
