package dashboard

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// TestVerdictCache: concurrent asks for one workload run fit once; an
// answer is reused within its TTL and asked again after; fits never run
// two at a time; an error is not cached; the cache stays bounded.
func TestVerdictCache(t *testing.T) {
	var calls, running, overlap atomic.Int32
	release := make(chan struct{})
	f := func(ctx context.Context, apiVersion, kind, ns, name string) (Verdict, error) {
		if running.Add(1) > 1 {
			overlap.Add(1)
		}
		defer running.Add(-1)
		calls.Add(1)
		<-release
		if name == "bad" {
			return Verdict{}, errors.New("boom")
		}
		return Verdict{Verdict: "fits now", Summary: name}, nil
	}
	var c verdictCache
	key := func(name string) [4]string { return [4]string{"v1", "Pod", "ns", name} }
	var wg sync.WaitGroup
	for _, name := range []string{"a", "a", "a", "b"} {
		wg.Add(1)
		go func() {
			defer wg.Done()
			v, err := c.verdict(context.Background(), key(name), time.Minute, f)
			if err != nil || v.Summary != name {
				t.Errorf("%s: %+v, %v", name, v, err)
			}
		}()
	}
	time.AfterFunc(50*time.Millisecond, func() { close(release) })
	wg.Wait()
	if calls.Load() != 2 || overlap.Load() != 0 {
		t.Errorf("%d fits (want 2: one per workload), %d overlapping (want 0)", calls.Load(), overlap.Load())
	}
	if _, err := c.verdict(context.Background(), key("bad"), time.Minute, f); err == nil {
		t.Error("an error was not returned")
	}
	if _, err := c.verdict(context.Background(), key("bad"), time.Minute, f); err == nil || calls.Load() != 4 {
		t.Errorf("the error was cached: %d fits, want 4", calls.Load())
	}
	if _, err := c.verdict(context.Background(), key("a"), 0, f); err != nil || calls.Load() != 5 {
		t.Errorf("an expired verdict was reused: %d fits, want 5 (%v)", calls.Load(), err)
	}
	now := time.Now()
	for i := range maxVerdicts + 10 {
		c.put([4]string{"v1", "Pod", "ns", string(rune('a'+i%26)) + time.Duration(i).String()}, Verdict{}, now.Add(time.Duration(i)))
	}
	if n := len(c.entries); n > maxVerdicts {
		t.Errorf("%d entries, want at most %d", n, maxVerdicts)
	}
}
