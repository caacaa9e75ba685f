/** Server-sent events as the daemon writes them (GET /svc/events): one JSON value per event, in a `data:` line. */

export const SSE_HEADERS = { "content-type": "text/event-stream", "cache-control": "no-cache" } as const;

/** A comment line: keeps idle proxies from closing a quiet stream, and readers ignore it. */
export const SSE_PING = ": ping\n\n";

export const sseEvent = (value: unknown) => `data: ${JSON.stringify(value)}\n\n`;
