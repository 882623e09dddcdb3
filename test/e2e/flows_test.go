package e2e

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/tools/cache"
	watchtools "k8s.io/client-go/tools/watch"
	"sigs.k8s.io/yaml"

	"github.com/muster-io/muster/catalog"
	"github.com/muster-io/muster/definition"
	"github.com/muster-io/muster/localcluster"
)

// Flows recorded from the sandbox's own operators, the way Workload Map
// records its corpus (../shared/corpus/workload-map/recorded): a real
// operator drives a root object through a flow (create, run, suspend,
// resume, scale, complete, fail), a watch keeps every state of the root
// object, and each state is judged from the object's own fields by a
// judge written here from the operator's API, never from a definition.
// Every snapshot must then give the judged state as the first status of
// muster's catalog definition, and among the statuses of Workload Map's
// own definition for the kind (upstream's replay contract), when
// ../shared/corpus/workload-map is there. MUSTER_RECORD_DIR=DIR writes the
// flows in the corpus's format (schemaVersion 1) for a look or a diff.

// flowStep is one step of a flow: an action on the root object or its
// pods, then what to wait for.
type flowStep struct {
	what string
	do   func(ctx context.Context, f *flowRun) error
}

// flow is one recorded flow of one kind.
type flow struct {
	name  string // e.g. "jobset/completed"
	gvr   schema.GroupVersionResource
	karta string // the upstream definition's file name
	yaml  func(ns, sched string) string
	judge func(obj *unstructured.Unstructured) string
	want  string // the flow's final state
	steps []flowStep
}

// flowRun is a flow being run: the root object's name and namespace.
type flowRun struct {
	ns, name string
	gvr      schema.GroupVersionResource
	judge    func(*unstructured.Unstructured) string
}

func (f *flowRun) get(ctx context.Context) (*unstructured.Unstructured, error) {
	return controlPlane.Dynamic.Resource(f.gvr).Namespace(f.ns).Get(ctx, f.name, metav1.GetOptions{})
}

// waitUntil waits until ok holds for the root object; seen says what it
// saw, for the timeout's error.
func (f *flowRun) waitUntil(ctx context.Context, what string, ok func(obj *unstructured.Unstructured) (bool, string)) error {
	return localcluster.WaitFor(ctx, localcluster.ShortTimeout, what, func(ctx context.Context) (bool, string, error) {
		obj, err := f.get(ctx)
		if err != nil {
			return false, "", err
		}
		done, seen := ok(obj)
		return done, seen, nil
	})
}

// patch merges p into the root object.
func (f *flowRun) patch(ctx context.Context, p string) error {
	_, err := controlPlane.Dynamic.Resource(f.gvr).Namespace(f.ns).Patch(ctx, f.name, types.MergePatchType, []byte(p), metav1.PatchOptions{})
	return err
}

// finishPods waits for n Running pods matching selector and finishes them:
// all succeed, or (fail) the first fails.
func (f *flowRun) finishPods(ctx context.Context, selector string, n int, fail bool) error {
	pods, err := controlPlane.WaitPodsRunning(ctx, f.ns, selector, n, localcluster.ShortTimeout)
	if err != nil {
		return err
	}
	for _, p := range pods {
		if fail {
			return podSim.Fail(ctx, p.Namespace, p.Name, "Error")
		}
		if err := podSim.Succeed(ctx, p.Namespace, p.Name); err != nil {
			return err
		}
	}
	return nil
}

// snapshot is one recorded state of the root object.
type snapshot struct {
	obj   *unstructured.Unstructured
	state string
}

