package devices

import (
	"context"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/client-go/tools/cache"
	resourceslicetracker "k8s.io/dynamic-resource-allocation/resourceslice/tracker"
	"k8s.io/klog/v2"
	fwk "k8s.io/kube-scheduler/framework"
	"k8s.io/kubernetes/pkg/scheduler/framework/plugins/dynamicresources"
	"k8s.io/kubernetes/pkg/scheduler/util/assumecache"
	"k8s.io/utils/ptr"
)

const driver = "gpu.example.com"

// draOver is the scheduler's DRA manager over the objects, synced.
func draOver(t *testing.T, objs ...runtime.Object) fwk.SharedDRAManager {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	client := fake.NewSimpleClientset(objs...)
	factory := informers.NewSharedInformerFactory(client, 0)
	claimInf := factory.Resource().V1().ResourceClaims().Informer()
	claims := assumecache.NewAssumeCache(klog.FromContext(ctx), claimInf, "ResourceClaim", "", nil)
	tracker, err := resourceslicetracker.StartTracker(ctx, resourceslicetracker.Options{SliceInformer: factory.Resource().V1().ResourceSlices()})
	if err != nil {
		t.Fatal(err)
	}
	m := dynamicresources.NewDRAManager(ctx, claims, tracker, factory)
	// As kube-scheduler's event handlers: the extended resource cache
	// learns the DeviceClasses from their informer.
	if _, err := factory.Resource().V1().DeviceClasses().Informer().AddEventHandler(m.DeviceClassResolver().(cache.ResourceEventHandler)); err != nil {
		t.Fatal(err)
	}
	factory.Start(ctx.Done())
	for typ, ok := range factory.WaitForCacheSync(ctx.Done()) {
		if !ok {
			t.Fatalf("informer %v did not sync", typ)
		}
	}
	// The slice tracker and the claim cache follow their informers on
	// their own goroutines.
	slices, claimCount := 0, 0
	for _, o := range objs {
		switch o.(type) {
		case *resourceapi.ResourceSlice:
			slices++
		case *resourceapi.ResourceClaim:
			claimCount++
		}
	}
	err = wait.PollUntilContextTimeout(ctx, 10*time.Millisecond, 10*time.Second, true, func(context.Context) (bool, error) {
		sl, err := m.ResourceSlices().ListWithDeviceTaintRules()
		if err != nil {
			return false, err
		}
		cl, err := m.ResourceClaims().List()
		return len(sl) == slices && len(cl) == claimCount, err
	})
	if err != nil {
		t.Fatalf("DRA manager never saw the objects: %v", err)
	}
	return m
}

func class(name, ext string) *resourceapi.DeviceClass {
	c := &resourceapi.DeviceClass{ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: resourceapi.DeviceClassSpec{Selectors: []resourceapi.DeviceSelector{{CEL: &resourceapi.CELDeviceSelector{Expression: `device.driver == "` + driver + `"`}}}}}
	if ext != "" {
		c.Spec.ExtendedResourceName = ptr.To(ext)
	}
	return c
}

// slice publishes devices of node, named gpu-<i>, with the models given.
func slice(node string, models ...string) *resourceapi.ResourceSlice {
	s := &resourceapi.ResourceSlice{ObjectMeta: metav1.ObjectMeta{Name: node, UID: types.UID("uid-" + node)},
		Spec: resourceapi.ResourceSliceSpec{Driver: driver, NodeName: ptr.To(node), Pool: resourceapi.ResourcePool{Name: node, ResourceSliceCount: 1}}}
	for i, m := range models {
		s.Spec.Devices = append(s.Spec.Devices, resourceapi.Device{Name: "gpu-" + string(rune('0'+i)),
			Attributes: map[resourceapi.QualifiedName]resourceapi.DeviceAttribute{"model": {StringValue: ptr.To(m)}}})
	}
	return s
}

func claim(name string, count int64, mode resourceapi.DeviceAllocationMode, selector string, allocated ...string) *resourceapi.ResourceClaim {
	c := &resourceapi.ResourceClaim{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: name, UID: types.UID("uid-" + name)}}
	r := &resourceapi.ExactDeviceRequest{DeviceClassName: "gpus", AllocationMode: mode, Count: count}
	if selector != "" {
		r.Selectors = []resourceapi.DeviceSelector{{CEL: &resourceapi.CELDeviceSelector{Expression: selector}}}
	}
	c.Spec.Devices.Requests = []resourceapi.DeviceRequest{{Name: "r", Exactly: r}}
	if len(allocated) > 0 {
		c.Status.Allocation = &resourceapi.AllocationResult{}
		for _, d := range allocated {
			node, dev, _ := strings.Cut(d, "/")
			c.Status.Allocation.Devices.Results = append(c.Status.Allocation.Devices.Results,
				resourceapi.DeviceRequestAllocationResult{Request: "r", Driver: driver, Pool: node, Device: dev})
		}
	}
	return c
}

// podWith names claim (made from a template when made is set) in its
// status.
func podWith(name, claimName string, made bool) *v1.Pod {
	p := &v1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: name}}
	pc := v1.PodResourceClaim{Name: "gpus", ResourceClaimTemplateName: ptr.To("tpl")}
	if !made {
		pc = v1.PodResourceClaim{Name: "gpus", ResourceClaimName: ptr.To(claimName)}
	}
	p.Spec.ResourceClaims = []v1.PodResourceClaim{pc}
	if made && claimName != "" {
		p.Status.ResourceClaimStatuses = []v1.PodResourceClaimStatus{{Name: "gpus", ResourceClaimName: ptr.To(claimName)}}
	}
	return p
}

