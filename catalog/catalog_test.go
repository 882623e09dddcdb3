package catalog

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/yaml"

	kartav1alpha1 "github.com/muster-io/muster/api/v1alpha1"
	"github.com/muster-io/muster/definition"
)

// Types is every workload type the catalog must define, with fixtures.
var Types = []string{
	"jobset", "pytorchjob", "mpijob", "trainjob", "tfjob", "xgboostjob", "jaxjob", "paddlejob",
	"sparkapplication", "raycluster", "rayjob", "rayservice",
	"leaderworkerset", "podcliqueset", "dynamographdeployment",
	"inferenceservice", "llminferenceservice", "knative-service", "nimservice", "milvus",
	"job", "cronjob", "deployment", "statefulset", "pod",
	"sandbox", "nimcache", "dynamographdeployment-v1beta1",
}

var fixtureFiles = []string{"object.yaml", "children.yaml", "pods.yaml", "expected.yaml"}

// expected is the format of testdata/<name>/expected.yaml.
type expected struct {
	Components []expComponent    `json:"components"`
	Totals     expTotals         `json:"totals"`
	Status     []expStatus       `json:"status"`
	Pods       map[string]expPod `json:"pods"`
	Gangs      []expGang         `json:"gangs"`
	Plans      []expPlan         `json:"plans"`
}

type expComponent struct {
	Name      string        `json:"name"`
	Instances []expInstance `json:"instances"`
}

type expInstance struct {
	ID       string `json:"id"`
	Replicas int32  `json:"replicas"`
	Pods     int64  `json:"pods"`
	MinPods  int64  `json:"minPods"`
}

type expTotals struct {
	Pods int64 `json:"pods"`
	GPUs int64 `json:"gpus"`
}

type expStatus struct {
	Name   string         `json:"name"`
	Status map[string]any `json:"status"`
	Want   []string       `json:"want"`
}

type expPod struct {
	Component string `json:"component"`
	Instance  string `json:"instance"`
	Gang      string `json:"gang"`
}

type expGang struct {
	Definition   string            `json:"definition"`
	Keys         []string          `json:"keys"`
	MinMember    int32             `json:"minMember"`
	MinResources map[string]string `json:"minResources,omitempty"`
}

type expPlan struct {
	Definition string `json:"definition"`
	Instances  int    `json:"instances"`
	MinMember  int32  `json:"minMember"`
}

func newTestRegistry(t *testing.T) *Registry {
	t.Helper()
	r, err := NewRegistry(definition.Options{})
	if err != nil {
		t.Fatalf("NewRegistry: %v", err)
	}
	return r
}

// readDocs splits a multi-document YAML file into objects, skipping empty
// documents.
func readDocs(t *testing.T, path string) []map[string]any {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	docs, err := splitDocs(data)
	if err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	return docs
}

func splitDocs(data []byte) ([]map[string]any, error) {
	r := utilyaml.NewYAMLReader(bufio.NewReader(bytes.NewReader(data)))
	var out []map[string]any
	for {
		doc, err := r.Read()
		if errors.Is(err, io.EOF) {
			return out, nil
		}
		if err != nil {
			return nil, err
		}
		var m map[string]any
		if err := yaml.Unmarshal(doc, &m); err != nil {
			return nil, err
		}
		if len(m) > 0 {
			out = append(out, m)
		}
	}
}

func toPod(t *testing.T, m map[string]any) *corev1.Pod {
	t.Helper()
	data, err := yaml.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	var p corev1.Pod
	if err := yaml.UnmarshalStrict(data, &p); err != nil {
		t.Fatalf("pod %v: %v", m["metadata"], err)
	}
	return &p
}

func gangName(g *definition.Gang) string {
	if g == nil {
		return ""
	}
	return strings.Join(append([]string{g.Definition}, g.Keys...), "/")
}

