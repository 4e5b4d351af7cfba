"""Train a policy with TRL's GRPOTrainer on synth envs, through OpenEnv.

    synth serve generated/envs --port 8000            # in one terminal
    python examples/trl_grpo_openenv.py --server http://127.0.0.1:8000 --model Qwen/Qwen3-0.6B

Needs `pip install "synth[protocols]"` (openenv-core and TRL). The script uses TRL's
documented environment integration (`environment_factory`): every served env becomes
one environment class whose methods are the env's tools, built from the schemas
OpenEnv's `list_tools` returns; each method calls its tool through openenv-core's
MCPToolClient on the env's WebSocket session, and `reset(task_id=...)` opens the
episode of the dataset row's task. The prompt of a row is the task's system prompt
and instruction. The reward function submits the model's final message through the
answer tool and trains on the reward the server computes (`synth serve --reward`).

`--tiny` swaps the model for a randomly initialised two-layer Qwen3 built from a
config, with a byte-level tokenizer built here and TRL's own Qwen3 chat template:
nothing is downloaded, so the whole loop runs on a CPU in seconds (the test does this).
The last line printed is JSON: global step, loss and the rewards seen.
"""

from __future__ import annotations

import argparse
import inspect
import json
import math
from pathlib import Path
from typing import Any

import httpx

_PY_TYPES = {"string": str, "integer": int, "number": float, "boolean": bool}


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--server", default="http://127.0.0.1:8000", help="where `synth serve` runs")
    p.add_argument("--model", default="Qwen/Qwen3-0.6B", help="model id or folder (ignored with --tiny)")
    p.add_argument("--tiny", action="store_true", help="a tiny random model and offline tokenizer (smoke run)")
    p.add_argument("--split", default="train", choices=["train", "test"], help="which tasks to train on")
    p.add_argument("--envs", nargs="*", help="only these env ids (default: every served env)")
    p.add_argument("--max-steps", type=int, default=100)
    p.add_argument("--num-generations", type=int, default=4, help="rollouts per task (the GRPO group)")
    p.add_argument("--max-completion-length", type=int, default=1024, help="tokens over all turns of a rollout")
    p.add_argument("--max-tool-calls", type=int, default=10, help="tool-calling turns per rollout")
    p.add_argument("--learning-rate", type=float, default=1e-6)
    p.add_argument("--output-dir", default="outputs/grpo-synth")
    return p.parse_args(argv)


# ----------------------------------------------------------------------------- envs as TRL environments

def tool_method(name: str, description: str, schema: dict[str, Any]):
    """A method with a typed signature and a Google-style docstring: what TRL turns into the tool's schema."""
    props = schema.get("properties") or {}
    required = set(schema.get("required") or [])
    params = [inspect.Parameter("self", inspect.Parameter.POSITIONAL_OR_KEYWORD)]
    annotations: dict[str, Any] = {}
    lines = []
    for arg, spec in props.items():
        kind = _PY_TYPES.get(spec.get("type"), str)
        if spec.get("type") == "array":
            kind = list[_PY_TYPES.get((spec.get("items") or {}).get("type"), str)]
        optional = arg not in required
        annotations[arg] = kind | None if optional else kind
        params.append(inspect.Parameter(arg, inspect.Parameter.KEYWORD_ONLY, annotation=annotations[arg],
                                        default=None if optional else inspect.Parameter.empty))
        text = (spec.get("description") or arg.replace("_", " ")).replace("\n", " ")
        if spec.get("enum"):
            text += f" (one of: {', '.join(map(str, spec['enum']))})"
        lines.append(f"    {arg}: {text}")

    def method(self, **arguments):
        return self._call(name, {k: v for k, v in arguments.items() if v is not None})

    method.__name__ = method.__qualname__ = name
    method.__signature__ = inspect.Signature(params, return_annotation=str)
    method.__annotations__ = {**annotations, "return": str}
    args = "\n\nArgs:\n" + "\n".join(lines) if lines else ""
    method.__doc__ = f"{description.strip() or name}{args}\n\nReturns:\n    The tool's result as JSON."
    return method


class SynthOpenEnv:
    """Base of the per-env classes: one OpenEnv session (WebSocket) per instance."""

    base_url = ""  # <server>/openenv/<env_id>, set on each subclass
    answer_tool = "submit_answer"

    def __init__(self):
        from openenv.core import MCPToolClient

        self.client = MCPToolClient(base_url=self.base_url).sync()
        self.client.connect()
        self.reward: float | None = None

    def reset(self, **row: Any) -> None:
        self.reward = None
        self.client.reset(task_id=row["task_id"])
        return None  # the row's prompt already holds the instruction

    def _call(self, name: str, arguments: dict[str, Any]) -> str:
        # A failed call raises: TRL shows the model the error message as the tool's answer.
        return json.dumps(self.client.call_tool(name, **arguments), ensure_ascii=False, default=str)

    def _submit(self, answer: str) -> float:
        from openenv.core.env_server.mcp_types import CallToolAction

        result = self.client.step(CallToolAction(tool_name=self.answer_tool, arguments={"answer": answer}))
        if result.observation.error is not None:
            raise RuntimeError(f"submitting the answer failed: {result.observation.error.message}")
        self.reward = float(result.reward)
        return self.reward


