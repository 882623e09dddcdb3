package podgrouper

import (
	"fmt"
	"sync"
	"testing"
	"time"
)

// TestKeyLocksDistinctKeysDoNotWait holds many keys at once, which a lock set
// shared between keys (one lock per CPU) cannot do.
func TestKeyLocksDistinctKeysDoNotWait(t *testing.T) {
	k := newKeyLocks()
	const n = 64
	unlocks := make(chan func(), n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() { unlocks <- k.lock(fmt.Sprintf("ns/pg-%d", i)) })
	}
	// Every lock must be taken while all the others are still held.
	for i := range n {
		select {
		case <-unlocks:
		case <-time.After(10 * time.Second):
			t.Fatalf("only %d of %d distinct keys locked at once", i, n)
		}
	}
	wg.Wait()
}

// TestKeyLocksSameKeyWaits checks that a second holder of one key waits for
// the first, and that released keys leave nothing behind.
func TestKeyLocksSameKeyWaits(t *testing.T) {
	k := newKeyLocks()
	unlock := k.lock("ns/a")
	got := make(chan func())
	go func() { got <- k.lock("ns/a") }()
	// The waiter must stay blocked for as long as the first holds the key.
	hold := time.NewTimer(200 * time.Millisecond)
	defer hold.Stop()
	select {
	case <-got:
		t.Fatal("a second holder took the key while the first held it")
	case <-hold.C:
	}
	unlock()
	var second func()
	select {
	case second = <-got:
	case <-time.After(10 * time.Second):
		t.Fatal("the waiter did not get the key after its release")
	}
	other := k.lock("ns/b")
	other()
	second()
	k.mu.Lock()
	defer k.mu.Unlock()
	if len(k.locks) != 0 {
		t.Errorf("%d keys left after every release, want 0", len(k.locks))
	}
}