// recordRoot watches the root object from before its creation and keeps each
// distinct state (by resourceVersion) until stop is called.
func recordRoot(t *testing.T, ctx context.Context, gvr schema.GroupVersionResource, ns, name string, judge func(*unstructured.Unstructured) string) (stop func() []snapshot) {
	t.Helper()
	// A retry watcher resumes where a closed watch stopped, so that no
	// state is missed on a busy machine; it starts at the list's version,
	// before the object exists.
	ri := controlPlane.Dynamic.Resource(gvr).Namespace(ns)
	sel := metav1.ListOptions{FieldSelector: "metadata.name=" + name}
	list, err := ri.List(ctx, sel)
	if err != nil {
		t.Fatalf("list %s: %v", gvr.Resource, err)
	}
	w, err := watchtools.NewRetryWatcherWithContext(ctx, list.GetResourceVersion(), &cache.ListWatch{
		WatchFuncWithContext: func(ctx context.Context, o metav1.ListOptions) (watch.Interface, error) {
			o.FieldSelector = sel.FieldSelector
			return ri.Watch(ctx, o)
		},
	})
	if err != nil {
		t.Fatalf("watch %s: %v", gvr.Resource, err)
	}
	var (
		mu   sync.Mutex
		out  []snapshot
		done = make(chan struct{})
	)
	go func() {
		defer close(done)
		for ev := range w.ResultChan() {
			if ev.Type != watch.Added && ev.Type != watch.Modified {
				continue
			}
			obj, ok := ev.Object.(*unstructured.Unstructured)
			if !ok {
				continue
			}
			mu.Lock()
			out = append(out, snapshot{obj: obj.DeepCopy(), state: judge(obj)})
			mu.Unlock()
		}
	}()
	return func() []snapshot {
		// The last state may still be on its way: wait until the watch has
		// delivered the object's current resourceVersion (or gone past it:
		// a controller may write again meanwhile, and a watch delivers
		// versions in order).
		cur, err := controlPlane.Dynamic.Resource(gvr).Namespace(ns).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			t.Errorf("get %s/%s: %v", gvr.Resource, name, err)
		} else {
			err := localcluster.WaitFor(ctx, localcluster.ShortTimeout, "the watch at the current state", func(context.Context) (bool, string, error) {
				mu.Lock()
				defer mu.Unlock()
				return slices.ContainsFunc(out, func(s snapshot) bool { return s.obj.GetResourceVersion() == cur.GetResourceVersion() }), fmt.Sprintf("%d states", len(out)), nil
			})
			if err != nil {
				t.Error(err)
			}
		}
		w.Stop()
		<-done
		mu.Lock()
		defer mu.Unlock()
		return out
	}
}

