# Structured output and tool calls through `ember serve` with the official openai client: response_format
# (json_object, json_schema strict), llama-server's `grammar` (GBNF), tools + tool_choice. The independent checks are
# PyPI `jsonschema` (every reply against its schema, every tool call's arguments against the tool's parameters),
# `json.loads` and `re.fullmatch`; malformed schemas / grammars / tools must get a 4xx while the server keeps serving.
import json
import re
import shutil

import pytest

from conftest import FIXTURES, Server

openai = pytest.importorskip("openai")
jsonschema = pytest.importorskip("jsonschema")

MSG = [{"role": "user", "content": "Give me a JSON record describing a person."}]

SCHEMAS = [
    {"type": "object", "properties": {"name": {"type": "string", "maxLength": 20},
                                      "age": {"type": "integer", "minimum": 0, "maximum": 120}},
     "required": ["name", "age"], "additionalProperties": False},
    {"type": "object", "properties": {"color": {"enum": ["red", "green", "blue"]}, "ok": {"type": "boolean"}},
     "required": ["color", "ok"], "additionalProperties": False},
    {"type": "array", "items": {"type": "object", "properties": {"id": {"type": "integer"}},
                                "required": ["id"], "additionalProperties": False},
     "minItems": 1, "maxItems": 3},
    {"type": "object", "properties": {"when": {"type": "string", "format": "date"},
                                      "code": {"type": "string", "pattern": "^[A-Z]{3}-[0-9]{2}$"},
                                      "note": {"anyOf": [{"type": "string", "maxLength": 10}, {"type": "null"}]}},
     "required": ["when", "code", "note"], "additionalProperties": False},
    {"$defs": {"node": {"type": "object", "properties": {"v": {"type": "number", "exclusiveMinimum": 0},
                                                         "kids": {"type": "array", "items": {"$ref": "#/$defs/node"},
                                                                  "maxItems": 2}},
                        "required": ["v"], "additionalProperties": False}},
     "$ref": "#/$defs/node"},
]


def validate(obj, schema):
    jsonschema.validate(obj, schema, format_checker=jsonschema.FormatChecker())


def schema_format(schema, name="record"):
    return {"type": "json_schema", "json_schema": {"name": name, "schema": schema, "strict": True}}


@pytest.mark.parametrize("i", range(len(SCHEMAS)))
def test_json_schema_replies_validate(client, i):
    schema = SCHEMAS[i]
    for temperature, seed in ((0, None), (1.0, 7 + i)):
        r = client.chat.completions.create(model="", messages=MSG, response_format=schema_format(schema),
                                           temperature=temperature, seed=seed, max_tokens=96)
        c = r.choices[0]
        assert c.finish_reason in ("stop", "length")
        validate(json.loads(c.message.content), schema)  # also when max_tokens ran out: the grammar closed it


def test_json_object_and_streaming(client):
    kw = dict(model="", messages=MSG, response_format={"type": "json_object"}, temperature=0, max_tokens=64)
    whole = client.chat.completions.create(**kw).choices[0].message.content
    assert isinstance(json.loads(whole), dict)
    parts = [ch.choices[0].delta.content or "" for ch in client.chat.completions.create(**kw, stream=True) if ch.choices]
    assert "".join(parts) == whole


def test_completions_endpoint_and_gbnf(client):
    r = client.completions.create(model="", prompt="A person as JSON:", max_tokens=64, temperature=0,
                                  extra_body={"json_schema": SCHEMAS[0]})
    validate(json.loads(r.choices[0].text), SCHEMAS[0])
    gbnf = 'root ::= item ("," item){0,3}\nitem ::= [0-9]{1,3} | "yes" | "no"\n'
    for seed in range(3):
        r = client.chat.completions.create(model="", messages=MSG, temperature=1.0, seed=seed, max_tokens=24,
                                           extra_body={"grammar": gbnf})
        assert re.fullmatch(r"([0-9]{1,3}|yes|no)(,([0-9]{1,3}|yes|no)){0,3}", r.choices[0].message.content)


def test_cut_by_max_tokens_is_length_but_parses(client):
    schema = {"type": "object", "properties": {"story": {"type": "string"}}, "required": ["story"]}
    r = client.chat.completions.create(model="", messages=MSG, response_format=schema_format(schema),
                                       temperature=0, max_tokens=12)
    assert r.choices[0].finish_reason == "length"
    assert r.usage.completion_tokens <= 12
    validate(json.loads(r.choices[0].message.content), schema)


