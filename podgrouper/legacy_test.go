package podgrouper

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/wait"
	dynamicfake "k8s.io/client-go/dynamic/fake"
	clientfeatures "k8s.io/client-go/features"
	clientfeaturestesting "k8s.io/client-go/features/testing"
	k8stesting "k8s.io/client-go/testing"
	"k8s.io/klog/v2/ktesting"

	kartav1alpha1 "github.com/muster-io/muster/api/v1alpha1"
	"github.com/muster-io/muster/definition"
)

// TestKartasReadResourceInterfaces: where the deprecated ResourceInterface
// CRD is served (here alone, without the Karta CRD), its objects reach the
// registry as Kartas and their Valid condition says they are deprecated;
// a ResourceInterface named like a Karta is left out.
func TestKartasReadResourceInterfaces(t *testing.T) {
	clientfeaturestesting.SetFeatureDuringTest(t, clientfeatures.WatchListClient, false)
	for _, tc := range []struct {
		name       string
		withKartas bool
		want       string // names given to the registry
	}{
		{"legacy CRD alone", false, "old,same"},
		{"both CRDs, one name taken", true, "old,same"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, ctx := ktesting.NewTestContext(t)
			ctx, cancel := context.WithCancel(ctx)
			legacy := func(name, kind string) *unstructured.Unstructured {
				u := kartaObject(name, validSpec(kind))
				u.SetAPIVersion(kartav1alpha1.LegacyAPIVersion)
				u.SetKind(kartav1alpha1.LegacyKind)
				return u
			}
			objs := []runtime.Object{legacy("old", "Old"), legacy("same", "FromLegacy")}
			m := testMapper().(*meta.DefaultRESTMapper)
			m.Add(schema.GroupVersionKind{Group: kartav1alpha1.LegacyGroup, Version: kartav1alpha1.Version, Kind: kartav1alpha1.LegacyKind}, meta.RESTScopeRoot)
			if tc.withKartas {
				m.Add(schema.GroupVersionKind{Group: kartav1alpha1.Group, Version: kartav1alpha1.Version, Kind: kartav1alpha1.Kind}, meta.RESTScopeRoot)
				objs = append(objs, kartaObject("same", validSpec("FromKarta")))
			}
			dyn := dynamicfake.NewSimpleDynamicClientWithCustomListKinds(runtime.NewScheme(),
				map[schema.GroupVersionResource]string{KartaResource: "KartaList", LegacyResource: "ResourceInterfaceList"}, objs...)
			defs := &fakeDefs{result: []Entry{{Name: "old"}, {Name: "same"}}}
			k := newKartas(dyn, m, defs, nil)
			defer func() { cancel(); k.shutdown() }()
			if err := k.start(ctx); err != nil {
				t.Fatal(err)
			}
			var cond *metav1.Condition
			err := wait.PollUntilContextTimeout(ctx, 5*time.Millisecond, 10*time.Second, true, func(ctx context.Context) (bool, error) {
				u, err := dyn.Resource(LegacyResource).Get(ctx, "old", metav1.GetOptions{})
				if err != nil {
					return false, err
				}
				cond = validCondition(t, u)
				return cond != nil, nil
			})
			if err != nil {
				t.Fatalf("no Valid condition on the ResourceInterface: %v", err)
			}
			if cond.Status != metav1.ConditionTrue || !strings.Contains(cond.Message, "deprecated") || !strings.Contains(cond.Message, "muster validate --convert") {
				t.Errorf("condition %+v, want True with the deprecation notice", cond)
			}
			defs.mu.Lock()
			var names, kinds []string
			for _, kt := range defs.cluster {
				names = append(names, kt.Name)
				kinds = append(kinds, kt.Spec.StructureDefinition.RootComponent.Kind.Kind)
				if kt.Name == "old" && !definition.IsLegacy(kt) {
					t.Errorf("ResourceInterface old not marked legacy: %s %s", kt.APIVersion, kt.Kind)
				}
			}
			defs.mu.Unlock()
			if got := strings.Join(names, ","); got != tc.want {
				t.Errorf("registry got %s, want %s", got, tc.want)
			}
			if tc.withKartas && !strings.Contains(strings.Join(kinds, ","), "FromKarta") {
				t.Errorf("kinds %v: the Karta named same must win over the ResourceInterface", kinds)
			}
		})
	}
}

// TestKartasResourceInterfacesForbidden: a pod-grouper not allowed to list
// ResourceInterfaces still starts, with the Kartas.
func TestKartasResourceInterfacesForbidden(t *testing.T) {
	clientfeaturestesting.SetFeatureDuringTest(t, clientfeatures.WatchListClient, false)
	_, ctx := ktesting.NewTestContext(t)
	ctx, cancel := context.WithCancel(ctx)
	m := testMapper().(*meta.DefaultRESTMapper)
	m.Add(schema.GroupVersionKind{Group: kartav1alpha1.LegacyGroup, Version: kartav1alpha1.Version, Kind: kartav1alpha1.LegacyKind}, meta.RESTScopeRoot)
	m.Add(schema.GroupVersionKind{Group: kartav1alpha1.Group, Version: kartav1alpha1.Version, Kind: kartav1alpha1.Kind}, meta.RESTScopeRoot)
	dyn := dynamicfake.NewSimpleDynamicClientWithCustomListKinds(runtime.NewScheme(),
		map[schema.GroupVersionResource]string{KartaResource: "KartaList", LegacyResource: "ResourceInterfaceList"}, kartaObject("k", validSpec("K")))
	dyn.PrependReactor("list", LegacyResource.Resource, func(k8stesting.Action) (bool, runtime.Object, error) {
		return true, nil, apierrors.NewForbidden(LegacyResource.GroupResource(), "", errors.New("no role"))
	})
	defs := &fakeDefs{result: []Entry{{Name: "k"}}}
	k := newKartas(dyn, m, defs, nil)
	defer func() { cancel(); k.shutdown() }()
	startCtx, stop := context.WithTimeout(ctx, 10*time.Second)
	defer stop()
	if err := k.start(startCtx); err != nil {
		t.Fatalf("start: %v", err)
	}
	if k.legacy != nil {
		t.Error("a ResourceInterface informer was started without list access")
	}
	defs.mu.Lock()
	defer defs.mu.Unlock()
	if len(defs.cluster) != 1 || defs.cluster[0].Name != "k" {
		t.Errorf("registry got %v, want the Karta k", defs.cluster)
	}
}
