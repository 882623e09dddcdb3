package podgrouper

import (
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/util/validation"
)

func TestPodGroupName(t *testing.T) {
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

func TestLabelValue(t *testing.T) {
	if got := labelValue("JobSet"); got != "JobSet" {
		t.Errorf("labelValue(JobSet) = %q, want it unchanged (label values may be upper case)", got)
	}
	for _, v := range []string{"JobSet", "train", strings.Repeat("n", 200)} {
		got := labelValue(v)
		if errs := validation.IsValidLabelValue(got); len(errs) > 0 {
			t.Errorf("labelValue(%q) = %q: %v", v, got, errs)
		}
	}
	if got := labelValue("train"); got != "train" {
		t.Errorf("labelValue(train) = %q, want it unchanged", got)
	}
}
