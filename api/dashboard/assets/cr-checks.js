// The CR page's checks, followed while one is queued or running (the page loads this script only then). About every
// second it asks the page's `…/checks` for the checks as the server renders them and puts them in place, and enables
// or disables Merge with the reason the server gives. A CR merged, closed, or taken into or out of the merge queue
// meanwhile is a new page: it reloads. Without JavaScript the page is right as of its load.
const section = document.getElementById("checks-section");
const body = document.getElementById("checks-body");
const mergeButton = document.getElementById("merge-button");
const blocked = document.getElementById("merge-blocked");

const POLL_MS = 1000;

/** The server's list in place of the page's; a check whose status did not change keeps its log opened or folded. */
function swap(markup) {
  const template = document.createElement("template");
  template.innerHTML = markup;
  for (const item of template.content.querySelectorAll("li[data-name]")) {
    const before = body.querySelector(`li[data-name="${CSS.escape(item.dataset.name)}"]`);
    const details = item.querySelector("details");
    if (details && before?.dataset.status === item.dataset.status)
      details.open = Boolean(before.querySelector("details")?.open);
  }
  body.replaceChildren(template.content);
}

function showMerge(reason) {
  if (!mergeButton) return;
  mergeButton.disabled = reason !== null;
  blocked.textContent = reason ?? "";
  blocked.hidden = reason === null;
}

/** One look at the checks; whether to look again. */
async function poll() {
  try {
    const res = await fetch(section.dataset.poll, { headers: { accept: "application/json" } });
    if (!res.ok) return true;
    const answer = await res.json();
    if (answer.state !== section.dataset.state) {
      window.location.reload();
      return false;
    }
    swap(answer.html);
    showMerge(answer.merge_blocked);
    return answer.live;
  } catch {
    // A network hiccup or a sign-in that expired: the next poll tries again.
    return true;
  }
}

function tick() {
  const next = document.hidden ? Promise.resolve(true) : poll();
  void next.then((again) => again && setTimeout(tick, POLL_MS));
}

setTimeout(tick, POLL_MS);
