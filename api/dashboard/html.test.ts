import { describe, expect, it } from "vitest";
import { html, raw } from "./html.ts";

describe("html: every interpolation escaped", () => {
  it("escapes strings and numbers, nests Html, joins arrays and drops null, undefined and false", () => {
    const name = `<script>alert("x")</script>&'`;
    expect(html`<p title="${name}">${name}</p>`.__html).toBe(
      '<p title="&lt;script&gt;alert(&quot;x&quot;)&lt;/script&gt;&amp;&#39;">&lt;script&gt;alert(&quot;x&quot;)&lt;/script&gt;&amp;&#39;</p>',
    );
    const items = ["a<", "b"].map((s) => html`<li>${s}</li>`);
    expect(html`<ul>${items}</ul>${null}${undefined}${false}${0}${raw("<hr>")}`.__html).toBe(
      "<ul><li>a&lt;</li><li>b</li></ul>0<hr>",
    );
  });
});
