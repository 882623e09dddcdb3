package localcluster

import (
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
)

// stopBound is far below the apiserver's request timeout (60 s), which is
// what Stop waited for each open watch before the harness passed a watch
// grace period; it is a hang bound, not a speed goal.
const stopBound = 30 * time.Second

// A client's open watch (a user's `kubectl get -w` on the sandbox) neither
// holds Stop for the apiserver's request timeout nor outlives it.
func TestStopEndsOpenWatches(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a control plane; not in -short")
	}
	cp, err := Start(Options{})
	if err != nil {
		t.Fatal(err)
	}
	stopped := false
	defer func() {
		if !stopped {
			cp.Stop()
		}
	}()
	var watches []watch.Interface
	for _, ns := range []string{"", "default"} {
		w, err := cp.Client.CoreV1().Pods(ns).Watch(t.Context(), metav1.ListOptions{})
		if err != nil {
			t.Fatal(err)
		}
		defer w.Stop()
		watches = append(watches, w)
	}
	w, err := cp.Client.CoreV1().Events("").Watch(t.Context(), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Stop()
	watches = append(watches, w)

	done := make(chan struct{})
	start := time.Now()
	go func() {
		defer close(done)
		cp.Stop()
	}()
	select {
	case <-done:
		stopped = true
		t.Logf("Stop returned %v after it was called, with %d watches open", time.Since(start), len(watches))
	case <-time.After(stopBound):
		t.Fatalf("Stop has not returned %v after it was called: the apiserver waits for the open watches", stopBound)
	}
	for i, w := range watches {
		select {
		case _, open := <-w.ResultChan():
			for open {
				_, open = <-w.ResultChan()
			}
		case <-time.After(stopBound):
			t.Errorf("watch %d still open %v after Stop returned", i, stopBound)
		}
	}
}
