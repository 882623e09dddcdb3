package catalog

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/yaml"
)

// mergePatch applies a JSON merge patch (RFC 7386) to doc.
func mergePatch(doc, patch map[string]any) map[string]any {
	out := map[string]any{}
	for k, v := range doc {
		out[k] = v
	}
	for k, v := range patch {
		if v == nil {
			delete(out, k)
			continue
		}
		pm, ok := v.(map[string]any)
		dm, ok2 := out[k].(map[string]any)
		if ok && ok2 {
			out[k] = mergePatch(dm, pm)
		} else {
			out[k] = v
		}
	}
	return out
}

// TestMinMemberRules checks the relaxations each definition's comment
// promises, as merge patches on the type's fixture object, with the
// expected plans derived by hand.
func TestMinMemberRules(t *testing.T) {
	tests := []struct {
		name, fixture, patch string
		want                 string // GangPlans as "<gang>:<instances>x<minMember>"
	}{
		{"jobset as written", "jobset", `{}`, "jobset:1x3"},
		// InOrder: JobSet creates workers only once the leader is ready.
		{"jobset InOrder counts the first replicated job", "jobset", `{"spec":{"startupPolicy":{"startupPolicyOrder":"InOrder"}}}`, "jobset:1x1"},
		{"jobset parallelism x replicas", "jobset", `{"spec":{"replicatedJobs":[{"name":"w","replicas":3,"template":{"spec":{"parallelism":4,"template":{"spec":{"containers":[{"name":"c"}]}}}}}]}}`, "jobset:1x12"},
		{"jobset completions cap parallelism", "jobset", `{"spec":{"replicatedJobs":[{"name":"w","replicas":2,"template":{"spec":{"parallelism":4,"completions":2,"template":{"spec":{"containers":[{"name":"c"}]}}}}}]}}`, "jobset:1x4"},
		{"workload min-member annotation", "jobset", `{"metadata":{"annotations":{"muster.io/min-member":"2"}}}`, "jobset:1x2"},
		{"workload opt-out", "jobset", `{"metadata":{"annotations":{"muster.io/gang":"off"}}}`, ""},
		// KAI's kai.scheduler/batch-min-member on the JobSet: that many
		// replicated jobs whole, the smallest first (leader 1, workers 2).
		{"jobset kai annotation 1: the smallest replicated job", "jobset", `{"metadata":{"annotations":{"kai.scheduler/batch-min-member":"1"}}}`, "jobset:1x1"},
		{"jobset kai annotation 2: both", "jobset", `{"metadata":{"annotations":{"kai.scheduler/batch-min-member":"2"}}}`, "jobset:1x3"},
		{"jobset kai annotation above the replicated jobs is capped", "jobset", `{"metadata":{"annotations":{"kai.scheduler/batch-min-member":"5"}}}`, "jobset:1x3"},
		// The smallest by pods, not the first: big 2 x 4 = 8, small 1.
		{"jobset kai annotation picks the fewest pods", "jobset", `{"metadata":{"annotations":{"kai.scheduler/batch-min-member":"1"}},"spec":{"replicatedJobs":[{"name":"big","replicas":2,"template":{"spec":{"parallelism":4,"template":{"spec":{"containers":[{"name":"c"}]}}}}},{"name":"small","template":{"spec":{"template":{"spec":{"containers":[{"name":"c"}]}}}}}]}}`, "jobset:1x1"},
		// InOrder still counts only the first replicated job.
		{"jobset kai annotation with InOrder", "jobset", `{"metadata":{"annotations":{"kai.scheduler/batch-min-member":"2"}},"spec":{"startupPolicy":{"startupPolicyOrder":"InOrder"}}}`, "jobset:1x1"},
		{"jobset muster min-member wins over kai", "jobset", `{"metadata":{"annotations":{"kai.scheduler/batch-min-member":"1","muster.io/min-member":"2"}}}`, "jobset:1x2"},
		// KAI's annotation is not even read then: a bad value is moot.
		{"jobset muster min-member makes a bad kai value moot", "jobset", `{"metadata":{"annotations":{"kai.scheduler/batch-min-member":"all","muster.io/min-member":"2"}}}`, "jobset:1x2"},
		// On a replicated job's Job template: pods per Job, 3 Jobs x 2.
		{"jobset kai template annotation", "jobset", `{"spec":{"replicatedJobs":[{"name":"w","replicas":3,"template":{"metadata":{"annotations":{"kai.scheduler/batch-min-member":"2"}},"spec":{"parallelism":4,"template":{"spec":{"containers":[{"name":"c"}]}}}}}]}}`, "jobset:1x6"},
		// Above parallelism: capped at the 4 pods a Job runs (KAI keeps 8).
		{"jobset kai template annotation capped at parallelism", "jobset", `{"spec":{"replicatedJobs":[{"name":"w","replicas":3,"template":{"metadata":{"annotations":{"kai.scheduler/batch-min-member":"8"}},"spec":{"parallelism":4,"template":{"spec":{"containers":[{"name":"c"}]}}}}}]}}`, "jobset:1x12"},
		// Empty on a template is unset, as in KAI.
		{"jobset kai template annotation empty", "jobset", `{"spec":{"replicatedJobs":[{"name":"w","replicas":3,"template":{"metadata":{"annotations":{"kai.scheduler/batch-min-member":""}},"spec":{"parallelism":4,"template":{"spec":{"containers":[{"name":"c"}]}}}}}]}}`, "jobset:1x12"},
		// Both: templates give 1 per Job (leader 1, workers 2 x 1), the
		// JobSet one replicated job: the leader.
		{"jobset kai annotations on both", "jobset", `{"metadata":{"annotations":{"kai.scheduler/batch-min-member":"1"}},"spec":{"replicatedJobs":[{"name":"leader","template":{"spec":{"parallelism":2,"template":{"spec":{"containers":[{"name":"c"}]}}}}},{"name":"workers","replicas":2,"template":{"metadata":{"annotations":{"kai.scheduler/batch-min-member":"1"}},"spec":{"parallelism":4,"template":{"spec":{"containers":[{"name":"c"}]}}}}}]}}`, "jobset:1x2"},
		// schedulingPolicy.minAvailable 2 of 4: master 1 + 1 worker.
		{"pytorchjob minAvailable", "pytorchjob", `{"spec":{"runPolicy":{"schedulingPolicy":{"minAvailable":2}}}}`, "pytorchjob:1x2"},
		// Elastic: master 1 + worker minReplicas 1.
		{"pytorchjob elastic", "pytorchjob", `{"spec":{"elasticPolicy":{"minReplicas":1,"maxReplicas":3}}}`, "pytorchjob:1x2"},
		{"pytorchjob minAvailable wins over elastic", "pytorchjob", `{"spec":{"elasticPolicy":{"minReplicas":1},"runPolicy":{"schedulingPolicy":{"minAvailable":4}}}}`, "pytorchjob:1x4"},
		// AtStartup: the launcher is created with the workers and counts.
		{"mpijob AtStartup", "mpijob", `{"spec":{"launcherCreationPolicy":"AtStartup"}}`, "mpijob:1x3"},
		{"mpijob minAvailable with WaitForWorkersReady", "mpijob", `{"spec":{"runPolicy":{"schedulingPolicy":{"minAvailable":1}}}}`, "mpijob:1x1"},
		// TFJob: chief 1 + ps 1 + worker 2 + evaluator 1. minAvailable 3:
		// chief, ps, one worker; the evaluator goes first.
		{"tfjob as written", "tfjob", `{}`, "tfjob:1x5"},
		{"tfjob minAvailable", "tfjob", `{"spec":{"runPolicy":{"schedulingPolicy":{"minAvailable":3}}}}`, "tfjob:1x3"},
		// Above the pods the job has: capped (KAI takes 9 as it is).
		{"tfjob minAvailable above the pods", "tfjob", `{"spec":{"runPolicy":{"schedulingPolicy":{"minAvailable":9}}}}`, "tfjob:1x5"},
		// No replicas: the operator's default of 1 (KAI refuses the job).
		{"tfjob replicas left to the operator", "tfjob", `{"spec":{"tfReplicaSpecs":{"Worker":{"replicas":null}}}}`, "tfjob:1x4"},
		{"xgboostjob minAvailable", "xgboostjob", `{"spec":{"runPolicy":{"schedulingPolicy":{"minAvailable":2}}}}`, "xgboostjob:1x2"},
		{"jaxjob minAvailable", "jaxjob", `{"spec":{"runPolicy":{"schedulingPolicy":{"minAvailable":3}}}}`, "jaxjob:1x3"},
		// Parameter-server mode: 2 servers + 2 trainers.
		{"paddlejob ps mode", "paddlejob", `{"spec":{"paddleReplicaSpecs":{"Master":{"replicas":2,"template":{"spec":{"containers":[{"name":"paddle"}]}}}}}}`, "paddlejob:1x4"},
		// Executors are never counted: not with more of them, nor with
		// dynamic allocation.
		{"sparkapplication more executors", "sparkapplication", `{"spec":{"executor":{"instances":16}}}`, "application:1x1"},
		{"sparkapplication dynamic allocation", "sparkapplication", `{"spec":{"dynamicAllocation":{"enabled":true,"initialExecutors":4,"minExecutors":2,"maxExecutors":10}}}`, "application:1x1"},
		{"trainjob numNodes", "trainjob", `{"spec":{"trainer":{"numNodes":8}}}`, "trainer:1x8"},
		{"trainjob numNodes left to the runtime", "trainjob", `{"spec":{"trainer":{"numNodes":null}}}`, "trainer:1x1"},
		// Autoscaling: head 1 + gpu minReplicas 1 + mh 0 x 2 + spare 0.
		{"raycluster autoscaling uses minReplicas", "raycluster", `{"spec":{"enableInTreeAutoscaling":true}}`, "raycluster:1x2"},
		{"rayjob autoscaling", "rayjob", `{"spec":{"rayClusterSpec":{"enableInTreeAutoscaling":true}}}`, "raycluster:1x3"},
		// LeaderReady: workers come after the leader is ready.
		{"lws LeaderReady", "leaderworkerset", `{"spec":{"startupPolicy":"LeaderReady"}}`, "group:2x1"},
		{"lws without leaderTemplate", "leaderworkerset", `{"spec":{"leaderWorkerTemplate":{"leaderTemplate":null}}}`, "group:2x4"},
		// prefill minAvailable 2: frontend 1 + 2 x (1 + 2) = 7.
		{"grove scaling group minAvailable", "podcliqueset", `{"spec":{"template":{"podCliqueScalingGroups":[{"name":"prefill","cliqueNames":["pleader","pworker"],"replicas":2,"minAvailable":2}]}}}`, "replica:2x7"},
		// multinode {} defaults nodeCount to 2, as the CRD does.
		{"dynamo nodeCount default", "dynamographdeployment", `{"spec":{"services":{"decode":{"multinode":{"nodeCount":null}}}}}`, "multinode-replica:2x2"},
		{"dynamo nodeCount 4", "dynamographdeployment", `{"spec":{"services":{"decode":{"multinode":{"nodeCount":4}}}}}`, "multinode-replica:2x4"},
		{"dynamo all single-node", "dynamographdeployment", `{"spec":{"services":{"decode":{"multinode":null}}}}`, ""},
	}
	reg := newTestRegistry(t)
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e, ok := reg.Get(tt.fixture)
			if !ok {
				t.Fatalf("no definition %s", tt.fixture)
			}
			obj := readDocs(t, filepath.Join("testdata", tt.fixture, "object.yaml"))[0]
			var patch map[string]any
			if err := yaml.Unmarshal([]byte(tt.patch), &patch); err != nil {
				t.Fatal(err)
			}
			u := &unstructured.Unstructured{Object: mergePatch(obj, patch)}
			plans, err := e.Compiled.GangPlans(context.Background(), u)
			if err != nil {
				t.Fatalf("GangPlans: %v", err)
			}
			var got []string
			for _, p := range plans {
				got = append(got, fmt.Sprintf("%s:%dx%d", p.Definition, p.Instances, p.MinMember))
			}
			if g := strings.Join(got, ","); g != tt.want {
				t.Errorf("plans = %q, want %q", g, tt.want)
			}
		})
	}
}

