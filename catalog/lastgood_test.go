package catalog

import (
	"testing"

	"k8s.io/apimachinery/pkg/types"

	kartav1alpha1 "github.com/muster-io/muster/api/v1alpha1"
)

// TestRegistryLastGood walks one Karta through the edits an admin makes:
// the generation that compiled stays in force while a later one is broken,
// until a valid generation replaces it; a Karta created anew under the same
// name inherits nothing; of two Kartas for one kind the first by name wins
// and the other says so.
func TestRegistryLastGood(t *testing.T) {
	gen := func(g int64, uid types.UID, broken bool) *kartav1alpha1.Karta {
		k := embeddedKarta(t, "jobset")
		k.Name, k.UID, k.Generation = "jobset-site", uid, g
		if broken {
			bad := "def f: f; f | del(.a)" // del is not allowed in a path
			k.Spec.StructureDefinition.ChildComponents[0].SpecDefinition.PodTemplateSpecPath = &bad
		}
		return k
	}
	other := embeddedKarta(t, "jobset")
	other.Name, other.UID, other.Generation = "zz-jobset-other", "uid-other", 1

	steps := []struct {
		name       string
		cluster    []*kartav1alpha1.Karta
		wantServed string // name of the entry serving JobSet
		wantGen    int64  // its generation (0: embedded)
		wantLast   int64  // LastGood generation of jobset-site (0: none)
		wantShadow string // ShadowedBy of zz-jobset-other
		wantErr    bool   // jobset-site is broken
	}{
		{"generation 1 compiles and is used", []*kartav1alpha1.Karta{gen(1, "uid-1", false)}, "jobset-site", 1, 0, "", false},
		{"generation 2 is broken: 1 stays", []*kartav1alpha1.Karta{gen(2, "uid-1", true)}, "jobset-site", 1, 1, "", true},
		{"generation 3 still broken: still 1", []*kartav1alpha1.Karta{gen(3, "uid-1", true)}, "jobset-site", 1, 1, "", true},
		{"generation 4 fixed: 4 is used", []*kartav1alpha1.Karta{gen(4, "uid-1", false)}, "jobset-site", 4, 0, "", false},
		{"deleted and created broken: the embedded one serves", []*kartav1alpha1.Karta{gen(1, "uid-2", true)}, "jobset", 0, 0, "", true},
		{"two valid Kartas: the first by name wins", []*kartav1alpha1.Karta{other, gen(2, "uid-2", false)}, "jobset-site", 2, 0, "jobset-site", false},
	}
	r := newTestRegistry(t)
	for _, s := range steps {
		entries := r.SetCluster(s.cluster)
		e, ok := r.Lookup(jobSetGK)
		if !ok {
			t.Fatalf("%s: JobSet has no definition", s.name)
		}
		if e.Name != s.wantServed || e.Generation != s.wantGen {
			t.Errorf("%s: served %s generation %d, want %s generation %d", s.name, e.Name, e.Generation, s.wantServed, s.wantGen)
		}
		for _, en := range entries {
			switch en.Name {
			case "jobset-site":
				var last int64
				if en.LastGood != nil {
					last = en.LastGood.Generation
				}
				if last != s.wantLast {
					t.Errorf("%s: jobset-site LastGood generation %d, want %d", s.name, last, s.wantLast)
				}
				if (en.Err != nil) != s.wantErr {
					t.Errorf("%s: jobset-site Err = %v, want an error: %v", s.name, en.Err, s.wantErr)
				}
			case "zz-jobset-other":
				if en.ShadowedBy != s.wantShadow {
					t.Errorf("%s: zz-jobset-other ShadowedBy %q, want %q", s.name, en.ShadowedBy, s.wantShadow)
				}
			}
		}
	}
}
