import type { z } from "zod";
import {
  CreateChangeRequestBody,
  MergeChangeRequestBody,
  UpdateChangeRequestBody,
} from "../../protocol/change-request.ts";
import { CreatePreviewBody } from "../../protocol/preview.ts";
import { CreateProjectBody } from "../../protocol/project.ts";
import { SetSecretsBody, UnsetSecretsBody } from "../../protocol/secret.ts";
import { CreateSessionBody, SessionMessageBody } from "../../protocol/session.ts";
import { MintProjectTokenBody, MintUserTokenBody } from "../../protocol/token.ts";

/**
 * What the bad-input sweep (bad-input.test.ts) sends: every route that reads a body or a path parameter, with a body
 * it accepts, and the bad values for each kind of field.
 */
type Expect = { status: number; code?: string; field?: string | RegExp };
export type Case = {
  category: string;
  label: string;
  method: string;
  path: string;
  body?: string;
  contentType?: string | null;
  expect: Expect;
  /** Text the answer must not echo (a secret value). */
  secret?: string;
};

type Field = {
  name: string;
  /**
   * name, branch, slug, uuid, url: one-line strings; text, secret-value: multi-line strings; key: a map key (its
   * characters only, any string is otherwise a key); value: a JSON value (its characters only, any type is
   * otherwise a value); map: an object of secrets.
   */
  kind:
    | "name"
    | "text"
    | "branch"
    | "slug"
    | "uuid"
    | "url"
    | "int"
    | "bool"
    | "map"
    | "key"
    | "value"
    | "secret-value"
    | "secret-names";
  max?: number;
  /** The body with this field set to `value`. */
  set: (value: unknown) => Record<string, unknown>;
  /** The `field` the 400 names. */
  field: string | RegExp;
};

type BodyRoute = {
  name: string;
  method: string;
  path: string;
  schema: z.ZodType;
  base: Record<string, unknown>;
  fields: Field[];
};

const PROJECT = ":projectId";
const NAME_BAD = [
  "\u0000",
  "\u0001",
  "\u0007",
  "\b",
  "\t",
  "\n",
  "\r",
  "\u000b",
  "\u000c",
  "\u001b",
  "\u001f",
  "\u007f",
];
const TEXT_BAD = ["\u0000", "\u0001", "\u0007", "\b", "\u000b", "\u000c", "\u001b", "\u001f"];
const SURROGATES = ["\ud800", "\udfff", "x\udc00y"];
const BAD_BRANCHES = [
  "-rf",
  "--upload-pack=touch /tmp/pwned",
  "-",
  "../x",
  "a/../b",
  "a..b",
  "x@{1}",
  "@{-1}",
  "@",
  "HEAD",
  "foo.lock",
  "a/b.lock/c",
  "a b",
  " main",
  "a~1",
  "a^",
  "a:b",
  "a?",
  "a*",
  "a[b",
  "a\\b",
  "/x",
  "x/",
  "a//b",
  ".x",
  "a/.b",
  "x.",
];
const WRONG_TYPES: unknown[] = [42, -1, 1.5, true, false, [], ["x"], {}, { a: "b" }, null];
const WRONG_INT_TYPES: unknown[] = ["3", true, [], {}, null, 1.5, 0, -1];
export const NON_OBJECT_BODIES = ["null", "[]", "[{}]", '"x"', '""', "3", "-1.5", "true", "false"];
/** An empty body labelled JSON is not among them: it is no body (api/http/validate.ts, test/api-validation.test.ts). */
export const MALFORMED_JSON = [
  "{",
  "{'a':1}",
  "{} {}",
  '{"a":}',
  '{"__proto__":{"x":1}}',
  '{"constructor":{"prototype":{"x":1}}}',
];
export const MEDIA_TYPES: (string | null)[] = [
  "text/plain",
  "text/plain; charset=utf-8",
  "application/x-www-form-urlencoded",
  "multipart/form-data; boundary=x",
  "application/xml",
  "text/html",
  "application/octet-stream",
  "application/x-git-upload-pack-request",
  null, // a body without any content-type
];
export const PARAM_BAD = [
  "a%00b",
  "%00",
  "%01",
  "a%07",
  "%08",
  "a%09b",
  "a%0Ab",
  "a%0Db",
  "%0B",
  "%1B",
  "%1F",
  "a%7Fb",
];
export const PARAM_UNDECODABLE = ["%E0%A4%A", "%FF", "a%zz"];

export const cr = `/v1/projects/${PROJECT}/change-requests`;
const ses = `/v1/projects/${PROJECT}/sessions/:sessionId`;
const set = (base: Record<string, unknown>, key: string) => (v: unknown) => ({ ...base, [key]: v });

