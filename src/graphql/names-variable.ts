// Whether arguments name a variable anywhere in their values (lists and input objects followed):
// what decides that a field's arguments or a selection's directives are the same on every request
// of a document (planned execution's literal arguments, the look-ahead kept per document).
import { type ArgumentNode, Kind, type ValueNode } from "graphql";

function valueNamesVariable(value: ValueNode): boolean {
  switch (value.kind) {
    case Kind.VARIABLE:
      return true;
    case Kind.LIST:
      return value.values.some(valueNamesVariable);
    case Kind.OBJECT:
      return value.fields.some((f) => valueNamesVariable(f.value));
    default:
      return false;
  }
}

export function argumentsNameVariable(args: readonly ArgumentNode[] | undefined): boolean {
  return args?.some((a) => valueNamesVariable(a.value)) ?? false;
}
