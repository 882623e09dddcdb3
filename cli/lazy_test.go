package cli

import (
	"bytes"
	"context"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/cli-runtime/pkg/genericiooptions"
	metadatafake "k8s.io/client-go/metadata/fake"
	clienttesting "k8s.io/client-go/testing"

	kartav1alpha1 "github.com/muster-io/muster/api/v1alpha1"
	"github.com/muster-io/muster/catalog"
	"github.com/muster-io/muster/definition"
)

// TestKindDefinitionsMatchRegistry: the describe path, which compiles only
// the definition it needs, picks for every kind the definition the full
// registry serves, with a cluster definition overriding one embedded kind,
// a broken one for another kind ignored, and a kind nobody defines giving
// the registry's error.
func TestKindDefinitionsMatchRegistry(t *testing.T) {
	emb, err := catalog.Embedded()
	if err != nil {
		t.Fatal(err)
	}
	// Fresh copies of two embedded definitions, renamed as cluster ones.
	fresh := func(name string) *kartav1alpha1.Karta {
		data, err := catalog.EmbeddedFile(name)
		if err != nil {
			t.Fatal(err)
		}
		k, err := definition.Decode(data)
		if err != nil {
			t.Fatal(err)
		}
		return k
	}
	override := fresh(emb[0].Name)
	override.Name = "zz-override"
	broken := fresh(emb[1].Name)
	broken.Name = "aa-broken"
	broken.Spec.StructureDefinition.RootComponent.Name = ""
	var errOut bytes.Buffer
	env := NewEnv(genericiooptions.IOStreams{Out: &bytes.Buffer{}, ErrOut: &errOut})
	p := &pendingDefinitions{env: env, done: make(chan struct{}), embedded: emb, cluster: []*kartav1alpha1.Karta{override, broken}, served: true}
	close(p.done)
	kd, err := p.wait()
	if err != nil {
		t.Fatal(err)
	}
	if w := errOut.String(); !strings.HasPrefix(w, "warning: cluster definition aa-broken is invalid and ignored: ") || strings.Count(w, "\n") != 1 {
		t.Errorf("warnings %q; want one, for aa-broken", w)
	}
	full, err := kd.full()
	if err != nil {
		t.Fatal(err)
	}
	kinds := []schema.GroupVersionKind{{Group: "example.com", Version: "v1", Kind: "Nothing"}}
	for _, k := range emb {
		r := k.Spec.StructureDefinition.RootComponent.Kind
		kinds = append(kinds, schema.GroupVersionKind{Group: r.Group, Version: r.Version, Kind: r.Kind})
	}
	for _, gvk := range kinds {
		got, gotErr := kd.forGVK(gvk)
		want, wantErr := full.forGVK(gvk)
		if (gotErr == nil) != (wantErr == nil) || (gotErr != nil && gotErr.Error() != wantErr.Error()) {
			t.Errorf("%v: error %v; the registry says %v", gvk, gotErr, wantErr)
			continue
		}
		if gotErr != nil {
			continue
		}
		if got.Name != want.Name || got.Origin != want.Origin || got.Source != want.Source || got.Compiled == nil {
			t.Errorf("%v: %s (%s, %s); the registry serves %s (%s, %s)", gvk, got.Name, got.Origin, got.Source, want.Name, want.Origin, want.Source)
		}
	}
	got, err := kd.forGVK(schema.GroupVersionKind{Group: override.Spec.StructureDefinition.RootComponent.Kind.Group, Kind: override.Spec.StructureDefinition.RootComponent.Kind.Kind})
	if err != nil || got == nil || got.Name != "zz-override" {
		t.Errorf("the cluster definition did not win over the embedded one: %+v (err %v)", got, err)
	}
}

// TestOwnerIndex: owners are read from one metadata-only list per kind and
// namespace, a prefetched list is reused, an unserved kind ends the chain.
func TestOwnerIndex(t *testing.T) {
	jobGVK := schema.GroupVersionKind{Group: "batch", Version: "v1", Kind: "Job"}
	mapper := meta.NewDefaultRESTMapper([]schema.GroupVersion{jobGVK.GroupVersion()})
	mapper.Add(jobGVK, meta.RESTScopeNamespace)
	job := func(name, uid string) *metav1.PartialObjectMetadata {
		return &metav1.PartialObjectMetadata{
			TypeMeta:   metav1.TypeMeta{APIVersion: "batch/v1", Kind: "Job"},
			ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "ns", UID: types.UID(uid)},
		}
	}
	scheme := metadatafake.NewTestScheme()
	scheme.AddKnownTypeWithName(jobGVK, &metav1.PartialObjectMetadata{})
	scheme.AddKnownTypeWithName(jobGVK.GroupVersion().WithKind("JobList"), &metav1.PartialObjectMetadataList{})
	md := metadatafake.NewSimpleMetadataClient(scheme, job("a", "uid-a"), job("b", "uid-b"))
	x := newOwnerIndex(&Cluster{Mapper: mapper, Metadata: md})
	ctx := context.Background()
	x.prefetch(ctx, "ns", []schema.GroupVersionKind{jobGVK, {Group: "example.com", Version: "v1", Kind: "Unserved"}})
	for _, uid := range []string{"uid-a", "uid-b", "uid-a"} {
		o, err := x.lookup(ctx, "ns", metav1.OwnerReference{APIVersion: "batch/v1", Kind: "Job", UID: types.UID(uid)})
		if err != nil || o == nil || string(o.GetUID()) != uid {
			t.Fatalf("lookup %s: %v, %v", uid, o, err)
		}
	}
	if o, err := x.lookup(ctx, "ns", metav1.OwnerReference{APIVersion: "batch/v1", Kind: "Job", UID: "gone"}); o != nil || err != nil {
		t.Errorf("a missing owner: %v, %v; want nil, nil", o, err)
	}
	if o, err := x.lookup(ctx, "ns", metav1.OwnerReference{APIVersion: "example.com/v1", Kind: "Unserved", UID: "x"}); o != nil || err != nil {
		t.Errorf("an unserved kind: %v, %v; want nil, nil", o, err)
	}
	lists := 0
	for _, a := range md.Actions() {
		if a.GetVerb() != "list" {
			t.Errorf("unexpected %s %s: owners are listed, never fetched one by one", a.GetVerb(), a.GetResource())
		}
		if la, ok := a.(clienttesting.ListAction); ok && la.GetResource().Resource == "jobs" && la.GetNamespace() == "ns" {
			lists++
		}
	}
	if lists != 1 {
		t.Errorf("%d lists of jobs; want 1", lists)
	}
}
