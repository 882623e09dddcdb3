package e2e

import (
	"context"
	"fmt"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/dynamic"
)

// catReplayer is one replay of a fixture: what the fixture's objects own,
// and what the replay has created so far.
type catReplayer struct {
	t            testing.TB
	ns, sched    string
	f            *catFixture
	replayClient dynamic.Interface

	// Fixture owner (fixture UID or Kind/name) → its fixture objects.
	ownedPods  map[string][]*unstructured.Unstructured
	ownedObjs  map[string][]*unstructured.Unstructured
	fixtureKey map[types.UID]string

	templates                              map[string]map[string]any // Deployment key → its template as created
	out                                    *catReplayed
	uids                                   map[types.UID]types.UID // fixture UID → real UID
	deployments, replicaSets, statefulSets []string
}

func newCatReplayer(t testing.TB, ns, sched string, f *catFixture) *catReplayer {
	r := &catReplayer{
		t: t, ns: ns, sched: sched, f: f, replayClient: catReplayClient(t),
		ownedPods:  map[string][]*unstructured.Unstructured{},
		ownedObjs:  map[string][]*unstructured.Unstructured{},
		fixtureKey: map[types.UID]string{},
		templates:  map[string]map[string]any{},
		out:        &catReplayed{ns: ns, byKey: map[string]*unstructured.Unstructured{}},
		uids:       map[types.UID]types.UID{},
	}
	all := append([]*unstructured.Unstructured{f.root}, f.children...)
	all = append(all, f.pods...)
	for _, o := range all {
		if o.GetUID() != "" {
			r.fixtureKey[o.GetUID()] = catKey(o)
		}
	}
	for _, p := range f.pods {
		if k := r.ownerKey(p); k != "" {
			r.ownedPods[k] = append(r.ownedPods[k], p)
		}
	}
	for _, o := range f.children {
		if k := r.ownerKey(o); k != "" {
			r.ownedObjs[k] = append(r.ownedObjs[k], o)
		}
	}
	return r
}

// ownerKey is the key of o's controller in the fixture ("" if none).
func (r *catReplayer) ownerKey(o *unstructured.Unstructured) string {
	ref := catControllerRef(o)
	if ref == nil {
		return ""
	}
	if k, ok := r.fixtureKey[ref.UID]; ok {
		return k
	}
	return ref.Kind + "/" + ref.Name
}

// podsUnder returns the fixture pods owned by the ReplicaSets of a
// Deployment key.
func (r *catReplayer) podsUnder(key string) []*unstructured.Unstructured {
	var out []*unstructured.Unstructured
	for _, rs := range r.ownedObjs[key] {
		out = append(out, r.ownedPods[catKey(rs)]...)
	}
	return out
}

func (r *catReplayer) setReplicas(c *unstructured.Unstructured, n int) {
	if have, found, _ := unstructured.NestedInt64(c.Object, "spec", "replicas"); found && int(have) != n {
		r.t.Fatalf("%s: %s %s has spec.replicas %d but %d pods in pods.yaml", r.f.name, c.GetKind(), c.GetName(), have, n)
	}
	_ = unstructured.SetNestedField(c.Object, int64(n), "spec", "replicas")
}

// podSet gives a ReplicaSet or StatefulSet as many replicas as it owns
// fixture pods and, where children.yaml gives no selector, one on the
// labels they share; it returns the pods and those labels.
func (r *catReplayer) podSet(c *unstructured.Unstructured, key string) ([]*unstructured.Unstructured, map[string]any) {
	pods := r.ownedPods[key]
	r.setReplicas(c, len(pods))
	common := catCommonLabels(pods)
	if _, found, _ := unstructured.NestedMap(c.Object, "spec", "selector"); !found {
		_ = unstructured.SetNestedMap(c.Object, map[string]any{"matchLabels": common}, "spec", "selector")
	}
	return pods, common
}

