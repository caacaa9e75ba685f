import { randomUUID } from "node:crypto";
import { rmSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { setTimeout as sleep } from "node:timers/promises";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { mergeTicketRef } from "../api/change-requests/merge-intents.ts";
import { readBranchTips } from "../api/git/refs.ts";
import { cutMissingSessionBranches } from "../api/git/session-branches.ts";
import { call, seedUser, startApi, type TestApi } from "./support/api-server.ts";
import { databaseKinds, freshDatabase, type TestDatabase } from "./support/databases.ts";
import { gitIn, rootCommit, writeBranches } from "./support/merge-history.ts";

describe.each(databaseKinds("postgres"))(
  "interrupted merges settled by the repair and by the next merge (%s)",
  (kind) => {
    let db: TestDatabase;
    let api: TestApi;
    let user: Awaited<ReturnType<typeof seedUser>>;
    let projectId: string;
    let bare: string;
    let branches = 0;
    const events: { number: number; change: string }[] = [];
    const dead = randomUUID();
    const repair = (isAlive: (id: string) => Promise<boolean>) =>
      api.services.changeRequests.repairMerges({
        isAlive,
        project: (id) => api.services.projects.byId(id),
        log: () => {},
      });
    const cr = (ref: string | number) =>
      call(api.url, "GET", `/v1/projects/${projectId}/change-requests/${ref}`, { token: user.token }).then(
        (r) => r.body.change_request,
      );
    const post = (path: string) =>
      call(api.url, "POST", `/v1/projects/${projectId}/change-requests${path}`, { token: user.token, body: {} });

    /** An open CR of a fresh branch off main, and what its merge would have written: the commit and the base it moved. */
    async function openCr(options: { threeWay: boolean }) {
      const g = gitIn(bare);
      const main = await g(["rev-parse", "main"]);
      branches += 1;
      const name = `work-${branches}`;
      const tips = await writeBranches(bare, [{ name, from: main }]);
      const head = tips.get(name)!;
      written();
      const opened = await call(api.url, "POST", `/v1/projects/${projectId}/change-requests`, {
        token: user.token,
        body: { title: `Work ${name}`, head_ref: name },
      });
      expect(opened.status).toBe(201);
      // A three-way merge's commit exists only in the object store until the branch moves to it.
      const target = options.threeWay
        ? await g(["commit-tree", `${head}^{tree}`, "-p", main, "-p", head, "-m", `Merge CR #${opened.body.number}`])
        : head;
      return { cr: opened.body, head, base: main, target };
    }

    /** The intent a process left when it died (or failed) between writing it and recording the merge. */
    async function leaveIntent(
      c: Awaited<ReturnType<typeof openCr>>,
      instanceId: string,
      at = "2024-01-02T03:04:05Z",
      intentId: string = randomUUID(),
    ) {
      await db.sql.query(
        `insert into cr_merge_intents (cr_id, project_id, base_ref, target_sha, base_sha, head_sha, merged_by, instance_id,
         created_at, intent_id) values ($1, $2, 'main', $3, $4, $5, $6, $7, $8, $9)`,
        [c.cr.cr_id, projectId, c.target, c.base, c.head, user.userId, instanceId, at, intentId],
      );
    }
    /** Refs written behind the API's back: its branch tips cache forgets them at once. */
    const written = () => api.services.repos.invalidate({ id: projectId, repo_kind: "managed" });
    /** main moved to `c`'s commit as the interrupted merge had moved it. */
    async function moveMain(c: { target: string; base: string }) {
      await gitIn(bare)(["update-ref", "refs/heads/main", c.target, c.base]);
      written();
    }
    const intentsLeft = async () =>
      (await db.sql.query<{ n: number }>("select count(*)::int as n from cr_merge_intents"))[0]!.n;

    beforeAll(async () => {
      db = await freshDatabase(kind);
      api = await startApi(db.sql);
      user = await seedUser(api.services);
      projectId = (await call(api.url, "POST", "/v1/projects", { token: user.token, body: { name: "Repair" } })).body
        .id;
      bare = api.services.repos.managedDir(projectId);
      await rootCommit(bare);
      api.services.events.on("change-request.changed", ({ cr, change }) => {
        events.push({ number: cr.number, change });
      });
    });
    afterAll(async () => {
      await api?.close();
      await db?.drop();
    });

    it("records a merge whose commit reached the base: its real commit, SHAs, merger and time, with the event", async () => {
      const ff = await openCr({ threeWay: false });
      await moveMain(ff);
      await leaveIntent(ff, dead);
      const threeWay = await openCr({ threeWay: true });
      await moveMain(threeWay);
      await leaveIntent(threeWay, dead, "2024-01-02T03:04:06Z");

      expect(await repair(async () => false)).toEqual({ recorded: 2, dropped: 0, waiting: 0 });
      for (const [c, at] of [
        [ff, "2024-01-02T03:04:05.000Z"],
        [threeWay, "2024-01-02T03:04:06.000Z"],
      ] as const) {
        expect(await cr(c.cr.number)).toMatchObject({
          status: "merged",
          merge_commit_sha: c.target,
          base_commit_sha: c.base,
          head_commit_sha: c.head,
          merged_by: user.userId,
          merged_at: at,
        });
        expect(events).toContainEqual({ number: c.cr.number, change: "merged" });
      }
      expect(await intentsLeft()).toBe(0);
    });

    it("drops an intent whose commit never reached the base: the CR stays open, untouched, and merges later", async () => {
      const c = await openCr({ threeWay: true });
      await leaveIntent(c, dead);
      const before = await cr(c.cr.number);
      expect(await repair(async () => false)).toEqual({ recorded: 0, dropped: 1, waiting: 0 });
      expect(await cr(c.cr.number)).toEqual(before);
      expect(await intentsLeft()).toBe(0);
      const merged = await post(`/${c.cr.number}/merge`);
      expect(merged.status).toBe(200);
      expect(merged.body.merge_commit_sha).toBe(await gitIn(bare)(["rev-parse", "main"]));
    });

    it("voids the ticket of a merge it drops: a git of that merge still running afterwards cannot move the branch", async () => {
      const c = await openCr({ threeWay: true });
      const project = { id: projectId, repo_kind: "managed" as const, account_id: user.accountId, repo_url: null };
      const intentId = randomUUID();
      const ticket = mergeTicketRef(intentId);
      await api.services.repos.issueTicket(project, ticket, c.target);
      await leaveIntent(c, dead, undefined, intentId);
      // A merge committing holds its ticket's lock: the repair waits instead of reading a branch about to move.
      writeFileSync(join(bare, `${ticket}.lock`), "");
      expect(await repair(async () => false)).toEqual({ recorded: 0, dropped: 0, waiting: 1 });
      expect(await intentsLeft()).toBe(1);
      rmSync(join(bare, `${ticket}.lock`));

      expect(await repair(async () => false)).toEqual({ recorded: 0, dropped: 1, waiting: 0 });
      // What the dead process's update-ref would do now, had it outlived the repair's reading.
      expect(await api.services.repos.updateBranch(project, "main", c.target, c.base, { ticket })).toBe(false);
      expect(await gitIn(bare)(["rev-parse", "main"])).toBe(c.base);
      expect(await cr(c.cr.number)).toMatchObject({ status: "open" });

      // A merge through the API leaves no ticket behind.
      const merged = await post(`/${c.cr.number}/merge`);
      expect(merged.status).toBe(200);
      expect(await gitIn(bare)(["for-each-ref", "refs/svc/merge-tickets/"])).toBe("");
    });

    it("leaves alone the intent of a live process; a merge or close of its CR waits for that merge to end", async () => {
      const c = await openCr({ threeWay: false });
      const live = randomUUID();
      await leaveIntent(c, live);
      expect(await repair(async (id) => id === live)).toEqual({ recorded: 0, dropped: 0, waiting: 1 });
      const merge = post(`/${c.cr.number}/merge`);
      const close = post(`/${c.cr.number}/close`);
      await sleep(300);
      // The live process ends its merge: the branch moved, then the record with the intent's removal.
      await moveMain(c);
      await db.sql.transaction(async (tx) => {
        await tx.query("delete from cr_merge_intents where cr_id = $1", [c.cr.cr_id]);
        await tx.query(
          `update change_requests set status = 'merged', merged_at = now(), merged_by = $2, merge_commit_sha = $3
          where cr_id = $1`,
          [c.cr.cr_id, user.userId, c.target],
        );
      });
      expect((await merge).body.code).toBe("CR_NOT_OPEN");
      expect((await close).body.code).toBe("CR_MERGED");
      expect(await cr(c.cr.number)).toMatchObject({ status: "merged", merge_commit_sha: c.target });
    });

    it("settles a stale intent of the CR first when it is merged or closed again", async () => {
      // This process's own intent (a record that failed after the move) is never in flight once the merge is over.
      const landed = await openCr({ threeWay: true });
      await moveMain(landed);
      await leaveIntent(landed, api.services.instanceId);
      const again = await post(`/${landed.cr.number}/merge`);
      expect(again.status).toBe(409);
      expect(again.body.code).toBe("CR_NOT_OPEN");
      expect(await cr(landed.cr.number)).toMatchObject({ status: "merged", merge_commit_sha: landed.target });

      // A dead process's, once the repair knows the cluster: the merge drops it and goes on.
      const stop = await api.services.changeRequests.startMergeRepair({
        isAlive: async (id) => id === api.services.instanceId,
        project: (id) => api.services.projects.byId(id),
        log: () => {},
        everyMs: 3_600_000,
      });
      stop();
      const lost = await openCr({ threeWay: true });
      await leaveIntent(lost, dead);
      const merged = await post(`/${lost.cr.number}/merge`);
      expect(merged.status).toBe(200);
      expect(merged.body.merge_commit_sha).not.toBe(lost.target);
      const closing = await openCr({ threeWay: false });
      await moveMain(closing);
      await leaveIntent(closing, dead);
      const closed = await post(`/${closing.cr.number}/close`);
      expect(closed.status).toBe(409);
      expect(closed.body.code).toBe("CR_MERGED");
      expect(await intentsLeft()).toBe(0);
    });

    it("gives a session whose provisioning was cut off before its branch the branch it never got", async () => {
      const insert = (status: string, branch: string, provisioner: string) =>
        db.sql.query(
          `insert into project_sessions (account_id, project_id, status, branch, base_ref, agent_name, created_by, provisioner)
         values ($1, $2, $3, $4, 'main', 'build', $5, $6)`,
          [user.accountId, projectId, status, branch, user.userId, provisioner],
        );
      await insert("failed", "session-interrupted", dead);
      await insert("provisioning", "session-dead-provisioner", dead);
      const live = randomUUID();
      await insert("provisioning", "session-in-flight", live);
      const cut = await cutMissingSessionBranches({
        sql: db.sql,
        repos: api.services.repos,
        project: (id) => api.services.projects.byId(id),
        isAlive: async (id) => id === live,
        log: () => {},
      });
      expect(cut).toBe(2);
      const tips = await readBranchTips(bare);
      expect(tips.get("session-interrupted")).toBe(tips.get("main"));
      expect(tips.get("session-dead-provisioner")).toBe(tips.get("main"));
      expect(tips.has("session-in-flight")).toBe(false);
    });
  },
);
