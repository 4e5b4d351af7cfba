"""verl's agent-loop interface, for running the exported agent loop where verl itself
cannot be installed (it needs ray, CUDA-era torch pins, tensordict...).

This mirrors what verl's AgentLoopWorker does with an agent loop (verl
verl/experimental/agent_loop/agent_loop.py, main branch of early 2026), strictly
enough that a loop violating the interface fails here:
- the registry entry comes from agent_loop.yaml (`name`, `_target_`) and the class is
  built the way hydra.utils.instantiate does, with exactly verl's keyword arguments
  (trainer_config, server_manager, tokenizer, processor, dataset_cls, dataset_config);
- AgentLoopBase.__init__ computes `system_prompt` the way verl does, by rendering
  [{"role": "user", "content": ""}] (once and twice) through the chat template;
- the server manager's generate() is keyword-only past request_id and returns a
  TokenOutput; AgentLoopOutput and AgentLoopMetrics are pydantic models with verl's fields;
- after run(), the prompt must fit rollout.prompt_length and the response
  rollout.response_length (verl pads to those lengths; a longer one breaks the batch);
- the config is an OmegaConf DictConfig with verl's defaults (data.max_prompt_length=512,
  rollout.prompt_length = ${oc.select:data.max_prompt_length,512}, multi_turn defaults),
  overridden by key=value pairs as on verl's command line.
"""

from __future__ import annotations

import importlib
import re
import sys
import types
from abc import ABC, abstractmethod
from pathlib import Path
from typing import Any, Optional

from omegaconf import DictConfig, OmegaConf
from pydantic import BaseModel

VERL_DEFAULTS = {
    "data": {"max_prompt_length": 512, "max_response_length": 512, "truncation": "error", "return_raw_chat": True,
             "apply_chat_template_kwargs": {}, "train_files": None, "val_files": None},
    "actor_rollout_ref": {"rollout": {
        "mode": "async",
        "prompt_length": "${oc.select:data.max_prompt_length,512}",
        "response_length": "${oc.select:data.max_response_length,512}",
        "multi_turn": {"enable": False, "max_assistant_turns": None, "max_user_turns": None, "max_parallel_calls": 1,
                       "max_tool_response_length": 256, "tool_response_truncate_side": "middle", "format": "hermes"},
        "agent": {"num_workers": 8, "default_agent_loop": "single_turn_agent", "agent_loop_config_path": None},
    }},
}


def verl_config(overrides: list[str]) -> DictConfig:
    config = OmegaConf.create(VERL_DEFAULTS)
    return OmegaConf.merge(config, OmegaConf.from_dotlist([o.lstrip("+") for o in overrides]))


def readme_overrides(readme: str) -> list[str]:
    """The key=value arguments of the README's `python -m verl.trainer.main_ppo` command."""
    block = readme.split("<!-- verl-command -->", 1)[1].split("<!-- /verl-command -->", 1)[0]
    command = block.split("verl.trainer.main_ppo", 1)[1]
    return [tok for tok in command.replace("\\\n", " ").split() if re.match(r"^\+?[\w.]+=", tok)]


class AgentLoopMetrics(BaseModel):
    generate_sequences: float = 0.0
    tool_calls: float = 0.0
    num_preempted: int = -1


class AgentLoopOutput(BaseModel):
    prompt_ids: list[int]
    response_ids: list[int]
    response_mask: list[int]
    response_logprobs: Optional[list[float]] = None
    routed_experts: Optional[Any] = None
    multi_modal_data: Optional[dict[str, Any]] = None
    reward_score: Optional[float] = None
    num_turns: int = 0
    metrics: AgentLoopMetrics
    extra_fields: dict[str, Any] = {}


class TokenOutput(BaseModel):
    token_ids: list[int]
    log_probs: Optional[list[float]] = None
    routed_experts: Optional[Any] = None
    stop_reason: Optional[str] = None
    num_preempted: Optional[int] = None


class DictConfigWrap:
    def __init__(self, config: DictConfig):
        self.config = config


def _token_ids(tokenizer: Any, messages: list[dict], **kwargs: Any) -> list[int]:
    # verl calls apply_chat_template(tokenize=True) under transformers 4, which returns ids
    return list(tokenizer.apply_chat_template(messages, tokenize=True, return_dict=False, **kwargs))


def initialize_system_prompt(tokenizer: Any, **apply_chat_template_kwargs: Any) -> list[int]:
    one = _token_ids(tokenizer, [{"role": "user", "content": ""}], add_generation_prompt=False)
    two = _token_ids(tokenizer, [{"role": "user", "content": ""}] * 2, add_generation_prompt=False)
    return one[: -(len(two) - len(one))]


