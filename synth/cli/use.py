"""`synth serve`, `synth rollout` and `synth export`: using built environments."""

from __future__ import annotations

from enum import Enum
from pathlib import Path
from typing import Optional

import typer

from synth.cli.app import app
from synth.cli.options import settings_options
from synth.config import Settings
from synth.errors import InputError


class Split(str, Enum):
    train = "train"
    test = "test"


class RewardKind(str, Enum):
    rubric = "rubric"
    state = "state"
    both = "both"


REWARD_HELP = ("the reward: rubric (the verifier's weighted checks), state (the final database equals the gold "
               "solution's, every table, volatile columns aside; a read task's answer states the expected facts), "
               "or both (the rubric's score when the state matches, else 0)")


def check_port(host: str, port: int) -> None:
    """A bad or busy port is a one-line error before anything is loaded or "serving" is printed."""
    import socket

    if not 1 <= port <= 65535:
        raise InputError(f"--port {port} is not a TCP port; pass 1-65535")
    try:
        infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)
    except socket.gaierror as exc:
        raise InputError(f"--host {host!r} cannot be resolved ({exc.strerror})") from None
    family, kind, proto, _, address = infos[0]
    with socket.socket(family, kind, proto) as probe:
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # as uvicorn binds
        try:
            probe.bind(address)
        except OSError as exc:
            raise InputError(f"cannot listen on {host}:{port} ({exc.strerror}); pick another --port") from None


@app.command()
@settings_options("max_body_bytes", "max_argument_bytes", "max_result_bytes")
def serve(
    settings: Settings,
    dir: Path = typer.Argument(..., help="folder of env folders (generated/, generated/envs/ or one env)"),
    host: str = typer.Option("127.0.0.1", "--host", help="interface to listen on (0.0.0.0 for remote trainers)"),
    port: int = typer.Option(8000, "--port", help="TCP port"),
    max_episodes: int = typer.Option(256, "--max-episodes", help="live episodes at once; more answer 503"),
    idle_timeout: float = typer.Option(300.0, "--idle-timeout", help="seconds before an unused episode is closed"),
    workers: int = typer.Option(1, "--workers", help="server processes sharing the port; each request goes to "
                                "the one that owns its episode"),
    sandbox_workers: Optional[int] = typer.Option(None, "--sandbox-workers", help="sandbox worker processes for "
                                                  "tools in each server process, each holding one env's code "
                                                  "(default: one per env, at least 2, at most 32); as many more "
                                                  "run verifiers"),
    trusted: bool = typer.Option(False, "--trusted", help="run generated code in this process with no "
                                 "protection (only envs you wrote or reviewed)"),
    include_failed: bool = typer.Option(False, "--include-failed", help="also serve envs whose status is failed"),
    include_rejected: bool = typer.Option(False, "--include-rejected", help="also serve envs rejected in review.json"),
    allowed_host: Optional[list[str]] = typer.Option(None, "--allowed-host", help="accepted Host header (repeat; "
                                                     "'name:*' = any port, '*' = any); default: loopback names"),
    allowed_origin: Optional[list[str]] = typer.Option(None, "--allowed-origin", help="accepted browser Origin "
                                                       "(repeat; '*' = any); default: loopback origins"),
    env_memory_mb: int = typer.Option(1024, "--env-memory-mb", help="address space of each env's worker process"),
    reward: RewardKind = typer.Option(RewardKind.rubric, "--reward",
                                      help=REWARD_HELP + "; a request's own \"reward\" field wins"),
) -> None:
    """Serve every env over REST (/docs), MCP (/episodes/<id>/mcp), OpenEnv (/openenv/<env_id>) and ORS, one
    isolated database per episode."""
    from synth.use.server.guard import ServerGuards, loopback_hosts, loopback_origins
    from synth.use.server.run import build, serve_forever

    if workers < 1:
        raise InputError("--workers must be at least 1")
    check_port(host, port)
    guards = ServerGuards(allowed_hosts=list(allowed_host or loopback_hosts()),
                          allowed_origins=list(allowed_origin or loopback_origins()),
                          max_body_bytes=settings.max_body_bytes)
    if not allowed_host and host not in ("127.0.0.1", "localhost", "::1"):
        typer.echo(f"note: listening on {host} but accepting only loopback Host headers; pass --allowed-host "
                   "NAME:* for each name trainers use (or '*')", err=True)
    options = dict(trusted=trusted, workers=sandbox_workers, max_episodes=max_episodes, idle_timeout=idle_timeout,
                   include_failed=include_failed, include_rejected=include_rejected,
                   max_argument_bytes=settings.max_argument_bytes, max_result_bytes=settings.max_result_bytes,
                   env_memory_mb=env_memory_mb, reward=reward.value)

    def serving(envs: list[str], skipped: list[dict], processes: str = "") -> None:
        for skip in skipped:
            typer.echo(f"skipped {skip['path']}: {skip['reason']}", err=True)
        typer.echo(f"serving {len(envs)} env(s) ({', '.join(envs)}) on http://{host}:{port}{processes} "
                   f"(REST docs /docs, MCP /episodes/<episode_id>/mcp, OpenEnv /openenv/<env_id>, ORS at the root)")

    if workers > 1:
        from synth.use.server.processes import Supervisor

        supervisor = Supervisor(dir, workers, host, port, options,
                                {"allowed_hosts": guards.allowed_hosts, "allowed_origins": guards.allowed_origins,
                                 "max_body_bytes": guards.max_body_bytes}, say=lambda m: typer.echo(m, err=True))
        supervisor.run(lambda r: serving(r["envs"], r["skipped"], f" with {workers} server processes"))
        return
    server_app, loaded = build(dir, guards=guards, **options)
    serving(list(loaded.envs), loaded.skipped)
    serve_forever(server_app, host, port)


