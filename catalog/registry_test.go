package catalog

import (
	"sync"
	"testing"

	"k8s.io/apimachinery/pkg/runtime/schema"

	kartav1alpha1 "github.com/muster-io/muster/api/v1alpha1"
	"github.com/muster-io/muster/definition"
)

// embeddedKarta returns a fresh copy of one embedded definition.
func embeddedKarta(t *testing.T, name string) *kartav1alpha1.Karta {
	t.Helper()
	data, err := EmbeddedFile(name)
	if err != nil {
		t.Fatal(err)
	}
	k, err := definition.Decode(data)
	if err != nil {
		t.Fatal(err)
	}
	return k
}

var jobSetGK = schema.GroupKind{Group: "jobset.x-k8s.io", Kind: "JobSet"}

func TestRegistryLookup(t *testing.T) {
	r := newTestRegistry(t)
	tests := []struct {
		name     string
		gvk      schema.GroupVersionKind
		wantName string
		wantOK   bool
	}{
		{"served version", jobSetGK.WithVersion("v1alpha2"), "jobset", true},
		{"any version of the group/kind", jobSetGK.WithVersion("v1"), "jobset", true},
		{"ray older version", schema.GroupVersionKind{Group: "ray.io", Version: "v1alpha1", Kind: "RayCluster"}, "raycluster", true},
		{"core kind", schema.GroupVersionKind{Group: "apps", Version: "v1", Kind: "StatefulSet"}, "statefulset", true},
		{"unknown kind", schema.GroupVersionKind{Group: "example.com", Version: "v1", Kind: "Thing"}, "", false},
		{"kind in another group", schema.GroupVersionKind{Group: "example.com", Version: "v1alpha2", Kind: "JobSet"}, "", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e, ok := r.LookupGVK(tt.gvk)
			if ok != tt.wantOK {
				t.Fatalf("LookupGVK(%v) ok = %v, want %v", tt.gvk, ok, tt.wantOK)
			}
			if !ok {
				return
			}
			if e.Name != tt.wantName || e.Origin != OriginEmbedded || e.Compiled == nil || e.Err != nil {
				t.Errorf("LookupGVK(%v) = %s/%s (compiled %v, err %v), want embedded %s", tt.gvk, e.Origin, e.Name, e.Compiled != nil, e.Err, tt.wantName)
			}
			if e.Source != "catalog/"+tt.wantName+".yaml" {
				t.Errorf("Source = %q", e.Source)
			}
			if e2, _ := r.Lookup(tt.gvk.GroupKind()); e2 != e {
				t.Errorf("Lookup and LookupGVK disagree")
			}
		})
	}
	if got := len(r.List()); got != len(Types) {
		t.Errorf("List has %d entries, want %d", got, len(Types))
	}
}

