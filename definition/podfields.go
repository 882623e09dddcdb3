package definition

import (
	"context"
	"fmt"
	"slices"

	"github.com/itchyny/gojq"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
)

// Converting a whole pod into the map form jq reads is most of the cost of
// the pod-grouping question, and the pod-side paths of real definitions only
// read a few labels. So Compile works out which parts of the pod those
// paths can observe (podNeeds) and podInput builds only those parts, falling
// back to the full conversion whenever an expression is not understood.

// maxNeedDepth is how deep podNeeds tracks paths: .metadata.labels is
// tracked, .metadata.labels.app is counted as .metadata.labels.
const maxNeedDepth = 2

// podNeeds is the set of pod subtrees the pod-side expressions can observe.
// A path means the whole value at that path is needed; a path's parents are
// only indexed by the keys listed. all means the whole pod.
type podNeeds struct {
	all   bool
	paths map[string]map[string]bool // top-level key → second-level keys; nil: the whole top-level value
}

func (n *podNeeds) need(p []string) {
	if n.all {
		return
	}
	if len(p) == 0 {
		n.all = true
		n.paths = nil
		return
	}
	if n.paths == nil {
		n.paths = map[string]map[string]bool{}
	}
	sub, seen := n.paths[p[0]]
	switch {
	case seen && sub == nil: // already whole
	case len(p) == 1:
		n.paths[p[0]] = nil
	default:
		if sub == nil {
			sub = map[string]bool{}
			n.paths[p[0]] = sub
		}
		sub[p[1]] = true
	}
}

// String is for tests and messages: "all", or the paths sorted.
func (n *podNeeds) String() string {
	if n.all {
		return "all"
	}
	var out []string
	for k, sub := range n.paths {
		if sub == nil {
			out = append(out, "."+k)
			continue
		}
		for s := range sub {
			out = append(out, "."+k+"."+s)
		}
	}
	slices.Sort(out)
	return fmt.Sprint(out)
}

// addExpr adds what e can observe of its input.
func (n *podNeeds) addExpr(e *expr) {
	if e == nil || n.all {
		return
	}
	a := &needsWalker{n: n}
	a.consume(a.query(e.query, rootVal()))
}

// val is what an expression yields, as far as the analysis knows: a value
// at a known path of the pod (tracked), or anything else (a new value or a
// part of the pod whose path is already counted as needed).
type val struct {
	tracked bool
	path    []string
}

func rootVal() val { return val{tracked: true} }

var untracked = val{}

// needsWalker is a conservative analysis of a gojq AST. The invariant: a
// tracked value has not been read yet beyond indexing it by constant keys;
// anything else done with it (compare, iterate, pass to a function, return
// it) "consumes" it, which records its path as needed. What reads an
// untracked value cannot reach the pod beyond what is already needed, since
// jq has no way up from a value to its parent and variables only ever hold
// untracked values (a tracked value bound to a variable is consumed).
// Function definitions could shadow builtins and rebind ., so any makes the
// whole pod needed.
type needsWalker struct{ n *podNeeds }

func (a *needsWalker) consume(v val) {
	if v.tracked {
		a.n.need(v.path)
	}
}

// merge is the value of an expression that yields a or b.
func (a *needsWalker) merge(x, y val) val {
	if x.tracked && y.tracked && equalPath(x.path, y.path) {
		return x
	}
	a.consume(x)
	a.consume(y)
	return untracked
}

func equalPath(a, b []string) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

func (a *needsWalker) query(q *gojq.Query, in val) val {
	if q == nil {
		return in // an absent query is identity here (if without else)
	}
	if len(q.FuncDefs) > 0 || q.Meta != nil || len(q.Imports) > 0 {
		a.n.need(nil)
		return untracked
	}
	if q.Term != nil {
		return a.term(q.Term, in)
	}
	switch q.Op {
	case gojq.OpPipe:
		l := a.query(q.Left, in)
		if len(q.Patterns) > 0 {
			// Left as $x | Right: the variable holds left's value and
			// Right runs on the same input.
			a.consume(l)
			return a.query(q.Right, in)
		}
		return a.query(q.Right, l)
	case gojq.OpComma, gojq.OpAlt:
		return a.merge(a.query(q.Left, in), a.query(q.Right, in))
	case gojq.OpAdd, gojq.OpSub, gojq.OpMul, gojq.OpDiv, gojq.OpMod,
		gojq.OpEq, gojq.OpNe, gojq.OpGt, gojq.OpLt, gojq.OpGe, gojq.OpLe,
		gojq.OpAnd, gojq.OpOr:
		a.consume(a.query(q.Left, in))
		a.consume(a.query(q.Right, in))
		return untracked
	}
	a.n.need(nil)
	return untracked
}

func (a *needsWalker) consumeQuery(q *gojq.Query, in val) {
	if q != nil {
		a.consume(a.query(q, in))
	}
}

func (a *needsWalker) str(s *gojq.String, in val) {
	if s != nil {
		for _, q := range s.Queries {
			a.consumeQuery(q, in)
		}
	}
}