@app.command()
@settings_options("model")
def rollout(
    settings: Settings,
    dir: Path = typer.Argument(..., help="folder of env folders"),
    out: Path = typer.Option(..., "--out", "-o", help="trajectories JSONL (appended; reruns resume)"),
    tasks: Optional[int] = typer.Option(None, "--tasks", help="at most this many tasks per env"),
    concurrency: int = typer.Option(4, "--concurrency", help="episodes in flight"),
    max_turns: int = typer.Option(10, "--max-turns", help="model turns per episode"),
    window: Optional[int] = typer.Option(None, "--window", help="also write <out>.window.jsonl per-turn samples "
                                         "keeping only the last W turns"),
    split: Optional[Split] = typer.Option(None, "--split", help="only tasks of this split"),
    trusted: bool = typer.Option(False, "--trusted", help="run generated code in this process with no "
                                 "protection (only envs you wrote or reviewed)"),
    reward: RewardKind = typer.Option(RewardKind.rubric, "--reward", help=REWARD_HELP),
    include_rejected: bool = typer.Option(False, "--include-rejected", help="also roll out envs rejected in "
                                          "review.json"),
) -> None:
    """Run a model as an agent on the envs' tasks and write trajectories with rewards."""
    from synth.cli.model import preflight
    from synth.folder.dirs import find_env_dirs
    from synth.use.rollout import rollout as run_rollout

    if settings.model is None:
        raise InputError("no model: pass --model provider/model, the agent to roll out (e.g. openai/gpt-4.1-mini)")
    find_env_dirs(dir)  # a wrong folder is named before the model is asked anything
    # As `synth run` does: a missing key or an unreachable --base-url is one line now, not an error per episode.
    typer.echo(f"model check: {preflight(settings, before='any episode')}", err=True)
    s = run_rollout(dir, settings, out, tasks=tasks, concurrency=concurrency, max_turns=max_turns, window=window,
                    split=split.value if split else None, trusted=trusted, reward=reward.value,
                    include_rejected=include_rejected)
    for skipped in s.skipped_envs:
        typer.echo(f"skipped {skipped}", err=True)
    scored = len(s.rewards)  # episodes that ended with a reward; errored ones have none
    mean = f"mean reward {s.mean_reward:.3f} over {scored}" if scored else "no reward (no episode was scored)"
    typer.echo(f"{out}: {s.written} written ({s.passed} passed, {scored - s.passed} not passed, {s.failed} errored), "
               f"{s.skipped} already done, {mean}; tokens {s.usage.get('prompt_tokens', 0)} in "
               f"{s.usage.get('completion_tokens', 0)} out")
    if s.written + s.skipped == 0 and not s.stopped:
        typer.echo(f"no task to run: no env under {dir} has tasks" + (f" in split {split.value!r}" if split else ""),
                   err=True)
    if s.window_out is not None:
        typer.echo(f"{s.window_out}: {s.window_samples} windowed samples (W={window})")
    if s.stopped:
        typer.echo(f"stopped early: {s.stopped}", err=True)
    if s.failed:
        typer.echo(f"{s.failed} episode(s) errored (their error is in {out}); rerun the same command to retry them",
                   err=True)
        raise typer.Exit(1)


