package cli

import (
	"fmt"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/tools/cache"
	"sigs.k8s.io/yaml"
)

func kueueObj(t *testing.T, doc string) *unstructured.Unstructured {
	t.Helper()
	u := &unstructured.Unstructured{}
	if err := yaml.Unmarshal([]byte(doc), &u.Object); err != nil {
		t.Fatal(err)
	}
	return u
}

func TestQueueView(t *testing.T) {
	const podSets = `
metadata: {name: jobset-train-1a2b, namespace: team}
spec:
  queueName: default
  podSets:
  - name: workers
    count: 4
    template:
      spec:
        containers:
        - name: main
          resources: {requests: {cpu: "1"}, limits: {nvidia.com/gpu: 4}}
`
	cq := kueueObj(t, `
metadata: {name: gpus}
spec:
  resourceGroups:
  - coveredResources: [cpu, nvidia.com/gpu]
    flavors:
    - name: a
      resources: [{name: cpu, nominalQuota: "64"}, {name: nvidia.com/gpu, nominalQuota: 16}]
    - name: b
      resources: [{name: nvidia.com/gpu, nominalQuota: "8"}]
status:
  flavorsReservation:
  - name: a
    resources: [{name: nvidia.com/gpu, total: "12"}]
`)
	gpus := gpuCount{names: []corev1.ResourceName{"nvidia.com/gpu"}}
	for _, tc := range []struct {
		name, status, gang string
		cq                 *unstructured.Unstructured
		admitted           []unstructured.Unstructured
		state              string
		summary            []string // substrings
	}{
		{
			name:    "waiting for quota",
			status:  `{conditions: [{type: QuotaReserved, status: "False", reason: Pending, message: "couldn't assign flavors"}]}`,
			cq:      cq,
			state:   QueuePending,
			summary: []string{"waiting for quota in ClusterQueue gpus: needs 16 nvidia.com/gpu, 12 free", "(Kueue: couldn't assign flavors)"},
		},
		{
			name:   "free counted from the Workloads holding quota, ahead of the status",
			status: `{conditions: [{type: QuotaReserved, status: "False"}]}`,
			cq:     cq,
			admitted: []unstructured.Unstructured{
				*kueueObj(t, `{metadata: {name: held}, status: {admission: {clusterQueue: gpus, podSetAssignments: [{name: w, resourceUsage: {nvidia.com/gpu: "20"}}]}, conditions: [{type: QuotaReserved, status: "True"}]}}`),
				*kueueObj(t, `{metadata: {name: done}, status: {admission: {clusterQueue: gpus, podSetAssignments: [{name: w, resourceUsage: {nvidia.com/gpu: "4"}}]}, conditions: [{type: QuotaReserved, status: "True"}, {type: Finished, status: "True"}]}}`),
				*kueueObj(t, `{metadata: {name: other}, status: {admission: {clusterQueue: cpus, podSetAssignments: [{name: w, resourceUsage: {nvidia.com/gpu: "4"}}]}, conditions: [{type: QuotaReserved, status: "True"}]}}`),
			},
			state:   QueuePending,
			summary: []string{"needs 16 nvidia.com/gpu, 4 free"},
		},
		{
			name:    "waiting, queue not readable",
			status:  `{conditions: [{type: QuotaReserved, status: "False"}]}`,
			state:   QueuePending,
			summary: []string{"needs 16 nvidia.com/gpu (Kueue)"},
		},
		{
			name:    "admitted, gang pending",
			status:  `{admission: {clusterQueue: gpus}, conditions: [{type: QuotaReserved, status: "True"}, {type: Admitted, status: "True"}]}`,
			gang:    "needs 16 nvidia.com/gpu for 4 members; best placement fits 2 of 4",
			state:   QueueAdmitted,
			summary: []string{"admitted by Kueue; gang pending: needs 16 nvidia.com/gpu for 4 members"},
		},
		{
			name:    "admitted",
			status:  `{admission: {clusterQueue: gpus}, conditions: [{type: Admitted, status: "True"}]}`,
			state:   QueueAdmitted,
			summary: []string{"admitted by Kueue to ClusterQueue gpus"},
		},
		{
			name:    "evicted by waitForPodsReady",
			status:  `{requeueState: {count: 1}, conditions: [{type: QuotaReserved, status: "False"}, {type: Evicted, status: "True", reason: PodsReadyTimeout, message: "Exceeded the PodsReady timeout"}]}`,
			state:   QueueEvicted,
			summary: []string{"evicted by Kueue (PodsReadyTimeout: Exceeded the PodsReady timeout)"},
		},
		{
			name:    "finished",
			status:  `{conditions: [{type: Admitted, status: "True"}, {type: Finished, status: "True"}]}`,
			state:   QueueFinished,
			summary: []string{"finished"},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			wl := kueueObj(t, podSets+"status: "+tc.status+"\n")
			in := &kueueInput{Workload: wl, ClusterQueue: tc.cq, ClusterQueueName: "gpus", Admitted: tc.admitted}
			v := queueView(in, gpus, tc.gang)
			if v.State != tc.state {
				t.Errorf("state %s, want %s", v.State, tc.state)
			}
			for _, s := range tc.summary {
				if !strings.Contains(v.Summary, s) {
					t.Errorf("summary %q lacks %q", v.Summary, s)
				}
			}
			if v.Needs["nvidia.com/gpu"] != 16 {
				t.Errorf("needs %v, want 16 nvidia.com/gpu", v.Needs)
			}
		})
	}
}

