"""`synth serve`, `synth rollout` and `synth export`: using built environments."""

from __future__ import annotations

from enum import Enum
from pathlib import Path
from typing import Optional

import typer

from synth.cli import app, settings_from


@app.command()
def serve(
    dir: Path = typer.Argument(..., help="folder of env folders (generated/, generated/envs/ or one env)"),
    host: str = typer.Option("127.0.0.1", "--host", help="interface to listen on (0.0.0.0 for remote trainers)"),
    port: int = typer.Option(8000, "--port", help="TCP port"),
    max_episodes: int = typer.Option(256, "--max-episodes", help="live episodes at once; more answer 503"),
    idle_timeout: float = typer.Option(300.0, "--idle-timeout", help="seconds before an unused episode is closed"),
    workers: Optional[int] = typer.Option(None, "--workers", help="sandbox worker processes in all, each "
                                          "holding one env's code (default: one per env, at most 32)"),
    trusted: bool = typer.Option(False, "--trusted", help="run generated code in this process with no "
                                 "protection (only envs you wrote or reviewed)"),
    include_failed: bool = typer.Option(False, "--include-failed", help="also serve envs whose status is failed"),
    allowed_host: Optional[list[str]] = typer.Option(None, "--allowed-host", help="accepted Host header (repeat; "
                                                     "'name:*' = any port, '*' = any); default: loopback names"),
    allowed_origin: Optional[list[str]] = typer.Option(None, "--allowed-origin", help="accepted browser Origin "
                                                       "(repeat; '*' = any); default: loopback origins"),
    max_body_bytes: Optional[int] = typer.Option(None, "--max-body-bytes", help="largest request body (413 over)"),
    max_argument_bytes: Optional[int] = typer.Option(None, "--max-argument-bytes",
                                                     help="largest tool-call arguments (ok:false over)"),
    max_result_bytes: Optional[int] = typer.Option(None, "--max-result-bytes",
                                                   help="largest tool result (ok:false over)"),
    env_memory_mb: int = typer.Option(1024, "--env-memory-mb", help="address space of each env's worker process"),
) -> None:
    """Serve every env over REST (/docs) and MCP (/episodes/<id>/mcp), one isolated database per episode."""
    from synth.server.guard import ServerGuards, loopback_hosts, loopback_origins
    from synth.server.run import build, serve_forever

    settings = settings_from(max_body_bytes=max_body_bytes, max_argument_bytes=max_argument_bytes,
                             max_result_bytes=max_result_bytes)
    guards = ServerGuards(allowed_hosts=list(allowed_host or loopback_hosts()),
                          allowed_origins=list(allowed_origin or loopback_origins()),
                          max_body_bytes=settings.max_body_bytes)
    if not allowed_host and host not in ("127.0.0.1", "localhost", "::1"):
        typer.echo(f"note: listening on {host} but accepting only loopback Host headers; pass --allowed-host "
                   "NAME:* for each name trainers use (or '*')", err=True)
    server_app, loaded = build(dir, trusted=trusted, workers=workers, max_episodes=max_episodes,
                               idle_timeout=idle_timeout, include_failed=include_failed, guards=guards,
                               max_argument_bytes=settings.max_argument_bytes,
                               max_result_bytes=settings.max_result_bytes, env_memory_mb=env_memory_mb)
    for skipped in loaded.skipped:
        typer.echo(f"skipped {skipped['path']}: {skipped['reason']}", err=True)
    typer.echo(f"serving {len(loaded.envs)} env(s) ({', '.join(loaded.envs)}) on http://{host}:{port} "
               f"(REST docs /docs, MCP /episodes/<episode_id>/mcp)")
    serve_forever(server_app, host, port)


@app.command()
def rollout(
    dir: Path = typer.Argument(..., help="folder of env folders"),
    model: str = typer.Option(..., "--model", "-m", help="provider/model, e.g. openai/gpt-4.1-mini"),
    out: Path = typer.Option(..., "--out", "-o", help="trajectories JSONL (appended; reruns resume)"),
    base_url: Optional[str] = typer.Option(None, "--base-url", help="OpenAI-compatible server URL (vLLM, SGLang)"),
    tasks: Optional[int] = typer.Option(None, "--tasks", help="at most this many tasks per env"),
    concurrency: int = typer.Option(4, "--concurrency", help="episodes in flight"),
    max_turns: int = typer.Option(10, "--max-turns", help="model turns per episode"),
    window: Optional[int] = typer.Option(None, "--window", help="also write <out>.window.jsonl per-turn samples "
                                         "keeping only the last W turns"),
    split: Optional[str] = typer.Option(None, "--split", help="only tasks of this split (train/test)"),
    temperature: Optional[float] = typer.Option(None, "--temperature", help="sampling temperature"),
    max_cost: Optional[float] = typer.Option(None, "--max-cost", help="USD budget; no new episode starts after"),
    trusted: bool = typer.Option(False, "--trusted", help="run generated code in this process with no "
                                 "protection (only envs you wrote or reviewed)"),
) -> None:
    """Run a model as an agent on the envs' tasks and write trajectories with rewards."""
    from synth.rollout import rollout as run_rollout

    settings = settings_from(model=model, base_url=base_url, temperature=temperature, max_cost=max_cost)
    s = run_rollout(dir, settings, out, tasks=tasks, concurrency=concurrency, max_turns=max_turns, window=window,
                    split=split, trusted=trusted)
    for skipped in s.skipped_envs:
        typer.echo(f"skipped {skipped}", err=True)
    typer.echo(f"{out}: {s.written} written ({s.passed} passed, {s.failed} failed), {s.skipped} already done, "
               f"mean reward {s.mean_reward:.3f}; tokens {s.usage.get('prompt_tokens', 0)} in "
               f"{s.usage.get('completion_tokens', 0)} out")
    if s.window_out is not None:
        typer.echo(f"{s.window_out}: {s.window_samples} windowed samples (W={window})")
    if s.stopped:
        typer.echo(f"stopped early: {s.stopped}", err=True)


class ExportFormat(str, Enum):
    sft = "sft"
    verl = "verl"
    verifiers = "verifiers"
    awm = "awm"


class ArgumentsStyle(str, Enum):
    dict = "dict"
    json = "json"


@app.command("export")
def export_cmd(
    format: ExportFormat = typer.Argument(..., help="sft | verl | verifiers | awm"),
    dir: Path = typer.Argument(..., help="envs folder (verl, verifiers, awm) or trajectories JSONL/folder (sft)"),
    out: Path = typer.Option(..., "--out", "-o", help="output file (sft) or folder (others)"),
    include_failed: bool = typer.Option(False, "--include-failed", help="sft: also trajectories that did not pass"),
    arguments: ArgumentsStyle = typer.Option(ArgumentsStyle.dict, "--arguments",
                                             help="sft: tool-call arguments as dicts (TRL) or JSON strings"),
    server_url: str = typer.Option("http://127.0.0.1:8000", "--server-url",
                                   help="verl, verifiers: where `synth serve` runs during training"),
    name: str = typer.Option("synth-envs", "--name", help="verifiers: distribution / taskset id"),
    max_turns: int = typer.Option(10, "--max-turns", help="verl: model turns per trajectory (SYNTH_MAX_TURNS)"),
) -> None:
    """Export for a trainer: SFT rows, verl parquet + agent loop, a verifiers package, or AWM files."""
    from synth.export import export

    report = export(format.value, dir, out, include_failed=include_failed, arguments=arguments.value,
                    server_url=server_url, name=name, max_turns=max_turns)
    typer.echo(report)