// setTemplate gives c the template of its first pod with labels where
// children.yaml gives none, and the replay's scheduler either way.
func (r *catReplayer) setTemplate(c *unstructured.Unstructured, pods []*unstructured.Unstructured, labels map[string]any) {
	if _, found, _ := unstructured.NestedMap(c.Object, "spec", "template"); found {
		_ = unstructured.SetNestedField(c.Object, r.sched, "spec", "template", "spec", "schedulerName")
		return
	}
	if len(pods) == 0 {
		r.t.Fatalf("%s: %s %s has no template and no pods to derive one from", r.f.name, c.GetKind(), c.GetName())
	}
	_ = unstructured.SetNestedMap(c.Object, catTemplateFromPod(pods[0], labels, r.sched), "spec", "template")
}

// create creates the copy of fixture object o once its owners exist
// (createInOwnerOrder's callback): false if an owner is not created yet.
func (r *catReplayer) create(o *unstructured.Unstructured) (bool, error) {
	key := catKey(o)
	if _, done := r.out.byKey[key]; done {
		return true, nil
	}
	c, ok := fixtureCopy(o, r.ns, r.sched, func(ref metav1.OwnerReference) (types.UID, bool) {
		if real, ok := r.uids[ref.UID]; ok {
			return real, true
		}
		if created, ok := r.out.byKey[ref.Kind+"/"+ref.Name]; ok {
			return created.GetUID(), true
		}
		return "", false
	})
	if !ok {
		return false, nil
	}
	client := controlPlane.Dynamic
	switch c.GroupVersionKind().GroupKind() {
	case schema.GroupKind{Kind: "Pod"}:
		client = r.replayClient
	case schema.GroupKind{Group: "apps", Kind: "Deployment"}:
		r.prepareDeployment(c, key)
	case schema.GroupKind{Group: "apps", Kind: "ReplicaSet"}:
		r.prepareReplicaSet(c, o, key)
	case schema.GroupKind{Group: "apps", Kind: "StatefulSet"}:
		r.prepareStatefulSet(c, key)
	case schema.GroupKind{Group: "batch", Kind: "Job"}:
		r.prepareJob(c, key)
	case schema.GroupKind{Group: "leaderworkerset.x-k8s.io", Kind: "LeaderWorkerSet"}:
		r.prepareLeaderWorkerSet(c, key)
	}
	res, err := controlPlane.RESTMapping(c.GroupVersionKind())
	if err != nil {
		return false, err
	}
	var ri dynamic.ResourceInterface = client.Resource(res.Resource)
	if res.Scope.Name() == "namespace" {
		ri = client.Resource(res.Resource).Namespace(r.ns)
	}
	created, err := ri.Create(context.Background(), c, metav1.CreateOptions{})
	if err != nil {
		return false, fmt.Errorf("%s: creating %s: %w", r.f.name, key, err)
	}
	if o.GetUID() != "" {
		r.uids[o.GetUID()] = created.GetUID()
	}
	r.out.byKey[key] = created
	return true, nil
}

// prepareDeployment makes c a paused Deployment with as many replicas as
// its ReplicaSets own fixture pods.
func (r *catReplayer) prepareDeployment(c *unstructured.Unstructured, key string) {
	pods := r.podsUnder(key)
	r.setReplicas(c, len(pods))
	_ = unstructured.SetNestedField(c.Object, true, "spec", "paused")
	common := catCommonLabels(pods)
	delete(common, "pod-template-hash")
	if _, found, _ := unstructured.NestedMap(c.Object, "spec", "selector"); !found {
		// The Deployment controller claims its ReplicaSets by their
		// labels: select on what the pods and the ReplicaSets share.
		sel := map[string]any{}
		for k, v := range common {
			sel[k] = v
		}
		for _, rs := range r.ownedObjs[key] {
			for k, v := range sel {
				if rs.GetLabels()[k] != v {
					delete(sel, k)
				}
			}
		}
		if len(sel) == 0 {
			r.t.Fatalf("%s: Deployment %s: its pods and ReplicaSets share no label to select on", r.f.name, c.GetName())
		}
		_ = unstructured.SetNestedMap(c.Object, map[string]any{"matchLabels": sel}, "spec", "selector")
	}
	r.setTemplate(c, pods, common)
	tmpl, _, _ := unstructured.NestedMap(c.Object, "spec", "template")
	r.templates[key] = tmpl
	r.deployments = append(r.deployments, c.GetName())
}

