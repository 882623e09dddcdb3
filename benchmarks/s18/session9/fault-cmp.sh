#!/bin/bash
# Runs the scheduler-kill fault test from worktrees /tmp/wt-old (8e9624f) and
# /tmp/wt-new (the fix), test binaries /tmp/s9/e2e-{old,new}.test.
# Alternates the scheduler-kill fault test from 8e9624f (old) and HEAD (new)
# on one CPU shared with three busy loops, same seeds.
(taskset -c 0 yes >/dev/null & taskset -c 0 yes >/dev/null & taskset -c 0 yes > /dev/null & wait) &
Y=$!
for seed in 1796195293041685835 1796197568497233195 1796197668903935864; do
  for v in old new; do
    cd /tmp/wt-$v/test/e2e
    MUSTER_FAULT_SEED=$seed taskset -c 0 timeout 300 /tmp/s9/e2e-$v.test -test.count=1 -test.run 'TestFaultSchedulerKills$' -test.v 2>&1 | grep -v '"logger":"etcd-client"' > /tmp/s9/fc-$v-$seed.log
    echo "$v $seed rc=$? $(grep -E '^--- ' /tmp/s9/fc-$v-$seed.log) | $(grep -oE 'all settled [0-9.]+s after the start: [0-9]+ gangs ran whole, [0-9]+ evicted' /tmp/s9/fc-$v-$seed.log) | $(grep -oE '[0-9]+ partial episodes ended in eviction|longest partial episode [0-9.a-z]+' /tmp/s9/fc-$v-$seed.log | tr '\n' ' ')"
  done
done
pkill yes