// TestFixtures runs every fixture folder through its definition and compares
// with expected.yaml.
func TestFixtures(t *testing.T) {
	reg := newTestRegistry(t)
	dirs, err := os.ReadDir("testdata")
	if err != nil {
		t.Fatal(err)
	}
	for _, d := range dirs {
		if !d.IsDir() {
			continue
		}
		name := d.Name()
		t.Run(name, func(t *testing.T) {
			dir := filepath.Join("testdata", name)
			for _, f := range fixtureFiles {
				if _, err := os.Stat(filepath.Join(dir, f)); err != nil {
					t.Fatalf("%s: %v", dir, err)
				}
			}
			entry, ok := reg.Get(name)
			if !ok {
				t.Fatalf("no definition named %q for folder %s", name, dir)
			}
			runFixture(t, dir, entry)
			// Variants of the same kind (a RayJob on an existing cluster,
			// say): subfolders with the same four files.
			variants, err := filepath.Glob(filepath.Join(dir, "*", "object.yaml"))
			if err != nil {
				t.Fatal(err)
			}
			for _, v := range variants {
				vdir := filepath.Dir(v)
				t.Run(filepath.Base(vdir), func(t *testing.T) {
					for _, f := range fixtureFiles {
						if _, err := os.Stat(filepath.Join(vdir, f)); err != nil {
							t.Fatalf("%s: %v", vdir, err)
						}
					}
					runFixture(t, vdir, entry)
				})
			}
		})
	}
}

// fixture is one catalog/testdata folder: its root object (with the
// references it needs in ctx), the definition compiled for its kind, and
// expected.yaml.
type fixture struct {
	dir  string
	c    *definition.Compiled
	obj  *unstructured.Unstructured
	want expected
}

// runFixture checks every part of expected.yaml against what the
// definition makes of the fixture's objects.
func runFixture(t *testing.T, dir string, entry *Entry) {
	ctx, f := loadFixture(t, dir, entry)
	f.checkComponents(t, ctx)
	f.checkStatus(t, ctx)
	f.checkPods(t, ctx)
	f.checkPlans(t, ctx)
}