def env_classes(server: str, env_ids: list[str]) -> tuple[dict[str, type], dict[str, str]]:
    """{env_id: environment class} and {env_id: system prompt}, read through OpenEnv."""
    from openenv.core import MCPToolClient

    classes, prompts = {}, {}
    for env_id in env_ids:
        base_url = f"{server}/openenv/{env_id}"
        with MCPToolClient(base_url=base_url).sync() as client:
            first = client.reset()
            prompts[env_id] = first.observation.metadata["system_prompt"]
            answer = first.observation.metadata["answer_tool"]
            tools = client.list_tools()
        methods = {t.name: tool_method(t.name, t.description, t.input_schema) for t in tools if t.name != answer}
        classes[env_id] = type(f"Env_{env_id}", (SynthOpenEnv,), {**methods, "base_url": base_url,
                                                                   "answer_tool": answer})
    return classes, prompts


def dataset_rows(server: str, split: str, only: list[str] | None) -> list[dict[str, Any]]:
    """One row per task: env, task id and instruction (from the REST listing of `synth serve`)."""
    listing = httpx.get(f"{server}/envs", timeout=60).raise_for_status().json()["envs"]
    return [{"environment": env["env_id"], "task_id": t["task_id"], "instruction": t["instruction"]}
            for env in listing if not only or env["env_id"] in only
            for t in env["tasks"] if t["split"] == split]


def final_answer(completion: Any) -> str:
    """The model's last message: what it says to the user is its answer."""
    if isinstance(completion, str):
        return completion
    said = [m.get("content") or "" for m in completion if m.get("role") == "assistant"]
    return said[-1] if said else ""


# ----------------------------------------------------------------------------- the tiny offline model

def tiny_model_and_tokenizer():
    """A random two-layer Qwen3 and a byte-level tokenizer with TRL's Qwen3 chat template."""
    import torch
    import trl
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers
    from transformers import PreTrainedTokenizerFast, Qwen3Config, Qwen3ForCausalLM

    alphabet = sorted(pre_tokenizers.ByteLevel.alphabet())  # the 256 byte symbols: any text encodes
    backend = Tokenizer(models.BPE(vocab={ch: i for i, ch in enumerate(alphabet)}, merges=[]))
    backend.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False)
    backend.decoder = decoders.ByteLevel()
    template = (Path(trl.__file__).parent / "chat_templates" / "qwen3.jinja").read_text()
    tokenizer = PreTrainedTokenizerFast(tokenizer_object=backend, eos_token="<|im_end|>", pad_token="<|endoftext|>",
                                        chat_template=template, padding_side="left")
    tokenizer.add_special_tokens({"additional_special_tokens": ["<|im_start|>"]})
    tokenizer.add_tokens(["<think>", "</think>", "<tool_call>", "</tool_call>", "<tool_response>",
                          "</tool_response>"])
    torch.manual_seed(0)
    config = Qwen3Config(vocab_size=len(tokenizer), hidden_size=32, intermediate_size=64, num_hidden_layers=2,
                         num_attention_heads=2, num_key_value_heads=1, head_dim=16, max_position_embeddings=65536,
                         tie_word_embeddings=True, eos_token_id=tokenizer.eos_token_id,
                         pad_token_id=tokenizer.pad_token_id, bos_token_id=None)
    return Qwen3ForCausalLM(config), tokenizer


# ----------------------------------------------------------------------------- training

def main(argv: list[str] | None = None) -> dict[str, Any]:
    args = parse_args(argv)
    from datasets import Dataset
    from transformers import TrainerCallback
    from trl import GRPOConfig, GRPOTrainer

    server = args.server.rstrip("/")
    rows = dataset_rows(server, args.split, args.envs)
    if not rows:
        raise SystemExit(f"error: no {args.split} task on {server} (is `synth serve` running on the envs?)")
    classes, prompts = env_classes(server, sorted({r["environment"] for r in rows}))
    dataset = Dataset.from_list([{"prompt": [{"role": "system", "content": prompts[r["environment"]]},
                                             {"role": "user", "content": r["instruction"]}],
                                  "environment": r["environment"], "task_id": r["task_id"]} for r in rows])
    seen: list[float] = []

    def synth_reward(completions: list[Any], environments: list[Any], **_: Any) -> list[float]:
        rewards = [env._submit(final_answer(c)) for c, env in zip(completions, environments)]
        seen.extend(rewards)
        return rewards

    losses: list[float] = []

    class KeepLoss(TrainerCallback):
        def on_log(self, _args, state, control, logs=None, **kwargs):
            if logs and "loss" in logs:
                losses.append(float(logs["loss"]))

    model, tokenizer = tiny_model_and_tokenizer() if args.tiny else (args.model, None)
    config = GRPOConfig(output_dir=args.output_dir, max_steps=args.max_steps, learning_rate=args.learning_rate,
                        per_device_train_batch_size=args.num_generations, num_generations=args.num_generations,
                        max_completion_length=args.max_completion_length,
                        max_tool_calling_iterations=args.max_tool_calls, logging_steps=1, save_strategy="no",
                        report_to="none", chat_template_kwargs={"enable_thinking": False},
                        **({"use_cpu": True, "bf16": False} if args.tiny else {}))
    trainer = GRPOTrainer(model=model, reward_funcs=synth_reward, args=config, train_dataset=dataset,
                          processing_class=tokenizer, environment_factory=classes, callbacks=[KeepLoss()])
    trainer.train()
    summary = {"global_step": trainer.state.global_step, "loss": losses[-1] if losses else None,
               "loss_finite": bool(losses) and all(math.isfinite(v) for v in losses), "rewards": seen,
               "envs": sorted(classes), "tasks": len(rows)}
    print(json.dumps(summary))
    return summary


if __name__ == "__main__":
    main()