// TestRecordedFlows runs every flow below on the real operators.
func TestRecordedFlows(t *testing.T) {
	startOperators(t, operatorRun{name: "jobset"}, operatorRun{name: "lws"}, operatorRun{name: "kuberay"}, operatorRun{name: "trainingoperator"})
	ns, sched := gangTest(t, "flows-", 4, 8, nil)
	startPodGrouper(t, sched)

	reg, err := catalog.NewRegistry(definition.Options{})
	if err != nil {
		t.Fatal(err)
	}
	upstream := flowUpstreamDefinitions(t)
	recordDir := os.Getenv("MUSTER_RECORD_DIR")

	for _, fl := range recordedFlows() {
		t.Run(strings.ReplaceAll(fl.name, "/", "-"), func(t *testing.T) {
			ctx := t.Context()
			name := strings.ReplaceAll(fl.name, "/", "-")
			f := &flowRun{ns: ns, name: name, gvr: fl.gvr, judge: fl.judge}
			stop := recordRoot(t, ctx, fl.gvr, ns, name, fl.judge)
			applyYAML(t, ns, strings.ReplaceAll(fl.yaml(ns, sched), "NAME", name))
			for _, s := range fl.steps {
				if err := s.do(ctx, f); err != nil {
					stop()
					t.Fatalf("%s: step %q: %v", fl.name, s.what, err)
				}
			}
			snaps := stop()
			if len(snaps) == 0 {
				t.Fatalf("%s: no state recorded", fl.name)
			}
			if last := snaps[len(snaps)-1].state; last != fl.want {
				t.Errorf("%s: final state %s, want %s", fl.name, last, fl.want)
			}
			up := upstream[fl.karta]
			var states []string
			var events []map[string]any
			for i, s := range snaps {
				states = append(states, s.state)
				e, ok := reg.LookupGVK(s.obj.GroupVersionKind())
				if !ok {
					t.Fatalf("the catalog has no definition for %s", s.obj.GroupVersionKind())
				}
				st, err := e.Compiled.Status(ctx, s.obj)
				if err != nil {
					t.Errorf("%s state %d: catalog %s: Status: %v", fl.name, i, e.Name, err)
				} else if string(st.Primary()) != s.state {
					t.Errorf("%s state %d (resourceVersion %s): catalog %s gives %v, judged %s\nstatus: %s", fl.name, i, s.obj.GetResourceVersion(), e.Name, st.Statuses, s.state, statusYAML(s.obj))
				}
				if _, err := e.Compiled.Extract(ctx, s.obj); err != nil {
					t.Errorf("%s state %d: catalog %s: Extract: %v", fl.name, i, e.Name, err)
				}
				var phases []string
				if up != nil {
					ust, err := up.Status(ctx, s.obj)
					if err != nil {
						t.Errorf("%s state %d: upstream %s: Status: %v", fl.name, i, fl.karta, err)
					} else {
						for _, x := range ust.Statuses {
							phases = append(phases, string(x))
						}
						if !slices.Contains(phases, s.state) {
							t.Errorf("%s state %d (resourceVersion %s): upstream %s gives %v, judged %s\nstatus: %s", fl.name, i, s.obj.GetResourceVersion(), fl.karta, phases, s.state, statusYAML(s.obj))
						}
					}
					if _, err := up.Extract(ctx, s.obj); err != nil {
						t.Errorf("%s state %d: upstream %s: Extract: %v", fl.name, i, fl.karta, err)
					}
				}
				events = append(events, map[string]any{"kind": "STATE", "object": s.obj.Object, "state": s.state, "phases": phases, "resourceVersion": s.obj.GetResourceVersion()})
			}
			t.Logf("%s: %d states: %s", fl.name, len(snaps), strings.Join(slices.Compact(states), " → "))
			if recordDir != "" {
				writeFlow(t, recordDir, fl, events)
			}
		})
	}
}

// statusYAML is obj's status as YAML, for a failure message.
func statusYAML(obj *unstructured.Unstructured) string {
	b, err := yaml.Marshal(map[string]any{"spec.suspend": obj.Object["spec"].(map[string]any)["suspend"], "status": obj.Object["status"]})
	if err != nil {
		return err.Error()
	}
	return string(b)
}

// writeFlow writes one flow in the corpus's recording format.
func writeFlow(t *testing.T, dir string, fl flow, events []map[string]any) {
	t.Helper()
	doc := map[string]any{
		"schemaVersion": 1, "operator": strings.SplitN(fl.name, "/", 2)[0], "version": "sandbox",
		"kartaName": fl.karta, "flow": strings.SplitN(fl.name, "/", 2)[1], "want": fl.want,
		"result": map[string]any{"succeeded": !t.Failed()}, "events": events,
	}
	b, err := yaml.Marshal(doc)
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, fl.karta, strings.SplitN(fl.name, "/", 2)[1]+".yaml")
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, b, 0o644); err != nil {
		t.Fatal(err)
	}
}

