package e2e

import (
	"context"
	"fmt"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"

	"github.com/muster-io/muster/api"
	"github.com/muster-io/muster/localcluster"
)

// pgrFixtureExpected is the part of catalog/testdata/<type>/expected.yaml
// the pod-grouper test reads.
type pgrFixtureExpected struct {
	Pods map[string]struct {
		Gang string `json:"gang"`
	} `json:"pods"`
	Gangs []struct {
		Definition   string            `json:"definition"`
		Keys         []string          `json:"keys"`
		MinMember    int32             `json:"minMember"`
		MinResources map[string]string `json:"minResources"`
	} `json:"gangs"`
}

// pgrControllerKinds are kinds a running kube-controller-manager controller
// would act on (create, adopt or delete pods of) if a fixture created them:
// fixtures with these as intermediate owners cannot replay the operator's
// pods exactly with this replay; TestCatalogFixturesWithControllers
// (catalog_replay_test.go) replays them next to the real controllers. Jobs are replayed with spec.managedBy,
// which the Job controller leaves alone.
var pgrControllerKinds = map[schema.GroupKind]bool{
	{Group: "apps", Kind: "Deployment"}:  true,
	{Group: "apps", Kind: "ReplicaSet"}:  true,
	{Group: "apps", Kind: "StatefulSet"}: true,
}

// TestPodGrouperCatalogFixtures replays every catalog fixture on the control
// plane: the workload object, the children and the pods, exactly as the
// fixture files give them (namespace and owner UIDs rewritten to the real
// ones as they are created), and checks the PodGroups and pod labels against
// the fixture's expected gangs.
func TestPodGrouperCatalogFixtures(t *testing.T) {
	root := pgrRepoRoot()
	dirs, err := filepath.Glob(filepath.Join(root, "catalog", "testdata", "*"))
	if err != nil || len(dirs) == 0 {
		t.Fatalf("no catalog fixtures under %s (err %v)", root, err)
	}
	sched := "pgr-fixtures"
	startPodGrouper(t, sched)
	var replayed, excluded []string
	for _, dir := range dirs {
		name := filepath.Base(dir)
		f := catLoadFixture(t, name)
		if k := pgrUsesControllerKinds(append([]*unstructured.Unstructured{f.root}, f.children...)); k != "" {
			excluded = append(excluded, name+" ("+k+")")
			continue
		}
		replayed = append(replayed, name)
		t.Run(name, func(t *testing.T) {
			ns := testNamespace(t, "pgr-fx-"+name)
			pgrReplayFixture(t, ns, sched, f.root, f.children, f.pods)
			pgrCheckFixture(t, ns, name, f.root.GetName(), f.want)
		})
	}
	t.Logf("replaying %d fixtures: %v", len(replayed), replayed)
	t.Logf("not replayed here (built-in controllers act on their children): %v; TestCatalogFixturesWithControllers replays them", excluded)
	if len(replayed) < len(dirs)/2 {
		t.Errorf("only %d of %d fixtures replayed", len(replayed), len(dirs))
	}
}

func pgrUsesControllerKinds(objs []*unstructured.Unstructured) string {
	for _, o := range objs {
		if pgrControllerKinds[o.GroupVersionKind().GroupKind()] {
			return o.GetKind()
		}
	}
	return ""
}

