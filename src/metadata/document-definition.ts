// A TB_DOCUMENT definition (spec 4.6, decisions.md §14): the root's fields and the parts embedded
// under their names. One schema for the metadata check (a definition is refused when written,
// naming the problem) and for the document read (src/resolvers/read/documents.ts).
import { z } from "zod";

/** A part's name becomes a member of the answer beside the root's fields: an identifier. */
const PART_NAME = /^[A-Za-z][A-Za-z0-9_]{0,59}$/;

const partSchema = z.object({
  name: z.string().regex(PART_NAME, "a part's name must be a letter, then letters, digits or _ (60 at most)"),
  dim: z.string().min(1).max(30),
  join: z.record(z.string(), z.string()),
  fields: z.array(z.string()).optional(),
  params: z.record(z.string(), z.string()).optional(),
});

export const documentDefinitionSchema = z.object({
  fields: z.array(z.string()).optional(),
  parts: z.array(partSchema).max(20),
});

export type DocumentDefinition = z.infer<typeof documentDefinitionSchema>;

/**
 * What is wrong with `definition` for a document rooted at `rootDim`, as [path, message] pairs:
 * its shape, then each part's dimension and the fields it names (`fieldExists` says whether a
 * dimension has a field; `dimExists` whether a dimension exists). A part's name may not repeat
 * nor be a field of the root, whose value it would replace in the answer.
 */
export function documentDefinitionProblems(
  definition: unknown,
  rootDim: string,
  dimExists: (dim: string) => boolean,
  fieldExists: (dim: string, field: string) => boolean,
): Array<[string, string]> {
  const parsed = documentDefinitionSchema.safeParse(definition);
  if (!parsed.success) {
    const issue = parsed.error.issues[0]!;
    const at = issue.path.map(String).join(".");
    return [[at ? `DEFINITION.${at}` : "DEFINITION", issue.message]];
  }
  const problems: Array<[string, string]> = [];
  const def = parsed.data;
  for (const f of def.fields ?? [])
    if (!fieldExists(rootDim, f)) problems.push(["DEFINITION.fields", `"${f}" is not a field of ${rootDim}`]);
  const names = new Set<string>();
  def.parts.forEach((part, i) => {
    const p = `DEFINITION.parts.${i}`;
    if (names.has(part.name)) problems.push([`${p}.name`, `part "${part.name}" is named twice`]);
    names.add(part.name);
    if (fieldExists(rootDim, part.name))
      problems.push([
        `${p}.name`,
        `"${part.name}" is a field of ${rootDim}; a part may not take a field's name`,
      ]);
    if (!dimExists(part.dim)) {
      problems.push([`${p}.dim`, `dimension ${part.dim} does not exist`]);
      return;
    }
    for (const [partField, rootField] of Object.entries(part.join)) {
      if (!fieldExists(part.dim, partField))
        problems.push([`${p}.join`, `"${partField}" is not a field of ${part.dim}`]);
      if (!fieldExists(rootDim, rootField))
        problems.push([`${p}.join`, `"${rootField}" is not a field of ${rootDim}`]);
    }
    if (Object.keys(part.join).length === 0)
      problems.push([`${p}.join`, "a part needs at least one join field"]);
    for (const f of part.fields ?? [])
      if (!fieldExists(part.dim, f)) problems.push([`${p}.fields`, `"${f}" is not a field of ${part.dim}`]);
    for (const f of Object.values(part.params ?? {}))
      if (!fieldExists(part.dim, f)) problems.push([`${p}.params`, `"${f}" is not a field of ${part.dim}`]);
  });
  return problems;
}
