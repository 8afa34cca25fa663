// The members a write body takes. A member no route reads was dropped without a word: a command
// body with a mistyped `data` moved its record without the values, `{"atomic": true}` on a batch
// was answered with per-item semantics. Every write body (the REST write routes, `/core/batch`'s
// payload) is checked here, with one code and one message.
import { BadRequestError } from "../../errors.ts";

/**
 * 400 INVALID_REQUEST naming the first member of `body` that `takes` lacks, with the members
 * `where` (e.g. "a PATCH body") takes; `hint` may add where such a member goes instead.
 */
export function refuseUnknownMembers(
  body: object,
  takes: readonly string[],
  where: string,
  hint: (member: string) => string = () => "",
): void {
  for (const member of Object.keys(body)) {
    if (takes.includes(member)) continue;
    const shown = member.slice(0, 60);
    throw new BadRequestError(
      "INVALID_REQUEST",
      `${shown} is not a member of ${where}, which takes ${takes.join(", ")}; it would not be read.${hint(member)}`,
      { field: shown },
    );
  }
}
