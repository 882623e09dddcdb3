#!/bin/bash
# one line per config: allocation, drain, writes/pod and failed attempts per rep
for f in "$@"; do
awk '
/^=== .* start s2/ {cfg=$5; t=$2; match($0,/load average: [0-9.]+/); l0=substr($0,RSTART+14,RLENGTH-14); alloc=""; drain=""; wr=""; fail=""; nf=0; next}
/result=unschedulable/ {split($1,a," "); fails[nrep]=$2; next}
/counters:/ {nrep=$5+0; fails[nrep]=0; next}
/rep .: drained/ {match($0,/in [0-9.]+s/); d=substr($0,RSTART+3,RLENGTH-4); match($0,/queued [0-9.]+%/); al=substr($0,RSTART+7,RLENGTH-7); alloc=alloc al " "; drain=drain d " "; next}
/writes .* per pod/ {match($0,/writes [0-9.]+/); wr=wr substr($0,RSTART+7,RLENGTH-7) " "; next}
/^=== .* end s2/ {match($0,/load average: [0-9.]+/); l1=substr($0,RSTART+14,RLENGTH-14); fl=""; for(i=0;i<3;i++) fl=fl fails[i]+0 " "; printf "%s %s | alloc %%: %s| drain s: %s| writes/pod: %s| failed attempts: %s| 1-min load %s -> %s\n", t, cfg, alloc, drain, wr, fl, l0, l1; delete fails}
' "$f"
done
