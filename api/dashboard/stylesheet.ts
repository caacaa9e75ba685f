/**
 * The dashboard's one stylesheet, served from the API (`/dashboard/assets/dashboard.css`): the CSP allows no
 * inline style. Narrow first: everything reflows at 375 px; wide tables scroll inside their own box.
 */
export const STYLESHEET = `
*, *::before, *::after { box-sizing: border-box; }
body { margin: 0; font: 15px/1.45 system-ui, sans-serif; color: #1b1f24; background: #f6f8fa; }
header { display: flex; flex-wrap: wrap; gap: .5rem 1rem; align-items: center; padding: .6rem 1rem; background: #24292f; color: #fff; }
header a { color: #fff; text-decoration: none; font-weight: 600; }
header nav { display: flex; flex-wrap: wrap; gap: .75rem; flex: 1; }
header form { margin: 0; }
main { max-width: 72rem; margin: 0 auto; padding: 1rem; }
h1 { font-size: 1.4rem; margin: .25rem 0 1rem; overflow-wrap: anywhere; }
h2 { font-size: 1.1rem; margin: 1.5rem 0 .5rem; }
section > h2:first-child { margin-top: 0; }
section { background: #fff; border: 1px solid #d0d7de; border-radius: 6px; padding: .75rem 1rem; margin-bottom: 1rem; }
.scroll { overflow-x: auto; }
table { border-collapse: collapse; width: 100%; }
th, td { text-align: left; padding: .35rem .5rem; border-bottom: 1px solid #eaeef2; vertical-align: top; }
pre.description { white-space: pre-wrap; overflow-wrap: anywhere; }
code, pre, .mono { font-family: ui-monospace, SFMono-Regular, Menlo, monospace; font-size: 13px; }
.muted { color: #57606a; }
.badge { display: inline-block; padding: 0 .5rem; border-radius: 1rem; font-size: 12px; font-weight: 600; background: #eaeef2; }
.badge.open, .badge.running, .badge.clean { background: #dafbe1; color: #116329; }
.badge.merged { background: #fbefff; color: #8250df; }
.badge.closed, .badge.failed, .badge.conflicts, .badge.missing { background: #ffebe9; color: #a40e26; }
.notice { padding: .6rem .8rem; border-radius: 6px; margin-bottom: 1rem; border: 1px solid; overflow-wrap: anywhere; }
.notice.error { background: #ffebe9; border-color: #ff8182; }
.notice.info { background: #ddf4ff; border-color: #54aeff; }
.actions { display: flex; flex-wrap: wrap; gap: 1rem; align-items: flex-end; }
.actions form { display: flex; flex-direction: column; gap: .4rem; margin: 0; }
label { font-weight: 600; }
textarea, input[type=text], input[type=email], input[type=password] { width: min(100%, 32rem); font: inherit; padding: .35rem; }
form.fields { display: flex; flex-direction: column; align-items: flex-start; gap: .4rem; }
form.inline { display: inline-flex; flex-wrap: wrap; gap: .4rem; margin: 0; }
button { font: inherit; font-weight: 600; padding: .35rem 1rem; border-radius: 6px; border: 1px solid #8c959f; background: #f6f8fa; cursor: pointer; }
button.primary { background: #1f883d; border-color: #1a7f37; color: #fff; }
header button { background: transparent; color: #fff; border-color: #8c959f; }
details.file { border: 1px solid #d0d7de; border-radius: 6px; margin: .5rem 0; background: #fff; }
details.file > summary { padding: .4rem .6rem; cursor: pointer; overflow-wrap: anywhere; background: #f6f8fa; }
details.file pre { margin: 0; padding: .4rem 0; overflow-x: auto; }
pre .l { display: block; padding: 0 .6rem; white-space: pre; }
pre .add { background: #e6ffec; }
pre .del { background: #ffebe9; }
pre .hunk { color: #0550ae; background: #ddf4ff; }
.add-count { color: #1a7f37; } .del-count { color: #cf222e; }
.badge.completed { background: #dafbe1; color: #116329; }
.badge.error { background: #ffebe9; color: #a40e26; }
#transcript { list-style: none; margin: 0 0 1rem; padding: 0; }
.entry { padding: .5rem 0; border-bottom: 1px solid #eaeef2; overflow-wrap: anywhere; }
.entry-head { margin: 0; font-size: 12px; color: #57606a; }
.entry .who { font-weight: 600; color: #1b1f24; }
.entry.user .who { color: #0550ae; }
.entry .markdown > :first-child { margin-top: .25rem; }
.entry .markdown > :last-child { margin-bottom: 0; }
.entry .markdown pre, .entry.tool pre { background: #f6f8fa; border-radius: 6px; padding: .5rem; overflow: auto; }
.entry.tool summary { cursor: pointer; font-size: 13px; }
.entry.tool summary time { color: #57606a; }
.entry.tool pre { max-height: 30rem; margin: .4rem 0; white-space: pre; }
.entry img { max-width: 100%; }
pre .l a { display: block; color: inherit; text-decoration: none; }
pre .l a:hover { background: #fff8c5; }
form.line-comment { display: flex; flex-direction: column; gap: .4rem; padding: .6rem; border-top: 1px solid #d0d7de; background: #fffbdd; }
form.comment-box { display: flex; flex-direction: column; gap: .4rem; }
.buttons { display: flex; flex-wrap: wrap; gap: .5rem; }
ol.comments { list-style: none; margin: 0 0 1rem; padding: 0; }
.comment { padding: .5rem 0; border-bottom: 1px solid #eaeef2; overflow-wrap: anywhere; }
.comment p { margin: 0; font-size: 13px; }
.comment pre { margin: .25rem 0 0; }
.badge.delivered { background: #dafbe1; color: #116329; }
ul.checks { list-style: none; margin: 0; padding: 0; }
.check details { border-bottom: 1px solid #eaeef2; padding: .35rem 0; }
.check summary { cursor: pointer; overflow-wrap: anywhere; }
pre.check-log { max-height: 30rem; overflow: auto; margin: .4rem 0; padding: .5rem; background: #f6f8fa; border-radius: 6px; white-space: pre-wrap; overflow-wrap: anywhere; }
.badge.passed { background: #dafbe1; color: #116329; }
.badge.pending, .badge.queued { background: #fff8c5; color: #7d4e00; }
button:disabled { cursor: not-allowed; opacity: .6; }
@media (max-width: 40rem) { main { padding: .5rem; } section { padding: .5rem; } th, td { padding: .25rem; } }
`;
