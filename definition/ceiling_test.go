package definition

import (
	"errors"
	"strings"
	"testing"

	"github.com/muster-io/muster/api"
)

// TestCountCeiling: a count above MaxCount, however it is produced, is an
// error that names the field and the ceiling, never a gang of that size; a
// real number is read as a number whatever jq function produced it.
func TestCountCeiling(t *testing.T) {
	worker := podT("train-workers-0-1", "jobset.sigs.k8s.io/jobset-name=train", "jobset.sigs.k8s.io/replicatedjob-name=workers", "jobset.sigs.k8s.io/job-index=0")
	const replicas = ".spec.replicatedJobs[] | (.replicas // 1) * (.template.spec.parallelism // 1)"
	tests := []struct {
		name     string
		replicas string // replaces the replicasPath of jobsetDef
		ann      []string
		wantMin  int32
		wantErr  []string
	}{
		{name: "through tojson and fromjson", replicas: "(" + replicas + ") | tojson | fromjson", wantMin: 3},
		{name: "through tostring and tonumber", replicas: "(" + replicas + ") | tostring | tonumber", wantMin: 3},
		{name: "a count above the ceiling", replicas: replicas + " | . * 200000000",
			wantErr: []string{"replicasPath", "above the ceiling of 100000"}},
		{name: "a product above the ceiling", replicas: replicas + " | . * 40000",
			wantErr: []string{"above the ceiling of 100000"}},
		{name: "min-member of 1e9", replicas: replicas, ann: []string{api.AnnotationMinMember, "1000000000"},
			wantErr: []string{"muster.io/min-member", `"1000000000"`, "from 1 to 100000"}},
		{name: "min-member as a float", replicas: replicas, ann: []string{api.AnnotationMinMember, "1e9"},
			wantErr: []string{"muster.io/min-member", "from 1 to 100000"}},
		{name: "empty min-member", replicas: replicas, ann: []string{api.AnnotationMinMember, ""},
			wantErr: []string{"muster.io/min-member", "from 1 to 100000"}},
		{name: "min-member at the ceiling", replicas: replicas, ann: []string{api.AnnotationMinMember, "100000"}, wantMin: 100000},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			def := strings.Replace(jobsetDef, "replicasPath: "+replicas, "replicasPath: '"+tc.replicas+"'", 1)
			if def == jobsetDef && tc.replicas != replicas {
				t.Fatal("the replicasPath of jobsetDef changed; update this test")
			}
			c := compileT(t, def)
			g, err := c.GangForPod(ctxT, withAnnotations(objT(t, jobsetObj), tc.ann...), worker)
			if len(tc.wantErr) > 0 {
				if err == nil {
					t.Fatalf("no error; gang %+v", g)
				}
				for _, w := range tc.wantErr {
					if !strings.Contains(err.Error(), w) {
						t.Errorf("error %q does not contain %q", err, w)
					}
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if g == nil || g.MinMember != tc.wantMin {
				t.Fatalf("gang %+v, want min-member %d", g, tc.wantMin)
			}
		})
	}
}

// TestAnnotationsCheckedWithoutGang: on a kind whose definition has no gang
// an invalid annotation is an error too, not a pod scheduled alone.
func TestAnnotationsCheckedWithoutGang(t *testing.T) {
	const noGang = `
apiVersion: run.ai/v1alpha1
kind: Karta
metadata: {name: job}
spec:
  structureDefinition:
    rootComponent:
      name: job
      kind: {group: batch, version: v1, kind: Job}
      specDefinition: {podTemplateSpecPath: .spec.template}
`
	const job = `
apiVersion: batch/v1
kind: Job
metadata: {name: j, namespace: ns, uid: u}
spec:
  template: {spec: {containers: [{name: c, image: i}]}}
`
	c := compileT(t, noGang)
	for _, ann := range [][]string{{api.AnnotationGang, "on"}, {api.AnnotationGang, "maybe"}, {api.AnnotationMinMember, "abc"}} {
		_, err := c.GangForPod(ctxT, withAnnotations(objT(t, job), ann...), podT("j-0"))
		var ae *AnnotationError
		if !errors.As(err, &ae) || ae.Key != ann[0] || ae.Value != ann[1] {
			t.Errorf("%s=%s: error %v, want an AnnotationError naming it", ann[0], ann[1], err)
		}
	}
	if g, err := c.GangForPod(ctxT, withAnnotations(objT(t, job), api.AnnotationGang, api.GangOff), podT("j-0")); err != nil || g != nil {
		t.Errorf("opted out: %v, %v; want no gang, no error", g, err)
	}
}

// TestUpperBoundCeiling: a maxReplicas beyond the ceiling that fits an
// int32 (KubeRay's default for "no limit") is no bound, not an error;
// a minReplicas there, which sizes gangs, still is one.
func TestUpperBoundCeiling(t *testing.T) {
	tests := []struct {
		name, max, min string
		wantMax        *int32
		wantErr        string
	}{
		{name: "a bound under the ceiling", max: "4", min: "1", wantMax: ptrInt32(4)},
		{name: "the largest int32", max: "2147483647", min: "1"},
		{name: "the largest int32 as a string", max: `"2147483647"`, min: "1"},
		{name: "beyond int32", max: "2147483648", min: "1", wantErr: "maxReplicasPath"},
		{name: "a negative bound", max: "-1", min: "1", wantErr: "negative"},
		{name: "a minimum beyond the ceiling", max: "4", min: "2147483647", wantErr: "above the ceiling of 100000"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			obj := strings.Replace(strings.Replace(rayObj, "maxReplicas: 4", "maxReplicas: "+tc.max, 1), "minReplicas: 1", "minReplicas: "+tc.min, 1)
			w, err := compileT(t, rayDef).Extract(ctxT, objT(t, obj))
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("error %v, want one containing %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			var got *int32
			for _, c := range w.Components {
				for _, in := range c.Instances {
					if c.Name == "workers" && in.ID == "gpu" {
						got = in.MaxReplicas
					}
				}
			}
			if (got == nil) != (tc.wantMax == nil) || (got != nil && *got != *tc.wantMax) {
				t.Errorf("workers/gpu maxReplicas %v, want %v", deref(got), deref(tc.wantMax))
			}
		})
	}
}

func ptrInt32(n int32) *int32 { return &n }

func deref(p *int32) any {
	if p == nil {
		return nil
	}
	return *p
}