func (a *needsWalker) term(t *gojq.Term, in val) val {
	var out val
	switch t.Type {
	case gojq.TermTypeIdentity:
		out = in
	case gojq.TermTypeNull, gojq.TermTypeTrue, gojq.TermTypeFalse, gojq.TermTypeNumber, gojq.TermTypeBreak:
		out = untracked
	case gojq.TermTypeIndex:
		out = a.index(t.Index, in, in)
	case gojq.TermTypeFunc:
		out = a.fn(t.Func, in)
	case gojq.TermTypeObject:
		for _, kv := range t.Object.KeyVals {
			a.str(kv.KeyString, in)
			a.consumeQuery(kv.KeyQuery, in)
			switch {
			case kv.Val != nil:
				a.consumeQuery(kv.Val, in)
			case kv.KeyString != nil || kv.KeyQuery != nil:
				a.consume(in) // {"\(k)"} reads .[k]
			case len(kv.Key) > 0 && kv.Key[0] == '$':
				// {$x}: a variable, untracked.
			default:
				a.consume(a.key(in, kv.Key)) // {a} is {a: .a}
			}
		}
		out = untracked
	case gojq.TermTypeArray:
		a.consumeQuery(t.Array.Query, in)
		out = untracked
	case gojq.TermTypeUnary:
		a.consume(a.term(t.Unary.Term, in))
		out = untracked
	case gojq.TermTypeFormat:
		a.consume(in) // @base64 and friends format their input
		a.str(t.Str, in)
		out = untracked
	case gojq.TermTypeString:
		a.str(t.Str, in)
		out = untracked
	case gojq.TermTypeIf:
		a.consumeQuery(t.If.Cond, in)
		out = a.query(t.If.Then, in)
		for _, e := range t.If.Elif {
			a.consumeQuery(e.Cond, in)
			out = a.merge(out, a.query(e.Then, in))
		}
		out = a.merge(out, a.query(t.If.Else, in)) // no else: identity
	case gojq.TermTypeTry:
		out = a.query(t.Try.Body, in)
		if t.Try.Catch != nil {
			// The catch body runs on the error value.
			out = a.merge(out, a.query(t.Try.Catch, untracked))
		}
	case gojq.TermTypeReduce:
		a.consumeQuery(t.Reduce.Query, in)
		a.consumeQuery(t.Reduce.Start, in)
		// The update runs on the accumulator, which starts as the
		// (consumed) start value.
		a.consumeQuery(t.Reduce.Update, untracked)
		out = untracked
	case gojq.TermTypeForeach:
		a.consumeQuery(t.Foreach.Query, in)
		a.consumeQuery(t.Foreach.Start, in)
		a.consumeQuery(t.Foreach.Update, untracked)
		a.consumeQuery(t.Foreach.Extract, untracked)
		out = untracked
	case gojq.TermTypeLabel:
		out = a.query(t.Label.Body, in)
	case gojq.TermTypeQuery:
		out = a.query(t.Query, in)
	default: // recursion and anything new
		a.n.need(nil)
		return untracked
	}
	for _, s := range t.SuffixList {
		switch {
		case s.Index != nil:
			// Index expressions run on the term's input: .a[.b] reads .b.
			out = a.index(s.Index, out, in)
		case s.Iter:
			a.consume(out)
			out = untracked
		}
	}
	return out
}

// index applies x to v; queries inside x run on in.
func (a *needsWalker) index(x *gojq.Index, v, in val) val {
	if k, ok := constKey(x); ok {
		return a.key(v, k)
	}
	a.str(x.Str, in)
	a.consumeQuery(x.Start, in)
	a.consumeQuery(x.End, in)
	a.consume(v)
	return untracked
}

// key indexes v by a constant key.
func (a *needsWalker) key(v val, k string) val {
	if !v.tracked {
		return untracked
	}
	if len(v.path) >= maxNeedDepth {
		a.consume(v)
		return untracked
	}
	return val{tracked: true, path: append(v.path[:len(v.path):len(v.path)], k)}
}

// constKey is the key of .name, ."name" and .["name"].
func constKey(x *gojq.Index) (string, bool) {
	switch {
	case x.IsSlice || x.End != nil:
		return "", false
	case x.Name != "":
		return x.Name, true
	case x.Str != nil:
		return x.Str.Str, len(x.Str.Queries) == 0
	case x.Start != nil:
		q := x.Start
		if q.Term != nil && q.Term.Type == gojq.TermTypeString && len(q.Term.SuffixList) == 0 && len(q.FuncDefs) == 0 &&
			q.Term.Str != nil && len(q.Term.Str.Queries) == 0 {
			return q.Term.Str.Str, true
		}
	}
	return "", false
}

func (a *needsWalker) fn(f *gojq.Func, in val) val {
	switch {
	case len(f.Name) > 0 && f.Name[0] == '$':
		return untracked // variables only hold untracked values
	case f.Name == "empty" && len(f.Args) == 0:
		return untracked
	case f.Name == "select" && len(f.Args) == 1:
		a.consumeQuery(f.Args[0], in)
		return in
	case (f.Name == "first" || f.Name == "last") && len(f.Args) == 1:
		return a.query(f.Args[0], in)
	}
	// Any other function may read all of its input; its arguments run on
	// the input or on parts of it, so analysing them on the input covers
	// both.
	a.consume(in)
	for _, q := range f.Args {
		a.consumeQuery(q, in)
	}
	return untracked
}

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
	n := &podNeeds{}
	for _, e := range c.podExprs() {
		n.addExpr(e)
	}
	c.podNeeds = n
}

// buildPodJQ builds the parts of pod that n names, in gojq value form, with
// the same values the full conversion gives at those paths. A nil n is the
// whole pod.
func buildPodJQ(pod *corev1.Pod, n *podNeeds) (any, error) {
	if n == nil || n.all {
		u, err := runtime.DefaultUnstructuredConverter.ToUnstructured(pod)
		if err != nil {
			return nil, err
		}
		// The map is ours, so convert in place instead of copying.
		return toJQInPlace(u), nil
	}
	out := make(map[string]any, len(n.paths)+1)
	// The conversion always has metadata, an object, so .metadata.x never
	// fails on a built pod either.
	if _, ok := n.paths["metadata"]; !ok {
		out["metadata"] = map[string]any{}
	}
	for k, sub := range n.paths {
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
			out[k] = toJQInPlace(u)
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
		return toJQInPlace(u).(map[string]any), nil
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
	needs *podNeeds
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
