import { z } from "zod";
import { Plans } from "./plan.ts";

// The forms a stack setting's value takes (stack-settings.ts holds the catalogue that uses them): URLs, whole
// numbers in a range, lists, and the patterns their entries match.

export const httpUrl = z
  .string()
  .url()
  .refine((v) => /^https?:\/\//i.test(v), "must start with http:// or https://");
export const postgresUrl = z
  .string()
  .url()
  .refine((v) => /^postgres(ql)?:\/\//i.test(v), "must start with postgres:// or postgresql://");
export const int = (min: number, max = Number.MAX_SAFE_INTEGER) => z.coerce.number().int().min(min).max(max);
export const PEM_PRIVATE_KEY =
  /^-----BEGIN (RSA )?PRIVATE KEY-----\r?\n[\s\S]+\r?\n-----END (RSA )?PRIVATE KEY-----\s*$/;
export const DNS_NAME = /^[a-z0-9]([a-z0-9-]*[a-z0-9])?(\.[a-z0-9]([a-z0-9-]*[a-z0-9])?)*$/i;
export const REPO_HOST_ENTRY =
  /^(?:[a-z0-9](?:[a-z0-9_-]*[a-z0-9])?(?:\.[a-z0-9](?:[a-z0-9_-]*[a-z0-9])?)*|\[[0-9a-f:.]+\])(?::\d{1,5})?$/i;
export const ACCOUNT_REF = /^[a-z0-9](?:[a-z0-9_-]*[a-z0-9])?$/i;
/**
 * An OpenID provider's issuer: https, or http on this machine's loopback only (a provider for tests or a local
 * trial), where no network carries its tokens.
 */
export const oidcIssuer = httpUrl.refine((v) => {
  const url = new URL(v);
  return url.protocol === "https:" || /^(localhost|127(\.\d{1,3}){3}|\[::1\])$/i.test(url.hostname);
}, "must be an https:// URL (http:// only on localhost, 127.x.x.x or [::1])");

/** SVC_PLANS: JSON text holding the plans. */
export const plansJson = z
  .string()
  .transform((v, ctx) => {
    try {
      return JSON.parse(v) as unknown;
    } catch {
      ctx.addIssue({
        code: "custom",
        message: 'must be JSON, e.g. {"free":{"session_cap":2},"team":{"session_cap":10}}',
      });
      return z.NEVER;
    }
  })
  .pipe(Plans);

/** A comma-separated list (spaces around commas allowed, lower-cased), each entry passing `entry`. */
export const commaList = (entry: RegExp, what: string) =>
  z
    .string()
    .transform((v) =>
      v
        .split(",")
        .map((item) => item.trim().toLowerCase())
        .filter(Boolean),
    )
    .pipe(z.array(z.string().regex(entry, `each entry must be ${what}`)));

/** A Swarm placement constraint: an attribute (node.labels.x, node.role, engine.labels.x...), == or !=, a value. */
export const SWARM_CONSTRAINT = /^[a-z][a-z0-9_.-]*\s*(==|!=)\s*[^\s,]+$/i;
/** A Swarm placement preference: the only strategy Swarm has, spread over a node attribute. */
export const SWARM_PREFERENCE = /^spread\s*=\s*[a-z][a-z0-9_.-]*$/i;
/** A registry's address as image names carry it: a host name or IPv4 address and a port. */
export const REGISTRY_ADDRESS = /^[a-z0-9]([a-z0-9.-]*[a-z0-9])?:\d{1,5}$/i;

/** A comma-separated list kept as written (Swarm's node labels are case-sensitive), each entry passing `entry`. */
export const swarmList = (entry: RegExp, what: string) =>
  z
    .string()
    .transform((v) =>
      v
        .split(",")
        .map((item) => item.trim())
        .filter(Boolean),
    )
    .pipe(z.array(z.string().regex(entry, `each entry must be ${what}`)));
