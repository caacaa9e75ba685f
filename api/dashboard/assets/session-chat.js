// The session page's transcript and chat. The transcript is the stored one, rendered by the server: the page comes
// with it, and this script asks about every second for the entries added or changed since (`?after_rev=`), each as
// the server's own `<li>`, placed by its `data-seq` or replacing the one whose `data-rev` it outgrew. While the
// session runs, the agent's event stream (the one `svc sessions chat` follows) drives the state shown beside the
// title, and messages and aborts are sent with the page's CSRF token. Without JavaScript the forms still post.
const chat = document.getElementById("chat");
const transcript = document.getElementById("transcript");
const empty = document.getElementById("transcript-empty");
const failure = document.getElementById("chat-error");
const form = document.getElementById("chat-form");
const abortForm = document.getElementById("abort-form");
const state = document.getElementById("agent-state");
const csrf = chat.dataset.csrf;

const POLL_MS = 1000;
let rev = Number(transcript.dataset.rev) || 0;

const pad = (n) => String(n).padStart(2, "0");

/** The server writes times in UTC; a person reads them in their own time zone. */
function localTimes(root) {
  for (const time of root.querySelectorAll("time[datetime]")) {
    const at = new Date(time.getAttribute("datetime"));
    if (!Number.isNaN(at.getTime()))
      time.textContent = `${pad(at.getHours())}:${pad(at.getMinutes())}:${pad(at.getSeconds())}`;
  }
}

function showError(message) {
  failure.textContent = message;
  failure.hidden = false;
}

/** Whether the page is scrolled to its end: then it follows what comes. */
const atEnd = () => window.innerHeight + window.scrollY >= document.documentElement.scrollHeight - 48;

/** One entry from the server, in its place: a new one by `data-seq`, a changed one in place of its older rev. */
function place(entry) {
  const template = document.createElement("template");
  template.innerHTML = entry.html;
  const item = template.content.firstElementChild;
  if (!item) return;
  localTimes(item);
  const existing = transcript.querySelector(`li[data-seq="${entry.seq}"]`);
  if (existing) {
    if (Number(existing.dataset.rev) >= entry.rev) return;
    // A tool call someone opened stays open as its output grows.
    const wasOpen = existing.querySelector("details")?.open;
    if (wasOpen) item.querySelector("details")?.setAttribute("open", "");
    existing.replaceWith(item);
    return;
  }
  const later = [...transcript.children].find((li) => Number(li.dataset.seq) > entry.seq);
  transcript.insertBefore(item, later ?? null);
  if (empty) empty.hidden = true;
}

let polling = false;
async function poll() {
  if (polling) return;
  polling = true;
  try {
    const res = await fetch(`${chat.dataset.transcript}?after_rev=${rev}`, { headers: { accept: "application/json" } });
    if (!res.ok) return;
    const { entries } = await res.json();
    const follow = atEnd();
    for (const entry of entries) {
      place(entry);
      rev = Math.max(rev, entry.rev);
    }
    if (entries.length > 0 && follow) transcript.lastElementChild?.scrollIntoView({ block: "end" });
  } catch {
    // A network hiccup or a sign-in that expired: the next poll tries again.
  } finally {
    polling = false;
  }
}

function tick() {
  const next = document.hidden ? Promise.resolve() : poll();
  void next.finally(() => setTimeout(tick, POLL_MS));
}

localTimes(transcript);
setTimeout(tick, POLL_MS);

function show(event) {
  if (event.type === "ready" || event.type === "idle") state.textContent = "ready";
  else if (event.type === "busy") state.textContent = "working…";
  else if (event.type === "error") {
    state.textContent = "ready";
    showError(`error: ${event.message}`);
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
if (chat.dataset.events && state) follow();

async function post(url, body) {
  const res = await fetch(url, {
    method: "POST",
    headers: { "content-type": "application/json" },
    body: JSON.stringify({ ...body, _csrf: csrf }),
  });
  if (!res.ok) {
    const answer = await res.json().catch(() => ({}));
    showError(`error: ${answer.error ?? res.statusText}`);
  }
}

form?.addEventListener("submit", (submit) => {
  submit.preventDefault();
  const text = form.elements.text.value.trim();
  if (!text) return;
  failure.hidden = true;
  form.elements.text.value = "";
  // The message is in the transcript once the API took it: shown at once, not at the next tick.
  void post(form.action, { text }).then(poll, () => showError("error: the message could not be sent; try again"));
});

abortForm?.addEventListener("submit", (submit) => {
  submit.preventDefault();
  void post(abortForm.action, {}).catch(() => showError("error: the abort could not be sent; try again"));
});
