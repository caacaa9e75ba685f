/** Server-sent events as svc writes and reads them: one JSON value per event, in `data:` lines. */

export const SSE_HEADERS = { "content-type": "text/event-stream", "cache-control": "no-cache" } as const;

/** A comment line: keeps idle proxies from closing a quiet stream, and readers ignore it. */
export const SSE_PING = ": ping\n\n";

export const sseEvent = (value: unknown) => `data: ${JSON.stringify(value)}\n\n`;

/**
 * Splits a stream of text chunks into the `data` payloads of complete events (multi-line data joined with
 * newlines, comments and events without data dropped); the rest waits for the next chunk.
 */
export function createSseReader(): (chunk: string) => string[] {
  let buffer = "";
  return (chunk) => {
    buffer += chunk;
    const payloads: string[] = [];
    for (let end = buffer.indexOf("\n\n"); end >= 0; end = buffer.indexOf("\n\n")) {
      const data = buffer
        .slice(0, end)
        .split("\n")
        .filter((line) => line.startsWith("data:"))
        .map((line) => line.slice(5).trimStart())
        .join("\n");
      buffer = buffer.slice(end + 2);
      if (data) payloads.push(data);
    }
    return payloads;
  };
}
