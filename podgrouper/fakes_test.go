package podgrouper

import (
	"context"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	dynamicfake "k8s.io/client-go/dynamic/fake"
	clientfeatures "k8s.io/client-go/features"
	clientfeaturestesting "k8s.io/client-go/features/testing"
	kubefake "k8s.io/client-go/kubernetes/fake"
	metadatafake "k8s.io/client-go/metadata/fake"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/record"
	"k8s.io/klog/v2/ktesting"
	"k8s.io/utils/ptr"
	schedv1alpha1 "sigs.k8s.io/scheduler-plugins/apis/scheduling/v1alpha1"
	pgfake "sigs.k8s.io/scheduler-plugins/pkg/generated/clientset/versioned/fake"

	kartav1alpha1 "github.com/muster-io/muster/api/v1alpha1"
	"github.com/muster-io/muster/definition"
)

// Kinds of the unit-test world: a gang workload (Trainer, owning Jobs), a
// gang-free workload (Deployment → ReplicaSet), and a wrapper (Pipeline)
// above the Trainer that has no definition.
var (
	trainerGVK  = schema.GroupVersionKind{Group: "acme.example.com", Version: "v1", Kind: "Trainer"}
	trainerGVR  = schema.GroupVersionResource{Group: "acme.example.com", Version: "v1", Resource: "trainers"}
	pipelineGVK = schema.GroupVersionKind{Group: "acme.example.com", Version: "v1", Kind: "Pipeline"}
	pipelineGVR = schema.GroupVersionResource{Group: "acme.example.com", Version: "v1", Resource: "pipelines"}
	jobGVK      = schema.GroupVersionKind{Group: "batch", Version: "v1", Kind: "Job"}
	jobGVR      = schema.GroupVersionResource{Group: "batch", Version: "v1", Resource: "jobs"}
	rsGVK       = schema.GroupVersionKind{Group: "apps", Version: "v1", Kind: "ReplicaSet"}
	rsGVR       = schema.GroupVersionResource{Group: "apps", Version: "v1", Resource: "replicasets"}
	deployGVK   = schema.GroupVersionKind{Group: "apps", Version: "v1", Kind: "Deployment"}
	deployGVR   = schema.GroupVersionResource{Group: "apps", Version: "v1", Resource: "deployments"}
	brokenGVK   = schema.GroupVersionKind{Group: "acme.example.com", Version: "v1", Kind: "Broken"}
	brokenGVR   = schema.GroupVersionResource{Group: "acme.example.com", Version: "v1", Resource: "brokens"}
)

// fakeGrouper answers GangForPod from a table keyed by pod name.
type fakeGrouper struct {
	karta *kartav1alpha1.Karta
	gangs map[string]*definition.Gang
	errs  map[string]error
	calls int
	mu    sync.Mutex
	// lastRoot is the root object of the last call.
	lastRoot *unstructured.Unstructured
}

func (g *fakeGrouper) Definition() *kartav1alpha1.Karta { return g.karta }
func (g *fakeGrouper) GangForPod(_ context.Context, root *unstructured.Unstructured, pod *corev1.Pod) (*definition.Gang, error) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.calls++
	g.lastRoot = root
	if err := g.errs[pod.Name]; err != nil {
		return nil, err
	}
	return g.gangs[pod.Name], nil
}

func karta(name, root string, gangs ...string) *kartav1alpha1.Karta {
	k := &kartav1alpha1.Karta{ObjectMeta: metav1.ObjectMeta{Name: name}}
	k.Spec.StructureDefinition.RootComponent.Name = root
	if len(gangs) > 0 {
		gs := &kartav1alpha1.GangSchedulingInstruction{}
		for _, g := range gangs {
			gs.PodGroups = append(gs.PodGroups, kartav1alpha1.PodGroupDefinition{Name: g})
		}
		k.Spec.OptimizationInstructions = &kartav1alpha1.OptimizationInstructions{GangScheduling: gs}
	}
	return k
}

// fakeDefs is a Definitions from fixed tables.
type fakeDefs struct {
	mu      sync.Mutex
	valid   map[schema.GroupKind]*Entry
	broken  map[schema.GroupKind]*Entry
	gen     int64
	cluster []*kartav1alpha1.Karta
	result  []Entry
}

