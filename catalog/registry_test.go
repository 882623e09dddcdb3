package catalog

import (
	"errors"
	"strings"
	"sync"
	"testing"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/utils/ptr"

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
		{"dynamo v1alpha1", schema.GroupVersionKind{Group: "nvidia.com", Version: "v1alpha1", Kind: "DynamoGraphDeployment"}, "dynamographdeployment", true},
		{"dynamo v1beta1", schema.GroupVersionKind{Group: "nvidia.com", Version: "v1beta1", Kind: "DynamoGraphDeployment"}, "dynamographdeployment-v1beta1", true},
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
			// Lookup has no version: it agrees where the kind has one
			// definition.
			if e2, _ := r.Lookup(tt.gvk.GroupKind()); e2 != e && len(r.ForKind(tt.gvk.GroupKind())) == 1 {
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

// widgetKarta defines acme.example.com/<version> Widget, reading
// .spec.workers and .spec.template.
func widgetKarta(t *testing.T, name, version string) *kartav1alpha1.Karta {
	t.Helper()
	k, err := definition.Decode([]byte(`apiVersion: run.ai/v1alpha1
kind: Karta
metadata: {name: ` + name + `}
spec:
  structureDefinition:
    rootComponent:
      name: widget
      kind: {group: acme.example.com, version: ` + version + `, kind: Widget}
    childComponents:
    - name: worker
      ownerRef: widget
      specDefinition: {podTemplateSpecPath: .spec.template}
      scaleDefinition: {replicasPath: .spec.workers}
`))
	if err != nil {
		t.Fatal(err)
	}
	return k
}

// objectSchema builds an object schema whose spec has the given fields.
func objectSchema(specFields ...string) *apiextensionsv1.JSONSchemaProps {
	spec := apiextensionsv1.JSONSchemaProps{Type: "object", Properties: map[string]apiextensionsv1.JSONSchemaProps{}}
	for _, f := range specFields {
		spec.Properties[f] = apiextensionsv1.JSONSchemaProps{Type: "object", XPreserveUnknownFields: ptr.To(true)}
	}
	return &apiextensionsv1.JSONSchemaProps{Type: "object", Properties: map[string]apiextensionsv1.JSONSchemaProps{"spec": spec}}
}

// widget is the test kind Widget at version v.
func widget(v string) schema.GroupVersionKind {
	return schema.GroupVersionKind{Group: "acme.example.com", Version: v, Kind: "Widget"}
}

// widgetSchemas serves Widget's schemas: v1 and v2 have the fields
// widget-v1 reads, v3 and v1beta1 miss one, v9 has no schema and "broken"
// fails. Each call counts in calls.
func widgetSchemas(calls *int) func(schema.GroupVersionKind) (*apiextensionsv1.JSONSchemaProps, error) {
	served := map[string]*apiextensionsv1.JSONSchemaProps{
		"v1":      objectSchema("workers", "template"),
		"v2":      objectSchema("workers", "template", "extra"),
		"v3":      objectSchema("replicas", "template"),
		"v1beta1": objectSchema("workerz", "template"),
	}
	return func(gvk schema.GroupVersionKind) (*apiextensionsv1.JSONSchemaProps, error) {
		*calls++
		if gvk.Version == "broken" {
			return nil, errors.New("apiserver said no")
		}
		return served[gvk.Version], nil // nil for "v9": no schema to check
	}
}

// TestRegistryVersionFallback: a kind at a version without a definition is
// read with another version's definition only when the served schema of
// that version has every field the definition reads; otherwise a
// VersionError names the fields. The version written in a definition
// always serves its own version.
func TestRegistryVersionFallback(t *testing.T) {
	calls := 0
	schemas := widgetSchemas(&calls)
	for _, tc := range []struct {
		name     string
		schemas  bool
		version  string
		wantName string
		wantErr  []string
	}{
		{"own version", true, "v1", "widget-v1", nil},
		{"same fields", true, "v2", "widget-v1", nil},
		{"field moved", true, "v3", "", []string{"no definition for Widget at version v3", "widget-v1 (v1) reads", ".spec.workers", "add a definition for v3"}},
		{"typo-close field", true, "v1beta1", "", []string{".spec.workers", `did you mean "workerz"`}},
		{"no schema served", true, "v9", "widget-v1", nil},
		{"schema unreadable", true, "broken", "", []string{"read the served schema of Widget broken", "apiserver said no"}},
		{"no cluster: unchecked", false, "v3", "widget-v1", nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := newTestRegistry(t)
			r.SetCluster([]*kartav1alpha1.Karta{widgetKarta(t, "widget-v1", "v1")})
			if tc.schemas {
				r.SetSchemas(schemas)
			}
			e, err := r.Resolve(widget(tc.version))
			if len(tc.wantErr) > 0 {
				if err == nil {
					t.Fatalf("Resolve = %s, want an error", e.Name)
				}
				for _, w := range tc.wantErr {
					if !strings.Contains(err.Error(), w) {
						t.Errorf("error %q lacks %q", err, w)
					}
				}
				if _, ok := r.LookupGVK(widget(tc.version)); ok {
					t.Error("LookupGVK found what Resolve refused")
				}
				return
			}
			if err != nil || e == nil || e.Name != tc.wantName {
				t.Fatalf("Resolve = %v, %v; want %s", e, err, tc.wantName)
			}
		})
	}
}

// TestRegistryVersionFallbackSnapshots: the schema check is done once per
// snapshot, a failed read is not kept, and a definition written for a
// version serves that version from then on.
func TestRegistryVersionFallbackSnapshots(t *testing.T) {
	calls := 0
	schemas := widgetSchemas(&calls)
	// A check is done once per snapshot; a new cluster set checks again.
	r := newTestRegistry(t)
	r.SetCluster([]*kartav1alpha1.Karta{widgetKarta(t, "widget-v1", "v1")})
	r.SetSchemas(schemas)
	for range 3 {
		if _, err := r.Resolve(widget("v3")); err == nil {
			t.Fatal("v3 resolved")
		}
	}
	if calls != 1 {
		t.Errorf("schema read %d times for three lookups, want 1", calls)
	}
	// A failed schema read is not kept: the next lookup reads again.
	calls = 0
	for range 2 {
		if _, err := r.Resolve(widget("broken")); err == nil {
			t.Fatal("unreadable schema resolved")
		}
	}
	if calls != 2 {
		t.Errorf("schema read %d times for two lookups after a failed read, want 2", calls)
	}
	// A definition written for v3 serves v3 from then on.
	r.SetCluster([]*kartav1alpha1.Karta{widgetKarta(t, "widget-v1", "v1"), widgetKarta(t, "widget-v3", "v3")})
	if e, err := r.Resolve(widget("v3")); err != nil || e.Name != "widget-v3" {
		t.Errorf("after adding widget-v3: %v, %v", e, err)
	}
	if e, err := r.Resolve(widget("v1")); err != nil || e.Name != "widget-v1" {
		t.Errorf("v1 after adding widget-v3: %v, %v", e, err)
	}
	// Two versions are two kinds for shadowing: neither shadows the other.
	for _, e := range r.List() {
		if e.ShadowedBy != "" {
			t.Errorf("%s is shadowed by %s", e.Name, e.ShadowedBy)
		}
	}
	if _, err := r.Resolve(schema.GroupVersionKind{Group: "acme.example.com", Version: "v1", Kind: "Gadget"}); !errors.Is(err, ErrNoDefinition) {
		t.Errorf("unknown kind: %v, want ErrNoDefinition", err)
	}
}
