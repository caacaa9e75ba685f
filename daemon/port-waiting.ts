import { type ServerResponse, STATUS_CODES } from "node:http";

/** How often a browser waiting for a dev server asks again, in seconds. */
export const WAITING_RETRY_S = 2;

/**
 * Whether a request is a browser opening a page (a navigation), not a script's fetch: only such a request gets
 * the waiting page, so tools and `fetch` callers keep the JSON error they can read.
 */
export function isPageNavigation(method: string, accept: string | undefined, fetchMode: string | undefined): boolean {
  if (method !== "GET") return false;
  if (fetchMode !== undefined) return fetchMode === "navigate";
  return accept?.includes("text/html") ?? false;
}

const escapeHtml = (text: string) => text.replace(/[&<>"']/g, (c) => `&#${c.charCodeAt(0)};`);

/**
 * The 502 a person sees when the preview opens before the dev server listens: it says so and reloads itself
 * until the port answers, as "Open preview" right after `npm run dev` needs. No script, so any page policy holds.
 */
function waitingPage(message: string) {
  const body = `<!doctype html><meta charset="utf-8"><meta http-equiv="refresh" content="${WAITING_RETRY_S}"><title>Waiting for the app</title><p>${escapeHtml(message)}.</p><p>This page tries again every ${WAITING_RETRY_S} seconds.</p>\n`;
  const headers = {
    "content-type": "text/html; charset=utf-8",
    "cache-control": "no-store",
    "retry-after": String(WAITING_RETRY_S),
    "content-length": String(Buffer.byteLength(body)),
  };
  return { headers, body };
}

/** The waiting page as raw HTTP/1.1, for the tunnel's socket; it closes the connection. */
export function rawWaitingPage(message: string): string {
  const { headers, body } = waitingPage(message);
  const lines = Object.entries(headers).map(([name, value]) => `${name}: ${value}\r\n`);
  return `HTTP/1.1 502 ${STATUS_CODES[502]}\r\n${lines.join("")}connection: close\r\n\r\n${body}`;
}

/** The waiting page on the full server's response. */
export function sendWaitingPage(res: ServerResponse, message: string): void {
  const { headers, body } = waitingPage(message);
  res.writeHead(502, headers);
  res.end(body);
}
