#!/bin/bash
# usage: run.sh WT NAME BENCH ENV...
# Runs BENCH (full name) from the e2e test binary /tmp/s8/e2e-WT.test, built
# in the worktree /tmp/wt-WT (with `make build` there for the binaries), and
# writes its output to /tmp/s8/log-NAME.txt with the load every 30 s beside it.
WT=$1; NAME=$2; BENCH=$3; shift 3
cd /tmp/wt-$WT/test/e2e
( while true; do echo "$(date -u +%H:%M:%S) $(uptime)"; sleep 30; done ) > /tmp/s8/load-$NAME.txt &
LP=$!
{
echo "=== $(date -u +%H:%M:%S) start $NAME commit=$(git rev-parse --short HEAD) nproc=$(nproc) $(uptime)"
echo "env: $*"
env MUSTER_BENCH_BIN=/tmp/wt-$WT/bin MUSTER_BENCH_OUT=/tmp/s8/out-$NAME "$@" \
  /tmp/s8/e2e-$WT.test -test.v -test.run '^$' -test.bench "^$BENCH\$" -test.benchtime 1x -test.timeout 120m
echo "=== $(date -u +%H:%M:%S) end $NAME rc=$? $(uptime)"
} 2>&1 | grep --line-buffered -v '"logger":"etcd-client"' > /tmp/s8/log-$NAME.txt
kill $LP
