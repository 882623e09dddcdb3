package app

import (
	"io"
	"strings"
	"testing"

	"k8s.io/klog/v2"
)

// Validate must leave the process's logging alone: in-process users (the
// e2e tests) silence klog, and applying the flags would undo that for the
// rest of the test binary.
func TestValidateDoesNotApplyLogging(t *testing.T) {
	if klog.V(7).Enabled() {
		t.Fatal("klog verbosity 7 is already on; the test cannot tell")
	}
	o := NewOptions()
	o.Logs.Verbosity = 7
	if err := o.Validate(); err != nil {
		t.Fatalf("Validate: %v", err)
	}
	if klog.V(7).Enabled() {
		t.Error("Validate applied -v=7 to klog; only ApplyLogging may")
	}
}

func TestValidateChecksLoggingFlags(t *testing.T) {
	cmd := NewCommand()
	cmd.SetArgs([]string{"--logging-format=nope"})
	cmd.SetOut(io.Discard)
	cmd.SetErr(io.Discard)
	err := cmd.Execute()
	if err == nil || !strings.Contains(err.Error(), "nope") {
		t.Fatalf("error = %v, want the unknown logging format named", err)
	}
}
