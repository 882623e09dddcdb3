package cli

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"k8s.io/cli-runtime/pkg/genericiooptions"

	"github.com/muster-io/muster/catalog"
	"github.com/muster-io/muster/definition"
)

func TestExitCode(t *testing.T) {
	tests := []struct {
		err  error
		want int
	}{
		{nil, ExitOK},
		{errors.New("x"), ExitInvalid},
		{usageErrorf("x"), ExitUsage},
		{notFoundErrorf("x"), ExitNotFound},
		{noDefinitionErrorf("x"), ExitNoDefinition},
		{unreachableErrorf("x"), ExitUnreachable},
		{withCode(ExitNotFound, usageErrorf("inner wins")), ExitUsage},
	}
	for _, tc := range tests {
		if got := ExitCode(tc.err); got != tc.want {
			t.Errorf("ExitCode(%v) = %d, want %d", tc.err, got, tc.want)
		}
	}
}

func TestUsageErrors(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"descibe"}, `did you mean "describe"`},
		{[]string{"describe", "--nope"}, "unknown flag: --nope"},
		{[]string{"describe"}, "needs TYPE/NAME"},
		{[]string{"describe", "-f", "x.yaml", "jobset/x"}, "not both"},
		{[]string{"describe", "jobset/x", "--pods", "p.yaml"}, "-f FILE only"},
		{[]string{"describe", "-f", "x.yaml", "-o", "xml"}, "-o must be one of"},
		{[]string{"describe", "-f", "x.yaml", "--pod-limit", "-1"}, "--pod-limit"},
		{[]string{"get", "--color", "sometimes"}, "--color must be"},
		{[]string{"get", "jobset/x", "y"}, "NAME given twice"},
		{[]string{"get", "jobset/"}, "want TYPE/NAME"},
		{[]string{"get", "a", "b", "c"}, "got 3 arguments"},
		{[]string{"get", "jobset", "x", "-l", "a=b"}, "NAME or --selector"},
		{[]string{"get", "-l", "a in (b"}, "--selector"},
		{[]string{"get", "--phase", "Sleeping"}, "want one of Resuming, Suspending, Suspended, Running"},
		{[]string{"get", "--chunk-size", "-1"}, "--chunk-size must be 0"},
		{[]string{"get", "jobset", "--all-types"}, "not both"},
		{[]string{"describe", "jobset/x", "--component-limit", "-1"}, "--component-limit must be 0"},
	} {
		res := run(t, nil, "", tc.args...)
		if res.code != ExitUsage || !strings.Contains(res.stderr, tc.want) {
			t.Errorf("muster %v: exit %d, stderr %q; want exit 2 and %q", tc.args, res.code, res.stderr, tc.want)
		}
	}
}

// TestNoKubeconfig: live commands without a cluster exit 5 with a hint;
// offline ones still work.
func TestNoKubeconfig(t *testing.T) {
	t.Setenv("KUBECONFIG", filepath.Join(t.TempDir(), "nonexistent"))
	t.Setenv("HOME", t.TempDir())
	t.Setenv("KUBERNETES_SERVICE_HOST", "")
	res := run(t, nil, "", "describe", "jobset/x")
	if res.code != ExitUnreachable || !strings.Contains(res.stderr, "no cluster configured") {
		t.Errorf("describe: exit %d, stderr %q; want 5 and a hint", res.code, res.stderr)
	}
	res = run(t, nil, "", "version")
	if res.code != 0 || !strings.Contains(res.stdout, "Client Version: ") || !strings.Contains(res.stdout, "Server Version: unknown") {
		t.Errorf("version: exit %d, stdout %q", res.code, res.stdout)
	}
	res = run(t, nil, "", "definitions")
	if res.code != 0 || !strings.Contains(res.stdout, "jobset") || !strings.Contains(res.stderr, "embedded catalog only") {
		t.Errorf("definitions: exit %d, stdout %q, stderr %q; want the catalog and a warning", res.code, res.stdout, res.stderr)
	}
}

func TestHelpTeaches(t *testing.T) {
	root := NewRootCommand(NewEnv(genericiooptions.IOStreams{In: strings.NewReader(""), Out: &bytes.Buffer{}, ErrOut: &bytes.Buffer{}}))
	for _, c := range root.Commands() {
		if c.Name() == "help" || c.Name() == "completion" {
			continue
		}
		if c.Example == "" || c.Long == "" {
			t.Errorf("%s: no examples or long help", c.Name())
		}
	}
	res := run(t, nil, "", "--help")
	for _, want := range []string{"Exit codes:", "4  the type has no definition", "muster describe jobset/trainer", "--color"} {
		if !strings.Contains(res.stdout, want) {
			t.Errorf("muster --help lacks %q", want)
		}
	}
}

