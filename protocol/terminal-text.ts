/**
 * Terminal control sequences: CSI (`ESC [ … final`, colours and cursor moves), OSC (`ESC ] … BEL|ESC \`, titles
 * and links), the other two-byte escapes, and their 8-bit C1 forms.
 */
const ESCAPES =
  // biome-ignore lint/suspicious/noControlCharactersInRegex: these are the characters being removed
  /(?:\u001b\[|\u009b)[0-?]*[ -/]*[@-~]|(?:\u001b\]|\u009d)[^\u0007\u001b\u009c]*(?:\u0007|\u001b\\|\u009c)?|\u001b[@-Z\\-_]|\u001b./g;
// biome-ignore lint/suspicious/noControlCharactersInRegex: what is left of control characters once lines are split
const OTHER_CONTROLS = /[\u0000-\u0008\u000b-\u001f\u007f-\u009f]/g;

/**
 * Output of Docker, git or a sandbox as plain text, for a stored message (a session's `error`, read by browsers
 * and pipes) or a pipe: no escape sequence, no control character but tab and newline; carriage returns (progress
 * bars redrawing a line) become newlines.
 */
export function plainText(text: string): string {
  return text.replace(ESCAPES, "").replace(/\r\n?/g, "\n").replace(OTHER_CONTROLS, "");
}
