package naming

import (
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/util/validation"

	kartav1alpha1 "github.com/muster-io/muster/api/v1alpha1"
)

// The expected names are the pod-grouper's since its first release: a
// change here renames the PodGroups of running workloads.
func TestPodGroupNameJoin(t *testing.T) {
	long := strings.Repeat("a", 70)
	cases := []struct {
		name     string
		workload string
		def      string
		keys     []string
		bare     bool
		want     string
	}{
		{name: "whole workload, bare", workload: "train", def: "jobset", bare: true, want: "train"},
		{name: "whole workload, named", workload: "train", def: "workers", want: "train-workers"},
		{name: "keys", workload: "serve", def: "group", keys: []string{"0"}, bare: true, want: "serve-group-0"},
		{name: "two keys", workload: "serve", def: "group", keys: []string{"1", "leader"}, want: "serve-group-1-leader"},
		{name: "upper case and slash rewritten with hash", workload: "Serve", def: "g", keys: []string{"a/b"}, want: "serve-g-a-b-" + identityHash([]string{"Serve", "g", "a/b"})},
		{name: "long cut with hash", workload: long, def: "g", bare: true, want: strings.Repeat("a", 54) + "-" + identityHash([]string{long})},
		// The hash itself is pinned too: computing it differently renames PodGroups.
		{name: "pinned hash", workload: "Serve", def: "g", keys: []string{"a/b"}, want: "serve-g-a-b-8a046b6c"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got := podGroupName(tc.workload, tc.def, tc.keys, tc.bare)
			if got != tc.want {
				t.Errorf("podGroupName = %q, want %q", got, tc.want)
			}
			if errs := validation.IsDNS1123Label(got); len(errs) > 0 {
				t.Errorf("%q is not a valid name: %v", got, errs)
			}
			if errs := validation.IsValidLabelValue(got); len(errs) > 0 {
				t.Errorf("%q is not a valid label value: %v", got, errs)
			}
		})
	}
}

func TestPodGroupNameDistinct(t *testing.T) {
	// Rewritten or cut names of different identities must not collide.
	a := podGroupName("w", "g", []string{"a/b"}, false)
	b := podGroupName("w", "g", []string{"a.b"}, false)
	c := podGroupName("w", "g", []string{"a", "b"}, false)
	if a == b || a == c || b == c {
		t.Errorf("names collide: %q %q %q", a, b, c)
	}
	long := strings.Repeat("x", 80)
	if podGroupName(long+"1", "g", nil, true) == podGroupName(long+"2", "g", nil, true) {
		t.Error("cut names of different workloads collide")
	}
}

// karta builds a definition with root component "root" and the given gang
// instruction.
func karta(gs *kartav1alpha1.GangSchedulingInstruction) *kartav1alpha1.Karta {
	k := &kartav1alpha1.Karta{}
	k.Spec.StructureDefinition.RootComponent.Name = "root"
	if gs != nil {
		k.Spec.OptimizationInstructions = &kartav1alpha1.OptimizationInstructions{GangScheduling: gs}
	}
	return k
}

func members(keys ...string) []kartav1alpha1.PodGroupMemberDefinition {
	m := kartav1alpha1.PodGroupMemberDefinition{ComponentName: "c"}
	m.GroupByKeyPaths = keys
	return []kartav1alpha1.PodGroupMemberDefinition{m}
}

func TestPodGroupNameAndWholeWorkload(t *testing.T) {
	one := karta(&kartav1alpha1.GangSchedulingInstruction{PodGroups: []kartav1alpha1.PodGroupDefinition{{Name: "workers", Members: members()}}})
	two := karta(&kartav1alpha1.GangSchedulingInstruction{PodGroups: []kartav1alpha1.PodGroupDefinition{
		{Name: "workers", Members: members()},
		{Name: "group", Members: members(".metadata.labels.g")},
	}})
	tree := karta(&kartav1alpha1.GangSchedulingInstruction{PodGroup: &kartav1alpha1.PodGroupTree{}})
	namedTree := karta(&kartav1alpha1.GangSchedulingInstruction{PodGroup: &kartav1alpha1.PodGroupTree{Name: "all"}})
	cases := []struct {
		name  string
		k     *kartav1alpha1.Karta
		def   string
		keys  []string
		want  string
		whole string // WholeWorkloadName; "" when not knowable
	}{
		{name: "only gang is bare", k: one, def: "workers", want: "train", whole: "train"},
		{name: "one of two gangs is named", k: two, def: "workers", want: "train-workers", whole: "train-workers"},
		{name: "grouped gang has keys", k: two, def: "group", keys: []string{"0"}, want: "train-group-0"},
		{name: "unnamed tree is the root's", k: tree, def: "root", want: "train", whole: "train"},
		{name: "named tree alone is bare", k: namedTree, def: "all", want: "train", whole: "train"},
		{name: "no definition", k: nil, def: "x", want: "train"},
		{name: "unknown gang", k: one, def: "nope", want: "train"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if got := PodGroupName("train", tc.k, tc.def, tc.keys); got != tc.want {
				t.Errorf("PodGroupName = %q, want %q", got, tc.want)
			}
			if len(tc.keys) > 0 {
				return
			}
			got, ok := WholeWorkloadName("train", tc.k, tc.def)
			if ok != (tc.whole != "") || got != tc.whole {
				t.Errorf("WholeWorkloadName = %q, %v; want %q", got, ok, tc.whole)
			}
		})
	}
	if _, ok := WholeWorkloadName("train", two, "group"); ok {
		t.Error("WholeWorkloadName of a grouped gang must not be knowable")
	}
}

func TestLabelValue(t *testing.T) {
	if got := LabelValue("JobSet"); got != "JobSet" {
		t.Errorf("LabelValue(JobSet) = %q, want it unchanged (label values may be upper case)", got)
	}
	for _, v := range []string{"JobSet", "train", strings.Repeat("n", 200)} {
		got := LabelValue(v)
		if errs := validation.IsValidLabelValue(got); len(errs) > 0 {
			t.Errorf("LabelValue(%q) = %q: %v", v, got, errs)
		}
	}
	if got := LabelValue("train"); got != "train" {
		t.Errorf("LabelValue(train) = %q, want it unchanged", got)
	}
}

func TestNativePodGroupName(t *testing.T) {
	long := strings.Repeat("w", 70)
	for _, tc := range []struct {
		workload, uid string
		keys          []string
		want          string
	}{
		{"train", "1b4e28ba-2fa1-11d2-883f-0016d3cca427", nil, "train-1b4e28ba"},
		{"serve", "9f0c7d1e-aaaa", []string{"0"}, "serve-group-0-9f0c7d1e"},
		{"train", "", nil, "train"},
	} {
		if got := NativePodGroupName(tc.workload, tc.uid, nil, "group", tc.keys); got != tc.want {
			t.Errorf("NativePodGroupName(%q, %q, %v) = %q, want %q", tc.workload, tc.uid, tc.keys, got, tc.want)
		}
	}
	a := NativePodGroupName(long, "aaaaaaaa-1", nil, "group", nil)
	b := NativePodGroupName(long, "bbbbbbbb-1", nil, "group", nil)
	if a == b || len(a) > MaxLength || !strings.HasSuffix(a, "-aaaaaaaa") {
		t.Errorf("long names %q and %q: want distinct, ≤ %d characters, ending in the UID", a, b, MaxLength)
	}
}