class AgentLoopBase(ABC):
    def __init__(self, trainer_config: DictConfigWrap, server_manager: Any, tokenizer: Any, processor: Any,
                 dataset_cls: Any, dataset_config: DictConfigWrap, **kwargs: Any):
        self.config = trainer_config.config
        self.server_manager = server_manager
        self.tokenizer = tokenizer
        self.processor = processor
        self.dataset_cls = dataset_cls
        self.dataset_config = dataset_config.config
        self.apply_chat_template_kwargs = self.dataset_config.get("apply_chat_template_kwargs", {})
        self.system_prompt = initialize_system_prompt(self.tokenizer, **self.apply_chat_template_kwargs)

    async def apply_chat_template(self, messages: list[dict], tools: list[dict] | None = None, images: Any = None,
                                  videos: Any = None, remove_system_prompt: bool = False) -> list[int]:
        ids = _token_ids(self.tokenizer, messages, tools=tools, add_generation_prompt=True,
                         **self.apply_chat_template_kwargs)
        return ids[len(self.system_prompt):] if remove_system_prompt else ids

    @abstractmethod
    async def run(self, sampling_params: dict[str, Any], **kwargs: Any) -> AgentLoopOutput:
        raise NotImplementedError


_agent_loop_registry: dict[str, dict] = {}


def register(agent_name: str):
    def decorator(subclass: type) -> type:
        _agent_loop_registry[agent_name] = {"_target_": f"{subclass.__module__}.{subclass.__qualname__}"}
        return subclass

    return decorator


def install(monkeypatch: Any) -> types.ModuleType:
    """Put the stand-in under verl.experimental.agent_loop.agent_loop for this test."""
    leaf = types.ModuleType("verl.experimental.agent_loop.agent_loop")
    for name in ("AgentLoopBase", "AgentLoopOutput", "AgentLoopMetrics", "DictConfigWrap", "register"):
        setattr(leaf, name, globals()[name])
    leaf._agent_loop_registry = _agent_loop_registry
    for name in ("verl", "verl.experimental", "verl.experimental.agent_loop"):
        monkeypatch.setitem(sys.modules, name, types.ModuleType(name))
    monkeypatch.setitem(sys.modules, leaf.__name__, leaf)
    return leaf


class ScriptedServer:
    """The rollout server manager: answers each generate() with the next scripted text, tokenized."""

    def __init__(self, tokenizer: Any, replies: list[str]):
        self.tokenizer, self.replies, self.prompts = tokenizer, list(replies), []

    async def generate(self, request_id: str, *, prompt_ids: list[int], sampling_params: dict[str, Any],
                       image_data: Any = None, video_data: Any = None) -> TokenOutput:
        self.prompts.append(list(prompt_ids))
        text = self.replies.pop(0) + self.tokenizer.eos_token
        return TokenOutput(token_ids=self.tokenizer.encode(text, add_special_tokens=False), num_preempted=0)


async def run_agent_loop(loop_dir: Path, config: DictConfig, tokenizer: Any, server: Any, row: dict[str, Any],
                         monkeypatch: Any) -> AgentLoopOutput:
    """What AgentLoopWorker._run_agent_loop does with one dataset row, then verl's padding checks."""
    install(monkeypatch)
    monkeypatch.syspath_prepend(str(loop_dir))
    for entry in OmegaConf.load(config.actor_rollout_ref.rollout.agent.agent_loop_config_path):
        _agent_loop_registry[entry.name] = entry
    target = _agent_loop_registry[row["agent_name"]]["_target_"]
    module_name, class_name = target.rsplit(".", 1)
    sys.modules.pop(module_name, None)
    cls = getattr(importlib.import_module(module_name), class_name)
    loop = cls(trainer_config=DictConfigWrap(config=config), server_manager=server, tokenizer=tokenizer,
               processor=None, dataset_cls=None, dataset_config=DictConfigWrap(config.data))
    kwargs = {"raw_prompt": row["prompt"], "extra_info": row["extra_info"], "data_source": row["data_source"],
              "reward_model": row["reward_model"], "index": row["extra_info"]["index"], "tools_kwargs": {}}
    output = await loop.run({"temperature": 1.0, "top_p": 1.0, "top_k": -1, "repetition_penalty": 1.0,
                             "logprobs": False}, **kwargs)
    assert isinstance(output, AgentLoopOutput), type(output)
    rollout = config.actor_rollout_ref.rollout
    if len(output.prompt_ids) > rollout.prompt_length:
        raise AssertionError(f"prompt_ids ({len(output.prompt_ids)}) longer than prompt_length "
                             f"({rollout.prompt_length}): verl cannot pad the batch")
    assert len(output.response_ids) == len(output.response_mask) <= rollout.response_length
    assert output.response_logprobs is None or len(output.response_logprobs) == len(output.response_ids)
    return output
