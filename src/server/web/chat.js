// ember web chat: streams /v1/chat/completions (SSE) with the settings of the side panel; no dependencies.
"use strict";
const $ = (id) => document.getElementById(id);
const history = [];   // the conversation: {role, content}
let controller = null; // AbortController of the reply in progress

function headers() {
  const h = { "Content-Type": "application/json" };
  const key = $("api_key").value.trim();
  if (key) h["Authorization"] = "Bearer " + key;
  return h;
}

function addMessage(role, text) {
  const div = document.createElement("div");
  div.className = "msg " + role;
  if (text !== undefined) div.textContent = text;
  $("messages").appendChild(div);
  div.scrollIntoView({ block: "end" });
  return div;
}

function numberSetting(id, body, key, parse) {
  const v = $(id).value.trim();
  if (v !== "") body[key] = parse(v);
}

function requestBody() {
  const messages = [];
  const sys = $("system").value.trim();
  if (sys) messages.push({ role: "system", content: sys });
  messages.push(...history);
  const body = { messages, stream: true, stream_options: { include_usage: true } };
  numberSetting("temperature", body, "temperature", parseFloat);
  numberSetting("top_p", body, "top_p", parseFloat);
  numberSetting("top_k", body, "top_k", (v) => parseInt(v, 10));
  numberSetting("min_p", body, "min_p", parseFloat);
  numberSetting("repetition_penalty", body, "repetition_penalty", parseFloat);
  numberSetting("max_tokens", body, "max_tokens", (v) => parseInt(v, 10));
  numberSetting("seed", body, "seed", (v) => parseInt(v, 10));
  body.chat_template_kwargs = { enable_thinking: $("thinking").checked };
  return body;
}

// One assistant bubble: a collapsible reasoning block (created on the first reasoning text) and the content.
function replyView() {
  const div = addMessage("assistant");
  const content = document.createElement("span");
  content.className = "content";
  const meta = document.createElement("span");
  meta.className = "meta";
  div.append(content, meta);
  let reasoning = null;
  return {
    div, content, meta,
    addReasoning(text) {
      if (!reasoning) {
        const d = document.createElement("details");
        d.className = "reasoning";
        d.open = true;
        d.innerHTML = "<summary>reasoning</summary><div></div>";
        div.insertBefore(d, content);
        reasoning = d.querySelector("div");
      }
      reasoning.textContent += text;
    },
  };
}

function showStats(view, s, done) {
  const now = performance.now();
  const gen = s.usage ? s.usage.completion_tokens : s.chunks;
  const secs = s.first ? (now - s.first) / 1000 : 0;
  const tps = secs > 0 && gen > 1 ? ((gen - 1) / secs).toFixed(1) : "–";
  const ttft = s.first ? ((s.first - s.start) / 1000).toFixed(2) + " s" : "–";
  const line = `${gen} tokens · ${tps} tok/s · first token ${ttft}` + (done ? ` · ${done}` : "");
  view.meta.textContent = line;
  $("stats").textContent = line;
}

async function send(text) {
  history.push({ role: "user", content: text });
  addMessage("user", text);
  const view = replyView();
  const s = { start: performance.now(), first: 0, chunks: 0, usage: null };
  controller = new AbortController();
  $("send").disabled = true;
  $("stop").disabled = false;
  let answer = "", finish = "";
  try {
    const res = await fetch("/v1/chat/completions", {
      method: "POST", headers: headers(), body: JSON.stringify(requestBody()), signal: controller.signal,
    });
    if (!res.ok) {
      let msg = res.status + " " + res.statusText;
      try { msg = (await res.json()).error.message; } catch (e) {}
      throw new Error(msg);
    }
    const reader = res.body.getReader();
    const decoder = new TextDecoder();
    let buf = "";
    for (;;) {
      const { value, done } = await reader.read();
      if (done) break;
      buf += decoder.decode(value, { stream: true });
      let cut;
      while ((cut = buf.indexOf("\n\n")) >= 0) {
        const event = buf.slice(0, cut);
        buf = buf.slice(cut + 2);
        for (const line of event.split("\n")) {
          if (!line.startsWith("data: ")) continue;
          const data = line.slice(6);
          if (data === "[DONE]") continue;
          const chunk = JSON.parse(data);
          if (chunk.error) throw new Error(chunk.error.message);
          if (chunk.usage) s.usage = chunk.usage;
          for (const c of chunk.choices || []) {
            const d = c.delta || {};
            if (d.reasoning_content) view.addReasoning(d.reasoning_content);
            if (d.content) { answer += d.content; view.content.textContent = answer; }
            if (d.content || d.reasoning_content) {
              if (!s.first) s.first = performance.now();
              s.chunks++;
            }
            if (c.finish_reason) finish = c.finish_reason;
          }
          showStats(view, s, "");
          view.div.scrollIntoView({ block: "end" });
        }
      }
    }
    showStats(view, s, finish ? "finish: " + finish : "");
  } catch (e) {
    if (e.name === "AbortError") showStats(view, s, "stopped");
    else addMessage("error", "Error: " + e.message);
  } finally {
    controller = null;
    $("send").disabled = false;
    $("stop").disabled = true;
    history.push({ role: "assistant", content: answer });
  }
}

$("composer").addEventListener("submit", (ev) => {
  ev.preventDefault();
  const text = $("input").value.trim();
  if (!text || controller) return;
  $("input").value = "";
  send(text);
});
$("input").addEventListener("keydown", (ev) => {
  if (ev.key === "Enter" && !ev.shiftKey) { ev.preventDefault(); $("composer").requestSubmit(); }
});
$("stop").addEventListener("click", () => { if (controller) controller.abort(); });
$("clear").addEventListener("click", () => {
  if (controller) controller.abort();
  history.length = 0;
  $("messages").textContent = "";
  $("stats").textContent = "";
});
$("api_key").value = localStorage.getItem("ember_api_key") || "";
$("api_key").addEventListener("change", () => localStorage.setItem("ember_api_key", $("api_key").value));
fetch("/v1/models", { headers: headers() })
  .then((r) => r.json())
  .then((j) => { $("model").textContent = j.data[0].id + " · context " + j.data[0].max_model_len; })
  .catch(() => { $("model").textContent = "(model list needs the API key)"; });
