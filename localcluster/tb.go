package localcluster

import (
	"fmt"
	"io"
	"os"
	"sync"

	"k8s.io/kubernetes/test/utils/ktesting"
)

// processTB implements ktesting.TB for code that runs outside a test function
// (TestMain, the sandbox binary). The upstream apiserver test server wants a
// TB for its logging, temp dirs and cleanups; this one collects cleanups so
// that ControlPlane.Stop can run them, writes log lines to a writer, and turns
// Fatal into a panic that Start recovers into an error.
type processTB struct {
	name string
	out  io.Writer

	mu       sync.Mutex
	cleanups []func()
	failed   bool
	skipped  bool
	tempDirs []string
}

var _ ktesting.TB = (*processTB)(nil)

// fatalPanic marks a panic raised by Fatal/FailNow so Start can tell it from
// a real crash.
type fatalPanic struct{ msg string }

func newProcessTB(name string, out io.Writer) *processTB {
	if out == nil {
		out = io.Discard
	}
	return &processTB{name: name, out: out}
}

func (tb *processTB) Attr(key, value string) { tb.Logf("attr %s=%s", key, value) }

// Chdir is unsupported: changing the directory of a whole process that may
// run several tests would surprise them. Nothing in the control plane calls it.
func (tb *processTB) Chdir(dir string) { tb.Fatalf("Chdir(%q) is not supported outside a test", dir) }

func (tb *processTB) Cleanup(f func()) {
	tb.mu.Lock()
	defer tb.mu.Unlock()
	tb.cleanups = append(tb.cleanups, f)
}

// runCleanups runs the registered cleanups last-in first-out, like testing.T,
// and then removes the temp dirs handed out by TempDir.
func (tb *processTB) runCleanups() {
	for {
		tb.mu.Lock()
		n := len(tb.cleanups)
		if n == 0 {
			dirs := tb.tempDirs
			tb.tempDirs = nil
			tb.mu.Unlock()
			for _, d := range dirs {
				_ = os.RemoveAll(d)
			}
			return
		}
		f := tb.cleanups[n-1]
		tb.cleanups = tb.cleanups[:n-1]
		tb.mu.Unlock()
		f()
	}
}

func (tb *processTB) Error(args ...any) { tb.Log(args...); tb.Fail() }
func (tb *processTB) Errorf(format string, args ...any) {
	tb.Logf(format, args...)
	tb.Fail()
}

func (tb *processTB) Fail() {
	tb.mu.Lock()
	defer tb.mu.Unlock()
	tb.failed = true
}

func (tb *processTB) FailNow() {
	tb.Fail()
	panic(fatalPanic{msg: "FailNow called"})
}

func (tb *processTB) Failed() bool {
	tb.mu.Lock()
	defer tb.mu.Unlock()
	return tb.failed
}

func (tb *processTB) Fatal(args ...any) {
	tb.Fail()
	panic(fatalPanic{msg: fmt.Sprint(args...)})
}

func (tb *processTB) Fatalf(format string, args ...any) {
	tb.Fail()
	panic(fatalPanic{msg: fmt.Sprintf(format, args...)})
}

func (tb *processTB) Helper() {}

func (tb *processTB) Log(args ...any) { tb.write(fmt.Sprintln(args...)) }
func (tb *processTB) Logf(format string, args ...any) {
	tb.write(fmt.Sprintf(format, args...) + "\n")
}

func (tb *processTB) write(s string) {
	tb.mu.Lock()
	defer tb.mu.Unlock()
	_, _ = io.WriteString(tb.out, s)
}

func (tb *processTB) Name() string { return tb.name }

// Setenv sets the variable for the rest of the process and restores it on
// cleanup, like testing.T.Setenv does for one test.
func (tb *processTB) Setenv(key, value string) {
	old, had := os.LookupEnv(key)
	if err := os.Setenv(key, value); err != nil {
		tb.Fatalf("setenv %s: %v", key, err)
	}
	tb.Cleanup(func() {
		if had {
			_ = os.Setenv(key, old)
		} else {
			_ = os.Unsetenv(key)
		}
	})
}

func (tb *processTB) Skip(args ...any) { tb.Log(args...); tb.SkipNow() }
func (tb *processTB) Skipf(format string, args ...any) {
	tb.Logf(format, args...)
	tb.SkipNow()
}

func (tb *processTB) SkipNow() {
	tb.mu.Lock()
	tb.skipped = true
	tb.mu.Unlock()
	panic(fatalPanic{msg: "skipped"})
}

func (tb *processTB) Skipped() bool {
	tb.mu.Lock()
	defer tb.mu.Unlock()
	return tb.skipped
}

// TempDir returns a new directory that runCleanups removes.
func (tb *processTB) TempDir() string {
	dir, err := os.MkdirTemp("", "muster-harness-")
	if err != nil {
		tb.Fatalf("TempDir: %v", err)
	}
	tb.mu.Lock()
	tb.tempDirs = append(tb.tempDirs, dir)
	tb.mu.Unlock()
	return dir
}
