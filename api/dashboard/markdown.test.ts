import { describe, expect, it } from "vitest";
import { markdown } from "./markdown.ts";

const render = (text: string) => markdown(text).__html;

describe("markdown: what the agent and the person wrote, rendered and sanitized", () => {
  it("escapes raw HTML instead of passing it on", () => {
    const out = render(`<script>alert(1)</script>\n\nsee <img src=x onerror="alert(1)"> here`);
    expect(out).not.toMatch(/<script|<img/i);
    expect(out).toContain("&lt;script&gt;alert(1)&lt;/script&gt;");
    expect(out).toContain("&lt;img src=x onerror=&quot;alert(1)&quot;&gt;");
  });

  it("refuses javascript: links, whatever their spelling", () => {
    for (const text of ["[x](javascript:alert(1))", "[x](JaVaScRiPt:alert(1))", "[x](  javascript:alert(1) )"]) {
      const out = render(text);
      expect(out, text).not.toContain("<a");
      expect(out, text).not.toMatch(/href="javascript/i);
    }
    expect(render("<javascript:alert(1)>")).not.toContain("<a");
  });

  it("renders emphasis, code and fenced code, with the code escaped", () => {
    expect(render("**bold** and `a < b`")).toBe("<p><strong>bold</strong> and <code>a &lt; b</code></p>\n");
    expect(render("```ts\nconst x = '<b>';\n```")).toBe(
      "<pre><code class=\"language-ts\">const x = '&lt;b&gt;';\n</code></pre>\n",
    );
  });

  it("links URLs, bare ones too, without the page's referrer", () => {
    expect(render("[docs](https://example.com/a)")).toBe(
      '<p><a href="https://example.com/a" rel="noopener noreferrer nofollow">docs</a></p>\n',
    );
    expect(render("see https://example.com")).toContain(
      '<a href="https://example.com" rel="noopener noreferrer nofollow">https://example.com</a>',
    );
  });
});
