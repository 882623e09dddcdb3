package e2e

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/kubernetes/cmd/kube-scheduler/app"
	"sigs.k8s.io/yaml"

	"github.com/muster-io/muster/definition"
	"github.com/muster-io/muster/plugins/gang"
	"github.com/muster-io/muster/test/harness"
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
	stop, err := harness.StartSchedulerApp(context.Background(), controlPlane, out, app.WithPlugin(gang.Name, newObservedGang))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(stop)
}

// pgBindWatcher applies the rule of gang_helpers_test.go (see settleWindow)
// to PodGroups the pod-grouper made: pods are attributed to a gang by their
// scheduling.x-k8s.io/pod-group label instead of the test's "gang" label.
type pgBindWatcher struct {
	ns           string
	min          map[string]int
	stop, done   chan struct{}
	once         sync.Once
	mu           sync.Mutex
	samples      int
	partialSeen  int
	partialSince map[string]time.Time
	longest      time.Duration
	failures     []string
}

func watchPodGroupBinding(t testing.TB, ns string, minMember map[string]int) *pgBindWatcher {
	w := &pgBindWatcher{ns: ns, min: minMember, stop: make(chan struct{}), done: make(chan struct{}), partialSince: map[string]time.Time{}}
	go func() {
		defer close(w.done)
		tick := time.NewTicker(100 * time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-w.stop:
				return
			case <-tick.C:
			}
			w.sample(context.Background())
		}
	}()
	t.Cleanup(func() { w.check(t) })
	return w
}

func pgBoundPods(ctx context.Context, ns string) (map[string][]types.UID, error) {
	pods, err := controlPlane.Client.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, err
	}
	out := map[string][]types.UID{}
	for _, p := range pods.Items {
		if g := p.Labels[definition.LabelPodGroup]; g != "" && p.DeletionTimestamp == nil && p.Spec.NodeName != "" {
			out[g] = append(out[g], p.UID)
		}
	}
	return out, nil
}

func (w *pgBindWatcher) sample(ctx context.Context) {
	bound, err := pgBoundPods(ctx, w.ns)
	if err != nil {
		return
	}
	now := time.Now()
	w.mu.Lock()
	defer w.mu.Unlock()
	w.samples++
	for g := range bound {
		if _, ok := w.min[g]; !ok {
			w.failures = append(w.failures, fmt.Sprintf("pods bound in PodGroup %s, which the test does not expect", g))
			w.min[g] = 1 << 30 // report once
		}
	}
	for g, min := range w.min {
		n := len(bound[g])
		since, wasPartial := w.partialSince[g]
		if n == 0 || n >= min {
			if wasPartial {
				delete(w.partialSince, g)
				if n == 0 {
					w.failures = append(w.failures, fmt.Sprintf("%s went from partly bound to none bound", g))
				}
				w.longest = max(w.longest, now.Sub(since))
			}
			continue
		}
		w.partialSeen++
		if !barrierLog.releasedTogether(w.ns+"/"+g, bound[g], min) {
			w.failures = append(w.failures, fmt.Sprintf("%s: %d of %d bound, not all allowed together by one barrier release", g, n, min))
		}
		if !wasPartial {
			w.partialSince[g] = now
		} else if now.Sub(since) > settleWindow {
			w.failures = append(w.failures, fmt.Sprintf("%s: %d of %d bound for %s (> %s)", g, n, min, now.Sub(since).Round(time.Millisecond), settleWindow))
			delete(w.partialSince, g)
		}
	}
}

// check stops sampling and checks the end state; call it before deleting
// the workload (a deletion in progress is partly bound too). Runs once.
func (w *pgBindWatcher) check(t testing.TB) {
	t.Helper()
	w.once.Do(func() {
		close(w.stop)
		<-w.done
		var last string
		err := wait.PollUntilContextTimeout(context.Background(), 100*time.Millisecond, settleWindow, true, func(ctx context.Context) (bool, error) {
			w.sample(ctx)
			bound, err := pgBoundPods(ctx, w.ns)
			if err != nil {
				return false, nil
			}
			var partial []string
			for g, min := range w.min {
				if n := len(bound[g]); n > 0 && n < min {
					partial = append(partial, fmt.Sprintf("%s: %d of %d", g, n, min))
				}
			}
			last = strings.Join(partial, ", ")
			if len(partial) > 0 {
				return false, nil
			}
			for g, min := range w.min {
				if len(bound[g]) > 0 && !barrierLog.releasedTogether(w.ns+"/"+g, bound[g], min) {
					w.mu.Lock()
					w.failures = append(w.failures, fmt.Sprintf("%s: %d bound, not all allowed together by one barrier release", g, len(bound[g])))
					w.mu.Unlock()
				}
			}
			return true, nil
		})
		w.mu.Lock()
		defer w.mu.Unlock()
		if err != nil {
			w.failures = append(w.failures, "ended partly bound: "+last)
		}
		if w.samples == 0 {
			w.failures = append(w.failures, "no binding samples were taken")
		}
		for _, f := range w.failures {
			t.Errorf("gang bound partly: %s", f)
		}
		t.Logf("%d binding samples; %d samples of a gang partly bound (%d broke the rule); longest partial episode %s", w.samples, w.partialSeen, len(w.failures), w.longest.Round(time.Millisecond))
	})
}