func TestKueueWorkloadOf(t *testing.T) {
	wls := []unstructured.Unstructured{
		*kueueObj(t, `{metadata: {name: a, creationTimestamp: "2026-01-01T00:00:00Z", ownerReferences: [{uid: u1, kind: JobSet, name: x, apiVersion: v}]}}`),
		*kueueObj(t, `{metadata: {name: b, creationTimestamp: "2026-01-02T00:00:00Z", ownerReferences: [{uid: u1, kind: JobSet, name: x, apiVersion: v}]}}`),
		*kueueObj(t, `{metadata: {name: c, ownerReferences: [{uid: u2, kind: Job, name: y, apiVersion: v}]}}`),
	}
	if got := kueueWorkloadOf(wls, "u1"); got == nil || got.GetName() != "b" {
		t.Errorf("u1: %v, want the newest, b", got)
	}
	if got := kueueWorkloadOf(wls, "u3"); got != nil {
		t.Errorf("u3: %v, want none", got.GetName())
	}
}

// TestKueueEntry: the dashboard's queue entry of a Kueue Workload is for
// the job that controls it, names the ClusterQueue its LocalQueue points
// at before admission, and leaves out Workloads no job controls.
func TestKueueEntry(t *testing.T) {
	const wl = `
metadata:
  name: jobset-late-1a2b
  namespace: team
  ownerReferences: [{apiVersion: jobset.x-k8s.io/v1alpha2, kind: JobSet, name: late, uid: u1, controller: %s}]
spec:
  queueName: default
  podSets:
  - {name: w, count: 2, template: {spec: {containers: [{name: c, resources: {limits: {nvidia.com/gpu: 8}}}]}}}
status: %s
`
	lqs := cache.NewStore(cache.MetaNamespaceKeyFunc)
	if err := lqs.Add(kueueObj(t, `{metadata: {name: default, namespace: team}, spec: {clusterQueue: gpus}}`)); err != nil {
		t.Fatal(err)
	}
	gpus := gpuCount{names: []corev1.ResourceName{"nvidia.com/gpu"}}
	for _, tc := range []struct {
		name, controller, status string
		store                    cache.Store
		ok, admitted, finished   bool
		state, summary           string
	}{
		{name: "waiting for quota", controller: "true", status: `{conditions: [{type: QuotaReserved, status: "False", reason: Pending, message: "insufficient quota"}]}`, store: lqs,
			ok: true, state: QueuePending, summary: "waiting for quota in ClusterQueue gpus: needs 16 nvidia.com/gpu (Kueue: insufficient quota)"},
		{name: "no LocalQueue readable", controller: "true", status: `{}`,
			ok: true, state: QueuePending, summary: "ClusterQueue (unknown)"},
		{name: "admitted", controller: "true", status: `{admission: {clusterQueue: gpus}, conditions: [{type: Admitted, status: "True"}]}`,
			ok: true, admitted: true, state: QueueAdmitted, summary: "admitted by Kueue to ClusterQueue gpus"},
		{name: "finished", controller: "true", status: `{conditions: [{type: Finished, status: "True"}]}`,
			ok: true, finished: true, state: QueueFinished},
		{name: "no controller", controller: "false", status: `{}`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e, ok := kueueEntry(kueueObj(t, fmt.Sprintf(wl, tc.controller, tc.status)), tc.store, gpus)
			if ok != tc.ok {
				t.Fatalf("ok %t, want %t (%+v)", ok, tc.ok, e)
			}
			if !ok {
				return
			}
			if e.Kind != "JobSet" || e.Name != "late" || e.Namespace != "team" || e.State != tc.state || e.Admitted != tc.admitted || e.Finished != tc.finished || !strings.Contains(e.Summary, tc.summary) {
				t.Errorf("entry %+v, want JobSet team/late, state %s, admitted %t, finished %t, summary with %q", e, tc.state, tc.admitted, tc.finished, tc.summary)
			}
		})
	}
}
