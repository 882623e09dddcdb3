package definition

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/muster-io/muster/definition/jq"
)

// Converting a whole pod into the map form jq reads is most of the cost of
// the pod-grouping question, and the pod-side paths of real definitions only
// read a few labels. So Compile works out which parts of the pod those
// paths can observe (podNeeds, a jq.Reads) and podInput builds only those
// parts, falling back to the full conversion whenever an expression is not
// understood.

// podExprs are the expressions that run on pods.
func (c *Compiled) podExprs() []*expr {
	var out []*expr
	for _, comp := range c.comps {
		out = append(out, comp.typeKey, comp.instanceSel, comp.replicaSel)
	}
	for _, g := range c.gangs {
		for _, m := range g.members {
			out = append(out, m.groupBy...)
			out = append(out, m.filters...)
		}
	}
	return out
}

func (c *Compiled) computePodNeeds() {
	n := &jq.Reads{}
	for _, e := range c.podExprs() {
		if e != nil {
			n.Add(e.code)
		}
	}
	c.podNeeds = n
}

// buildPodJQ builds the parts of pod that n names, in jq.Value form, with
// the same values the full conversion gives at those paths. A nil n is the
// whole pod.
func buildPodJQ(pod *corev1.Pod, n *jq.Reads) (any, error) {
	if n == nil || n.All {
		u, err := runtime.DefaultUnstructuredConverter.ToUnstructured(pod)
		if err != nil {
			return nil, err
		}
		// The map is ours, so convert in place instead of copying.
		return jq.ValueInPlace(u), nil
	}
	out := make(map[string]any, len(n.Paths)+1)
	// The conversion always has metadata, an object, so .metadata.x never
	// fails on a built pod either.
	if _, ok := n.Paths["metadata"]; !ok {
		out["metadata"] = map[string]any{}
	}
	for k, sub := range n.Paths {
		switch k {
		case "apiVersion":
			if pod.APIVersion != "" {
				out[k] = pod.APIVersion
			}
		case "kind":
			if pod.Kind != "" {
				out[k] = pod.Kind
			}
		case "metadata":
			md, err := metadataJQ(&pod.ObjectMeta, sub)
			if err != nil {
				return nil, err
			}
			out[k] = md
		case "spec", "status":
			var obj any = &pod.Spec
			if k == "status" {
				obj = &pod.Status
			}
			u, err := runtime.DefaultUnstructuredConverter.ToUnstructured(obj)
			if err != nil {
				return nil, err
			}
			out[k] = jq.ValueInPlace(u)
		}
		// Other keys are not in a pod: null, as in the conversion.
	}
	return out, nil
}

// metadataJQ builds the metadata keys in sub (every key when sub is nil):
// the common ones by hand, the rest from a conversion of the metadata.
// Like the conversion, empty strings, maps and lists are left out.
func metadataJQ(md *metav1.ObjectMeta, sub map[string]bool) (map[string]any, error) {
	if sub == nil {
		u, err := runtime.DefaultUnstructuredConverter.ToUnstructured(md)
		if err != nil {
			return nil, err
		}
		return jq.ValueInPlace(u).(map[string]any), nil
	}
	out := make(map[string]any, len(sub))
	var full map[string]any // the conversion, made when a key needs it
	for k := range sub {
		switch k {
		case "name":
			setString(out, k, md.Name)
		case "generateName":
			setString(out, k, md.GenerateName)
		case "namespace":
			setString(out, k, md.Namespace)
		case "uid":
			setString(out, k, string(md.UID))
		case "resourceVersion":
			setString(out, k, md.ResourceVersion)
		case "labels":
			setStringMap(out, k, md.Labels)
		case "annotations":
			setStringMap(out, k, md.Annotations)
		case "finalizers":
			if len(md.Finalizers) > 0 {
				l := make([]any, len(md.Finalizers))
				for i, f := range md.Finalizers {
					l[i] = f
				}
				out[k] = l
			}
		case "ownerReferences":
			if len(md.OwnerReferences) > 0 {
				l := make([]any, len(md.OwnerReferences))
				for i, r := range md.OwnerReferences {
					m := map[string]any{"apiVersion": r.APIVersion, "kind": r.Kind, "name": r.Name, "uid": string(r.UID)}
					if r.Controller != nil {
						m["controller"] = *r.Controller
					}
					if r.BlockOwnerDeletion != nil {
						m["blockOwnerDeletion"] = *r.BlockOwnerDeletion
					}
					l[i] = m
				}
				out[k] = l
			}
		default:
			if full == nil {
				var err error
				if full, err = metadataJQ(md, nil); err != nil {
					return nil, err
				}
			}
			if v, ok := full[k]; ok {
				out[k] = v
			}
		}
	}
	return out, nil
}

