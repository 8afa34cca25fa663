// Loaded first with `node --import` into every process test/helpers/process.ts spawns: when the
// process that spawned it is gone (a vitest worker ended while a test timed out, or was killed),
// the orphan is reparented, and it ends itself: SIGTERM to itself (the service's own shutdown),
// then a hard exit if that has not ended it within 10 s. A test that fails half-way through its
// start therefore leaves no service running. The check is a timer that does not keep a process
// alive (a CLI still exits when its work is done). The spawner names itself in TEST_PARENT_PID:
// a parent killed before this module ran has already left this process reparented.
const parent = Number(process.env.TEST_PARENT_PID) || process.ppid;
const watch = setInterval(() => {
  if (process.ppid === parent) return;
  clearInterval(watch);
  setTimeout(() => process.exit(1), 10_000).unref();
  process.kill(process.pid, "SIGTERM");
}, 250);
watch.unref();
