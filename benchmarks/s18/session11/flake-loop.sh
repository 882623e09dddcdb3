#!/bin/bash
# The e2e binaries: /tmp/s11/e2e-old.test built at 8e7fa34 with 08bebe1's test/e2e/faults_test.go, /tmp/s11/e2e-new.test at 08bebe1.
# old binary (HEAD 8e7fa34 + the reordered test), then the fix, one test at a time
for i in 1 2 3 4; do
  (cd /tmp/wt-old/test/e2e && /tmp/s11/e2e-old.test -test.run 'TestFaultStaleNominations$' -test.v > /tmp/s11/old-$i.log 2>&1); echo "old $i rc=$? $(grep -E '^--- ' /tmp/s11/old-$i.log)"
done
for i in $(seq 20); do
  (cd /work/main/test/e2e && /tmp/s11/e2e-new.test -test.run 'TestFaultStaleNominations$' -test.v > /tmp/s11/new-$i.log 2>&1); echo "new $i rc=$? $(grep -E '^--- ' /tmp/s11/new-$i.log)"
done
