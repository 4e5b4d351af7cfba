"""Builds the two small chat tokenizers the verl export tests use (no hub download):

  llama_style/  byte-level BPE with Llama-3.1-style header tokens and a chat template that,
                like Llama 3.1/3.2's, puts the tools into the first user message and fails on a
                message without a role
  qwen_style/   byte-level BPE with ChatML tokens where <tool_call> and </tool_call> are
                *special* tokens (decoding with skip_special_tokens=True drops them), and a
                template that, like recent Qwen ones, raises "No user query found in messages."
                when no user message is given and honours enable_thinking=False

Both templates are written here for the tests (behaviourally modelled on those families,
not copied). Rerun after changing them:  python tests/data/tokenizers/build.py
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
from transformers import PreTrainedTokenizerFast

HERE = Path(__file__).parent
sys.path.insert(0, str(HERE.parent.parent))  # tests/, for envkit

LLAMA_TEMPLATE = """{{- bos_token }}
{%- if messages and messages[0]['role'] == 'system' %}
    {%- set system_text = messages[0]['content'] | trim %}
    {%- set rest = messages[1:] %}
{%- else %}
    {%- set system_text = '' %}
    {%- set rest = messages %}
{%- endif %}
{{- '<|start_header_id|>system<|end_header_id|>\\n\\nEnvironment: test\\n\\n' + system_text + '<|eot_id|>' }}
{%- if tools is not none %}
    {%- if rest | length == 0 %}{{- raise_exception('Tools go into the first user message, and there is none.') }}{%- endif %}
    {{- '<|start_header_id|>user<|end_header_id|>\\n\\nYou may call these functions; answer with JSON.\\n\\n' }}
    {%- for tool in tools %}{{- tool | tojson(indent=4) + '\\n\\n' }}{%- endfor %}
    {{- rest[0]['content'] | trim + '<|eot_id|>' }}
    {%- set rest = rest[1:] %}
{%- endif %}
{%- for message in rest %}
    {%- if message['role'] == 'tool' or message['role'] == 'ipython' %}
        {{- '<|start_header_id|>ipython<|end_header_id|>\\n\\n' + message['content'] + '<|eot_id|>' }}
    {%- elif message['role'] == 'assistant' and message.tool_calls %}
        {{- '<|start_header_id|>assistant<|end_header_id|>\\n\\n' }}
        {%- for call in message.tool_calls %}{{- '<|python_tag|>' + call.function | tojson }}{%- endfor %}
        {{- '<|eom_id|>' }}
    {%- else %}
        {{- '<|start_header_id|>' + message['role'] + '<|end_header_id|>\\n\\n' + message['content'] | trim + '<|eot_id|>' }}
    {%- endif %}
{%- endfor %}
{%- if add_generation_prompt %}{{- '<|start_header_id|>assistant<|end_header_id|>\\n\\n' }}{%- endif %}"""

QWEN_TEMPLATE = """{%- set ns = namespace(has_query=false) %}
{%- for message in messages %}
    {%- if message.role == 'user' and message.content is string %}{%- set ns.has_query = true %}{%- endif %}
{%- endfor %}
{%- if not ns.has_query %}{{- raise_exception('No user query found in messages.') }}{%- endif %}
{%- if messages[0].role == 'system' %}
    {{- '<|im_start|>system\\n' + messages[0].content }}
    {%- set rest = messages[1:] %}
{%- else %}
    {{- '<|im_start|>system\\nYou are a helpful assistant.' }}
    {%- set rest = messages %}
{%- endif %}
{%- if tools %}
    {{- '\\n\\n# Tools\\n\\n<tools>' }}
    {%- for tool in tools %}{{- '\\n' + tool | tojson }}{%- endfor %}
    {{- '\\n</tools>\\n\\nCall a function with <tool_call>{"name": <name>, "arguments": <object>}</tool_call>.' }}
{%- endif %}
{{- '<|im_end|>\\n' }}
{%- for message in rest %}
    {%- if message.role == 'tool' %}
        {%- if loop.first or rest[loop.index0 - 1].role != 'tool' %}{{- '<|im_start|>user' }}{%- endif %}
        {{- '\\n<tool_response>\\n' + message.content + '\\n</tool_response>' }}
        {%- if loop.last or rest[loop.index0 + 1].role != 'tool' %}{{- '<|im_end|>\\n' }}{%- endif %}
    {%- else %}
        {{- '<|im_start|>' + message.role + '\\n' + (message.content or '') }}
        {%- for call in message.tool_calls or [] %}
            {{- '\\n<tool_call>\\n' + call.function | tojson + '\\n</tool_call>' }}
        {%- endfor %}
        {{- '<|im_end|>\\n' }}
    {%- endif %}
{%- endfor %}
{%- if add_generation_prompt %}
    {{- '<|im_start|>assistant\\n' }}
    {%- if enable_thinking is defined and enable_thinking is false %}{{- '<think>\\n\\n</think>\\n\\n' }}{%- endif %}
{%- endif %}"""

LLAMA_SPECIAL = ["<|begin_of_text|>", "<|end_of_text|>", "<|start_header_id|>", "<|end_header_id|>", "<|eot_id|>",
                 "<|eom_id|>", "<|python_tag|>"]
QWEN_SPECIAL = ["<|endoftext|>", "<|im_start|>", "<|im_end|>", "<tool_call>", "</tool_call>", "<tool_response>",
                "</tool_response>"]


def corpus() -> list[str]:
    from envkit import SCHEMA_SQL, TASKS, TOOLS, library_draft

    draft = library_draft()
    texts = [draft.scenario.description, SCHEMA_SQL, "You are an assistant working inside an application."]
    texts += [json.dumps(t.model_dump()) for t in TOOLS] + [t.instruction for t in TASKS]
    texts += ['{"name": "search_books", "arguments": {"query": "Dune"}}', "error: the book is not available"]
    return texts * 3


def build(folder: str, special: list[str], template: str, bos: str | None, eos: str) -> None:
    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=600, special_tokens=special,
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet(), show_progress=False)
    tok.train_from_iterator(corpus(), trainer)
    fast = PreTrainedTokenizerFast(tokenizer_object=tok, bos_token=bos, eos_token=eos, pad_token=eos,
                                   additional_special_tokens=[t for t in special if t not in (bos, eos)])
    fast.chat_template = template
    fast.save_pretrained(HERE / folder)


if __name__ == "__main__":
    build("llama_style", LLAMA_SPECIAL, LLAMA_TEMPLATE, "<|begin_of_text|>", "<|eot_id|>")
    build("qwen_style", QWEN_SPECIAL, QWEN_TEMPLATE, None, "<|im_end|>")
    print("wrote", ", ".join(sorted(str(p.relative_to(HERE)) for p in HERE.rglob("*") if p.is_file())))