def test_invalid_schemas_and_grammars_are_400(client):
    cases = [
        (dict(response_format=schema_format({"type": "frob"})), "response_format", "matches nothing"),
        (dict(response_format=schema_format({"type": "object", "not": {"required": ["a"]}})), "response_format", "not"),
        (dict(response_format=schema_format({"$ref": "#/$defs/missing"})), "response_format", "missing"),
        (dict(response_format={"type": "json_schema", "json_schema": {"name": "x"}}), "response_format", "schema"),
        (dict(extra_body={"grammar": "root ::= undefined-rule"}), "grammar", "undefined"),
        (dict(response_format={"type": "json_object"}, extra_body={"grammar": 'root ::= "a"'}), "response_format",
         "at most one"),
    ]
    for extra, param, word in cases:
        with pytest.raises(openai.BadRequestError) as e:
            client.chat.completions.create(model="", messages=MSG, max_tokens=4, **extra)
        assert e.value.status_code == 400
        assert e.value.body["param"] == param, e.value.body
        assert word in e.value.body["message"], e.value.body


def deep_schema_text(n):
    """A schema nested n objects deep, as JSON text (deeper than Python's json module recurses)."""
    return '{"type": "object", "properties": {"a": ' * n + '{"type": "integer"}' + "}}" * n


def test_hostile_structured_requests_get_4xx(server):
    deep = ('{"messages": [{"role": "user", "content": "x"}], "max_tokens": 2, "response_format": {"type": '
            '"json_schema", "json_schema": {"name": "d", "schema": ' + deep_schema_text(3000) + "}}}").encode()
    status, body = server.post("/v1/chat/completions", deep)
    assert 400 <= status < 500 and body["error"]["message"], (status, body)
    bodies = [
        {"response_format": schema_format({"$ref": "#"})},
        {"response_format": schema_format({"$defs": {"a": {"$ref": "#/$defs/b"}, "b": {"$ref": "#/$defs/a"}},
                                           "$ref": "#/$defs/a"})},
        {"response_format": schema_format({"allOf": [{"$ref": "#"}]})},
        {"response_format": schema_format({"type": "string", "pattern": "(a|b" * 200})},
        {"response_format": schema_format({"type": "string", "minLength": 10**9})},
        {"response_format": schema_format({"type": "array", "minItems": 10**9})},
        {"grammar": "root ::= " + "(" * 5000 + '"a"' + ")" * 4999},
        {"grammar": "root ::= a\na ::= b\nb ::= a"},
        {"grammar": "root ::= root"},
        {"tools": [{"type": "function", "function": {"name": "f", "parameters": {"type": "object", "not": {}}}}],
         "tool_choice": "required"},
        {"tools": [{"type": "function", "function": {"name": "f" * 65}}]},
        {"tools": [{"type": "function", "function": {"name": "f"}}] * 2},
        {"tools": [{"type": "function", "function": {"name": "f", "x": 1}}]},
        {"tools": [{"type": "function", "function": {"name": "f"}}], "response_format": {"type": "json_object"}},
        {"tool_choice": "required"},
        {"tools": [{"type": "function", "function": {"name": "f"}}], "tool_choice": {"type": 5}},
        {"tools": [{"type": "function", "function": {"name": "f"}}], "tool_choice": {"type": "function", "function": 5}},
        {"response_format": {"type": "json_object"}, "ignore_eos": True},
    ]
    for b in bodies:
        status, body = server.post("/v1/chat/completions", dict(b, messages=MSG, max_tokens=2))
        assert 400 <= status < 500, (str(b)[:200], status, body)
        assert body["error"]["message"]
    assert server.get("/health")[0] == 200
    status, _ = server.post("/v1/chat/completions", {"messages": MSG, "max_tokens": 2,
                                                       "response_format": {"type": "json_object"}})
    assert status == 200


# ---- tool calls (the Qwen3.5 fixture's random weights under a tool template: the grammar makes the calls; the
# Qwen3 template writes <tool_call> JSON, Llama 3.2 bare JSON, Qwen3.5 its <tool_call><function=...> XML) ----

TOOLS = [
    {"type": "function", "function": {
        "name": "get_weather", "description": "Current weather of a city",
        "parameters": {"type": "object", "properties": {"city": {"type": "string"},
                                                        "unit": {"enum": ["c", "f"]}},
                       "required": ["city", "unit"], "additionalProperties": False}}},
    {"type": "function", "function": {
        "name": "add", "parameters": {"type": "object", "properties": {"a": {"type": "integer"}, "b": {"type": "integer"}},
                                      "required": ["a", "b"], "additionalProperties": False}}},
]
PARAMS = {t["function"]["name"]: t["function"]["parameters"] for t in TOOLS}
ASK = [{"role": "user", "content": "What is the weather in Paris?"}]


def template_server(qwen35_dir, tmp_path_factory, template, name):
    d = tmp_path_factory.mktemp(name)
    for f in qwen35_dir.iterdir():
        shutil.copy(f, d / f.name)
    (d / "chat_template.jinja").write_text(json.load(open(FIXTURES / f"templates/real_{template}.json"))["template"])
    return Server(d, "--max-seqs", "2", name=name)


