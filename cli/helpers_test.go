package cli

import (
	"bytes"
	"context"
	"flag"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"k8s.io/cli-runtime/pkg/genericiooptions"
)

var update = flag.Bool("update", false, "rewrite the golden files under testdata/ with the current output")

// fixedNow is the clock of every test: ages in golden files do not move.
var fixedNow = time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)

// repoRoot is the module root, found from this file.
func repoRoot(t testing.TB) string {
	t.Helper()
	_, file, _, ok := runtime.Caller(0)
	if !ok {
		t.Fatal("cannot locate the test file")
	}
	return filepath.Clean(filepath.Join(filepath.Dir(file), ".."))
}

type result struct {
	stdout, stderr string
	code           int
}

// run runs the muster command in-process the way main does.
func run(t testing.TB, cluster *Cluster, stdin string, args ...string) result {
	t.Helper()
	var out, errOut bytes.Buffer
	env := NewEnv(genericiooptions.IOStreams{In: strings.NewReader(stdin), Out: &out, ErrOut: &errOut})
	env.Now = func() time.Time { return fixedNow }
	env.Getenv = func(string) string { return "" }
	if cluster != nil {
		env.NewCluster = func() (*Cluster, error) { return cluster, nil }
	}
	code := Run(context.Background(), env, args)
	return result{stdout: out.String(), stderr: errOut.String(), code: code}
}

// golden compares got with testdata/<name>; with -update it rewrites it.
func golden(t *testing.T, name, got string) {
	t.Helper()
	path := filepath.Join("testdata", name)
	if *update {
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("read golden file: %v (create it with: go test ./cli -run '%s' -update)", err, t.Name())
	}
	if diff := cmp.Diff(string(want), got); diff != "" {
		t.Errorf("%s differs from the output (-golden +got):\n%s\nIf the change is intended, regenerate with: go test ./cli -run '%s' -update, and review the diff", path, diff, t.Name())
	}
}
