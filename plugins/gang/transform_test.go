package gang

import (
	"context"
	"reflect"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	clientfeatures "k8s.io/client-go/features"
	clientfeaturestesting "k8s.io/client-go/features/testing"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2/ktesting"
	frameworkruntime "k8s.io/kubernetes/pkg/scheduler/framework/runtime"
	testingclock "k8s.io/utils/clock/testing"
	schedv1alpha1 "sigs.k8s.io/scheduler-plugins/apis/scheduling/v1alpha1"
)

// TestInformersTrimmed: with the plugin built, the scheduler's pod cache
// holds one map for equal resource lists and no managedFields, and neither
// do the plugin's PodGroups nor the nodes.
func TestInformersTrimmed(t *testing.T) {
	clientfeaturestesting.SetFeatureDuringTest(t, clientfeatures.WatchListClient, false)
	_, ctx := ktesting.NewTestContext(t)
	ctx, cancel := context.WithCancel(ctx)
	t.Cleanup(cancel)
	mf := []metav1.ManagedFieldsEntry{{Manager: "kubectl", Operation: metav1.ManagedFieldsOperationApply}}
	mkPod := func(name string) *v1.Pod {
		return &v1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: name, ManagedFields: mf},
			Spec: v1.PodSpec{Containers: []v1.Container{{Name: "c", Resources: v1.ResourceRequirements{
				Requests: v1.ResourceList{"nvidia.com/gpu": resource.MustParse("8")},
			}}}}}
	}
	node := &v1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n", ManagedFields: mf}}
	cs := fake.NewClientset(mkPod("a"), mkPod("b"), node)
	inf := informers.NewSharedInformerFactory(cs, 0)
	f, err := frameworkruntime.NewFramework(ctx, nil, nil,
		frameworkruntime.WithClientSet(cs),
		frameworkruntime.WithInformerFactory(inf),
	)
	if err != nil {
		t.Fatal(err)
	}
	pg := podGroup("g", 2)
	pg.ManagedFields = mf
	pl := newTestPlugin(t, ctx, f, testingclock.NewFakeClock(time.Now()), []*schedv1alpha1.PodGroup{pg})
	inf.Start(ctx.Done())
	t.Cleanup(func() { cancel(); inf.Shutdown() })
	if !cache.WaitForCacheSync(ctx.Done(), inf.Core().V1().Pods().Informer().HasSynced, inf.Core().V1().Nodes().Informer().HasSynced) {
		t.Fatal("caches not synced")
	}
	if err := wait.PollUntilContextTimeout(ctx, 5*time.Millisecond, 10*time.Second, true, func(context.Context) (bool, error) {
		return pl.pgSynced.Load(), nil
	}); err != nil {
		t.Fatalf("PodGroup informer did not sync: %v", err)
	}

	var reqs []v1.ResourceList
	for _, name := range []string{"a", "b"} {
		p, err := pl.podLister.Pods("ns").Get(name)
		if err != nil {
			t.Fatal(err)
		}
		if p.ManagedFields != nil {
			t.Errorf("pod %s: managedFields kept", name)
		}
		r := p.Spec.Containers[0].Resources.Requests
		if q := r["nvidia.com/gpu"]; q.Value() != 8 || len(r) != 1 {
			t.Errorf("pod %s: requests %v, want nvidia.com/gpu: 8", name, r)
		}
		reqs = append(reqs, r)
	}
	if reflect.ValueOf(reqs[0]).UnsafePointer() != reflect.ValueOf(reqs[1]).UnsafePointer() {
		t.Error("equal requests of two cached pods are separate maps")
	}
	n, err := inf.Core().V1().Nodes().Lister().Get("n")
	if err != nil {
		t.Fatal(err)
	}
	if n.ManagedFields != nil {
		t.Error("node: managedFields kept")
	}
	got, err := pl.pgLister.PodGroups("ns").Get("g")
	if err != nil {
		t.Fatal(err)
	}
	if got.ManagedFields != nil {
		t.Error("PodGroup: managedFields kept")
	}
}
