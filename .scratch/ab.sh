# A/B of rest-cpu W2,W1,W3: current tree (B) vs stash (A)
cd /work/main
run() { TEST_DATABASE_URL=postgres://postgres@127.0.0.1:5432/postgres BENCH_ROUNDS=5 BENCH_WORKLOADS=W2,W1,W3 BENCH_REQUESTS=${REQ:-20000} BENCH_ORDERS=5000 BENCH_CUSTOMERS=5000 npx tsx bench/rest-cpu.ts 2>&1 | tail -8; }
echo "== B (change)"; run
git stash -q; echo "== A (base)"; run; git stash pop -q
echo "== B (change)"; run