// pgrReplayFixture creates root, then children and pods in owner order.
func pgrReplayFixture(t *testing.T, ns, sched string, root *unstructured.Unstructured, children, pods []*unstructured.Unstructured) {
	t.Helper()
	ctx := context.Background()
	uids := map[types.UID]types.UID{} // fixture UID → real UID
	byName := map[string]types.UID{}  // kind/name → real UID
	create := func(o *unstructured.Unstructured) (bool, error) {
		if _, done := byName[o.GetKind()+"/"+o.GetName()]; done {
			return true, nil // the root listed again (a bare Pod's fixture)
		}
		c, ok := fixtureCopy(o, ns, sched, func(r metav1.OwnerReference) (types.UID, bool) {
			real, ok := uids[r.UID]
			if !ok {
				real, ok = byName[r.Kind+"/"+r.Name]
			}
			return real, ok
		})
		if !ok {
			return false, nil // owner not created yet
		}
		if c.GroupVersionKind().GroupKind() == (schema.GroupKind{Group: "batch", Kind: "Job"}) {
			// children.yaml abbreviates intermediate objects: fill in what
			// the API requires of a Job's template.
			if cs, _, _ := unstructured.NestedSlice(c.Object, "spec", "template", "spec", "containers"); len(cs) == 0 {
				_ = unstructured.SetNestedSlice(c.Object, []any{map[string]any{"name": "main", "image": "busybox"}}, "spec", "template", "spec", "containers")
			}
			if rp, _, _ := unstructured.NestedString(c.Object, "spec", "template", "spec", "restartPolicy"); rp == "" {
				_ = unstructured.SetNestedField(c.Object, "Never", "spec", "template", "spec", "restartPolicy")
			}
		}
		created, err := controlPlane.Create(ctx, c, ns)
		if err != nil {
			return false, err
		}
		if o.GetUID() != "" {
			uids[o.GetUID()] = created.GetUID()
		}
		byName[created.GetKind()+"/"+created.GetName()] = created.GetUID()
		return true, nil
	}
	createInOwnerOrder(t, "", root, append(append([]*unstructured.Unstructured{}, children...), pods...), create)
}

// fixtureCopy is the fixture object o as a replay creates it in ns: owner
// UIDs rewritten to the real ones (false if realUID knows an owner not
// yet), what the API server sets removed, pods for sched and unbound, Jobs
// managed by someone else (the Job controller leaves them alone, so the
// fixture's pods are the only pods) and CronJobs suspended.
func fixtureCopy(o *unstructured.Unstructured, ns, sched string, realUID func(metav1.OwnerReference) (types.UID, bool)) (*unstructured.Unstructured, bool) {
	c := o.DeepCopy()
	refs := c.GetOwnerReferences()
	for i, r := range refs {
		real, ok := realUID(r)
		if !ok {
			return nil, false
		}
		refs[i].UID = real
	}
	c.SetOwnerReferences(refs)
	for _, f := range []string{"uid", "resourceVersion", "creationTimestamp", "generation", "managedFields", "selfLink"} {
		unstructured.RemoveNestedField(c.Object, "metadata", f)
	}
	unstructured.RemoveNestedField(c.Object, "status")
	c.SetNamespace(ns)
	switch c.GroupVersionKind().GroupKind() {
	case schema.GroupKind{Kind: "Pod"}:
		_ = unstructured.SetNestedField(c.Object, sched, "spec", "schedulerName")
		unstructured.RemoveNestedField(c.Object, "spec", "nodeName")
	case schema.GroupKind{Group: "batch", Kind: "Job"}:
		_ = unstructured.SetNestedField(c.Object, "muster.io/e2e-fixture", "spec", "managedBy")
		unstructured.RemoveNestedField(c.Object, "spec", "selector")
		unstructured.RemoveNestedField(c.Object, "spec", "manualSelector")
		for _, l := range []string{"controller-uid", "batch.kubernetes.io/controller-uid", "job-name", "batch.kubernetes.io/job-name"} {
			unstructured.RemoveNestedField(c.Object, "spec", "template", "metadata", "labels", l)
		}
	case schema.GroupKind{Group: "batch", Kind: "CronJob"}:
		_ = unstructured.SetNestedField(c.Object, true, "spec", "suspend")
	}
	return c, true
}

// createInOwnerOrder creates root, then the others in rounds: create
// reports false for an object whose owner does not exist yet, and the next
// round tries it again. A round that creates nothing fails t (the owners
// are in no fixture file), as does any error. fixture, if set, starts the
// messages.
func createInOwnerOrder(t testing.TB, fixture string, root *unstructured.Unstructured, others []*unstructured.Unstructured, create func(*unstructured.Unstructured) (bool, error)) {
	t.Helper()
	if fixture != "" {
		fixture += ": "
	}
	if ok, err := create(root); err != nil || !ok {
		t.Fatalf("%screating the root: created=%v err=%v", fixture, ok, err)
	}
	pending := others
	for len(pending) > 0 {
		var left []*unstructured.Unstructured
		for _, o := range pending {
			ok, err := create(o)
			if apierrors.IsInvalid(err) {
				// A real operator CRD (installed by operators_test.go)
				// validates the fixture's objects: an abbreviated one is a
				// fixture bug, not a reason to skip.
				t.Fatalf("%s%s %s is not valid under the installed CRD: %v", fixture, o.GetKind(), o.GetName(), err)
			}
			if err != nil {
				t.Fatal(err)
			}
			if !ok {
				left = append(left, o)
			}
		}
		if len(left) == len(pending) {
			var names []string
			for _, o := range left {
				names = append(names, o.GetKind()+"/"+o.GetName())
			}
			t.Fatalf("%sowners of %v are in no fixture file", fixture, names)
		}
		pending = left
	}
}

