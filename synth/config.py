"""One settings object. Precedence: defaults < synth.toml < SYNTH_* env vars < CLI flags.

Secrets (API keys) are never stored on the object: providers read them from
OPENAI_API_KEY / ANTHROPIC_API_KEY when they are created, so the resolved
config can be written into a run folder as it is.
"""

from __future__ import annotations

import os
import tomllib
from pathlib import Path
from typing import Any, Literal, get_args

from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from synth.errors import SynthError

CONFIG_FILE = "synth.toml"
ENV_PREFIX = "SYNTH_"


class ConfigError(SynthError):
    """Bad configuration; the message says which source and key to fix."""


class Settings(BaseModel):
    model_config = ConfigDict(extra="forbid", validate_assignment=True)

    # model gateway
    model: str | None = Field(None, description="provider/model, e.g. openai/gpt-4.1-mini")
    base_url: str | None = Field(None, description="OpenAI-compatible server URL (vLLM, SGLang, Ollama)")
    temperature: float = Field(0.7, description="sampling temperature of every model call")
    max_tokens: int = Field(8192, ge=256, description="the model's output cap, in tokens; stage budgets stay within it")
    concurrency: int = Field(8, ge=1, description="max requests in flight per provider")
    timeout: float = Field(120.0, gt=0, description="seconds per model request")
    max_attempts: int = Field(6, ge=1, description="attempts per request on retryable errors")
    retry_base_delay: float = Field(1.0, ge=0, description="first backoff in seconds (doubles, with jitter)")
    max_retry_seconds: float = Field(600.0, gt=0, description="total time a request may spend retrying")
    repair_turns: int = Field(2, ge=0, description="turns that feed a validation error back to the model")
    max_invalid_streak: int = Field(20, ge=0, description="stop the run once this many answers in a row of one "
                                    "stage fail validation (the model ignores the answer format); 0 = never")
    max_cost: float | None = Field(None, ge=0, description="USD budget; no new call starts once reached")
    prices_file: Path | None = Field(None, description="JSON price table overriding the bundled one")
    cache_dir: Path = Field(Path("generated/.cache"),
                            description="model-call and embedding cache folder")
    no_cache: bool = Field(False, description="neither read nor write the model-call cache")
    replay_file: Path | None = Field(None, description="recorded responses for the replay provider")
    judge_model: str | None = Field(None, description="provider/model of the checking agent (default: --model)")
    judge_base_url: str | None = Field(None, description="server URL of the judge model, when it is not the API's")

    # runs
    out: Path = Field(Path("generated"), description="output folder (envs/, runs/)")
    run_id: str | None = Field(None, description="name the run (default: derived from the command's inputs)")
    build_attempts_per_env: float = Field(
        3.0, ge=1, description="`synth run -n N` builds at most N x this many scenarios before it stops short")

    # scenarios
    dedup_threshold: float = Field(0.64, gt=0, le=1, description="cosine similarity of a duplicate (see docs/dedup.md)")
    dedup_borderline: float = Field(0.09, ge=0, description="band below the threshold: quota / judge decide")
    max_stall_rounds: int = Field(3, ge=1, description="rounds in a row without a new scenario before a seed "
                                  "counts as exhausted")

    # build / verify
    parallel_envs: int = Field(4, ge=1, description="scenarios built and verified at the same time")
    build_repair_rounds: int = Field(3, ge=0, description="repair rounds per build stage fed with concrete errors")
    check_rounds: int = Field(3, ge=1, description="test / judge / repair rounds of the check loop")
    verifier_rounds: int = Field(2, ge=1, description="rounds the check loop may add past --check-rounds to repair "
                                 "and recheck verifiers the reward agents or gates blame (a finding always gets a "
                                 "repair)")
    task_repairs: int = Field(2, ge=1, description="verifier repairs a task gets in the check loop; a task still "
                              "blamed after them is set aside (no more repairs or reward agents) and dropped at the "
                              "end, when at least half the env's tasks remain")
    check_pass_rate: float = Field(0.95, ge=0, le=1, description="share of check-loop tests that must pass")
    tool_timeout: float = Field(5.0, gt=0, description="wall-clock seconds per sandboxed tool call")
    probe_threshold: float = Field(0.5, gt=0, le=1, description="an exploit probe (or a red-team attempt) "
                                   "scoring at least this much fails its task's verifier")
    probe_margin: float = Field(0.25, ge=0, le=1, description="a probe must also score at least this much "
                                "under the gold solution's reward")

    # tasks from templates (synth tasks, and synth run after verification)
    templates: int = Field(12, ge=0, description="task templates asked per verified env, half read and half write "
                           "(0: `synth run` adds none)")
    per_template: int = Field(40, ge=1, description="instances at most made of one template per run")
    template_sample: int = Field(1, ge=0, description="instances of each template the reward agents check")

    # executor
    executor: Literal["local", "ray"] = Field(
        "local", description="where each env is built and verified: local (this process) or ray (Ray tasks on "
        "any node of a cluster; pip install \"synth[ray]\")")
    ray_address: str | None = Field(None, description="the Ray cluster to run on with --executor ray: HOST:PORT of "
                                    "its head, or auto (default: RAY_ADDRESS, else a new local Ray instance)")
    env_attempts: int = Field(3, ge=1, description="attempts per env when the worker building it is lost (node "
                              "lost, out of memory, killed) under --executor ray")

    @model_validator(mode="before")
    @classmethod
    def _cache_follows_out(cls, data: Any) -> Any:
        """Unless set, the cache lives in the output folder: `--out /x` leaves ./generated alone."""
        if isinstance(data, dict) and data.get("cache_dir") is None:
            data = {**data, "cache_dir": Path(data.get("out") or cls.model_fields["out"].default) / ".cache"}
        return data

    # sandbox and server limits
    allow_weak_sandbox: bool = Field(False, description="mark envs verified even when the sandbox's OS layer "
                                     "(seccomp, Landlock, network namespace) cannot be set up here")
    max_argument_bytes: int = Field(1 << 20, ge=1024, description="largest tool-call arguments (pickled bytes)")
    max_result_bytes: int = Field(4 << 20, ge=1024, description="largest tool result (JSON bytes)")
    max_body_bytes: int = Field(8 << 20, ge=1024, description="largest HTTP request body `synth serve` accepts")

    def public_dict(self) -> dict[str, Any]:
        """JSON-able dict without secrets (there are none on the object by design)."""
        return self.model_dump(mode="json")