func TestRegistrySetCluster(t *testing.T) {
	override := embeddedKarta(t, "jobset")
	override.Name = "jobset-site"

	broken := embeddedKarta(t, "raycluster")
	broken.Name = "raycluster-broken"
	bad := ".spec.headGroupSpec.template | del(.spec)" // del is not allowed in a path
	broken.Spec.StructureDefinition.ChildComponents[0].SpecDefinition.PodTemplateSpecPath = &bad

	noRoot := embeddedKarta(t, "mpijob")
	noRoot.Name = "no-root-kind"
	noRoot.Spec.StructureDefinition.RootComponent.Kind = nil

	tests := []struct {
		name      string
		cluster   []*kartav1alpha1.Karta
		lookup    schema.GroupKind
		wantName  string
		wantOrig  Origin
		wantErrs  []string // names of cluster entries expected to carry Err
		wantValid []string // names of cluster entries expected valid
	}{
		{
			name:     "cluster overrides embedded for the same root kind",
			cluster:  []*kartav1alpha1.Karta{override},
			lookup:   jobSetGK,
			wantName: "jobset-site", wantOrig: OriginCluster,
			wantValid: []string{"jobset-site"},
		},
		{
			name:     "broken cluster definition reported, embedded still served",
			cluster:  []*kartav1alpha1.Karta{broken},
			lookup:   schema.GroupKind{Group: "ray.io", Kind: "RayCluster"},
			wantName: "raycluster", wantOrig: OriginEmbedded,
			wantErrs: []string{"raycluster-broken"},
		},
		{
			name:     "a broken one does not affect the others",
			cluster:  []*kartav1alpha1.Karta{broken, override, noRoot},
			lookup:   jobSetGK,
			wantName: "jobset-site", wantOrig: OriginCluster,
			wantErrs:  []string{"raycluster-broken", "no-root-kind"},
			wantValid: []string{"jobset-site"},
		},
		{
			name:     "an empty set restores the embedded definitions",
			cluster:  nil,
			lookup:   jobSetGK,
			wantName: "jobset", wantOrig: OriginEmbedded,
		},
	}
	r := newTestRegistry(t)
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			gen := r.Generation()
			entries := r.SetCluster(tt.cluster)
			if r.Generation() <= gen {
				t.Errorf("Generation %d did not increase from %d", r.Generation(), gen)
			}
			if len(entries) != len(tt.cluster) {
				t.Fatalf("SetCluster returned %d entries, want %d", len(entries), len(tt.cluster))
			}
			byName := map[string]Entry{}
			for _, e := range entries {
				byName[e.Name] = e
				if e.Origin != OriginCluster || e.Source != "karta/"+e.Name {
					t.Errorf("entry %s: origin %s source %s", e.Name, e.Origin, e.Source)
				}
			}
			for _, n := range tt.wantErrs {
				if e := byName[n]; e.Err == nil || e.Compiled != nil {
					t.Errorf("entry %s: want Err and no Compiled, got err %v", n, e.Err)
				} else {
					t.Logf("%s: %v", n, e.Err)
				}
				if _, ok := r.Get(n); ok {
					t.Errorf("Get(%s) serves a broken definition", n)
				}
			}
			for _, n := range tt.wantValid {
				if e := byName[n]; e.Err != nil || e.Compiled == nil {
					t.Errorf("entry %s: want valid, got %v", n, e.Err)
				}
			}
			e, ok := r.Lookup(tt.lookup)
			if !ok || e.Name != tt.wantName || e.Origin != tt.wantOrig {
				t.Fatalf("Lookup(%v) = %v, %v; want %s from %s", tt.lookup, e, ok, tt.wantName, tt.wantOrig)
			}
			// List holds every embedded entry plus the cluster set, broken included.
			if got, want := len(r.List()), len(Types)+len(tt.cluster); got != want {
				t.Errorf("List has %d entries, want %d", got, want)
			}
		})
	}
}

// TestRegistryConcurrent runs lookups while the cluster set is replaced:
// readers must always see a complete snapshot, either the embedded JobSet
// definition or the override, never none. Run with -race.
func TestRegistryConcurrent(t *testing.T) {
	r := newTestRegistry(t)
	override := embeddedKarta(t, "jobset")
	override.Name = "jobset-site"
	var wg sync.WaitGroup
	stop := make(chan struct{})
	for range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				select {
				case <-stop:
					return
				default:
				}
				e, ok := r.Lookup(jobSetGK)
				if !ok || (e.Name != "jobset" && e.Name != "jobset-site") {
					t.Errorf("Lookup during SetCluster = %v, %v", e, ok)
					return
				}
				_ = r.List()
			}
		}()
	}
	for i := range 50 {
		if i%2 == 0 {
			r.SetCluster([]*kartav1alpha1.Karta{override})
		} else {
			r.SetCluster(nil)
		}
	}
	close(stop)
	wg.Wait()
	if got := r.Generation(); got != 51 {
		t.Errorf("Generation = %d after 50 SetCluster calls, want 51", got)
	}
}
