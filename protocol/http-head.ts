// An HTTP/1.1 request head as the preview and proxy tunnels read it: one parser for the API and the daemon, since
// a tunnel and the HTTP server behind it must never disagree about where a request ends.

/** Node's own limit on a request head; a longer one goes to the full HTTP server, which answers 431. */
export const MAX_HEAD = 16 * 1024;
export const HEAD_END = Buffer.from("\r\n\r\n");
/** Like http.Server's headersTimeout: a client gets this long to send its first request head. */
export const FIRST_HEAD_TIMEOUT_MS = 60_000;
const REQUEST_LINE = /^([A-Z]{1,20}) (\/[\x21-\x7e]*) HTTP\/1\.1$/;
const TOKEN = /^[!#$%&'*+\-.^_`|~0-9A-Za-z]+$/;

export type TunnelHeader = { name: string; lower: string; value: string; line: string };
export type TunnelHead = { method: string; target: string; headers: TunnelHeader[]; bodyLength: number };

/**
 * A request head the tunnel may forward as bytes: HTTP/1.1, an origin-form target, no body or a Content-Length
 * body, nothing ambiguous. Anything else (upgrades, chunked bodies, odd framing) is undefined and left to the full
 * server, which answers it exactly as it always has. Being strict here is what keeps the two parsers from ever
 * disagreeing about where a request ends.
 */
export function parseHead(head: string): TunnelHead | undefined {
  const lines = head.split("\r\n");
  const line = REQUEST_LINE.exec(lines[0]!);
  if (!line) return undefined;
  let bodyLength = 0;
  let sawLength = false;
  const headers: TunnelHeader[] = [];
  for (let i = 1; i < lines.length; i++) {
    const header = lines[i]!;
    const colon = header.indexOf(":");
    if (colon <= 0 || header.includes("\n") || header.includes("\r")) return undefined;
    const name = header.slice(0, colon);
    if (!TOKEN.test(name)) return undefined;
    const lower = name.toLowerCase();
    const value = header.slice(colon + 1).trim();
    if (lower === "transfer-encoding" || lower === "upgrade") return undefined;
    if (lower === "connection" && /upgrade/i.test(value)) return undefined;
    if (lower === "content-length") {
      if (sawLength || !/^\d{1,15}$/.test(value)) return undefined;
      sawLength = true;
      bodyLength = Number(value);
    }
    headers.push({ name, lower, value, line: header });
  }
  return { method: line[1]!, target: line[2]!, headers, bodyLength };
}
