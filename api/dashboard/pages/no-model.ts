import { MODEL_SETUP_COMMAND, PROJECT_MODEL_COMMAND } from "../../../protocol/env.ts";
import { html } from "../html.ts";
import { layout } from "../layout.ts";

/**
 * What the dashboard answers when a session's agent has no model (MODEL_NOT_CONFIGURED): the commands that give
 * it one, for the whole stack or for this project alone, and what applies them.
 */
export function noModelPage(message: string, csrf?: string): string {
  return layout({
    title: "No model configured",
    csrf,
    body: html`<h1>No model configured</h1>
<p class="notice error" role="alert">${message}</p>
<section>
<h2>Give every project a model</h2>
<p>On the machine that runs the stack, set the model gateway, then restart the stack to apply it:</p>
<pre><code>${MODEL_SETUP_COMMAND}
svc self-host restart</code></pre>
<h2>Or give this project its own</h2>
<p>Store the gateway (or a provider's key) as the project's secrets:</p>
<pre><code>${PROJECT_MODEL_COMMAND}</code></pre>
<p>Then restart the session (its Restart button, or <code>svc sessions restart &lt;id&gt;</code>): a sandbox gets
its model when it starts.</p>
</section>
<p><a href="/dashboard">Back to your projects</a></p>`,
  });
}
