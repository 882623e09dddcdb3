// Command operators builds the real operators the in-process cluster runs
// (localcluster/operators/<name>), into the cache the tests and the sandbox
// read them from, one line per operator with the time it took. CI runs it
// as its own step before the tests, so that a test's time is its own; a
// warm cache makes it a no-op.
//
//	go run ./hack/operators [NAME...]
package main

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"sync"
	"time"

	"github.com/muster-io/muster/localcluster/operators"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	names := os.Args[1:]
	if len(names) == 0 {
		names = operators.Names()
	}
	if len(names) == 0 {
		fmt.Fprintln(os.Stderr, "operators: none found (is this a source tree?)")
		os.Exit(1)
	}
	// In parallel: each build is one go command, and the operators share
	// most of their dependencies through the build cache.
	var wg sync.WaitGroup
	errs := make([]error, len(names))
	for i, name := range names {
		wg.Go(func() {
			start := time.Now()
			bin, err := operators.Build(ctx, name)
			if err != nil {
				errs[i] = err
				return
			}
			fmt.Printf("operator %s: %s (%s)\n", name, bin, time.Since(start).Round(time.Second))
		})
	}
	wg.Wait()
	failed := false
	for _, err := range errs {
		if err != nil {
			fmt.Fprintln(os.Stderr, "error:", err)
			failed = true
		}
	}
	if failed {
		os.Exit(1)
	}
}
