// The session page's chat: the agent's events (the stream `svc sessions chat` follows) appended as they come,
// messages and aborts sent with the page's CSRF token. Without JavaScript the forms still post.
const chat = document.getElementById("chat");
const transcript = document.getElementById("transcript");
const form = document.getElementById("chat-form");
const abortForm = document.getElementById("abort-form");
const state = document.getElementById("agent-state");
const csrf = chat.dataset.csrf;

let reply = null;

function line(kind, text) {
  const item = document.createElement("li");
  item.className = kind;
  item.textContent = text;
  transcript.append(item);
  item.scrollIntoView({ block: "end" });
  return item;
}

function show(event) {
  if (event.type === "ready") state.textContent = "ready";
  else if (event.type === "busy") state.textContent = "working…";
  else if (event.type === "text") {
    reply ??= line("agent", "");
    reply.textContent += event.delta;
  } else if (event.type === "tool" && event.status !== "running") {
    line("tool", `${event.status === "completed" ? "✓" : "✗"} ${event.tool}${event.title ? `: ${event.title}` : ""}`);
    reply = null;
  } else if (event.type === "idle") {
    state.textContent = "ready";
    reply = null;
  } else if (event.type === "error") {
    line("error", `error: ${event.message}`);
    state.textContent = "ready";
    reply = null;
  }
}

// EventSource retries a cut stream itself but gives up on an error answer (the agent still starting is a 503):
// then the page opens a new one a second later, as `svc sessions chat` waits for the agent.
function follow() {
  const events = new EventSource(chat.dataset.events);
  events.onmessage = (message) => show(JSON.parse(message.data));
  events.onerror = () => {
    if (events.readyState !== EventSource.CLOSED) {
      state.textContent = "reconnecting…";
      return;
    }
    state.textContent = "waiting for the agent…";
    setTimeout(follow, 1000);
  };
}
follow();

async function post(url, body) {
  const res = await fetch(url, {
    method: "POST",
    headers: { "content-type": "application/json" },
    body: JSON.stringify({ ...body, _csrf: csrf }),
  });
  if (!res.ok) {
    const answer = await res.json().catch(() => ({}));
    line("error", `error: ${answer.error ?? res.statusText}`);
  }
}

form.addEventListener("submit", (submit) => {
  submit.preventDefault();
  const text = form.elements.text.value.trim();
  if (!text) return;
  line("you", text);
  reply = null;
  form.elements.text.value = "";
  void post(form.action, { text });
});

abortForm.addEventListener("submit", (submit) => {
  submit.preventDefault();
  void post(abortForm.action, {});
});