// loadFixture reads the fixture in dir, whose root object must be of the
// kind entry defines, and returns it with ctx holding its references.
func loadFixture(t *testing.T, dir string, entry *Entry) (context.Context, fixture) {
	ctx := context.Background()
	f := fixture{dir: dir, c: entry.Compiled}
	objs := readDocs(t, filepath.Join(dir, "object.yaml"))
	if len(objs) != 1 {
		t.Fatalf("%s/object.yaml: %d documents, want 1", dir, len(objs))
	}
	f.obj = &unstructured.Unstructured{Object: objs[0]}
	if got := f.obj.GroupVersionKind().GroupKind(); got != entry.GroupKind {
		t.Fatalf("%s/object.yaml is a %v, the definition's root is %v", dir, got, entry.GroupKind)
	}
	ctx = fixtureReferences(t, ctx, dir, f.c, f.obj)
	expData, err := os.ReadFile(filepath.Join(dir, "expected.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	if err := yaml.UnmarshalStrict(expData, &f.want); err != nil {
		t.Fatalf("%s/expected.yaml: %v", dir, err)
	}
	return ctx, f
}

// checkComponents checks the components, instances and totals.
func (f fixture) checkComponents(t *testing.T, ctx context.Context) {
	w, err := f.c.Extract(ctx, f.obj)
	if err != nil {
		t.Fatalf("%s: Extract: %v", f.dir, err)
	}
	var gotComps []expComponent
	var totals expTotals
	for _, comp := range w.Components {
		ec := expComponent{Name: comp.Name}
		for _, in := range comp.Instances {
			ec.Instances = append(ec.Instances, expInstance{ID: in.ID, Replicas: in.Replicas, Pods: in.Pods, MinPods: in.MinPods})
			if comp.HasPods && in.Template != nil {
				totals.Pods += in.Pods
				totals.GPUs += in.Pods * definition.GPUs(definition.PodRequests(&in.Template.Spec), definition.DefaultGPUResourceNames)
			}
		}
		gotComps = append(gotComps, ec)
	}
	if d := cmp.Diff(f.want.Components, gotComps, cmpopts.EquateEmpty()); d != "" {
		t.Errorf("%s: components (-want +got):\n%s", f.dir, d)
	}
	if d := cmp.Diff(f.want.Totals, totals); d != "" {
		t.Errorf("%s: totals (-want +got):\n%s", f.dir, d)
	}
}

// checkStatus checks the status snapshots, merged over the object's own
// status.
func (f fixture) checkStatus(t *testing.T, ctx context.Context) {
	for _, s := range f.want.Status {
		o := f.obj.DeepCopy()
		st, _, _ := unstructured.NestedMap(o.Object, "status")
		if st == nil {
			st = map[string]any{}
		}
		for k, v := range s.Status {
			st[k] = v
		}
		o.Object["status"] = st
		got, err := f.c.Status(ctx, o)
		if err != nil {
			t.Errorf("%s: status %q: %v", f.dir, s.Name, err)
			continue
		}
		var gs []string
		for _, x := range got.Statuses {
			gs = append(gs, string(x))
		}
		if d := cmp.Diff(s.Want, gs); d != "" {
			t.Errorf("%s: status %q (-want +got):\n%s", f.dir, s.Name, d)
		}
	}
}

// checkPods checks each pod's component, instance and gang, and the gangs
// they form.
func (f fixture) checkPods(t *testing.T, ctx context.Context) {
	children := readDocs(t, filepath.Join(f.dir, "children.yaml"))
	podDocs := readDocs(t, filepath.Join(f.dir, "pods.yaml"))
	gotPods := map[string]expPod{}
	gangs := map[string]*definition.Gang{}
	for _, pm := range podDocs {
		p := toPod(t, pm)
		if err := ownerChainReaches(p, f.obj, children, podDocs); err != nil {
			t.Errorf("%s: pod %s: %v", f.dir, p.Name, err)
		}
		m, err := f.c.MatchPod(ctx, p)
		if err != nil {
			t.Errorf("%s: MatchPod %s: %v", f.dir, p.Name, err)
			continue
		}
		g, err := f.c.GangForPod(ctx, f.obj, p)
		if err != nil {
			t.Errorf("%s: GangForPod %s: %v", f.dir, p.Name, err)
			continue
		}
		gotPods[p.Name] = expPod{Component: m.Component, Instance: m.Instance, Gang: gangName(g)}
		if g != nil {
			gangs[gangName(g)] = g
		}
	}
	if d := cmp.Diff(f.want.Pods, gotPods); d != "" {
		t.Errorf("%s: pods (-want +got):\n%s", f.dir, d)
	}
	f.checkGangs(t, gangs)
}

// checkGangs checks the gangs the pods form, by definition and keys.
func (f fixture) checkGangs(t *testing.T, gangs map[string]*definition.Gang) {
	wantGang := map[string]expGang{}
	for _, g := range f.want.Gangs {
		wantGang[strings.Join(append([]string{g.Definition}, g.Keys...), "/")] = g
	}
	var gotGangs []expGang
	for key, g := range gangs {
		eg := expGang{Definition: g.Definition, Keys: g.Keys, MinMember: g.MinMember}
		// Only the resources expected.yaml lists are compared.
		if wg, ok := wantGang[key]; ok && wg.MinResources != nil {
			eg.MinResources = map[string]string{}
			for r := range wg.MinResources {
				q, ok := g.MinResources[corev1.ResourceName(r)]
				if ok {
					eg.MinResources[r] = q.String()
				}
			}
		}
		gotGangs = append(gotGangs, eg)
	}
	sortGangs(f.want.Gangs)
	sortGangs(gotGangs)
	if d := cmp.Diff(f.want.Gangs, gotGangs, cmpopts.EquateEmpty()); d != "" {
		t.Errorf("%s: gangs (-want +got):\n%s", f.dir, d)
	}
}

// checkPlans checks the gang plans of the root object.
func (f fixture) checkPlans(t *testing.T, ctx context.Context) {
	plans, err := f.c.GangPlans(ctx, f.obj)
	if err != nil {
		t.Fatalf("%s: GangPlans: %v", f.dir, err)
	}
	var gotPlans []expPlan
	for _, p := range plans {
		gotPlans = append(gotPlans, expPlan{Definition: p.Definition, Instances: p.Instances, MinMember: p.MinMember})
	}
	if d := cmp.Diff(f.want.Plans, gotPlans, cmpopts.EquateEmpty()); d != "" {
		t.Errorf("%s: plans (-want +got):\n%s", f.dir, d)
	}
}

func sortGangs(gs []expGang) {
	sort.Slice(gs, func(i, j int) bool {
		return strings.Join(append([]string{gs[i].Definition}, gs[i].Keys...), "/") < strings.Join(append([]string{gs[j].Definition}, gs[j].Keys...), "/")
	})
}

// ownerChainReaches walks the pod's controller owner references through the
// fixture's objects by UID and fails unless it reaches the root object: the
// fixtures must be owner chains the pod-grouper can actually walk.
func ownerChainReaches(p *corev1.Pod, root *unstructured.Unstructured, children, pods []map[string]any) error {
	byUID := map[string]*unstructured.Unstructured{}
	for _, set := range [][]map[string]any{children, pods} {
		for _, m := range set {
			u := &unstructured.Unstructured{Object: m}
			byUID[string(u.GetUID())] = u
		}
	}
	if p.UID == root.GetUID() && root.GetKind() == "Pod" {
		return nil // the pod is the workload
	}
	cur := &unstructured.Unstructured{}
	cur.SetOwnerReferences(p.OwnerReferences)
	var path []string
	for range 10 {
		var next string
		var nextName, nextKind string
		for _, o := range cur.GetOwnerReferences() {
			if o.Controller != nil && *o.Controller {
				next, nextName, nextKind = string(o.UID), o.Name, o.Kind
			}
		}
		if next == "" {
			return fmt.Errorf("owner chain %v ends without reaching %s %s", path, root.GetKind(), root.GetName())
		}
		path = append(path, nextKind+"/"+nextName)
		if next == string(root.GetUID()) {
			if nextName != root.GetName() || nextKind != root.GetKind() {
				return fmt.Errorf("owner reference %s/%s has the root's uid but not its kind/name", nextKind, nextName)
			}
			return nil
		}
		o, ok := byUID[next]
		if !ok {
			return fmt.Errorf("owner %s/%s (uid %s) is not in children.yaml or pods.yaml", nextKind, nextName, next)
		}
		if o.GetName() != nextName || o.GetKind() != nextKind {
			return fmt.Errorf("owner reference %s/%s points at uid of %s/%s", nextKind, nextName, o.GetKind(), o.GetName())
		}
		cur = o
	}
	return fmt.Errorf("owner chain %v is too long", path)
}

// TestCompleteness fails when a listed type lacks its definition, its
// summary annotations, a fixture file or expected results.
func TestCompleteness(t *testing.T) {
	kartas, err := Embedded()
	if err != nil {
		t.Fatalf("Embedded: %v", err)
	}
	byName := map[string]*kartav1alpha1.Karta{}
	for _, k := range kartas {
		byName[k.Name] = k
	}
	for _, name := range Types {
		k, ok := byName[name]
		if !ok {
			t.Errorf("%s: no definition catalog/%s.yaml", name, name)
			continue
		}
		for _, a := range []string{AnnotationGangGranularity, AnnotationMinMemberRule, AnnotationGPUSource} {
			if k.Annotations[a] == "" {
				t.Errorf("%s: catalog/%s.yaml lacks the summary annotation %s", name, name, a)
			}
		}
		raw, err := EmbeddedFile(name)
		if err != nil {
			t.Errorf("%s: %v", name, err)
		}
		if !bytes.HasPrefix(raw, []byte("#")) {
			t.Errorf("%s: catalog/%s.yaml does not start with its comment block", name, name)
		}
		for _, f := range fixtureFiles {
			p := filepath.Join("testdata", name, f)
			if _, err := os.Stat(p); err != nil {
				t.Errorf("%s: missing fixture %s", name, p)
			}
		}
		data, err := os.ReadFile(filepath.Join("testdata", name, "expected.yaml"))
		if err != nil {
			continue
		}
		var e expected
		if err := yaml.UnmarshalStrict(data, &e); err != nil {
			t.Errorf("%s: expected.yaml: %v", name, err)
			continue
		}
		if len(e.Components) == 0 || len(e.Pods) == 0 || len(e.Status) == 0 {
			t.Errorf("%s: expected.yaml must list components, pods and status snapshots", name)
		}
	}
	for name := range byName {
		if !contains(Types, name) {
			t.Errorf("catalog/%s.yaml is not in the list of types; add it and its fixtures", name)
		}
	}
}

func contains(xs []string, x string) bool {
	for _, y := range xs {
		if y == x {
			return true
		}
	}
	return false
}
