package jq

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"
)

// Runaway expressions that pass validation end with an error under the
// deadline instead of hanging.
func TestEvalRunaway(t *testing.T) {
	tests := []struct {
		src, want string
	}{
		// Every loop a definition can write ends by its step budget; the
		// ones jq makes unbounded (recursion, until, while, repeat, range)
		// are refused before they run (TestBombs).
		{"[.[] as $a | .[] as $b | .[] as $c | $a] | length", "steps"},
		{".[], .[]", "too many results"},
	}
	big := make([]any, 2000)
	for i := range big {
		big[i] = i
	}
	for _, tc := range tests {
		t.Run(tc.src, func(t *testing.T) {
			e := compileT(t, tc.src)
			_, err := e.Run(ctxT, big, Limits{Timeout: time.Minute, MaxResults: 1000}, nil)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error = %v, want %q", err, tc.want)
			}
		})
	}
}

// An evaluation stops when the caller's context ends, not only at its own
// deadline.
func TestEvalStopsWithCallerContext(t *testing.T) {
	e := compileT(t, "[.[] as $a | .[] as $b | $a] | length")
	ctx, cancel := context.WithCancel(ctxT)
	cancel()
	_, err := e.Run(ctx, []any{1, 2, 3}, limitsT(time.Hour), nil)
	if err == nil || !strings.Contains(err.Error(), context.Canceled.Error()) {
		t.Fatalf("error = %v, want %v", err, context.Canceled)
	}
}

// TestIteratedNull: iterating over null is ErrIteratedNull, whatever gojq
// calls it; iterating over another scalar stays an error of its own.
func TestIteratedNull(t *testing.T) {
	tests := []struct {
		src   string
		input any
		null  bool
	}{
		{".groups[].name", map[string]any{}, true},
		{".groups[] | .name", map[string]any{"groups": nil}, true},
		{".groups[].name", map[string]any{"groups": "x"}, false},
		{".groups[].name", map[string]any{"groups": 3}, false},
		{`error("cannot iterate")`, nil, false},
	}
	for _, tc := range tests {
		t.Run(tc.src, func(t *testing.T) {
			_, err := compileT(t, tc.src).Run(ctxT, tc.input, Limits{Timeout: time.Minute, MaxResults: 10}, nil)
			if err == nil {
				t.Fatal("no error")
			}
			if got := errors.Is(err, ErrIteratedNull); got != tc.null {
				t.Errorf("error %q: iterated null %v, want %v", err, got, tc.null)
			}
		})
	}
}
