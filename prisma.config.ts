import { defineConfig } from "prisma/config";

// The CLI is used only for `prisma generate`; the service applies prisma/migrations itself.
export default defineConfig({
  schema: "prisma/schema.prisma",
});