// TestKAIAnnotationErrors: a kai.scheduler/batch-min-member that is not a
// whole number of at least 1 fails the plan with an error naming the
// annotation and where it is, as KAI's grouper refuses it; never a gang
// read some other way.
func TestKAIAnnotationErrors(t *testing.T) {
	tests := []struct{ name, patch, want string }{
		{"on the JobSet, not a number", `{"metadata":{"annotations":{"kai.scheduler/batch-min-member":"all"}}}`, "on the JobSet"},
		{"on the JobSet, zero", `{"metadata":{"annotations":{"kai.scheduler/batch-min-member":"0"}}}`, "on the JobSet"},
		{"on the JobSet, empty", `{"metadata":{"annotations":{"kai.scheduler/batch-min-member":""}}}`, "on the JobSet"},
		{"on a template, negative", `{"spec":{"replicatedJobs":[{"name":"w","template":{"metadata":{"annotations":{"kai.scheduler/batch-min-member":"-1"}},"spec":{"template":{"spec":{"containers":[{"name":"c"}]}}}}}]}}`, "replicated job w"},
		{"on a template, fraction", `{"spec":{"replicatedJobs":[{"name":"w","template":{"metadata":{"annotations":{"kai.scheduler/batch-min-member":"1.5"}},"spec":{"template":{"spec":{"containers":[{"name":"c"}]}}}}}]}}`, "replicated job w"},
	}
	reg := newTestRegistry(t)
	e, ok := reg.Get("jobset")
	if !ok {
		t.Fatal("no jobset definition")
	}
	obj := readDocs(t, filepath.Join("testdata", "jobset", "object.yaml"))[0]
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var patch map[string]any
			if err := yaml.Unmarshal([]byte(tt.patch), &patch); err != nil {
				t.Fatal(err)
			}
			plans, err := e.Compiled.GangPlans(context.Background(), &unstructured.Unstructured{Object: mergePatch(obj, patch)})
			if err == nil || !strings.Contains(err.Error(), "kai.scheduler/batch-min-member") || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("GangPlans = %v, %v; want an error naming kai.scheduler/batch-min-member %s", plans, err, tt.want)
			}
		})
	}
}