func (d *fakeDefs) LookupGVK(gvk schema.GroupVersionKind) (*Entry, bool) {
	d.mu.Lock()
	defer d.mu.Unlock()
	e, ok := d.valid[gvk.GroupKind()]
	return e, ok
}
func (d *fakeDefs) Broken(gk schema.GroupKind) (*Entry, bool) {
	d.mu.Lock()
	defer d.mu.Unlock()
	e, ok := d.broken[gk]
	return e, ok
}
func (d *fakeDefs) SetCluster(k []*kartav1alpha1.Karta) []Entry {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.cluster = k
	d.gen++
	return d.result
}
func (d *fakeDefs) Generation() int64 {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.gen
}

func testMapper() meta.RESTMapper {
	m := meta.NewDefaultRESTMapper(nil)
	for gvk, gvr := range map[schema.GroupVersionKind]schema.GroupVersionResource{
		trainerGVK: trainerGVR, pipelineGVK: pipelineGVR, jobGVK: jobGVR, rsGVK: rsGVR, deployGVK: deployGVR, brokenGVK: brokenGVR,
		podGVK: corev1.SchemeGroupVersion.WithResource("pods"),
		{Group: "apps", Version: "v1", Kind: "StatefulSet"}: {Group: "apps", Version: "v1", Resource: "statefulsets"},
	} {
		m.AddSpecific(gvk, gvr, gvr.GroupVersion().WithResource(gvr.Resource[:len(gvr.Resource)-1]), meta.RESTScopeNamespace)
	}
	return m
}

// obj is a small description of an owner object of the test world.
type obj struct {
	gvk   schema.GroupVersionKind
	name  string
	uid   string
	owner *obj
	annot map[string]string
}

func ownerRef(o *obj) metav1.OwnerReference {
	return metav1.OwnerReference{APIVersion: o.gvk.GroupVersion().String(), Kind: o.gvk.Kind, Name: o.name, UID: types.UID(o.uid), Controller: ptr.To(true)}
}

func (o *obj) meta() *metav1.PartialObjectMetadata {
	m := &metav1.PartialObjectMetadata{
		TypeMeta:   metav1.TypeMeta{APIVersion: o.gvk.GroupVersion().String(), Kind: o.gvk.Kind},
		ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: o.name, UID: types.UID(o.uid), Annotations: o.annot},
	}
	if o.owner != nil {
		m.OwnerReferences = []metav1.OwnerReference{ownerRef(o.owner)}
	}
	return m
}

func (o *obj) unstructured() *unstructured.Unstructured {
	u := &unstructured.Unstructured{}
	u.SetGroupVersionKind(o.gvk)
	u.SetNamespace("ns")
	u.SetName(o.name)
	u.SetUID(types.UID(o.uid))
	u.SetGeneration(1)
	u.SetAnnotations(o.annot)
	if o.owner != nil {
		u.SetOwnerReferences([]metav1.OwnerReference{ownerRef(o.owner)})
	}
	return u
}

type podOpt func(*corev1.Pod)

func makePod(name string, owner *obj, opts ...podOpt) *corev1.Pod {
	p := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: name, UID: types.UID("uid-" + name),
			CreationTimestamp: metav1.NewTime(time.Now().Add(-time.Second))},
		Spec: corev1.PodSpec{SchedulerName: DefaultSchedulerName},
	}
	if owner != nil {
		p.OwnerReferences = []metav1.OwnerReference{ownerRef(owner)}
	}
	for _, o := range opts {
		o(p)
	}
	return p
}

func withLabel(k, v string) podOpt {
	return func(p *corev1.Pod) {
		if p.Labels == nil {
			p.Labels = map[string]string{}
		}
		p.Labels[k] = v
	}
}

func withAnnotation(k, v string) podOpt {
	return func(p *corev1.Pod) {
		if p.Annotations == nil {
			p.Annotations = map[string]string{}
		}
		p.Annotations[k] = v
	}
}

// world is a controller over fake clients with its informers running.
type world struct {
	ctrl     *Controller
	kube     *kubefake.Clientset
	pg       *pgfake.Clientset
	md       *metadatafake.FakeMetadataClient
	recorder *record.FakeRecorder
	ctx      context.Context
}

func newWorld(t *testing.T, defs Definitions, owners []*obj, roots []*obj, pods []*corev1.Pod, pgs []*schedv1alpha1.PodGroup) *world {
	t.Helper()
	return newWorldWith(t, Options{}, defs, owners, roots, pods, pgs)
}

