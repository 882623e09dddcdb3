#!/bin/bash
# usage: run.sh NAME BENCH ENV...   (runs the e2e bench binary from /tmp/wtb)
NAME=$1; BENCH=$2; shift 2
cd /tmp/wta/test/e2e
( while true; do echo "$(date -u +%H:%M:%S) $(uptime)"; sleep 30; done ) > /tmp/s7/load-$NAME.txt &
LP=$!
{
echo "=== $(date -u +%H:%M:%S) start $NAME commit=$(git rev-parse --short HEAD) nproc=$(nproc) $(uptime)"
echo "env: $*"
env MUSTER_BENCH_BIN=/tmp/wtb/bin MUSTER_BENCH_OUT=/tmp/s7/out-$NAME "$@" \
  /tmp/wta-e2e.test -test.v -test.run '^$' -test.bench "^$BENCH\$" -test.benchtime 1x -test.timeout 120m
echo "=== $(date -u +%H:%M:%S) end $NAME rc=$? $(uptime)"
} 2>&1 | grep --line-buffered -v '"logger":"etcd-client"' > /tmp/s7/log-$NAME.txt
kill $LP
