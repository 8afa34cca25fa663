// Identifier rules and quoting for dynamic SQL. Identifiers come only from validated metadata;
// values are always parameters.
export const IDENTIFIER_RE = /^[A-Za-z][A-Za-z0-9_]*$/;
export const MAX_IDENTIFIER_LENGTH = 60;

export function isValidIdentifier(name: unknown, maxLength = MAX_IDENTIFIER_LENGTH): name is string {
  return typeof name === "string" && name.length <= maxLength && IDENTIFIER_RE.test(name);
}

/** Double-quotes a validated identifier. Throws on anything else: a bug, never user input. */
export function ident(name: string): string {
  if (!isValidIdentifier(name, 63))
    throw new Error(`Refusing to quote invalid identifier ${JSON.stringify(name)}`);
  return `"${name}"`;
}
