import MarkdownIt from "markdown-it";
import { type Html, raw } from "./html.ts";

/**
 * Markdown as the agent and the person write it: raw HTML is escaped (`html: false`), bare URLs become links, and
 * markdown-it's own link check refuses `javascript:`, `vbscript:`, `file:` and non-image `data:` URLs. Every link
 * leaves without the page's referrer or ranking.
 */
const md = new MarkdownIt({ html: false, linkify: true });

const LINK_REL = "noopener noreferrer nofollow";
const renderLinkOpen =
  md.renderer.rules.link_open ?? ((tokens, idx, options, _env, self) => self.renderToken(tokens, idx, options));
md.renderer.rules.link_open = (tokens, idx, options, env, self) => {
  tokens[idx]!.attrSet("rel", LINK_REL);
  return renderLinkOpen(tokens, idx, options, env, self);
};

/** Text someone wrote (a message, an agent's answer) as safe markup for a dashboard page. */
export function markdown(text: string): Html {
  return raw(md.render(text));
}
