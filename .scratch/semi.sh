cd /work/main
run() { TEST_DATABASE_URL=postgres://postgres@127.0.0.1:5432/postgres BENCH_ROUNDS=3 npx tsx bench/compare.ts 2>&1 | grep -vE "^\s*$" | grep -E "^\||load average|peak RSS" ; }
cp package.json /tmp/package.json.orig
sed -i 's/--max-semi-space-size=4 --heap-growing-percent=50/--max-semi-space-size=8 --heap-growing-percent=50/' package.json
grep '"start"' package.json
echo "== semi 8"; run
cp /tmp/package.json.orig package.json
grep '"start"' package.json
echo "== semi 4 (current)"; run