// prepareReplicaSet sizes c, the copy of fixture object o, and gives it a
// template where children.yaml gives none.
func (r *catReplayer) prepareReplicaSet(c, o *unstructured.Unstructured, key string) {
	pods, common := r.podSet(c, key)
	if _, found, _ := unstructured.NestedMap(c.Object, "spec", "template"); !found {
		// The Deployment controller's ReplicaSet: the Deployment's
		// template plus the pod-template-hash label.
		tmpl, ok := r.templates[r.ownerKey(o)]
		if !ok {
			if len(pods) == 0 {
				r.t.Fatalf("%s: ReplicaSet %s has no template and no pods", r.f.name, c.GetName())
			}
			tmpl = catTemplateFromPod(pods[0], common, r.sched)
		}
		tmpl = runtimeDeepCopy(tmpl)
		if h, ok := c.GetLabels()["pod-template-hash"]; ok {
			_ = unstructured.SetNestedField(tmpl, h, "metadata", "labels", "pod-template-hash")
		}
		_ = unstructured.SetNestedMap(c.Object, tmpl, "spec", "template")
	}
	r.replicaSets = append(r.replicaSets, c.GetName())
}

// prepareStatefulSet sizes c to its fixture pods, whose ordinals must be
// contiguous, and stops it from replacing them (OnDelete).
func (r *catReplayer) prepareStatefulSet(c *unstructured.Unstructured, key string) {
	pods, common := r.podSet(c, key)
	r.setTemplate(c, pods, common)
	// Ordinals: the pods' name suffixes must be contiguous.
	var ords []int
	for _, p := range pods {
		n, err := strconv.Atoi(strings.TrimPrefix(p.GetName(), c.GetName()+"-"))
		if err != nil || !strings.HasPrefix(p.GetName(), c.GetName()+"-") {
			r.t.Fatalf("%s: pod %s of StatefulSet %s is not named <set>-<ordinal>", r.f.name, p.GetName(), c.GetName())
		}
		ords = append(ords, n)
	}
	sort.Ints(ords)
	for i := range ords {
		if ords[i] != ords[0]+i {
			r.t.Fatalf("%s: StatefulSet %s pods have ordinals %v, not contiguous", r.f.name, c.GetName(), ords)
		}
	}
	if len(ords) > 0 && ords[0] != 0 {
		_ = unstructured.SetNestedField(c.Object, int64(ords[0]), "spec", "ordinals", "start")
	}
	_ = unstructured.SetNestedMap(c.Object, map[string]any{"type": "OnDelete"}, "spec", "updateStrategy")
	r.statefulSets = append(r.statefulSets, c.GetName())
}

// prepareJob gives a Job without containers the pod spec of its first pod.
func (r *catReplayer) prepareJob(c *unstructured.Unstructured, key string) {
	if cs, _, _ := unstructured.NestedSlice(c.Object, "spec", "template", "spec", "containers"); len(cs) == 0 {
		pods := r.ownedPods[key]
		if len(pods) == 0 {
			r.t.Fatalf("%s: Job %s has no template and no pods", r.f.name, c.GetName())
		}
		tmpl := catTemplateFromPod(pods[0], nil, r.sched)
		_ = unstructured.SetNestedMap(c.Object, tmpl["spec"].(map[string]any), "spec", "template", "spec")
	}
}

// prepareLeaderWorkerSet gives an abbreviated LWS its templates.
// children.yaml abbreviates an LWS an operator wrote (NIM,
// KServe): its templates are what its pods show. The leader
// StatefulSet is owned by the LWS, the leader pods by that,
// the worker StatefulSets by a leader pod.
func (r *catReplayer) prepareLeaderWorkerSet(c *unstructured.Unstructured, key string) {
	if _, found, _ := unstructured.NestedMap(c.Object, "spec", "leaderWorkerTemplate", "workerTemplate"); found {
		return
	}
	var leaders, workers []*unstructured.Unstructured
	for _, sts := range r.ownedObjs[key] {
		for _, l := range r.ownedPods[catKey(sts)] {
			leaders = append(leaders, l)
			for _, wsts := range r.ownedObjs[catKey(l)] {
				workers = append(workers, r.ownedPods[catKey(wsts)]...)
			}
		}
	}
	if len(leaders) == 0 {
		r.t.Fatalf("%s: LeaderWorkerSet %s has no workerTemplate and no leader pods", r.f.name, c.GetName())
	}
	_ = unstructured.SetNestedMap(c.Object, catTemplateFromPod(leaders[0], nil, r.sched), "spec", "leaderWorkerTemplate", "leaderTemplate")
	wt := leaders[0]
	if len(workers) > 0 {
		wt = workers[0]
	}
	_ = unstructured.SetNestedMap(c.Object, catTemplateFromPod(wt, nil, r.sched), "spec", "leaderWorkerTemplate", "workerTemplate")
}

