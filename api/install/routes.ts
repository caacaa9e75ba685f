import { readFileSync } from "node:fs";
import type { FastifyInstance } from "fastify";
import { apiError } from "../errors.ts";
import type { CliBundleSource } from "./cli-bundle.ts";

/** Read once: the bundle has it beside itself (dist/), the sources beside this module. */
const TEMPLATE = readFileSync(new URL("./served-install.sh", import.meta.url), "utf8");
const ORIGIN_PLACEHOLDER = "@SVC_ORIGIN@";

/**
 * What may go between single quotes in a script users pipe to bash: an http(s) URL of plain characters, no quote,
 * `$`, backtick or space. The URL is the configured public one (SVC_PUBLIC_URL), never the request's Host header:
 * a cache in front of the API would otherwise keep a script pointing wherever one forged request said.
 */
const SAFE_URL = /^https?:\/\/[A-Za-z0-9.\-[\]:]+(\/[A-Za-z0-9._~/-]*)?$/;

export function renderInstallScript(publicUrl: string): string {
  if (!SAFE_URL.test(publicUrl)) {
    throw apiError("NOT_CONFIGURED", "the server's public URL (SVC_PUBLIC_URL) cannot be written into a shell script");
  }
  return TEMPLATE.replace(ORIGIN_PLACEHOLDER, publicUrl);
}

function matchesEtag(header: string | undefined, etag: string): boolean {
  return (header ?? "").split(",").some((tag) => tag.trim() === etag || tag.trim() === "*");
}

/** `curl -fsSL <origin>/install.sh | bash` installs the CLI this API serves; `svc update` runs the same script. */
export function installRoutes(deps: { publicUrl: () => string; cliBundle: CliBundleSource }) {
  return async (app: FastifyInstance) => {
    app.get("/install.sh", { config: { auth: "public" } }, async (_req, reply) => {
      const script = renderInstallScript(deps.publicUrl());
      return reply.type("text/x-shellscript; charset=utf-8").header("cache-control", "no-store").send(script);
    });

    app.get("/v1/cli/svc.mjs", { config: { auth: "public" } }, async (req, reply) => {
      const bundle = await deps.cliBundle.get();
      const etag = `"${bundle.sha256}"`;
      reply.header("etag", etag).header("cache-control", "no-cache").header("x-svc-cli-sha256", bundle.sha256);
      if (bundle.version) reply.header("x-svc-cli-version", bundle.version);
      if (matchesEtag(req.headers["if-none-match"], etag)) return reply.code(304).send();
      return reply.type("text/javascript; charset=utf-8").send(bundle.bytes);
    });
  };
}
