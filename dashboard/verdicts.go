package dashboard

import (
	"context"
	"encoding/json"
	"net/http"
	"slices"
	"strings"
	"sync"
	"time"
)

// FitFunc judges one workload as `muster fit` does, in a line.
type FitFunc func(ctx context.Context, apiVersion, kind, namespace, name string) (Verdict, error)

// Verdict is fit's answer for the gangs table.
type Verdict struct {
	// Verdict is fit's: "fits now", "fits after preempting", "does not
	// fit", "no gang" or "not evaluated".
	Verdict string `json:"verdict"`
	// Summary is what would let the workload start, in fit's words: the
	// victims, or why it never fits here.
	Summary string `json:"summary"`
}

// verdictCache keeps each workload's last verdict for a while and runs one
// fit at a time: each fit lists every node and pod, so a page of waiting
// gangs must not become a burst of full lists against the API server.
type verdictCache struct {
	mu      sync.Mutex
	entries map[[4]string]verdictEntry
	run     sync.Mutex // held while a fit runs
}

type verdictEntry struct {
	at time.Time
	v  Verdict
}

// maxVerdicts bounds the cache; past it, the oldest half goes.
const maxVerdicts = 2048

func (c *verdictCache) get(key [4]string, ttl time.Duration, now time.Time) (Verdict, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	e, ok := c.entries[key]
	if !ok || now.Sub(e.at) >= ttl {
		return Verdict{}, false
	}
	return e.v, true
}

func (c *verdictCache) put(key [4]string, v Verdict, now time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.entries == nil {
		c.entries = map[[4]string]verdictEntry{}
	}
	if len(c.entries) >= maxVerdicts {
		times := make([]time.Time, 0, len(c.entries))
		for _, e := range c.entries {
			times = append(times, e.at)
		}
		slices.SortFunc(times, time.Time.Compare)
		cut := times[len(times)/2]
		for k, e := range c.entries {
			if !e.at.After(cut) {
				delete(c.entries, k)
			}
		}
	}
	c.entries[key] = verdictEntry{at: now, v: v}
}

// verdict returns key's verdict from the cache or from one run of f.
func (c *verdictCache) verdict(ctx context.Context, key [4]string, ttl time.Duration, f FitFunc) (Verdict, error) {
	if v, ok := c.get(key, ttl, time.Now()); ok {
		return v, nil
	}
	c.run.Lock()
	defer c.run.Unlock()
	// Another request may have answered it while this one waited.
	if v, ok := c.get(key, ttl, time.Now()); ok {
		return v, nil
	}
	if err := ctx.Err(); err != nil {
		return Verdict{}, err
	}
	v, err := f(ctx, key[0], key[1], key[2], key[3])
	if err != nil {
		return Verdict{}, err
	}
	c.put(key, v, time.Now())
	return v, nil
}

func (s *Server) fit(w http.ResponseWriter, r *http.Request) {
	args, ok := workloadArgs(w, r)
	if !ok {
		return
	}
	w.Header().Set("Content-Type", "application/json")
	if s.Fit == nil {
		w.WriteHeader(http.StatusNotImplemented)
		_ = json.NewEncoder(w).Encode(map[string]string{"error": "fit is not available"})
		return
	}
	ttl := s.FitTTL
	if ttl == 0 {
		ttl = 20 * time.Second
	}
	timeout := s.DetailTimeout
	if timeout == 0 {
		timeout = 30 * time.Second
	}
	ctx, cancel := context.WithTimeout(r.Context(), timeout)
	defer cancel()
	v, err := s.fits.verdict(ctx, args, ttl, s.Fit)
	if err != nil {
		w.WriteHeader(http.StatusBadGateway)
		_ = json.NewEncoder(w).Encode(map[string]string{"error": strings.TrimSpace(err.Error())})
		return
	}
	_ = json.NewEncoder(w).Encode(v)
}
