import { z } from "zod";
import { SafeName } from "./text.ts";

export const TOKEN_PREFIX = "svc_pat_";
export const SERVICE_KEY_PREFIX = "svc_sk_";
export const CLONE_CREDENTIAL_PREFIX = "svc_git_";

export const TokenKind = z.enum(["user", "project"]);
export type TokenKind = z.infer<typeof TokenKind>;

/** A token as listed: never carries the secret (nor its hash). Every token expires. */
export const Token = z.object({
  id: z.uuid(),
  kind: TokenKind,
  name: z.string(),
  user_id: z.uuid(),
  project_id: z.uuid().nullable(),
  /** Set on a session's own token (SVC_CLI_TOKEN): it works only while that session's sandbox runs. */
  session_id: z.string().nullable(),
  prefix: z.string(),
  expires_at: z.string(),
  last_used_at: z.string().nullable(),
  created_at: z.string(),
});
export type Token = z.infer<typeof Token>;

/** `GET /v1/accounts/tokens`: the user's tokens that still work, newest first. */
export const TokenList = z.object({ tokens: z.array(Token) });
export type TokenList = z.infer<typeof TokenList>;

/** The one response that carries a token's secret: the answer to minting it. */
export const MintedToken = Token.extend({ token: z.string().startsWith(TOKEN_PREFIX) });
export type MintedToken = z.infer<typeof MintedToken>;

/** How long a token lives when its minter does not say (browser logins included). */
export const DEFAULT_TOKEN_DAYS = 30;
/** The most a minter may ask for: a leaked token stops working within a year whatever was asked. */
const expiresInDays = z.number().int().min(1).max(365);

export const MintUserTokenBody = z
  .object({
    name: SafeName.trim().min(1).max(200).optional(),
    expires_in_days: expiresInDays.optional(),
  })
  .strict();
export type MintUserTokenBody = z.infer<typeof MintUserTokenBody>;

export const MintProjectTokenBody = MintUserTokenBody;
export type MintProjectTokenBody = z.infer<typeof MintProjectTokenBody>;
