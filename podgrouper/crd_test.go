package podgrouper

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// repoRoot is the module root, two levels up from this package's directory
// in the test's working directory.
func repoRoot(t *testing.T) string {
	t.Helper()
	root, err := filepath.Abs("..")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(root, "go.mod")); err != nil {
		t.Fatalf("module root not found at %s: %v", root, err)
	}
	return root
}

// TestKartaCRDUpToDate regenerates the Karta CRD from api/v1alpha1/types.go
// with the pinned controller-gen and compares it with the shipped file, so
// a type change without `make manifests` fails here.
func TestKartaCRDUpToDate(t *testing.T) {
	if testing.Short() {
		t.Skip("builds controller-gen; not in -short")
	}
	root := repoRoot(t)
	tmp := t.TempDir()
	bin := filepath.Join(tmp, "controller-gen")
	build := exec.Command("go", "build", "-o", bin, "sigs.k8s.io/controller-tools/cmd/controller-gen")
	build.Dir = filepath.Join(root, "hack", "tools")
	// Offline: the module cache must already hold controller-gen.
	build.Env = append(os.Environ(), "GOPROXY=off", "GOFLAGS=-mod=mod")
	if out, err := build.CombinedOutput(); err != nil {
		t.Skipf("controller-gen (hack/tools/go.mod) cannot be built offline, so the CRD drift check cannot run: %v\n%s", err, out)
	}
	out := filepath.Join(tmp, "crds")
	gen := exec.Command(bin, "crd", "paths=./api/...", "output:crd:artifacts:config="+out)
	gen.Dir = root
	if msg, err := gen.CombinedOutput(); err != nil {
		t.Fatalf("controller-gen: %v\n%s", err, msg)
	}
	want, err := os.ReadFile(filepath.Join(out, "run.ai_kartas.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	got, err := os.ReadFile(filepath.Join(root, "manifests", "crds", "run.ai_kartas.yaml"))
	if err != nil {
		t.Fatalf("%v; run make manifests", err)
	}
	if diff := cmp.Diff(string(want), string(got)); diff != "" {
		t.Errorf("manifests/crds/run.ai_kartas.yaml is out of date with api/v1alpha1/types.go; run make manifests (-generated +shipped):\n%s", diff)
	}
}

// TestPodGroupCRDMatchesModule checks the shipped PodGroup CRD is the one of
// the scheduler-plugins version in go.mod.
func TestPodGroupCRDMatchesModule(t *testing.T) {
	root := repoRoot(t)
	cmd := exec.Command("go", "list", "-m", "-f", "{{.Dir}}", "sigs.k8s.io/scheduler-plugins")
	cmd.Dir = root
	dir, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list -m sigs.k8s.io/scheduler-plugins: %v", err)
	}
	want, err := os.ReadFile(filepath.Join(strings.TrimSpace(string(dir)), "config", "crd", "bases", "scheduling.x-k8s.io_podgroups.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	got, err := os.ReadFile(filepath.Join(root, "manifests", "crds", "scheduling.x-k8s.io_podgroups.yaml"))
	if err != nil {
		t.Fatalf("%v; run make manifests", err)
	}
	if !bytes.Equal(want, got) {
		t.Error("manifests/crds/scheduling.x-k8s.io_podgroups.yaml differs from the scheduler-plugins module's; run make manifests")
	}
}
