package e2e

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"k8s.io/kubernetes/cmd/kube-scheduler/app"
	"sigs.k8s.io/yaml"

	"github.com/muster-io/muster/localcluster"
	"github.com/muster-io/muster/plugins/gang"
)

// catSchedulerName is the profile of the shipped scheduler configuration;
// the full-stack tests use it unchanged, with the pod-grouper's default.
const catSchedulerName = "muster-scheduler"

// startShippedScheduler runs kube-scheduler's app path with the shipped
// manifests/scheduler-config.yaml. Only what cannot apply in-process
// changes: the kubeconfig (the control plane's instead of the in-cluster
// account) and leader election (off: app.Run exits the process when it loses
// a lease). The gang plugin is the shipped one, with its barrier releases
// recorded in barrierLog.
func startShippedScheduler(t testing.TB) {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(pgrRepoRoot(), "manifests", "scheduler-config.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var doc map[string]any
	if err := yaml.Unmarshal(data, &doc); err != nil {
		t.Fatalf("manifests/scheduler-config.yaml: %v", err)
	}
	profiles, _ := doc["profiles"].([]any)
	if len(profiles) != 1 || profiles[0].(map[string]any)["schedulerName"] != catSchedulerName {
		t.Fatalf("manifests/scheduler-config.yaml: want one profile %s, got %v", catSchedulerName, profiles)
	}
	doc["clientConnection"] = map[string]any{"kubeconfig": controlPlane.KubeconfigPath, "qps": 1000, "burst": 2000}
	doc["leaderElection"] = map[string]any{"leaderElect": false}
	out, err := yaml.Marshal(doc)
	if err != nil {
		t.Fatal(err)
	}
	stop, err := localcluster.StartSchedulerApp(context.Background(), controlPlane, out, app.WithPlugin(gang.Name, newObservedGang))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(stop)
}
