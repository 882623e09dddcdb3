package e2e

import (
	"bytes"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/muster-io/muster/internal/sandbox"
)

// The sandbox starts a second control plane of its own in this process,
// runs its examples, prints the ready line and shuts down cleanly.
func TestSandboxRunsExamplesAndStops(t *testing.T) {
	dir := t.TempDir()
	var out, progress bytes.Buffer
	err := sandbox.Run(t.Context(), sandbox.Config{
		Nodes: 3, GPUsPerNode: 4, Zones: 3,
		Kubeconfig: filepath.Join(dir, "kubeconfig"),
		Stdout:     &out, Stderr: &progress,
	})
	if err != nil {
		t.Fatalf("sandbox: %v\nprogress:\n%s", err, progress.String())
	}
	text := out.String()
	if !strings.Contains(text, "ready: kubeconfig="+filepath.Join(dir, "kubeconfig")) {
		t.Errorf("no ready line in output:\n%s", text)
	}
	// Two 1-GPU pods of the example, Running on sandbox nodes with zones.
	running := regexp.MustCompile(`(?m)^\s+gpu-deployment-\S+\s+Running\s+gpu-node-\d\s+zone-\d\s+1$`).FindAllString(text, -1)
	if len(running) != 2 {
		t.Errorf("want 2 Running example pods in the summary, got %d:\n%s", len(running), text)
	}
	for _, step := range []string{"kube-apiserver ready", "3 nodes × 4 GPUs in 3 zones", "example gpu-deployment scheduled", "stopped in"} {
		if !strings.Contains(progress.String(), step) {
			t.Errorf("progress lacks %q:\n%s", step, progress.String())
		}
	}
}

// A kubeconfig that is not the sandbox's own is never overwritten (the
// sandbox deletes its kubeconfig at exit).
func TestSandboxRefusesForeignKubeconfig(t *testing.T) {
	path := filepath.Join(t.TempDir(), "config")
	foreign := "apiVersion: v1\nkind: Config\ncontexts:\n- name: prod\n  context: {cluster: prod, user: me}\ncurrent-context: prod\n"
	if err := os.WriteFile(path, []byte(foreign), 0o600); err != nil {
		t.Fatal(err)
	}
	var out, progress bytes.Buffer
	err := sandbox.Run(t.Context(), sandbox.Config{Nodes: 1, Zones: 1, Kubeconfig: path, Stdout: &out, Stderr: &progress})
	if err == nil || !strings.Contains(err.Error(), `context "prod"`) {
		t.Fatalf("Run with a foreign kubeconfig: err = %v, want a refusal naming the context", err)
	}
	if b, _ := os.ReadFile(path); string(b) != foreign {
		t.Errorf("foreign kubeconfig changed:\n%s", b)
	}
}
