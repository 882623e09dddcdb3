package jq

import (
	"context"
	"testing"
	"time"
)

var ctxT = context.Background()

// limitsT are the limits the definition package runs with by default
// (10000 results), with the given timeout.
func limitsT(timeout time.Duration) Limits {
	return Limits{Timeout: timeout, MaxResults: 10000}
}

// compileT compiles src, which must compile.
func compileT(t testing.TB, src string) *Expr {
	t.Helper()
	e, err := Compile(src, nil)
	if err != nil {
		t.Fatalf("%s: %v", src, err)
	}
	return e
}
