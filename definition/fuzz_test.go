package definition

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/yaml"
)

// FuzzDecode: decoding, validating and compiling never panic, and whatever
// validates compiles.
func FuzzDecode(f *testing.F) {
	for _, s := range []string{minimal, jobsetDef, lwsDef, rayDef, fragDef, podSpecDef, statusKarta, "", "{}", "kind: Karta"} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		if len(data) > 1<<16 {
			return
		}
		k, err := Decode(data)
		if err != nil {
			return
		}
		errs := Validate(k)
		c, err := Compile(k, Options{})
		if len(errs) == 0 && err != nil {
			t.Fatalf("validates but does not compile: %v", err)
		}
		if len(errs) > 0 && err == nil {
			t.Fatalf("Validate found %v but Compile passed", errs)
		}
		if c != nil {
			_ = c.RootGVK()
		}
	})
}

// FuzzEvaluate: every question asked of fixed definitions about an
// arbitrary object never panics and ends within the deadline.
func FuzzEvaluate(f *testing.F) {
	for _, s := range []string{jobsetObj, lwsObj, rayObj, fragObj} {
		j, err := yaml.YAMLToJSON([]byte(s))
		if err != nil {
			f.Fatal(err)
		}
		f.Add(j)
	}
	f.Add([]byte(`{"spec":{"replicatedJobs":[{"name":1,"replicas":"x"}]}}`))
	f.Add([]byte(`{"spec":{"replicas":1e300,"leaderWorkerTemplate":{"size":-5}}}`))
	var defs []*Compiled
	for _, d := range []string{jobsetDef, lwsDef, rayDef, fragDef, statusKarta} {
		defs = append(defs, compileT(f, d))
	}
	pods := []*podSpecT{
		{"jobset.sigs.k8s.io/jobset-name=train", "jobset.sigs.k8s.io/replicatedjob-name=workers"},
		{"leaderworkerset.sigs.k8s.io/worker-index=1", "leaderworkerset.sigs.k8s.io/group-index=0"},
		{"ray.io/node-type=worker", "ray.io/group=gpu"},
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		if len(data) > 1<<16 {
			return
		}
		var m map[string]any
		if json.Unmarshal(data, &m) != nil || m == nil {
			return
		}
		u := &unstructured.Unstructured{}
		if u.UnmarshalJSON(data) != nil {
			u.Object = m // float64 numbers, as from a plain JSON decoder
		}
		// Each evaluation has its own deadline (Options.Timeout); the whole call gets a
		// generous bound so a hang fails the fuzzer instead of stalling it.
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		for _, c := range defs {
			_, _ = c.Extract(ctx, u)
			_, _ = c.Status(ctx, u)
			_, _ = c.GangPlans(ctx, u)
			_, _ = c.ApplyTemplatePatch(ctx, u, TemplatePatch{SchedulerName: "s", Labels: map[string]string{"a": "b"}})
			for _, p := range pods {
				_, _ = c.GangForPod(ctx, u, podT("p", (*p)...))
			}
		}
		if ctx.Err() != nil {
			t.Fatal("evaluation did not end in time")
		}
	})
}

type podSpecT []string