const tokenBase = { name: "minted", expires_in_days: 30 };
const tokenFields = (base: Record<string, unknown>): Field[] => [
  { name: "name", kind: "name", max: 200, set: set(base, "name"), field: "name" },
  { name: "expires_in_days", kind: "int", max: 365, set: set(base, "expires_in_days"), field: "expires_in_days" },
];
const projectBase = { name: "Fresh project", slug: "fresh-project", default_branch: "main" };
export const crBase = {
  title: "a CR",
  description: "line one\n\tline two\r\n",
  head_ref: "feature",
  base_ref: "main",
  session_id: "some-session",
  metadata: { source: "sweep", nested: { list: ["a", { deep: "b" }] } },
};
const patchBase = { title: "renamed", description: "new text" };
const sessionBase = { prompt: "do it\n", agent: "build", model: "m-1", base_ref: "main" };
const messageBase = { text: "hello\nagent", agent: "build", new: true };

/** Every route that reads a JSON body, with a body it would accept and the fields it names. */
export const BODY_ROUTES: BodyRoute[] = [
  {
    name: "mint user token",
    method: "POST",
    path: "/v1/accounts/tokens",
    schema: MintUserTokenBody,
    base: tokenBase,
    fields: tokenFields(tokenBase),
  },
  {
    name: "create project",
    method: "POST",
    path: "/v1/projects",
    schema: CreateProjectBody,
    base: projectBase,
    fields: [
      { name: "name", kind: "name", max: 200, set: set(projectBase, "name"), field: "name" },
      { name: "slug", kind: "slug", max: 63, set: set(projectBase, "slug"), field: "slug" },
      { name: "account_id", kind: "uuid", set: set(projectBase, "account_id"), field: "account_id" },
      { name: "repo_url", kind: "url", max: 2000, set: set(projectBase, "repo_url"), field: "repo_url" },
      {
        name: "default_branch",
        kind: "branch",
        max: 255,
        set: set(projectBase, "default_branch"),
        field: "default_branch",
      },
    ],
  },
  {
    name: "mint project token",
    method: "POST",
    path: `/v1/projects/${PROJECT}/cli-token`,
    schema: MintProjectTokenBody,
    base: tokenBase,
    fields: tokenFields(tokenBase),
  },
  {
    name: "open CR",
    method: "POST",
    path: cr,
    schema: CreateChangeRequestBody,
    base: crBase,
    fields: [
      { name: "title", kind: "name", max: 500, set: set(crBase, "title"), field: "title" },
      { name: "description", kind: "text", max: 100_000, set: set(crBase, "description"), field: "description" },
      { name: "head_ref", kind: "branch", max: 255, set: set(crBase, "head_ref"), field: "head_ref" },
      { name: "base_ref", kind: "branch", max: 255, set: set(crBase, "base_ref"), field: "base_ref" },
      { name: "session_id", kind: "name", max: 200, set: set(crBase, "session_id"), field: "session_id" },
      { name: "metadata value", kind: "value", set: (v) => ({ ...crBase, metadata: { k: v } }), field: /^metadata/ },
      {
        name: "metadata nested value",
        kind: "value",
        set: (v) => ({ ...crBase, metadata: { a: { b: [1, { c: v }] } } }),
        field: /^metadata/,
      },
      {
        name: "metadata key",
        kind: "key",
        max: 200,
        set: (v) => ({ ...crBase, metadata: { [String(v)]: 1 } }),
        field: /^metadata/,
      },
      {
        name: "metadata nested key",
        kind: "key",
        set: (v) => ({ ...crBase, metadata: { a: [{ [String(v)]: "x" }] } }),
        field: /^metadata/,
      },
    ],
  },
  {
    name: "edit CR",
    method: "PATCH",
    path: `${cr}/1`,
    schema: UpdateChangeRequestBody,
    base: patchBase,
    fields: [
      { name: "title", kind: "name", max: 500, set: set(patchBase, "title"), field: "title" },
      { name: "description", kind: "text", max: 100_000, set: set(patchBase, "description"), field: "description" },
    ],
  },
  {
    name: "merge CR",
    method: "POST",
    path: `${cr}/1/merge`,
    schema: MergeChangeRequestBody,
    base: { message: "merge it\n\nwith a body" },
    fields: [{ name: "message", kind: "text", max: 10_000, set: (v) => ({ message: v }), field: "message" }],
  },
  { name: "close CR", method: "POST", path: `${cr}/1/close`, schema: MergeChangeRequestBody, base: {}, fields: [] },
  { name: "reopen CR", method: "POST", path: `${cr}/1/reopen`, schema: MergeChangeRequestBody, base: {}, fields: [] },
  {
    name: "set secrets",
    method: "PUT",
    path: `/v1/projects/${PROJECT}/secrets`,
    schema: SetSecretsBody,
    base: { secrets: { NEW_SECRET: "value\nline 2" } },
    fields: [
      {
        name: "secret value",
        kind: "secret-value",
        max: 65_536,
        set: (v) => ({ secrets: { NEW_SECRET: v } }),
        field: /^secrets/,
      },
      { name: "secret name", kind: "key", set: (v) => ({ secrets: { [`A${String(v)}`]: "v" } }), field: /^secrets/ },
      { name: "secrets map", kind: "map", set: (v) => ({ secrets: v }), field: /^secrets/ },
    ],
  },
  {
    name: "unset secrets",
    method: "DELETE",
    path: `/v1/projects/${PROJECT}/secrets`,
    schema: UnsetSecretsBody,
    base: { names: ["KEEP"] },
    fields: [
      { name: "names[]", kind: "secret-names", max: 200, set: (v) => ({ names: ["KEEP", v] }), field: /^names/ },
    ],
  },
  {
    name: "start session",
    method: "POST",
    path: `/v1/projects/${PROJECT}/sessions`,
    schema: CreateSessionBody,
    base: sessionBase,
    fields: [
      { name: "prompt", kind: "text", max: 200_000, set: set(sessionBase, "prompt"), field: "prompt" },
      { name: "agent", kind: "name", max: 100, set: set(sessionBase, "agent"), field: "agent" },
      { name: "model", kind: "name", max: 200, set: set(sessionBase, "model"), field: "model" },
      { name: "base_ref", kind: "branch", max: 255, set: set(sessionBase, "base_ref"), field: "base_ref" },
    ],
  },
  {
    name: "preview link",
    method: "POST",
    path: `${ses}/previews`,
    schema: CreatePreviewBody,
    base: { port: 3000 },
    fields: [{ name: "port", kind: "int", max: 65_535, set: (v) => ({ port: v }), field: "port" }],
  },
  {
    name: "message the agent",
    method: "POST",
    path: `${ses}/messages`,
    schema: SessionMessageBody,
    base: messageBase,
    fields: [
      { name: "text", kind: "text", max: 200_000, set: set(messageBase, "text"), field: "text" },
      { name: "agent", kind: "name", max: 100, set: set(messageBase, "agent"), field: "agent" },
      { name: "new", kind: "bool", set: set(messageBase, "new"), field: "new" },
    ],
  },
];

