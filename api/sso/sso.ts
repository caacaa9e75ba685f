import type { SignInAudit } from "../audit/sign-ins.ts";
import type { Sql } from "../db/sql.ts";
import { createOidcProvider, type OidcSettings, SSO_CALLBACK_PATH } from "./provider.ts";
import { createSsoSignIns } from "./sign-ins.ts";
import { createSsoUsers } from "./users.ts";

/** Single sign-on as SVC_OIDC_* configure it: the provider, the sign-ins under way, and whom they sign in. */
export function createSso(deps: {
  sql: Sql;
  settings: OidcSettings;
  publicUrl: () => string;
  signInAudit: SignInAudit;
}) {
  return {
    provider: createOidcProvider(deps.settings, () => `${deps.publicUrl()}${SSO_CALLBACK_PATH}`),
    signIns: createSsoSignIns(deps.sql),
    users: createSsoUsers({
      sql: deps.sql,
      allowedDomains: deps.settings.allowedDomains,
      onJoined: (userId, accountId) => deps.signInAudit.joined(userId, accountId, "single sign-on"),
    }),
  };
}

export type Sso = ReturnType<typeof createSso>;