// waitCounted waits until every replayed controller has counted the
// fixture pods, unpausing the Deployments first.
func (r *catReplayer) waitCounted(ctx context.Context) {
	t, ns := r.t, r.ns
	apps := controlPlane.Client.AppsV1()
	for _, name := range r.replicaSets {
		waitFor(t, time.Minute, "ReplicaSet "+name+" counted the fixture pods", objectIs(apps.ReplicaSets(ns), name, func(rs *appsv1.ReplicaSet) (bool, string) {
			return catCounted(rs.Generation-rs.Status.ObservedGeneration, *rs.Spec.Replicas, rs.Status.Replicas, rs.Status.FullyLabeledReplicas)
		}))
	}
	for _, name := range r.statefulSets {
		waitFor(t, time.Minute, "StatefulSet "+name+" counted the fixture pods", objectIs(apps.StatefulSets(ns), name, func(s *appsv1.StatefulSet) (bool, string) {
			return catCounted(s.Generation-s.Status.ObservedGeneration, *s.Spec.Replicas, s.Status.Replicas, s.Status.Replicas)
		}))
	}
	for _, name := range r.deployments {
		patch := []byte(`{"spec":{"paused":false}}`)
		d, err := apps.Deployments(ns).Patch(ctx, name, types.MergePatchType, patch, metav1.PatchOptions{})
		if err != nil {
			t.Fatal(err)
		}
		gen := d.Generation
		waitFor(t, time.Minute, "Deployment "+name+" counted the fixture pods", objectIs(apps.Deployments(ns), name, func(d *appsv1.Deployment) (bool, string) {
			return catCounted(gen-d.Status.ObservedGeneration, *d.Spec.Replicas, d.Status.Replicas, d.Status.UpdatedReplicas)
		}))
	}
}

// catCounted reports whether a controller has observed the object's
// generation (lag is how far behind it is) and reports status replicas and
// the second count (fully labelled, updated) equal to spec.replicas.
func catCounted(lag int64, spec, status, other int32) (bool, string) {
	return lag <= 0 && status == spec && other == spec, fmt.Sprintf("generation lag %d, spec %d, status %d/%d", lag, spec, status, other)
}

// catAssertExactPods checks that ns holds exactly the fixture's pods (no
// controller made one of its own) and that the Deployments made no
// ReplicaSet beside the fixture's.
func catAssertExactPods(t testing.TB, ns string, f *catFixture, replicaSets int) {
	t.Helper()
	ctx := context.Background()
	pods, err := controlPlane.Client.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var got, want []string
	for _, p := range pods.Items {
		got = append(got, p.Name)
		if p.DeletionTimestamp != nil {
			t.Errorf("%s: pod %s is being deleted by a controller", f.name, p.Name)
		}
	}
	for _, p := range f.pods {
		want = append(want, p.GetName())
	}
	sort.Strings(got)
	sort.Strings(want)
	if strings.Join(got, ",") != strings.Join(want, ",") {
		t.Errorf("%s: pods in %s = %v, want exactly the fixture's %v", f.name, ns, got, want)
	}
	rsl, err := controlPlane.Client.AppsV1().ReplicaSets(ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if len(rsl.Items) != replicaSets {
		var names []string
		for _, rs := range rsl.Items {
			names = append(names, rs.Name)
		}
		t.Errorf("%s: ReplicaSets %v, want only the fixture's %d", f.name, names, replicaSets)
	}
}
