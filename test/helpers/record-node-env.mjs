// Loaded with `node --import`: when the process exits, writes its NODE_ENV (what the modules it
// loaded saw) to the file RECORD_NODE_ENV names.
import { writeFileSync } from "node:fs";

const file = process.env.RECORD_NODE_ENV;
if (file) process.on("exit", () => writeFileSync(file, String(process.env.NODE_ENV)));