func TestCompletion(t *testing.T) {
	res := run(t, nil, "", "completion", "bash")
	if res.code != 0 || !strings.Contains(res.stdout, "__start_muster") {
		t.Errorf("completion bash: exit %d", res.code)
	}
	c := jobsetCluster(t, "Running")
	res = run(t, c, "", "__complete", "describe", "jobs")
	if !strings.Contains(res.stdout, "jobset\n") || !strings.Contains(res.stdout, "jobsets\n") || !strings.Contains(res.stdout, "jobset.jobset.x-k8s.io\n") {
		t.Errorf("type completion:\n%s", res.stdout)
	}
	res = run(t, c, "", "__complete", "-n", "train", "describe", "jobset/")
	if !strings.Contains(res.stdout, "jobset/llama-ft\n") {
		t.Errorf("name completion:\n%s", res.stdout)
	}
	res = run(t, c, "", "__complete", "-n", "train", "describe", "jobset", "ll")
	if !strings.Contains(res.stdout, "llama-ft\n") {
		t.Errorf("name completion (TYPE NAME):\n%s", res.stdout)
	}
}

func TestColor(t *testing.T) {
	dir := filepath.Join(repoRoot(t), "catalog", "testdata", "jobset")
	args := fixtureArgs(t, dir)
	res := run(t, nil, "", append(args[:len(args)-2:len(args)-2], "--color", "always")...)
	if !strings.Contains(res.stdout, "\x1b[") {
		t.Error("--color always: no colour")
	}
	// auto on a buffer (not a terminal) is plain; NO_COLOR keeps auto plain
	// even where it would colour.
	res = run(t, nil, "", fixtureArgs(t, dir)[:len(args)-2]...)
	if strings.Contains(res.stdout, "\x1b[") {
		t.Error("auto on a non-terminal: coloured")
	}
	var out bytes.Buffer
	env := NewEnv(genericiooptions.IOStreams{Out: &out, ErrOut: &out})
	env.Getenv = func(k string) string {
		if k == "NO_COLOR" {
			return "1"
		}
		return ""
	}
	if newPainter(env, os.Stdout).on {
		t.Error("NO_COLOR set: painter on")
	}
}

func TestDefinitions(t *testing.T) {
	res := run(t, nil, "", "definitions", "--offline", "--color", "never")
	if res.code != 0 {
		t.Fatalf("exit %d: %s", res.code, res.stderr)
	}
	golden(t, "definitions/list.txt", res.stdout)

	// One definition in full decodes back to the embedded one.
	res = run(t, nil, "", "definitions", "jobset", "--offline", "-o", "yaml")
	if res.code != 0 {
		t.Fatalf("exit %d: %s", res.code, res.stderr)
	}
	got, err := definition.Decode([]byte(res.stdout))
	if err != nil {
		t.Fatalf("printed definition does not decode: %v\n%s", err, res.stdout)
	}
	emb, err := catalog.Embedded()
	if err != nil {
		t.Fatal(err)
	}
	for _, k := range emb {
		if k.Name == "jobset" {
			if diff := cmp.Diff(k.Spec, got.Spec); diff != "" {
				t.Errorf("printed jobset differs from the embedded one (-want +got):\n%s", diff)
			}
		}
	}
	res = run(t, nil, "", "definitions", "jobsett", "--offline")
	if res.code != ExitNotFound || !strings.Contains(res.stderr, `did you mean "jobset"`) {
		t.Errorf("unknown name: exit %d, stderr %q", res.code, res.stderr)
	}
}

func TestGangGranularity(t *testing.T) {
	emb, err := catalog.Embedded()
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]string{}
	for _, k := range emb {
		got[k.Name] = gangGranularity(k)
	}
	for name, want := range map[string]string{"deployment": "none", "jobset": "workload"} {
		if got[name] != want {
			t.Errorf("%s: %q, want %q", name, got[name], want)
		}
	}
	if !strings.HasPrefix(got["leaderworkerset"], "per ") {
		t.Errorf("leaderworkerset: %q, want per-group", got["leaderworkerset"])
	}
}

func TestVersionJSON(t *testing.T) {
	c := jobsetCluster(t, "Running")
	res := run(t, c, "", "version", "--client", "-o", "json")
	if res.code != 0 || !strings.Contains(res.stdout, `"clientVersion": "dev"`) {
		t.Errorf("exit %d, stdout %q", res.code, res.stdout)
	}
	_ = context.Background
}
