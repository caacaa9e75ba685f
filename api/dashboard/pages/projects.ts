import type { Project } from "../../../protocol/project.ts";
import { html } from "../html.ts";
import { layout } from "../layout.ts";

/** `/dashboard`: every project of the signed-in user's accounts. */
export function projectsPage(projects: Project[], csrf: string): string {
  const rows = projects.map(
    (p) => html`<tr>
<td><a href="/dashboard/projects/${p.id}">${p.name}</a></td>
<td class="mono">${p.slug}</td>
<td>${p.repo_kind}</td>
<td class="mono">${p.default_branch}</td>
</tr>`,
  );
  const body =
    projects.length === 0
      ? html`<p>No projects yet: run <code>svc ship</code> in a repository, or <code>svc projects create</code>.</p>`
      : html`<section class="scroll"><table>
<thead><tr><th scope="col">Project</th><th scope="col">Slug</th><th scope="col">Repository</th><th scope="col">Default branch</th></tr></thead>
<tbody>${rows}</tbody>
</table></section>`;
  return layout({ title: "Projects", csrf, body: html`<h1>Projects</h1>${body}` });
}
