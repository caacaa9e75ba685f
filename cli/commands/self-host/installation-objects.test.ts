import { describe, expect, it } from "vitest";
import { planImageRemoval, platformKey } from "./installation-objects.ts";

describe("platformKey", () => {
  it("reads the platform image's key from a sandbox or project image's tag, nothing from others", () => {
    expect(platformKey("svc-sandbox:4de270ad908409b4")).toBe("4de270ad908409b4");
    expect(platformKey("svc-project:10686012c37b2fea-4de270ad908409b4")).toBe("4de270ad908409b4");
    expect(platformKey("svc-app:03a3863a7969de31")).toBeUndefined();
    expect(platformKey("svc-debian:bookworm")).toBeUndefined();
  });
});

describe("planImageRemoval", () => {
  const present = [
    "svc-debian:bookworm",
    "svc-node:20",
    "svc-sandbox:aaaa",
    "svc-sandbox:bbbb",
    "svc-project:t1-aaaa",
    "svc-project:t2-aaaa",
    "svc-project:t3-bbbb",
    "svc-app:0123",
    "svc-api:k1",
    "svc-postgres:15-k2",
    "postgres:15",
  ];

  it("removes what the installation ran, its platform image and every project image on it, children first", () => {
    const plan = planImageRemoval({
      ran: ["svc-project:t1-aaaa", "svc-app:0123", "svc-api:k1", "svc-postgres:15-k2"],
      present,
      othersRun: ["svc-debian:bookworm"],
    });
    expect(plan).toEqual({
      remove: [
        "svc-app:0123",
        "svc-project:t1-aaaa",
        "svc-project:t2-aaaa",
        "svc-api:k1",
        "svc-postgres:15-k2",
        "svc-sandbox:aaaa",
      ],
      kept: [],
    });
  });

  it("never removes a base image, a public one, or another platform image's", () => {
    const plan = planImageRemoval({
      ran: ["svc-debian:bookworm", "svc-node:20", "postgres:15", "svc-sandbox:aaaa"],
      present,
      othersRun: [],
    });
    expect(plan.remove).toEqual(["svc-project:t1-aaaa", "svc-project:t2-aaaa", "svc-sandbox:aaaa"]);
  });

  it("keeps a platform image, and every image on it, that another installation's container runs", () => {
    const plan = planImageRemoval({
      ran: ["svc-sandbox:aaaa", "svc-app:0123"],
      present,
      othersRun: ["svc-project:t9-aaaa", "svc-app:0123"],
    });
    expect(plan.remove).toEqual([]);
    expect(plan.kept).toEqual([
      { image: "svc-app:0123", reason: "another container runs it" },
      {
        image: "svc-project:t1-aaaa",
        reason: "another installation runs an image of the platform image svc-sandbox:aaaa",
      },
      {
        image: "svc-project:t2-aaaa",
        reason: "another installation runs an image of the platform image svc-sandbox:aaaa",
      },
      {
        image: "svc-sandbox:aaaa",
        reason: "another installation runs an image of the platform image svc-sandbox:aaaa",
      },
    ]);
  });

  it("skips what the engine no longer has", () => {
    expect(planImageRemoval({ ran: ["svc-app:gone", "svc-project:t1-cccc"], present, othersRun: [] })).toEqual({
      remove: [],
      kept: [],
    });
  });
});
