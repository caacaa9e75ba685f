import type { FastifyInstance } from "fastify";
import type { z } from "zod";
import { isSafeName, NAME_RULE } from "../../protocol/text.ts";
import { apiError } from "../errors.ts";

/**
 * Path parameters are names (protocol/text.ts): a control character in one is a 400 before any route, store or
 * authentication sees it. `*` (the rest of a proxied or git path) belongs to the upstream and is not ours to judge.
 */
export function checkParams(params: unknown): void {
  if (params === null || typeof params !== "object") return;
  for (const [name, value] of Object.entries(params)) {
    if (name !== "*" && typeof value === "string" && !isSafeName(value)) {
      throw apiError("VALIDATION_FAILED", `path parameter ${name} ${NAME_RULE}`, { field: name });
    }
  }
}

/** Parses request input; the first issue becomes a 400 naming the field. */
export function parseInput<S extends z.ZodType>(
  schema: S,
  value: unknown,
  where: "body" | "query" | "params",
): z.infer<S> {
  if (where === "params") checkParams(value);
  const result = schema.safeParse(value ?? (where === "body" ? undefined : {}));
  if (result.success) return result.data;
  const issue = result.error.issues[0]!;
  const field = issue.path.join(".");
  if (issue.code === "unrecognized_keys") {
    const keys = issue.keys.join(", ");
    throw apiError("VALIDATION_FAILED", `unknown ${where} field: ${keys}`, { field: issue.keys[0] });
  }
  if (field === "") {
    const message =
      value === undefined || value === null ? `request ${where} is required` : `${where}: ${issue.message}`;
    throw apiError("VALIDATION_FAILED", message);
  }
  throw apiError("VALIDATION_FAILED", `${field}: ${issue.message}`, { field });
}

/**
 * What every route gets before its handler, registered on the root instance before any route:
 * - request bodies are JSON objects or nothing (an empty body labelled JSON is nothing). Fastify's text/plain
 *   parser is gone (any type without a parser is a 415), and a JSON body that is not an object (`null`, `[]`, `"x"`,
 *   `3`) is a 400, so a `req.body ?? {}` in a route only ever turns an absent body into `{}`. Routes that take other bodies (git packs, previews) register
 *   their own parsers in their own scope.
 * - path parameters pass `checkParams` before authentication looks a project up by them.
 */
export function registerInputChecks(app: FastifyInstance): void {
  const parseJson = app.getDefaultJsonParser("error", "error");
  app.removeContentTypeParser(["application/json", "text/plain"]);
  app.addContentTypeParser("application/json", { parseAs: "string" }, (req, text, done) => {
    // Many clients label every POST as JSON, bodies or not (`close`, `reopen`, `merge` take none): no body it is.
    if (String(text).trim() === "") return done(null, undefined);
    parseJson(req, String(text), (err, value) => {
      if (err) return done(err, undefined);
      if (value === null || typeof value !== "object" || Array.isArray(value)) {
        const kind = value === null ? "null" : Array.isArray(value) ? "an array" : `a ${typeof value}`;
        return done(apiError("VALIDATION_FAILED", `request body must be a JSON object, not ${kind}`), undefined);
      }
      done(null, value);
    });
  });
  app.addHook("preValidation", async (req) => checkParams(req.params));
}
