// Loaded with `node --import`: records every module specifier the process resolves from then on,
// one per line, in the file RECORD_IMPORTS names (what a test checks a process has loaded).
import { register } from "node:module";

register(new URL("./record-imports-hooks.mjs", import.meta.url), {
  data: { file: process.env.RECORD_IMPORTS },
});