func node(name string, gpus int64) *v1.Node {
	n := &v1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{"rack": name[:1]}}}
	if gpus > 0 {
		n.Status.Allocatable = v1.ResourceList{"example.com/gpu": *resource.NewQuantity(gpus, resource.DecimalSI)}
	}
	return n
}

func TestCounter(t *testing.T) {
	const h100 = `device.attributes["gpu.example.com"].model == "h100"`
	dra := draOver(t,
		class("gpus", "example.com/gpu"),
		slice("a1", "h100", "h100", "a100", "a100"),
		slice("a2", "h100", "h100", "h100", "h100"),
		slice("a3", "a100", "a100"),
		claim("taken", 1, resourceapi.DeviceAllocationModeExactCount, "", "a2/gpu-0"),
		claim("four", 4, resourceapi.DeviceAllocationModeExactCount, ""),
		claim("two-h100", 2, resourceapi.DeviceAllocationModeExactCount, h100),
		claim("all", 0, resourceapi.DeviceAllocationModeAll, ""),
		claim("done", 2, resourceapi.DeviceAllocationModeExactCount, "", "a1/gpu-2", "a1/gpu-3"),
	)
	c := New(dra)
	cases := []struct {
		name      string
		pod       *v1.Pod
		free      map[string]int64 // per node; nil: no dimension
		wantPend  bool
		wantNoReq bool
	}{
		{name: "exact count", pod: podWith("p", "four", true), free: map[string]int64{"a1": 2, "a2": 3, "a3": 2, "b1": 0}},
		{name: "selector counts matching devices", pod: podWith("p", "two-h100", true), free: map[string]int64{"a1": 2, "a2": 3, "a3": 0}},
		{name: "all devices of a node, all free or none", pod: podWith("p", "all", true), free: map[string]int64{"a1": 0, "a2": 0, "a3": 1}},
		{name: "allocated claim takes no more", pod: podWith("p", "done", true), wantNoReq: true},
		{name: "shared claim is not the pod's", pod: podWith("p", "four", false), wantNoReq: true},
		{name: "claim not made yet", pod: podWith("p", "", true), wantPend: true, wantNoReq: true},
		{name: "claim not known yet", pod: podWith("p", "missing", true), wantPend: true, wantNoReq: true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if got := c.Pending(tc.pod); (got != "") != tc.wantPend {
				t.Errorf("Pending = %q, want pending %v", got, tc.wantPend)
			}
			v := c.View()
			req := v.Request(tc.pod)
			if tc.wantNoReq {
				if len(req) != 0 {
					t.Errorf("Request = %v, want none", req)
				}
				return
			}
			if len(req) != 1 {
				t.Fatalf("Request = %v, want one dimension", req)
			}
			for dim := range req {
				for n, want := range tc.free {
					if got, ok := v.Free(node(n, 0), dim); !ok || got != want {
						t.Errorf("Free(%s, %s) = %d, %v; want %d", n, dim, got, ok, want)
					}
				}
			}
		})
	}
	t.Run("extended resource backed by devices", func(t *testing.T) {
		v := c.View()
		if got, ok := v.Free(node("a2", 0), "example.com/gpu"); !ok || got != 3 {
			t.Errorf("on a node without the resource: %d, %v; want 3 free devices", got, ok)
		}
		if _, ok := v.Free(node("a2", 8), "example.com/gpu"); ok {
			t.Error("on a node whose allocatable has the resource, the devices counted it")
		}
		if _, ok := v.Free(node("a2", 0), "cpu"); ok {
			t.Error("cpu counted as devices")
		}
	})
}

func TestDomains(t *testing.T) {
	channel := func(rack string) *resourceapi.ResourceSlice {
		return &resourceapi.ResourceSlice{ObjectMeta: metav1.ObjectMeta{Name: "ch-" + rack, UID: types.UID("uid-ch-" + rack)},
			Spec: resourceapi.ResourceSliceSpec{Driver: driver, Pool: resourceapi.ResourcePool{Name: "clique-" + rack, ResourceSliceCount: 1},
				NodeSelector: &v1.NodeSelector{NodeSelectorTerms: []v1.NodeSelectorTerm{{MatchExpressions: []v1.NodeSelectorRequirement{
					{Key: "rack", Operator: v1.NodeSelectorOpIn, Values: []string{rack}}}}}},
				Devices: []resourceapi.Device{{Name: "channel"}}}}
	}
	dra := draOver(t, class("gpus", ""), channel("a"), channel("b"),
		claim("shared", 1, resourceapi.DeviceAllocationModeExactCount, ""),
		claim("taken", 1, resourceapi.DeviceAllocationModeExactCount, ""),
	)
	v := New(dra).View()
	domains := v.(*View).Domains(podWith("p", "shared", false))
	if len(domains) != 2 {
		t.Fatalf("%d domains, want one per clique", len(domains))
	}
	for _, d := range domains {
		rack := strings.TrimPrefix(d.Name, "clique-")
		if !d.Reaches(node(rack+"1", 0)) || d.Reaches(node("z1", 0)) {
			t.Errorf("domain %s reaches the wrong nodes", d.Name)
		}
	}
	if d := v.(*View).Domains(podWith("p", "four", true)); d != nil {
		t.Errorf("a pod without shared claims has domains %v", d)
	}
}
