#!/bin/bash
# Scrape the running muster-podgrouper's /metrics every 5 s into $1/metrics-<seconds>.txt until it exits.
out=$1; mkdir -p $out
while ! pgrep -f 'muster-podgrouper --kubeconfig' >/dev/null; do sleep 0.5; done
addr=$(ps -o args= -p $(pgrep -f 'muster-podgrouper --kubeconfig' | head -1) | sed -n 's/.*--bind-address \([^ ]*\).*/\1/p')
t0=$(date +%s)
while pgrep -f 'muster-podgrouper --kubeconfig' >/dev/null; do
  t=$(( $(date +%s) - t0 ))
  curl -s --max-time 3 http://$addr/metrics > $out/metrics-$(printf %04d $t).txt || break
  sleep 5
done