// pgrCheckFixture waits until every fixture pod is decided as expected:
// pods of one expected gang share one PodGroup, pods of different gangs
// different ones, gang-free pods are marked; then compares the PodGroups.
func pgrCheckFixture(t *testing.T, ns, defName, workload string, want pgrFixtureExpected) {
	t.Helper()
	ctx := context.Background()
	var labels map[string]string // pod → PodGroup label
	err := localcluster.WaitFor(ctx, time.Minute, "fixture pods grouped as expected.yaml says", func(ctx context.Context) (bool, string, error) {
		labels = map[string]string{}
		var bad []string
		for podName, exp := range want.Pods {
			p, err := controlPlane.Client.CoreV1().Pods(ns).Get(ctx, podName, metav1.GetOptions{})
			if err != nil {
				return false, "", err
			}
			l := p.Labels[api.LabelPodGroup]
			labels[podName] = l
			switch {
			case exp.Gang == "" && (l != "" || p.Annotations[api.AnnotationGrouping] != api.GroupingNone):
				bad = append(bad, fmt.Sprintf("%s: want alone, label %q annotations %v", podName, l, p.Annotations))
			case exp.Gang != "" && (l == "" || api.ScheduledAlone(p.Annotations)):
				bad = append(bad, fmt.Sprintf("%s: want gang %s, label %q annotations %v", podName, exp.Gang, l, p.Annotations))
			}
		}
		sort.Strings(bad)
		return len(bad) == 0, strings.Join(bad, "; "), nil
	})
	if err != nil {
		t.Fatal(err)
	}
	// Expected gang id ↔ PodGroup name must be a bijection.
	gangToPG := map[string]string{}
	pgToGang := map[string]string{}
	for podName, exp := range want.Pods {
		if exp.Gang == "" {
			continue
		}
		pg := labels[podName]
		if prev, ok := gangToPG[exp.Gang]; ok && prev != pg {
			t.Errorf("gang %s split over PodGroups %s and %s", exp.Gang, prev, pg)
		}
		if prev, ok := pgToGang[pg]; ok && prev != exp.Gang {
			t.Errorf("PodGroup %s holds gangs %s and %s", pg, prev, exp.Gang)
		}
		gangToPG[exp.Gang], pgToGang[pg] = pg, exp.Gang
	}
	if names := podGroupNames(t, ns); len(names) != len(gangToPG) {
		t.Errorf("PodGroups %v, want %d (one per gang of the pods)", names, len(gangToPG))
	}
	for _, g := range want.Gangs {
		id := strings.Join(append([]string{g.Definition}, g.Keys...), "/")
		name, ok := gangToPG[id]
		if !ok {
			continue // a gang of expected.yaml without pods in pods.yaml
		}
		pg, err := podGroups(t).SchedulingV1alpha1().PodGroups(ns).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			t.Errorf("gang %s: PodGroup %s: %v", id, name, err)
			continue
		}
		if pg.Spec.MinMember != g.MinMember {
			t.Errorf("gang %s: PodGroup %s minMember %d, want %d", id, name, pg.Spec.MinMember, g.MinMember)
		}
		for r, q := range g.MinResources {
			got := pg.Spec.MinResources[corev1.ResourceName(r)]
			if wq := resource.MustParse(q); got.Cmp(wq) != 0 {
				t.Errorf("gang %s: PodGroup %s minResources[%s] = %s, want %s", id, name, r, got.String(), q)
			}
		}
		if pg.Labels[api.LabelDefinition] != defName || pg.Labels[api.LabelWorkloadName] != workload {
			t.Errorf("gang %s: PodGroup %s labels %v, want definition %s and workload %s", id, name, pg.Labels, defName, workload)
		}
		if len(name) > 63 || !strings.HasPrefix(name, workload) {
			t.Errorf("gang %s: PodGroup name %q: want at most 63 characters starting with the workload name", id, name)
		}
	}
}