def _coerce(field: str, raw: str) -> Any:
    """Turn a SYNTH_* string into something pydantic can validate for `field`."""
    annotation = Settings.model_fields[field].annotation
    kinds = set(get_args(annotation)) or {annotation}
    if bool in kinds:
        return raw.strip().lower() in {"1", "true", "yes", "on"}
    if raw == "" and type(None) in kinds:
        return None
    return raw


def load_settings(
    cli: dict[str, Any] | None = None,
    *,
    cwd: Path | None = None,
    environ: dict[str, str] | None = None,
) -> Settings:
    """Resolve settings from all sources. CLI values of None mean 'not given'."""
    return resolve_settings(cli, cwd=cwd, environ=environ)[0]


def resolve_settings(
    cli: dict[str, Any] | None = None,
    *,
    cwd: Path | None = None,
    environ: dict[str, str] | None = None,
    flag_names: dict[str, str] | None = None,
) -> tuple[Settings, dict[str, str]]:
    """Settings and, per field, where its value came from: default, synth.toml, SYNTH_X or the flag
    (named by `flag_names`, else --field-name)."""
    cwd = cwd or Path.cwd()
    environ = os.environ if environ is None else environ
    merged: dict[str, Any] = {}
    sources = {field: "default" for field in Settings.model_fields}

    toml_path = cwd / CONFIG_FILE
    if toml_path.exists():
        try:
            data = tomllib.loads(toml_path.read_text())
        except tomllib.TOMLDecodeError as exc:
            raise ConfigError(f"{toml_path}: invalid TOML ({exc}); fix or remove the file") from exc
        data = data.get("synth", data)
        unknown = sorted(set(data) - set(Settings.model_fields))
        if unknown:
            raise ConfigError(f"{toml_path}: unknown key(s) {', '.join(unknown)}; `synth config` lists the "
                              "settings keys")
        merged.update(data)
        sources.update({key: CONFIG_FILE for key in data})

    for field in Settings.model_fields:
        key = ENV_PREFIX + field.upper()
        if key in environ:
            merged[field] = _coerce(field, environ[key])
            sources[field] = key

    given = {k: v for k, v in (cli or {}).items() if v is not None}
    merged.update(given)
    names = flag_names or {}
    sources.update({key: "flag " + names.get(key, "--" + key.replace("_", "-")) for key in given})
    if sources["cache_dir"] == "default" and sources["out"] != "default":
        sources["cache_dir"] = "default (<out>/.cache)"
    try:
        return Settings(**merged), sources
    except ValidationError as exc:
        err = exc.errors()[0]
        where = ".".join(str(p) for p in err["loc"])
        raise ConfigError(f"setting {where!r}: {err['msg']} (got {err.get('input')!r})") from exc
