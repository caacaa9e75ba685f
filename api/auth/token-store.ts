import { displayPrefix, hashSecret, newSecret } from "../../protocol/credential.ts";
import type { MintedToken, Token } from "../../protocol/token.ts";
import { DEFAULT_TOKEN_DAYS, TOKEN_PREFIX } from "../../protocol/token.ts";
import { iso } from "../db/rows.ts";
import type { Sql } from "../db/sql.ts";
import { createTtlCache } from "../ttl-cache.ts";

type TokenRow = {
  id: string;
  user_id: string;
  project_id: string | null;
  name: string;
  prefix: string;
  expires_at: Date;
  last_used_at: Date | null;
  revoked_at: Date | null;
  created_at: Date;
  /** Set on a session's token: it is valid only while `sandbox_id`, the live sandbox holding it, is set. */
  session_id: string | null;
};

const COLUMNS = "id, user_id, project_id, name, prefix, expires_at, last_used_at, revoked_at, created_at, session_id";
/** The live (provisioning or active) sandbox that holds a session's token; null for every other token. */
const LIVE_SANDBOX = `(select b.sandbox_id from session_sandboxes b
   where b.token_id = t.id and b.status in ('provisioning', 'active') limit 1) as sandbox_id`;
// last_used_at is bookkeeping: write it at most once a minute per token, never on the hot path's critical section.
const LAST_USED_GRANULARITY_MS = 60_000;

function toToken(row: TokenRow): Token {
  return {
    id: row.id,
    kind: row.project_id ? "project" : "user",
    name: row.name,
    user_id: row.user_id,
    project_id: row.project_id,
    session_id: row.session_id,
    prefix: row.prefix,
    expires_at: iso(row.expires_at),
    last_used_at: iso(row.last_used_at),
    created_at: iso(row.created_at),
  };
}

export type MintOptions = {
  userId: string;
  projectId?: string | null;
  name?: string;
  /** Every token expires: DEFAULT_TOKEN_DAYS (30) unless the minter asks for another span. */
  expiresInDays?: number;
  /**
   * The session a project token is minted for (provisioning's SVC_CLI_TOKEN): the token then works only while a
   * provisioning or active sandbox row references it (`session_sandboxes.token_id`), and dies with the session.
   */
  sessionId?: string;
};

/** Where a session's token lives: the sandbox whose row references it. */
export type TokenSandbox = { sessionId: string; sandboxId: string };

export type TokenLookup =
  | { status: "valid"; token: Token; sandbox: TokenSandbox | null }
  | { status: "expired" }
  /** A session's token whose sandbox is stopped, failed or gone (revoked or not). */
  | { status: "ended" }
  | { status: "unknown" };

const CACHE_TTL_MS = 5000;

export function createTokenStore(sql: Sql) {
  // A session token's sandbox is cached with it: a sandbox that stops without revoking its token (a missed
  // revocation) ends the token within the TTL; a revocation in this process ends it at once.
  const cache = createTtlCache<string, (TokenRow & { sandbox_id: string | null }) | undefined>(CACHE_TTL_MS);
  /** Stores a token whose secret the caller already holds (self-host bootstrap); idempotent by hash. */
  async function insert(secret: string, opts: MintOptions): Promise<MintedToken> {
    const expires = new Date(Date.now() + (opts.expiresInDays ?? DEFAULT_TOKEN_DAYS) * 86_400_000);
    const [row] = await sql.query<TokenRow>(
      `insert into tokens (user_id, project_id, name, token_hash, prefix, expires_at, session_id)
         values ($1, $2, $3, $4, $5, $6, $7)
         on conflict (token_hash) do update set revoked_at = null
         returning ${COLUMNS}`,
      [
        opts.userId,
        opts.projectId ?? null,
        opts.name ?? "",
        hashSecret(secret),
        displayPrefix(secret),
        expires,
        opts.sessionId ?? null,
      ],
    );
    return { ...toToken(row!), token: secret };
  }

  return {
    insert,
    mint: (opts: MintOptions) => insert(newSecret(TOKEN_PREFIX), opts),

    async lookup(secret: string): Promise<TokenLookup> {
      const hash = hashSecret(secret);
      const row = await cache.get(hash, async () => {
        const [found] = await sql.query<TokenRow & { sandbox_id: string | null }>(
          `select ${COLUMNS}, ${LIVE_SANDBOX} from tokens t where token_hash = $1`,
          [hash],
        );
        return found;
      });
      if (!row || row.revoked_at) return { status: "unknown" };
      if (row.expires_at.getTime() <= Date.now()) return { status: "expired" };
      if (row.session_id && !row.sandbox_id) return { status: "ended" };
      if (!row.last_used_at || Date.now() - row.last_used_at.getTime() > LAST_USED_GRANULARITY_MS) {
        row.last_used_at = new Date();
        sql.query("update tokens set last_used_at = now() where id = $1", [row.id]).catch(() => {});
      }
      const sandbox =
        row.session_id && row.sandbox_id ? { sessionId: row.session_id, sandboxId: row.sandbox_id } : null;
      return { status: "valid", token: toToken(row), sandbox };
    },

    async revoke(id: string): Promise<void> {
      await sql.query("update tokens set revoked_at = now() where id = $1 and revoked_at is null", [id]);
      await cache.deleteWhere((row) => row?.id === id);
    },

    /** The user's tokens that still work (not revoked, not expired, a session's only while its sandbox lives). */
    async listForUser(userId: string): Promise<Token[]> {
      const rows = await sql.query<TokenRow>(
        `select ${COLUMNS} from tokens t
          where user_id = $1 and revoked_at is null and expires_at > now()
            and (session_id is null or exists (select 1 from session_sandboxes b
                  where b.token_id = t.id and b.status in ('provisioning', 'active')))
          order by created_at desc, id`,
        [userId],
      );
      return rows.map(toToken);
    },

    /** Revokes a token of `userId`'s own; false when that user has no such token (or it was revoked already). */
    async revokeForUser(userId: string, id: string): Promise<boolean> {
      const rows = await sql.query(
        "update tokens set revoked_at = now() where id = $1 and user_id = $2 and revoked_at is null returning id",
        [id, userId],
      );
      await cache.deleteWhere((row) => row?.id === id);
      return rows.length > 0;
    },
  };
}

export type TokenStore = ReturnType<typeof createTokenStore>;