/** Routes that take no body but still parse one when it is sent, and every route with a path parameter. */
export const OTHER_ROUTES: { method: string; path: string; body: boolean }[] = [
  { method: "GET", path: "/v1/accounts/me", body: false },
  { method: "GET", path: "/v1/accounts/tokens", body: false },
  { method: "DELETE", path: "/v1/accounts/tokens/:tokenId", body: false },
  { method: "POST", path: "/v1/admin/sessions/stop", body: true },
  { method: "GET", path: "/v1/projects", body: false },
  { method: "GET", path: `/v1/projects/${PROJECT}`, body: false },
  { method: "GET", path: cr, body: false },
  { method: "GET", path: `${cr}/:crId`, body: false },
  { method: "GET", path: `${cr}/:crId/diff`, body: false },
  { method: "GET", path: `${cr}/:crId/merge-preview`, body: false },
  { method: "GET", path: `/v1/projects/${PROJECT}/git/clone-credential`, body: false },
  { method: "GET", path: `/v1/projects/${PROJECT}/secrets`, body: false },
  { method: "GET", path: `/v1/projects/${PROJECT}/sessions`, body: false },
  { method: "GET", path: ses, body: false },
  { method: "GET", path: "/v1/sessions/:sessionId", body: false },
  { method: "POST", path: `${ses}/stop`, body: true },
  { method: "POST", path: `${ses}/restart`, body: true },
  { method: "DELETE", path: ses, body: true },
  { method: "POST", path: `${ses}/abort`, body: true },
  { method: "GET", path: `${ses}/events`, body: false },
  { method: "GET", path: "/git/:repo/info/refs", body: false },
  { method: "POST", path: "/git/:repo/git-upload-pack", body: true },
];

export function badValues(kind: Field["kind"]): { label: string; value: unknown; category: string }[] {
  const out: { label: string; value: unknown; category: string }[] = [];
  const hex = (s: string) => [...s].map((ch) => `U+${ch.charCodeAt(0).toString(16).padStart(4, "0")}`).join("");
  const multiLine = kind === "text" || kind === "value" || kind === "secret-value";
  if (kind !== "int" && kind !== "bool" && kind !== "map") {
    for (const ch of multiLine ? TEXT_BAD : NAME_BAD) {
      out.push({ label: `${hex(ch)} inside`, value: `ok${ch}ok`, category: "control characters in body strings" });
      out.push({ label: `${hex(ch)} alone`, value: ch, category: "control characters in body strings" });
    }
    for (const s of SURROGATES)
      out.push({ label: `lone surrogate ${hex(s)}`, value: s, category: "control characters in body strings" });
  }
  if (kind === "branch") {
    for (const b of BAD_BRANCHES) out.push({ label: JSON.stringify(b), value: b, category: "branch names" });
  }
  if (kind === "key" || kind === "value") return out;
  for (const v of kind === "int" ? WRONG_INT_TYPES : WRONG_TYPES) {
    if (kind === "bool" && typeof v === "boolean") continue;
    if (kind === "map" && v !== null && typeof v === "object" && !Array.isArray(v)) continue;
    out.push({ label: `wrong type ${JSON.stringify(v)}`, value: v, category: "wrong types" });
  }
  return out;
}

export function oversized(f: Field): unknown | undefined {
  if (f.max === undefined) return undefined;
  if (f.kind === "int") return f.max + 1;
  if (f.kind === "url") return `/srv/${"r".repeat(f.max)}`;
  return "a".repeat(f.max + 1);
}
