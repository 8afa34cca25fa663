cd /work/main
run() { TEST_DATABASE_URL=postgres://postgres@127.0.0.1:5432/postgres BENCH_ROUNDS=5 BENCH_WORKLOADS=W2,W1 BENCH_REQUESTS=20000 BENCH_ORDERS=5000 BENCH_CUSTOMERS=5000 npx tsx bench/rest-cpu.ts 2>&1 | grep -E "^least|PROMISE" | tail -3; }
echo "== B"; run
git stash -q; echo "== A"; run; git stash pop -q
echo "== B"; run
git stash -q; echo "== A"; run; git stash pop -q
