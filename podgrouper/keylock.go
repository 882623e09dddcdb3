package podgrouper

import "sync"

// keyLocks serializes work on one key and only on that key. The PodGroup
// writes need exactly that: the members of one gang, synced by several
// workers at once, must not race to create its PodGroup, but two gangs must
// never wait on each other. A hashed lock set (k8s.io/utils/keymutex) shares
// a lock between unrelated keys, held across an API round trip; with its
// default of one lock per CPU, a 2-core pod-grouper catching up with 64
// workers spent 300–550 ms of a gang's first 400–640 ms reconcile waiting
// for another gang's create (scenario 3b of BENCHMARKS.md, at 00531f6).
//
// Entries live while the key is held or awaited, so memory is bounded by
// the number of workers, not by the number of PodGroups.
type keyLocks struct {
	mu    sync.Mutex
	locks map[string]*keyLock
}

type keyLock struct {
	mu   sync.Mutex
	refs int // holders and waiters; guarded by keyLocks.mu
}

func newKeyLocks() *keyLocks { return &keyLocks{locks: map[string]*keyLock{}} }

// lock takes key's lock and returns its release.
func (k *keyLocks) lock(key string) (unlock func()) {
	k.mu.Lock()
	l := k.locks[key]
	if l == nil {
		l = &keyLock{}
		k.locks[key] = l
	}
	l.refs++
	k.mu.Unlock()

	l.mu.Lock()
	return func() {
		l.mu.Unlock()
		k.mu.Lock()
		if l.refs--; l.refs == 0 {
			delete(k.locks, key)
		}
		k.mu.Unlock()
	}
}