// flowUpstreamDefinitions compiles the corpus's upstream definitions by
// file name, or returns none (and says so) without the corpus.
func flowUpstreamDefinitions(t *testing.T) map[string]*definition.Compiled {
	t.Helper()
	dir := filepath.Join(pgrRepoRoot(), "..", "shared", "corpus", "workload-map", "definitions")
	files, err := filepath.Glob(filepath.Join(dir, "*.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	if len(files) == 0 {
		t.Logf("%s is not there: the flows are checked against muster's catalog only", dir)
		return nil
	}
	out := map[string]*definition.Compiled{}
	for _, file := range files {
		data, err := os.ReadFile(file)
		if err != nil {
			t.Fatal(err)
		}
		k, err := definition.Decode(data)
		if err != nil {
			t.Fatalf("%s: %v", file, err)
		}
		c, err := definition.Compile(k, definition.Options{})
		if err != nil {
			t.Fatalf("%s: %v", file, err)
		}
		out[strings.TrimSuffix(filepath.Base(file), ".yaml")] = c
	}
	return out
}

// Judges: the state of a root object from its own fields, by the
// operator's API documentation.

func condTrue(obj *unstructured.Unstructured, typ string) bool {
	conds, _, _ := unstructured.NestedSlice(obj.Object, "status", "conditions")
	for _, c := range conds {
		m, ok := c.(map[string]any)
		if ok && m["type"] == typ && strings.EqualFold(fmt.Sprint(m["status"]), "true") {
			return true
		}
	}
	return false
}

func nestedInt(obj map[string]any, fields ...string) int64 {
	v, found, err := unstructured.NestedFieldNoCopy(obj, fields...)
	if !found || err != nil {
		return 0
	}
	switch n := v.(type) {
	case int64:
		return n
	case float64:
		return int64(n)
	}
	return 0
}

// judgeJob: a Job's terminal conditions, its Suspended condition, then its
// pods: ready ones mean Running, active ones not yet ready Initializing.
func judgeJob(obj *unstructured.Unstructured) string {
	switch {
	case condTrue(obj, "Complete") || condTrue(obj, "SuccessCriteriaMet"):
		return "Completed"
	case condTrue(obj, "Failed") || condTrue(obj, "FailureTarget"):
		return "Failed"
	case condTrue(obj, "Suspended"):
		return "Suspended"
	case nestedInt(obj.Object, "status", "ready") > 0:
		return "Running"
	case nestedInt(obj.Object, "status", "active") > 0:
		return "Initializing"
	}
	return "Undefined"
}

// judgeJobSet: the JobSet's terminal and Suspended conditions, then its
// replicated jobs: any active or ready pods, none failed, is Running (a
// JobSet's jobs start together; JobSet itself has no Initializing).
func judgeJobSet(obj *unstructured.Unstructured) string {
	switch {
	case condTrue(obj, "Completed"):
		return "Completed"
	case condTrue(obj, "Failed"):
		return "Failed"
	case condTrue(obj, "Suspended"):
		return "Suspended"
	}
	rjs, _, _ := unstructured.NestedSlice(obj.Object, "status", "replicatedJobsStatus")
	var active, failed int64
	for _, rj := range rjs {
		m, _ := rj.(map[string]any)
		active += nestedInt(m, "active") + nestedInt(m, "ready")
		failed += nestedInt(m, "failed")
	}
	if active > 0 && failed == 0 {
		return "Running"
	}
	return "Undefined"
}

// judgeLWS: Available means every group is ready; so does every group the
// status counts being ready and updated while the condition lags (a scale
// up: the new groups are not counted yet, the old ones serve). Progressing
// alone is groups being created.
func judgeLWS(obj *unstructured.Unstructured) string {
	replicas := nestedInt(obj.Object, "status", "replicas")
	allReady := replicas > 0 && nestedInt(obj.Object, "status", "readyReplicas") == replicas &&
		nestedInt(obj.Object, "status", "updatedReplicas") == replicas
	switch {
	case condTrue(obj, "Available") || allReady:
		return "Running"
	case condTrue(obj, "Progressing"):
		return "Initializing"
	}
	return "Undefined"
}

// judgeRayCluster: KubeRay's status.state (ready, failed, suspended), and a
// suspended spec before the operator has said so.
func judgeRayCluster(obj *unstructured.Unstructured) string {
	state, _, _ := unstructured.NestedString(obj.Object, "status", "state")
	suspend, _, _ := unstructured.NestedBool(obj.Object, "spec", "suspend")
	switch {
	case state == "ready":
		return "Running"
	case state == "failed":
		return "Failed"
	case suspend && (state == "suspended" || state == ""):
		return "Suspended"
	}
	return "Undefined"
}

// judgePyTorchJob: the training operator's conditions, the newest that is
// True (it keeps Created True under Running).
func judgePyTorchJob(obj *unstructured.Unstructured) string {
	switch {
	case condTrue(obj, "Succeeded"):
		return "Completed"
	case condTrue(obj, "Failed"):
		return "Failed"
	case condTrue(obj, "Suspended"):
		return "Suspended"
	case condTrue(obj, "Running"):
		return "Running"
	case condTrue(obj, "Created"):
		return "Initializing"
	}
	return "Undefined"
}

var (
	jobsGVR = schema.GroupVersionResource{Group: "batch", Version: "v1", Resource: "jobs"}
)

func recordedFlows() []flow {
	jobYAML := func(suspend bool) func(ns, sched string) string {
		return func(ns, sched string) string {
			return fmt.Sprintf(`
apiVersion: batch/v1
kind: Job
metadata: {name: NAME}
spec:
  suspend: %t
  parallelism: 2
  completions: 2
  backoffLimit: 0
  template:
    metadata: {labels: {flow: NAME}}
    spec:
      %s
      restartPolicy: Never
      containers:
      - name: main
        image: busybox
        resources: {limits: {nvidia.com/gpu: 1}}
`, suspend, podPlacement(ns, sched, "      "))
		}
	}
	jobSet := func(suspend bool) func(ns, sched string) string {
		return func(ns, sched string) string {
			doc := jobSetYAML("NAME", ns, sched)
			if suspend {
				doc = strings.Replace(doc, "spec:\n  replicatedJobs:", "spec:\n  suspend: true\n  replicatedJobs:", 1)
			}
			// A failed pod fails its Job at once, and the JobSet with it.
			return strings.ReplaceAll(doc, "parallelism: 1", "backoffLimit: 0\n        parallelism: 1")
		}
	}
	pytorch := func(suspend bool) func(ns, sched string) string {
		return func(ns, sched string) string {
			doc := strings.Replace(kueuePyTorchJobYAML("NAME", ns, sched, 2, 1), "  labels: {kueue.x-k8s.io/queue-name: default}\n", "", 1)
			return strings.Replace(doc, "runPolicy: {cleanPodPolicy: None}", fmt.Sprintf("runPolicy: {cleanPodPolicy: None, suspend: %t}", suspend), 1)
		}
	}
	var flows []flow
	add := func(fl flow) { flows = append(flows, fl) }
	waitFor := func(state string) flowStep {
		return flowStep{what: "until " + state, do: func(ctx context.Context, f *flowRun) error {
			return f.waitUntil(ctx, "state "+state, func(obj *unstructured.Unstructured) (bool, string) {
				got := f.judge(obj)
				return got == state, "judged " + got
			})
		}}
	}
	waitReplicas := func(n int64) flowStep {
		return flowStep{what: fmt.Sprintf("until %d groups ready", n), do: func(ctx context.Context, f *flowRun) error {
			return f.waitUntil(ctx, fmt.Sprintf("%d ready and Running", n), func(obj *unstructured.Unstructured) (bool, string) {
				ready, got := nestedInt(obj.Object, "status", "readyReplicas"), f.judge(obj)
				return ready == n && got == "Running", fmt.Sprintf("%d ready, judged %s", ready, got)
			})
		}}
	}
	patch := func(what, p string) flowStep {
		return flowStep{what: what, do: func(ctx context.Context, f *flowRun) error { return f.patch(ctx, p) }}
	}
	finish := func(selector func(name string) string, n int, fail bool) flowStep {
		what := "succeed the pods"
		if fail {
			what = "fail a pod"
		}
		return flowStep{what: what, do: func(ctx context.Context, f *flowRun) error {
			return f.finishPods(ctx, selector(f.name), n, fail)
		}}
	}
	byLabel := func(key string) func(string) string { return func(name string) string { return key + "=" + name } }

	add(flow{name: "batch-job/completed", gvr: jobsGVR, karta: "batch-job-v1", yaml: jobYAML(false), judge: judgeJob, want: "Completed",
		steps: []flowStep{waitFor("Running"), finish(byLabel("flow"), 2, false), waitFor("Completed")}})
	add(flow{name: "batch-job/resumed-failed", gvr: jobsGVR, karta: "batch-job-v1", yaml: jobYAML(true), judge: judgeJob, want: "Failed",
		steps: []flowStep{waitFor("Suspended"), patch("resume", `{"spec":{"suspend":false}}`), waitFor("Running"), finish(byLabel("flow"), 2, true), waitFor("Failed")}})
	add(flow{name: "jobset/completed", gvr: jobsetsGVR, karta: "jobset-x-k8s-io-jobset-v1alpha2", yaml: jobSet(false), judge: judgeJobSet, want: "Completed",
		steps: []flowStep{waitFor("Running"), finish(byLabel("jobset.sigs.k8s.io/jobset-name"), 3, false), waitFor("Completed")}})
	add(flow{name: "jobset/resumed-failed", gvr: jobsetsGVR, karta: "jobset-x-k8s-io-jobset-v1alpha2", yaml: jobSet(true), judge: judgeJobSet, want: "Failed",
		steps: []flowStep{waitFor("Suspended"), patch("resume", `{"spec":{"suspend":false}}`), waitFor("Running"), finish(byLabel("jobset.sigs.k8s.io/jobset-name"), 3, true), waitFor("Failed")}})
	add(flow{name: "lws/scaled", gvr: lwsGVR, karta: "leaderworkerset-x-k8s-io-leaderworkerset-v1",
		yaml: func(ns, sched string) string {
			return strings.Replace(strings.Replace(lwsYAML(ns, sched, 1), "metadata: {name: serve}", "metadata: {name: NAME}", 1), "replicas: 2", "replicas: 1", 1)
		},
		judge: judgeLWS, want: "Running",
		steps: []flowStep{waitFor("Running"), patch("scale to 2", `{"spec":{"replicas":2}}`), waitReplicas(2)}})
	add(flow{name: "kuberay/suspended-resumed", gvr: rayClustersGVR, karta: "ray-io-raycluster-v1",
		yaml:  func(ns, sched string) string { return rayClusterYAML("NAME", ns, sched, 2, 1) },
		judge: judgeRayCluster, want: "Running",
		steps: []flowStep{waitFor("Running"), patch("suspend", `{"spec":{"suspend":true}}`), waitFor("Suspended"), patch("resume", `{"spec":{"suspend":false}}`), waitFor("Running")}})
	add(flow{name: "kubeflow/pytorchjob-completed", gvr: pytorchJobsGVR, karta: "kubeflow-org-pytorchjob-v1", yaml: pytorch(false), judge: judgePyTorchJob, want: "Completed",
		steps: []flowStep{waitFor("Running"), finish(byLabel("training.kubeflow.org/job-name"), 3, false), waitFor("Completed")}})
	add(flow{name: "kubeflow/pytorchjob-resumed", gvr: pytorchJobsGVR, karta: "kubeflow-org-pytorchjob-v1", yaml: pytorch(true), judge: judgePyTorchJob, want: "Running",
		steps: []flowStep{waitFor("Suspended"), patch("resume", `{"spec":{"runPolicy":{"suspend":false}}}`), waitFor("Running")}})
	return flows
}
