package cli

import (
	"context"
	"errors"
	"fmt"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/muster-io/muster/definition"
)

// refReader binds the objects a definition references besides the root
// (definition/doc.go, "References"; a TrainJob's runtime): read from the
// cluster live, found among the documents of the same files offline. One
// it cannot resolve is bound null, which is what the definition's
// fallbacks are written for, and a warning says which and what was
// assumed; the pod-grouper, unlike the CLI, holds the pods then.
type refReader struct {
	cluster *Cluster // nil offline
	docs    []*unstructured.Unstructured
	// live answers by target, so a list of workloads naming one runtime
	// reads it once.
	got map[string]refAnswer
}

type refAnswer struct {
	obj *unstructured.Unstructured
	why string
}

func liveRefs(c *Cluster) *refReader { return &refReader{cluster: c, got: map[string]refAnswer{}} }

func offlineRefs(docs []*unstructured.Unstructured) *refReader { return &refReader{docs: docs} }

// bind returns ctx with root's references bound, and the warnings. A
// reference that is not resolved is bound null and named in a warning only
// when root's evaluation reads it: a TrainJob that states its node count
// needs no runtime.
func (r *refReader) bind(ctx context.Context, c *definition.Compiled, root *unstructured.Unstructured) (context.Context, []string) {
	if c == nil || !c.HasReferences() {
		return ctx, nil
	}
	targets, err := c.Targets(ctx, root)
	if err != nil {
		return ctx, []string{fmt.Sprintf("references: %v", err)}
	}
	b := definition.Bindings{Objects: map[string]*unstructured.Unstructured{}, Unresolved: map[string]string{}}
	missing := map[string]definition.Target{}
	for _, t := range targets {
		a := r.read(ctx, t)
		if a.obj == nil {
			b.Unresolved[t.Reference] = a.why
			missing[t.Reference] = t
			continue
		}
		b.Objects[t.Reference] = a.obj
	}
	// Each round finds one unresolved reference the evaluation reads and
	// binds it null; there are at most definition.MaxReferences.
	var warnings []string
	for len(b.Unresolved) > 0 {
		ue := readsUnresolved(definition.WithReferences(ctx, b), c, root)
		if ue == nil {
			break
		}
		t := missing[ue.Reference]
		warnings = append(warnings, fmt.Sprintf("reference $%s (%s) not resolved: %s; assumed null, so the definition's fallbacks apply (the pod-grouper holds the pods until it exists)",
			t.Reference, t, ue.Why))
		delete(b.Unresolved, ue.Reference)
	}
	return definition.WithReferences(ctx, b), warnings
}

// readsUnresolved returns the first unresolved reference that what the CLI
// shows of root (components, status, gang plans) reads, or nil.
func readsUnresolved(ctx context.Context, c *definition.Compiled, root *unstructured.Unstructured) *definition.UnresolvedError {
	var ue *definition.UnresolvedError
	if _, err := c.Extract(ctx, root); errors.As(err, &ue) {
		return ue
	}
	if _, err := c.GangPlans(ctx, root); errors.As(err, &ue) {
		return ue
	}
	if _, err := c.Status(ctx, root); errors.As(err, &ue) {
		return ue
	}
	return nil
}

func (r *refReader) read(ctx context.Context, t definition.Target) refAnswer {
	if r.cluster == nil {
		found, _ := definition.Resolve([]definition.Target{t}, r.docs)
		if o := found[t.Reference]; o != nil {
			return refAnswer{obj: o}
		}
		return refAnswer{why: "not in the files given"}
	}
	key := t.Kind.GVK().String() + "/" + t.Namespace + "/" + t.Name
	if a, ok := r.got[key]; ok {
		return a
	}
	a := r.get(ctx, t)
	r.got[key] = a
	return a
}

func (r *refReader) get(ctx context.Context, t definition.Target) refAnswer {
	gvk := t.Kind.GVK()
	m, err := r.cluster.Mapper.RESTMapping(gvk.GroupKind(), gvk.Version)
	if err != nil {
		return refAnswer{why: fmt.Sprintf("the cluster does not serve %s", gvk)}
	}
	obj, err := r.cluster.Dynamic.Resource(m.Resource).Namespace(t.Namespace).Get(ctx, t.Name, metav1.GetOptions{})
	switch {
	case apierrors.IsNotFound(err):
		return refAnswer{why: "not found in the cluster"}
	case err != nil:
		return refAnswer{why: oneLine(err.Error())}
	}
	return refAnswer{obj: obj}
}
