import { lookup } from "node:dns";
import { Agent, fetch } from "undici";

/**
 * `*.localhost` is loopback to browsers and curl, but Node's resolver does not know it here (no NSS module for it):
 * this dispatcher resolves those names to 127.0.0.1 itself and every other name as usual.
 */
const localhostAgent = new Agent({
  connect: {
    lookup: (hostname, options, done) => {
      if (hostname === "localhost" || hostname.endsWith(".localhost")) {
        return options.all
          ? (done as (e: null, a: { address: string; family: number }[]) => void)(null, [
              { address: "127.0.0.1", family: 4 },
            ])
          : done(null, "127.0.0.1", 4);
      }
      lookup(hostname, options, done);
    },
  },
});

/** fetch() of a preview URL (`http://<port>-<session>.localhost:<port>/…`), as a browser would reach it. */
export const previewFetch = (url: string, init: Parameters<typeof fetch>[1] = {}) =>
  fetch(url, { ...init, dispatcher: localhostAgent });
