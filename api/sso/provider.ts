import * as oidc from "openid-client";
import { z } from "zod";
import { apiError } from "../errors.ts";
import type { PendingSignIn } from "./sign-ins.ts";

/** SVC_OIDC_*: the provider, svc's client there, and the email domains whose people may join by themselves. */
export type OidcSettings = { issuer: string; clientId: string; clientSecret: string; allowedDomains: string[] };

/** Where the provider sends the browser back: registered there as `<public URL>/auth/oidc/callback`. */
export const SSO_CALLBACK_PATH = "/auth/oidc/callback";

/** Whom the provider vouches for: (issuer, subject) is the person; the email is what they joined or were invited by. */
export type SsoIdentity = {
  issuer: string;
  subject: string;
  email: string | undefined;
  emailVerified: boolean;
  name: string | undefined;
};

/** What svc reads of the ID token's or UserInfo's claims; anything else there is the provider's business. */
const Profile = z.object({
  email: z.string().optional().catch(undefined),
  email_verified: z.unknown(),
  name: z.string().optional().catch(undefined),
});

/** The one-time values of a sign-in (state, nonce, PKCE verifier): fresh for every redirect to the provider. */
export function newSignInChecks() {
  return { state: oidc.randomState(), nonce: oidc.randomNonce(), codeVerifier: oidc.randomPKCECodeVerifier() };
}

/** No answer at all (refused connection, DNS, timeout), as opposed to an answer that does not check out. */
function unreachable(err: unknown): boolean {
  return (
    (err instanceof TypeError && err.message === "fetch failed") ||
    (err instanceof DOMException && (err.name === "TimeoutError" || err.name === "AbortError"))
  );
}

/** Which check failed: the library's own error names it in its cause, its wrapper only says what kind. */
function checkThatFailed(err: Error): string {
  return err instanceof oidc.ClientError && err.cause instanceof Error ? err.cause.message : err.message;
}

/**
 * A failed exchange in words a person can act on. The library's messages name the check that failed, never a code
 * or token; its `cause` (the provider's raw answer) stays out of messages and logs.
 */
function exchangeFailure(err: unknown, issuer: string) {
  if (err instanceof oidc.AuthorizationResponseError)
    return apiError("SSO_FAILED", `The sign-in provider did not sign you in (${err.error}). Sign in again.`);
  if (err instanceof oidc.ResponseBodyError)
    return apiError(
      "SSO_FAILED",
      `The sign-in provider refused to complete the sign-in (${err.error}). Sign in again.`,
    );
  if (err instanceof oidc.WWWAuthenticateChallengeError)
    return apiError("SSO_FAILED", "The sign-in provider's UserInfo refused the access token it issued. Sign in again.");
  if (err instanceof oidc.ClientError)
    return apiError(
      "SSO_FAILED",
      `The sign-in provider's answer did not check out (${checkThatFailed(err)}). Sign in again.`,
    );
  if (unreachable(err))
    return apiError("SSO_PROVIDER_UNAVAILABLE", `The sign-in provider (${issuer}) did not answer. Try again later.`);
  return err;
}

/**
 * svc as an OpenID Connect relying party (openid-client): the authorization code flow with PKCE (S256), state and
 * nonce, as a confidential client. The provider's configuration is discovered at the first sign-in, not at start, so
 * an API starts while its provider is down; a failed discovery is tried again at the next sign-in.
 */
export function createOidcProvider(settings: OidcSettings, redirectUri: () => string) {
  let discovered: Promise<oidc.Configuration> | undefined;

  async function discover(): Promise<oidc.Configuration> {
    const issuer = new URL(settings.issuer);
    try {
      return await oidc.discovery(
        issuer,
        settings.clientId,
        settings.clientSecret,
        undefined,
        // The settings allow http for a loopback issuer only (protocol/stack-settings.ts).
        issuer.protocol === "http:" ? { execute: [oidc.allowInsecureRequests] } : undefined,
      );
    } catch (err) {
      const reason = unreachable(err) ? "no answer" : err instanceof Error ? checkThatFailed(err) : String(err);
      throw apiError(
        "SSO_PROVIDER_UNAVAILABLE",
        `The sign-in provider (${settings.issuer}) did not give its OpenID configuration (${reason}). Try again later, or tell this installation's administrator.`,
      );
    }
  }

  function configuration(): Promise<oidc.Configuration> {
    discovered ??= discover().catch((err) => {
      discovered = undefined;
      throw err;
    });
    return discovered;
  }

  return {
    /** The provider's page where this sign-in continues. */
    async authorizationUrl(checks: Omit<PendingSignIn, "next">): Promise<URL> {
      const config = await configuration();
      return oidc.buildAuthorizationUrl(config, {
        redirect_uri: redirectUri(),
        scope: "openid email profile",
        state: checks.state,
        nonce: checks.nonce,
        code_challenge: await oidc.calculatePKCECodeChallenge(checks.codeVerifier),
        code_challenge_method: "S256",
      });
    },

    /**
     * The person the provider's redirect back (`callbackQuery`: its query string) vouches for: the code is exchanged
     * with the verifier, and the library checks the answer's state and the ID token's iss, aud, exp and nonce. The
     * email comes from the ID token, or from UserInfo when the provider keeps it there (OIDC Core: in the code flow,
     * claims asked for by scope go to UserInfo).
     */
    async identify(callbackQuery: string, pending: PendingSignIn): Promise<SsoIdentity> {
      const config = await configuration();
      // The redirect URI as registered, whatever path prefix a proxy in front of the API strips.
      const callbackUrl = new URL(redirectUri());
      callbackUrl.search = callbackQuery;
      try {
        const tokens = await oidc.authorizationCodeGrant(config, callbackUrl, {
          pkceCodeVerifier: pending.codeVerifier,
          expectedState: pending.state,
          expectedNonce: pending.nonce,
          idTokenExpected: true,
        });
        // idTokenExpected: the grant fails without an ID token.
        const claims = tokens.claims()!;
        const profile = Profile.parse(
          claims.email === undefined ? await oidc.fetchUserInfo(config, tokens.access_token, claims.sub) : claims,
        );
        return {
          issuer: claims.iss,
          subject: claims.sub,
          email: profile.email,
          emailVerified: profile.email_verified === true,
          name: profile.name,
        };
      } catch (err) {
        throw exchangeFailure(err, settings.issuer);
      }
    },
  };
}

export type OidcProvider = ReturnType<typeof createOidcProvider>;
