package localcluster_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/muster-io/muster/localcluster"
)

func TestWaitForNamesExpectationAndLastSeen(t *testing.T) {
	err := localcluster.WaitFor(t.Context(), 100*time.Millisecond, "the answer", func(context.Context) (bool, string, error) {
		return false, "41", nil
	})
	if err == nil || !strings.Contains(err.Error(), "the answer") || !strings.Contains(err.Error(), "last seen: 41") {
		t.Errorf("WaitFor error = %v, want it to name the expectation and the last value seen", err)
	}
}

func TestConsistently(t *testing.T) {
	errAPI := errors.New("the server is on fire")
	const period = 200 * time.Millisecond
	tests := []struct {
		name string
		// cond answers sample n (1-based).
		cond func(n int) (bool, string, error)
		// ctxTimeout, if set, ends the context before the period.
		ctxTimeout time.Duration
		// wantErr: the error must contain every string; none: nil error.
		wantErr []string
		wantIs  error
		// wantSamples is the least number of samples taken.
		wantSamples int
	}{
		{
			name:        "holds for the whole period",
			cond:        func(int) (bool, string, error) { return true, "0 bound", nil },
			wantSamples: 2, // at the start and once the period has passed
		},
		{
			name: "breaks on the third sample",
			cond: func(n int) (bool, string, error) {
				return n < 3, fmt.Sprintf("%d bound", n-1), nil
			},
			wantErr:     []string{"no pod bound broke after", "of 200ms", "2 bound"},
			wantSamples: 3,
		},
		{
			name:        "breaks at once",
			cond:        func(int) (bool, string, error) { return false, "", nil },
			wantErr:     []string{"no pod bound broke after", "nothing"},
			wantSamples: 1,
		},
		{
			name: "a condition error is an error",
			cond: func(n int) (bool, string, error) {
				if n == 2 {
					return false, "half a list", errAPI
				}
				return true, "", nil
			},
			wantErr:     []string{"checking that no pod bound for 200ms", "half a list"},
			wantIs:      errAPI,
			wantSamples: 2,
		},
		{
			name:        "the context ending first is an error",
			cond:        func(int) (bool, string, error) { return true, "", nil },
			ctxTimeout:  50 * time.Millisecond,
			wantErr:     []string{"checking that no pod bound for 200ms"},
			wantIs:      context.DeadlineExceeded,
			wantSamples: 1,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ctx := t.Context()
			if tt.ctxTimeout > 0 {
				var cancel context.CancelFunc
				ctx, cancel = context.WithTimeout(ctx, tt.ctxTimeout)
				defer cancel()
			}
			samples := 0
			begin := time.Now()
			err := localcluster.Consistently(ctx, period, "no pod bound", func(context.Context) (bool, string, error) {
				samples++
				return tt.cond(samples)
			})
			elapsed := time.Since(begin)
			if samples < tt.wantSamples {
				t.Errorf("%d samples, want at least %d", samples, tt.wantSamples)
			}
			if tt.wantErr == nil {
				if err != nil {
					t.Fatalf("Consistently = %v, want nil", err)
				}
				if elapsed < period {
					t.Errorf("returned after %s, before the period of %s was over", elapsed, period)
				}
				return
			}
			if err == nil {
				t.Fatalf("Consistently = nil after %d samples, want an error", samples)
			}
			for _, want := range tt.wantErr {
				if !strings.Contains(err.Error(), want) {
					t.Errorf("error %q lacks %q", err, want)
				}
			}
			if tt.wantIs != nil && !errors.Is(err, tt.wantIs) {
				t.Errorf("error %v does not wrap %v", err, tt.wantIs)
			}
		})
	}
}