// newWorldWith is newWorld with options; extra objects for the kube
// client (native PodGroups) come after the pods in kubeObjs.
func newWorldWith(t *testing.T, opts Options, defs Definitions, owners []*obj, roots []*obj, pods []*corev1.Pod, pgs []*schedv1alpha1.PodGroup, kubeObjs ...runtime.Object) *world {
	t.Helper()
	// The fake clients of scheduler-plugins and client-go/metadata do not
	// send the bookmark a watch-list stream starts with; list then watch.
	clientfeaturestesting.SetFeatureDuringTest(t, clientfeatures.WatchListClient, false)
	_, ctx := ktesting.NewTestContext(t)
	ctx, cancel := context.WithCancel(ctx)
	t.Cleanup(cancel)

	var podObjs []runtime.Object
	for _, p := range pods {
		podObjs = append(podObjs, p)
	}
	kube := kubefake.NewClientset(append(podObjs, kubeObjs...)...)
	var pgObjs []runtime.Object
	for _, p := range pgs {
		pgObjs = append(pgObjs, p)
	}
	pgc := pgfake.NewSimpleClientset(pgObjs...)

	scheme := metadatafake.NewTestScheme()
	if err := metav1.AddMetaToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	var mdObjs []runtime.Object
	for _, o := range owners {
		mdObjs = append(mdObjs, o.meta())
	}
	md := metadatafake.NewSimpleMetadataClient(scheme, mdObjs...)

	listKinds := map[schema.GroupVersionResource]string{}
	for gvk, gvr := range map[schema.GroupVersionKind]schema.GroupVersionResource{trainerGVK: trainerGVR, pipelineGVK: pipelineGVR, jobGVK: jobGVR, rsGVK: rsGVR, deployGVK: deployGVR, brokenGVK: brokenGVR} {
		listKinds[gvr] = gvk.Kind + "List"
	}
	var dynObjs []runtime.Object
	for _, o := range roots {
		dynObjs = append(dynObjs, o.unstructured())
	}
	dyn := dynamicfake.NewSimpleDynamicClientWithCustomListKinds(runtime.NewScheme(), listKinds, dynObjs...)

	rec := record.NewFakeRecorder(100)
	ctrl, err := NewController(ctx, Clients{Kube: kube, PodGroups: pgc, Metadata: md, Dynamic: dyn, Mapper: testMapper()}, defs, rec, opts)
	if err != nil {
		t.Fatal(err)
	}
	ctrl.roots.start(ctx)
	ctrl.kubeFactory.Start(ctx.Done())
	ctrl.pgFactory.Start(ctx.Done())
	synced := []cache.InformerSynced{ctrl.podSynced, ctrl.pgSynced}
	if ctrl.native != nil {
		ctrl.native.factory.Start(ctx.Done())
		synced = append(synced, ctrl.native.synced)
	}
	if !cache.WaitForCacheSync(ctx.Done(), synced...) {
		t.Fatal("caches not synced")
	}
	// What Start does besides the informers: the test world has no
	// Karta CRD.
	ctrl.started.Store(true)
	t.Cleanup(func() {
		cancel()
		ctrl.roots.shutdown()
		ctrl.kubeFactory.Shutdown()
		ctrl.pgFactory.Shutdown()
		if ctrl.native != nil {
			ctrl.native.factory.Shutdown()
		}
	})
	return &world{ctrl: ctrl, kube: kube, pg: pgc, md: md, recorder: rec, ctx: ctx}
}

// events drains the recorded events.
func (w *world) events() []string {
	var out []string
	for {
		select {
		case e := <-w.recorder.Events:
			out = append(out, e)
		default:
			return out
		}
	}
}

// writes lists the write actions (create, update, patch) of both clients.
func (w *world) writes() []string {
	var out []string
	for _, a := range append(w.kube.Actions(), w.pg.Actions()...) {
		switch a.GetVerb() {
		case "create", "update", "patch", "delete":
			out = append(out, a.GetVerb()+" "+a.GetResource().Resource)
		}
	}
	return out
}

// clearActions forgets what the clients recorded.
func (w *world) clearActions() {
	w.kube.ClearActions()
	w.pg.ClearActions()
}