func setString(m map[string]any, k, v string) {
	if v != "" {
		m[k] = v
	}
}

func setStringMap(m map[string]any, k string, v map[string]string) {
	if len(v) == 0 {
		return
	}
	o := make(map[string]any, len(v))
	for x, y := range v {
		o[x] = y
	}
	m[k] = o
}

// podField is a metadata path that can be read straight from a pod, with
// the value the map form has there: strings are left out when empty, and
// labels and annotations are maps of strings.
type podField uint8

const (
	podFieldNone podField = iota
	podFieldName
	podFieldGenerateName
	podFieldNamespace
	podFieldUID
	podFieldResourceVersion
	podFieldLabel      // .metadata.labels[key]
	podFieldAnnotation // .metadata.annotations[key]
)

func podFieldOf(keys []string, simple bool) podField {
	if !simple || len(keys) < 2 || keys[0] != "metadata" {
		return podFieldNone
	}
	if len(keys) == 2 {
		switch keys[1] {
		case "name":
			return podFieldName
		case "generateName":
			return podFieldGenerateName
		case "namespace":
			return podFieldNamespace
		case "uid":
			return podFieldUID
		case "resourceVersion":
			return podFieldResourceVersion
		}
	}
	if len(keys) == 3 {
		switch keys[1] {
		case "labels":
			return podFieldLabel
		case "annotations":
			return podFieldAnnotation
		}
	}
	return podFieldNone
}

// read returns the value of f on pod; key is the label or annotation key.
func (f podField) read(pod *corev1.Pod, key string) any {
	var s string
	switch f {
	case podFieldName:
		s = pod.Name
	case podFieldGenerateName:
		s = pod.GenerateName
	case podFieldNamespace:
		s = pod.Namespace
	case podFieldUID:
		s = string(pod.UID)
	case podFieldResourceVersion:
		s = pod.ResourceVersion
	case podFieldLabel, podFieldAnnotation:
		m := pod.Labels
		if f == podFieldAnnotation {
			m = pod.Annotations
		}
		if v, ok := m[key]; ok {
			return v
		}
		return nil
	}
	if s == "" {
		return nil
	}
	return s
}

// podInput is one pod as the pod-side expressions read it. The map form is
// built on first use: when every expression reads a podField, it never is.
// A podInput belongs to one call; it is not safe for concurrent use.
type podInput struct {
	pod   *corev1.Pod
	needs *jq.Reads
	pm    any
	built bool
	// one backs the single result of a podField read (evalPod), so the
	// fast path allocates no slice.
	one [1]any
}

func (p *podInput) value() (any, error) {
	if !p.built {
		pm, err := buildPodJQ(p.pod, p.needs)
		if err != nil {
			return nil, fmt.Errorf("read pod %s/%s: %w", p.pod.Namespace, p.pod.Name, err)
		}
		p.pm, p.built = pm, true
	}
	return p.pm, nil
}

// evalPod runs e on a pod. The result of a podField read lives in in: it is
// valid until the next evalPod on in, so use it before asking again.
func (c *Compiled) evalPod(ctx context.Context, e *expr, in *podInput) ([]any, error) {
	if e.pod != podFieldNone {
		in.one[0] = e.pod.read(in.pod, e.keys[len(e.keys)-1])
		return in.one[:], nil
	}
	pm, err := in.value()
	if err != nil {
		return nil, err
	}
	return c.eval(ctx, e, pm)
}
