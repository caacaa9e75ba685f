import { describe, expect, it } from "vitest";
import { parseHead } from "../../protocol/http-head.ts";
import { USER_CONTEXT_HEADER } from "../../protocol/user-context.ts";
import { daemonAddress, previewRoute, routeRequest } from "./tunnel.ts";

describe("a preview request as the daemon gets it", () => {
  const daemon = daemonAddress("http://172.18.0.5:8000")!;
  const request = {
    host: "3000-s.localhost:7700",
    authorization: undefined,
    cookie: "theme=dark; svc_preview=grant; other=1",
  };
  const route = previewRoute(request, "localhost", Date.now(), 3000, daemon, "127.0.0.1", "ctx");

  it("strips the caller's credentials and forged headers, keeps the rest in order, adds the API's own", () => {
    const head = parseHead(
      [
        "POST /api/x?y=1 HTTP/1.1",
        "Host: 3000-s.localhost:7700",
        "Accept: */*",
        "Cookie: theme=dark; svc_preview=grant; other=1",
        `${USER_CONTEXT_HEADER}: forged`,
        "X-Forwarded-For: 6.6.6.6",
        "Content-Length: 2",
      ].join("\r\n"),
    )!;
    const admitted = routeRequest(head, route);
    expect(admitted.upstream).toBe("http://172.18.0.5:8000");
    expect(admitted.address).toEqual({ host: "172.18.0.5", port: 8000 });
    expect(admitted.head).toBe(
      [
        "POST /proxy/3000/api/x?y=1 HTTP/1.1",
        "Accept: */*",
        "cookie: theme=dark; other=1",
        "Content-Length: 2",
        "host: 172.18.0.5:8000",
        "x-forwarded-for: 127.0.0.1",
        `${USER_CONTEXT_HEADER}: ctx`,
        "",
        "",
      ].join("\r\n"),
    );
  });

  it("drops the Cookie line when only grants were in it", () => {
    const onlyGrant = previewRoute(
      { ...request, cookie: "svc_preview=grant" },
      "localhost",
      Date.now(),
      3000,
      daemon,
      "::1",
      "ctx",
    );
    const head = parseHead("GET / HTTP/1.1\r\nHost: 3000-s.localhost:7700\r\nCookie: svc_preview=grant")!;
    expect(routeRequest(head, onlyGrant).head).toBe(
      `GET /proxy/3000/ HTTP/1.1\r\nhost: 172.18.0.5:8000\r\nx-forwarded-for: ::1\r\n${USER_CONTEXT_HEADER}: ctx\r\n\r\n`,
    );
  });
});
