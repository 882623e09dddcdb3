package app

import (
	"io"
	"strings"
	"testing"

	"github.com/spf13/pflag"
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

func TestValidateFlags(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string // "" = valid
	}{
		{args: nil},
		{args: []string{"--kube-api-content-type=application/json"}},
		{args: []string{"--kube-api-content-type=application/yaml"}, want: `--kube-api-content-type: "application/yaml"`},
		{args: []string{"--workers=0"}, want: "--workers: 0"},
		{args: []string{"--kube-api-qps=0"}, want: "--kube-api-qps 0"},
		{args: []string{"--max-owner-depth=0"}, want: "--max-owner-depth: 0"},
		{args: []string{"--scheduler-name="}, want: "--scheduler-name"},
		{args: []string{"--podgroup-api=native"}},
		{args: []string{"--podgroup-api=auto", "--webhook-cert-dir=/certs", "--webhook-secret="}},
		{args: []string{"--podgroup-api=volcano"}, want: `--podgroup-api: "volcano"`},
		{args: []string{"--podgroup-api=native", "--webhook-secret=tls"}, want: `--webhook-secret: "tls"`},
		{args: []string{"--podgroup-api=native", "--webhook-dns-name="}, want: "--webhook-dns-name"},
		{args: []string{"--podgroup-api=native", "--native-scheduler-name="}},
		{args: []string{"--podgroup-api=native", "--webhook-bind-address=", "--webhook-secret=x"}},
	} {
		o := NewOptions()
		fs := pflag.NewFlagSet("test", pflag.ContinueOnError)
		o.AddFlags(fs)
		if err := fs.Parse(tc.args); err != nil {
			t.Fatalf("%v: %v", tc.args, err)
		}
		err := o.Validate()
		switch {
		case tc.want == "" && err != nil:
			t.Errorf("%v: %v, want valid", tc.args, err)
		case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
			t.Errorf("%v: error %v, want one naming %q", tc.args, err, tc.want)
		}
	}
}
