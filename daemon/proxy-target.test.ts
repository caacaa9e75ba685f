import { describe, expect, it } from "vitest";
import { proxyTarget } from "./proxy-target.ts";

const OWN = { servicePort: 8000, agentPort: 4096 };

describe("proxyTarget", () => {
  it("takes the port and keeps the rest of the path and its query", () => {
    expect(proxyTarget("/proxy/3000/", OWN)).toEqual({ port: 3000, path: "/" });
    expect(proxyTarget("/proxy/3000/assets/app.js", OWN)).toEqual({ port: 3000, path: "/assets/app.js" });
    expect(proxyTarget("/proxy/5173/api/items?page=2&q=a%20b", OWN)).toEqual({
      port: 5173,
      path: "/api/items?page=2&q=a%20b",
    });
    expect(proxyTarget("/proxy/3000//double", OWN)).toEqual({ port: 3000, path: "//double" });
  });

  it("asks for / when nothing follows the port, keeping a query written right after it", () => {
    expect(proxyTarget("/proxy/3000", OWN)).toEqual({ port: 3000, path: "/" });
    expect(proxyTarget("/proxy/3000?x=1", OWN)).toEqual({ port: 3000, path: "/?x=1" });
  });

  it("accepts every port from 1 to 65535, leading zeros included", () => {
    expect(proxyTarget("/proxy/1/", OWN)).toEqual({ port: 1, path: "/" });
    expect(proxyTarget("/proxy/65535/", OWN)).toEqual({ port: 65535, path: "/" });
    expect(proxyTarget("/proxy/03000/", OWN)).toEqual({ port: 3000, path: "/" });
  });

  it("refuses the agent runtime's port with a 403: its shell is never a preview", () => {
    for (const url of ["/proxy/4096/session", "/proxy/4096", "/proxy/04096/"]) {
      const target = proxyTarget(url, OWN);
      expect(target && "error" in target && target.error, url).toMatchObject({ code: "FORBIDDEN", status: 403 });
    }
  });

  it("refuses the daemon's own port with a 403, however it is written", () => {
    for (const url of ["/proxy/8000/svc/health", "/proxy/8000", "/proxy/08000/"]) {
      const target = proxyTarget(url, OWN);
      expect(target && "error" in target && target.error, url).toMatchObject({ code: "FORBIDDEN", status: 403 });
    }
    expect(proxyTarget("/proxy/8000/", { servicePort: 9000, agentPort: 4096 })).toEqual({ port: 8000, path: "/" });
  });

  it("answers 400 for anything that is not a port", () => {
    for (const bad of ["0", "65536", "70000", "123456", "-1", "abc", "3000abc", "1e3", "", " 80", "%33000"]) {
      const target = proxyTarget(`/proxy/${bad}/x`, OWN);
      expect(target && "error" in target && target.error, bad).toMatchObject({
        code: "BAD_REQUEST",
        status: 400,
        message: `'${bad}' is not a port`,
      });
    }
  });

  it("leaves every other path alone", () => {
    for (const url of ["/", "/proxy", "/proxyx/3000/", "/svc/health", "/session/proxy/3000/", "/PROXY/3000/"]) {
      expect(proxyTarget(url, OWN), url).toBeUndefined();
    }
  });
});