class ExportFormat(str, Enum):
    sft = "sft"
    verl = "verl"
    verifiers = "verifiers"
    awm = "awm"


class ArgumentsStyle(str, Enum):
    dict = "dict"
    json = "json"


class SftSource(str, Enum):
    trajectories = "trajectories"
    gold = "gold"


@app.command("export")
def export_cmd(
    format: ExportFormat = typer.Argument(..., help="sft | verl | verifiers | awm"),
    dir: Path = typer.Argument(..., help="envs folder (verl, verifiers, awm, sft --from gold) or trajectories "
                               "JSONL/folder (sft)"),
    out: Path = typer.Option(..., "--out", "-o", help="output file (sft) or folder (others)"),
    source: SftSource = typer.Option(SftSource.trajectories, "--from",
                                     help="sft: rows from rollout trajectories, or from the tasks' gold solutions "
                                          "replayed on the envs (no model needed)"),
    include_failed: bool = typer.Option(False, "--include-failed", help="sft: also trajectories that did not pass"),
    include_rejected: bool = typer.Option(False, "--include-rejected",
                                          help="also envs a reviewer rejected (review.json)"),
    arguments: ArgumentsStyle = typer.Option(ArgumentsStyle.dict, "--arguments",
                                             help="sft: tool-call arguments as dicts (TRL) or JSON strings"),
    server_url: str = typer.Option("http://127.0.0.1:8000", "--server-url",
                                   help="verl, verifiers: where `synth serve` runs during training"),
    name: str = typer.Option("synth-envs", "--name", help="verifiers: distribution / taskset id"),
    max_turns: int = typer.Option(10, "--max-turns", help="verl: model turns per trajectory"),
    tokenizer: Optional[str] = typer.Option(None, "--tokenizer",
                                            help="verl, sft: the tokenizer of the model you train (local folder or "
                                                 "model id) to count tokens exactly with its chat template; default: "
                                                 "the bundled Qwen3 one, with a margin"),
    max_prompt_length: Optional[int] = typer.Option(None, "--max-prompt-length",
                                                    help="verl: data.max_prompt_length for the README command "
                                                         "(default: the longest prompt, rounded up); warns when a "
                                                         "prompt is longer"),
    max_response_length: Optional[int] = typer.Option(None, "--max-response-length",
                                                      help="verl: data.max_response_length (default 8192)"),
    reward: RewardKind = typer.Option(RewardKind.rubric, "--reward",
                                      help="verl, verifiers, sft --from gold: " + REWARD_HELP),
    pass_rate: Optional[str] = typer.Option(None, "--pass-rate", help="only tasks whose calibrated pass rate "
                                            "(synth calibrate) lies in LO:HI, e.g. 0.1:0.9"),
) -> None:
    """Export for a trainer: SFT rows, verl parquet + agent loop, a verifiers package, or AWM files."""
    from synth.cli.tasks import pass_band
    from synth.use.export import export

    if format is ExportFormat.sft and out.is_dir():
        raise InputError(f"--out {out} is a folder; sft writes one JSONL file, pass a file path")
    if format is not ExportFormat.sft and out.exists() and not out.is_dir():
        raise InputError(f"--out {out} is a file; {format.value} writes a folder, pass a folder path")
    report = export(format.value, dir, out, include_failed=include_failed, arguments=arguments.value,
                    server_url=server_url, name=name, max_turns=max_turns, source=source.value,
                    include_rejected=include_rejected, tokenizer=tokenizer, max_prompt_length=max_prompt_length,
                    max_response_length=max_response_length, reward=reward.value, pass_rate=pass_band(pass_rate))
    for line in report.splitlines():
        typer.echo(line, err=line.startswith("warning:"))
