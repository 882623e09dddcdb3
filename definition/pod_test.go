package definition

import (
	"errors"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
)

func TestMatchPod(t *testing.T) {
	// specific has two selectors that both match some pods, at different
	// depths and with and without a value.
	specific := `
apiVersion: run.ai/v1alpha1
kind: Karta
metadata: {name: sel}
spec:
  structureDefinition:
    rootComponent:
      name: app
      kind: {group: example.com, version: v1, kind: App}
      podSelector: {replicaSelector: {keyPath: .metadata.labels.replica}}
    childComponents:
      - name: any
        ownerRef: app
        specDefinition: {podTemplateSpecPath: .spec.a}
        podSelector: {componentTypeSelector: {keyPath: .metadata.labels.role}}
      - name: exact
        ownerRef: app
        specDefinition: {podTemplateSpecPath: .spec.b}
        podSelector: {componentTypeSelector: {keyPath: .metadata.labels.role, value: main}}
      - name: group
        ownerRef: app
      - name: deep
        ownerRef: group
        specDefinition: {podTemplateSpecPath: .spec.c}
        podSelector: {componentTypeSelector: {matchLabels: {tier: deep}}}
`
	single := `
apiVersion: run.ai/v1alpha1
kind: Karta
metadata: {name: one}
spec:
  structureDefinition:
    rootComponent:
      name: dep
      kind: {group: apps, version: v1, kind: Deployment}
      specDefinition: {podTemplateSpecPath: .spec.template}
`
	tests := []struct {
		name    string
		def     string
		pod     *corev1.Pod
		want    *PodMatch
		wantErr error
	}{
		{"key exists", specific, podT("p", "role=other", "replica=3"), &PodMatch{Component: "any", Replica: "3"}, nil},
		{"value beats key-exists", specific, podT("p", "role=main"), &PodMatch{Component: "exact"}, nil},
		{"deeper beats value", specific, podT("p", "role=main", "tier=deep", "replica=1"), &PodMatch{Component: "deep", Replica: "1"}, nil},
		{"empty value is not a key", specific, podT("p", "role="), nil, ErrNoComponent},
		{"no match", specific, podT("p", "x=y"), nil, ErrNoComponent},
		{"single component takes every pod", single, podT("p"), &PodMatch{Component: "dep"}, nil},
		{"instance and replica", jobsetDef, podT("p", "jobset.sigs.k8s.io/jobset-name=train", "jobset.sigs.k8s.io/replicatedjob-name=workers", "jobset.sigs.k8s.io/job-index=1"),
			&PodMatch{Component: "replicatedjob", Instance: "workers", Replica: "1"}, nil},
		{"replica inherited from an ancestor", lwsDef, podT("p", "leaderworkerset.sigs.k8s.io/worker-index=3", "leaderworkerset.sigs.k8s.io/group-index=1"),
			&PodMatch{Component: "worker", Replica: "1"}, nil},
		{"leader by value", lwsDef, podT("p", "leaderworkerset.sigs.k8s.io/worker-index=0"), &PodMatch{Component: "leader"}, nil},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			c := compileT(t, tc.def)
			got, err := c.MatchPod(ctxT, tc.pod)
			if tc.wantErr != nil {
				if !errors.Is(err, tc.wantErr) {
					t.Fatalf("error = %v, want %v", err, tc.wantErr)
				}
				if !strings.Contains(err.Error(), "ns/p") {
					t.Errorf("error %q does not name the pod", err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("match (-want, +got):\n%s", diff)
			}
		})
	}
}

// A filter decides between two gang definitions over the same component.
func TestGangFilters(t *testing.T) {
	def := minimal + `
        podSelector: {componentTypeSelector: {keyPath: .metadata.labels.app}}
  optimizationInstructions:
    gangScheduling:
      podGroups:
        - name: gpu
          members: [{componentName: worker, filters: ['.metadata.labels.gpu == "yes"']}]
        - name: rest
          members: [{componentName: worker, groupByKeyPaths: [.metadata.labels.app]}]
`
	c := compileT(t, def)
	root := objT(t, "apiVersion: example.com/v1\nkind: App\nmetadata: {name: a}\nspec: {replicas: 2, template: {spec: {containers: [{name: c}]}}}")
	for _, tc := range []struct {
		pod  *corev1.Pod
		want string
	}{
		{podT("p", "app=x", "gpu=yes"), "gpu"},
		{podT("p", "app=x", "gpu=no"), "rest"},
	} {
		g, err := c.GangForPod(ctxT, root, tc.pod)
		if err != nil {
			t.Fatal(err)
		}
		if g.Definition != tc.want || g.MinMember != 2 {
			t.Errorf("pod %v: gang %s min %d, want %s 2", tc.pod.Labels, g.Definition, g.MinMember, tc.want)
		}
	}
}
