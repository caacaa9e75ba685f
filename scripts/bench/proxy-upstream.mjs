// A server on a sandbox port for the proxy benchmark: `node proxy-upstream.mjs <kind> <port>`.
// empty: answers "ok" (no work at all, the proxy's worst case); asset: a 32 KiB script read from disk, as a
// static or dev server sends a bundle; page: an HTML page rendered per request, as a server-rendered app does.
import { readFile, writeFile } from "node:fs/promises";
import { createServer } from "node:http";
import { tmpdir } from "node:os";
import { join } from "node:path";

const [kind, port] = process.argv.slice(2);
const asset = join(tmpdir(), `svc-bench-asset-${process.pid}.js`);
await writeFile(asset, `export const data = ${JSON.stringify("x".repeat(32 * 1024 - 40))};\n`);

const items = Array.from({ length: 200 }, (_, i) => ({ id: i, title: `Item <${i}>`, done: i % 3 === 0 }));
const escapeHtml = (s) => String(s).replace(/[&<>"]/g, (c) => `&#${c.charCodeAt(0)};`);

const handlers = {
  empty: (_req, res) => res.end("ok"),
  asset: async (_req, res) => {
    const body = await readFile(asset);
    res.writeHead(200, { "content-type": "text/javascript", "cache-control": "no-cache" });
    res.end(body);
  },
  page: (req, res) => {
    const rows = items.map(
      (it) => `<li class="${it.done ? "done" : ""}" data-id="${it.id}">${escapeHtml(it.title)}</li>`,
    );
    res.writeHead(200, { "content-type": "text/html; charset=utf-8" });
    res.end(`<!doctype html><title>${escapeHtml(req.url)}</title><ul>${rows.join("")}</ul>`);
  },
};

createServer(handlers[kind]).listen(Number(port), "127.0.0.1");
