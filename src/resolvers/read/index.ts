// The read resolvers: plain async functions over a ReadContext, shared by REST and GraphQL.
export { type ReadContext, type ReadDeps, createReadContext } from "./context.ts";
export { listRecords, listRecordsBySort } from "./list.ts";
export { getRecord } from "./get.ts";
export { countRecords } from "./count.ts";
export {
  describeDimension,
  listDimensions,
  describeFields,
  listFieldConfigurations,
  listFieldDefinitions,
} from "./describe.ts";
export {
  attachRelationTree,
  type EmbeddedRelation,
  loadPlannedRelation,
  loadRelated,
  type RelationTree,
} from "./expand.ts";
export { listRelatedPages } from "./related-pages.ts";
export { type DimensionEvent, subscribeToEvents } from "./events.ts";
export { type LookupQuery, lookupValues, MAX_LOOKUP_ITEMS } from "./lookup.ts";
export type * from "./types.ts";
export type { DataRecord, DebugInfo } from "./common.ts";