@pytest.fixture(scope="module", params=[("qwen3", "qwen"), ("llama-3.2-instruct", "llama3"),
                                                      ("qwen3.5", "qwen35-xml")], ids=lambda p: p[1])
def tool_client(request, qwen35_dir, tmp_path_factory):
    s = template_server(qwen35_dir, tmp_path_factory, request.param[0], "tools-" + request.param[1])
    yield openai.OpenAI(base_url=s.url + "/v1", api_key="unused", max_retries=0, timeout=300), s
    assert s.stop() == 0


def check_calls(calls, names):
    assert calls, "no tool call parsed"
    for c in calls:
        assert c.type == "function" and c.id
        assert c.function.name in names
        validate(json.loads(c.function.arguments), PARAMS[c.function.name])


def test_tool_choice_required_and_named(tool_client):
    client, _ = tool_client
    for choice, names in (("required", {"get_weather", "add"}),
                          ({"type": "function", "function": {"name": "add"}}, {"add"})):
        for seed in range(2):
            r = client.chat.completions.create(model="", messages=ASK, tools=TOOLS, tool_choice=choice,
                                               temperature=1.0, seed=seed, max_tokens=160,
                                               parallel_tool_calls=False)
            c = r.choices[0]
            check_calls(c.message.tool_calls, names)
            assert len(c.message.tool_calls) == 1
            assert c.finish_reason in ("tool_calls", "length")


def test_streamed_tool_calls_reassemble_to_the_whole(tool_client):
    client, _ = tool_client
    kw = dict(model="", messages=ASK, tools=TOOLS, tool_choice="required", temperature=0, max_tokens=160)
    whole = client.chat.completions.create(**kw).choices[0]
    calls, finish = {}, None
    for ch in client.chat.completions.create(**kw, stream=True):
        if not ch.choices:
            continue
        finish = ch.choices[0].finish_reason or finish
        for d in ch.choices[0].delta.tool_calls or []:
            if d.index not in calls:  # the first delta of a call: id, type, name
                assert d.id and d.type == "function" and d.function.name
                calls[d.index] = {"name": d.function.name, "arguments": d.function.arguments or ""}
            else:
                assert d.id is None and not d.function.name
                calls[d.index]["arguments"] += d.function.arguments or ""
    got = [calls[i] for i in sorted(calls)]
    want = [{"name": c.function.name, "arguments": c.function.arguments} for c in whole.message.tool_calls]
    assert got == want and finish == whole.finish_reason
    check_calls(whole.message.tool_calls, {"get_weather", "add"})


def test_tool_auto_and_history_render(tool_client):
    client, _ = tool_client
    history = ASK + [
        {"role": "assistant", "content": None, "tool_calls": [
            {"id": "call_1", "type": "function",
             "function": {"name": "get_weather", "arguments": json.dumps({"city": "Paris", "unit": "c"})}}]},
        {"role": "tool", "tool_call_id": "call_1", "content": "21 degrees, sunny"},
        {"role": "user", "content": "And in Rome?"}]
    for seed in range(3):
        r = client.chat.completions.create(model="", messages=history, tools=TOOLS, temperature=1.0, seed=seed,
                                           max_tokens=48)
        m = r.choices[0].message
        if m.tool_calls:  # auto: whatever the model chose, a call it makes follows its schema
            check_calls(m.tool_calls, {"get_weather", "add"})
        else:
            assert isinstance(m.content, str)
    r = client.chat.completions.create(model="", messages=history, tools=TOOLS, tool_choice="none", max_tokens=8)
    assert r.choices[0].message.tool_calls is None


def test_tools_refused_without_template_support(client, qwen35_dir):
    with pytest.raises(openai.BadRequestError) as e:  # SmolLM2's template renders no tools
        client.chat.completions.create(model="", messages=ASK, tools=TOOLS, max_tokens=4)
    assert e.value.body["param"] == "tools" and "tool support" in e.value.body["message"]


def test_xml_form_refuses_string_constraints_it_cannot_enforce(tool_client):
    client, server = tool_client
    if "xml" not in server.log_path.name:
        pytest.skip("the XML tool-call form only")
    tools = [{"type": "function", "function": {"name": "f", "parameters": {
        "type": "object", "properties": {"s": {"type": "string", "maxLength": 3}}}}}]
    with pytest.raises(openai.BadRequestError) as e:
        client.chat.completions.create(model="", messages=ASK, tools=tools, tool_choice="required", max_tokens=4)
    assert e.value.body["param"] == "tools" and "maxLength" in e.value.body["message"]
